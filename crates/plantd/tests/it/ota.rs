//! OTA (issue 29): packages uploaded as a stream, signed, released once, downloaded by devices
//! with their own password and resumed with Range; deployments over simulated devices (real
//! MQTT clients that download, verify the SHA-256 and the Ed25519 signature, and report each
//! step, or fail, or never answer): a phase above its threshold stops and rolls back, phases
//! walk to completion, cancel, manual rollback, continue, timeouts; tenancy, scopes, the rate
//! limit.

use base64::Engine as _;
use plantd_app::AppConfig;
use plantd_model::Tier;
use plantd_test_support::mqtt::{Device, connect, next_publish, options};
use plantd_test_support::{TestApp, spawn_app_with, temp_dir, wait_for};
use reqwest::Method;
use rumqttc::{ConnectReturnCode, QoS};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::time::Duration;

async fn ota_app() -> (TestApp, PathBuf) {
    let dir = temp_dir("ota");
    let app = spawn_app_with(AppConfig {
        ota_dir: dir.clone(),
        ..AppConfig::default()
    })
    .await;
    (app, dir)
}

/// A package file of `n` bytes that are not all alike.
fn firmware(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 31 % 251) as u8).collect()
}

async fn upload(app: &TestApp, key: &str, bytes: Vec<u8>, fields: &[(&str, &str)]) -> (u16, Value) {
    let mut form = reqwest::multipart::Form::new();
    for (k, v) in fields {
        form = form.text(k.to_string(), v.to_string());
    }
    form = form.part(
        "file",
        reqwest::multipart::Part::bytes(bytes).file_name("gateway.bin"),
    );
    let r = app
        .client
        .post(format!("{}/ota/packages", app.base))
        .bearer_auth(key)
        .multipart(form)
        .send()
        .await
        .expect("upload sent");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// A released package of `bytes`.
pub(crate) async fn released(app: &TestApp, bytes: Vec<u8>, version: &str) -> Value {
    let (status, body) = upload(app, &app.admin_key, bytes, &[("version", version)]).await;
    assert_eq!(status, 201, "{body}");
    let id = body["data"]["id"].as_str().unwrap().to_string();
    app.post(
        &format!("/ota/packages/{id}/release"),
        &app.admin_key,
        json!({}),
    )
    .await
    .expect(200)
    .json["data"]
        .clone()
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

async fn download(
    app: &TestApp,
    id: &str,
    key: &str,
    range: Option<&str>,
) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    let mut req = app
        .client
        .get(format!("{}/ota/packages/{id}/download", app.base))
        .bearer_auth(key)
        .header("accept-encoding", "gzip");
    if let Some(r) = range {
        req = req.header("range", r);
    }
    let r = req.send().await.expect("download sent");
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    (status, headers, r.bytes().await.unwrap().to_vec())
}

fn verify(public_key_b64: &str, package: &Value) -> bool {
    let key: [u8; 32] = base64::engine::general_purpose::STANDARD
        .decode(public_key_b64)
        .unwrap()
        .try_into()
        .unwrap();
    let signature = base64::engine::general_purpose::STANDARD
        .decode(package["signature"].as_str().unwrap())
        .unwrap();
    plantd_auth::license_key::verify_message(
        &key,
        package["manifest"].as_str().unwrap().as_bytes(),
        &signature,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn packages_upload_sign_release_and_download() {
    let (app, dir) = ota_app().await;
    let k = app.admin_key.clone();
    let bytes = firmware(300_000);
    let sha = hex::encode(Sha256::digest(&bytes));

    let (status, body) = upload(
        &app,
        &k,
        bytes.clone(),
        &[
            ("version", "2.4.1"),
            ("device_type", "gateway-x1"),
            ("release_notes", "fixes the Modbus retry"),
        ],
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let p = body["data"].clone();
    let id = p["id"].as_str().unwrap().to_string();
    assert_eq!(
        p["name"], "gateway.bin",
        "the file's name when none is given"
    );
    assert_eq!(p["size_bytes"], 300_000);
    assert_eq!(p["sha256"], sha);
    assert_eq!(p["status"], "draft");
    assert!(p["released_at"].is_null());
    assert_eq!(
        p["manifest"],
        format!(
            "plantd-ota-manifest-v1\npackage_id={id}\nversion=2.4.1\nsize_bytes=300000\nsha256={sha}\n"
        )
    );
    // The signature checks with the published key (the organization's license key pair).
    let key = app.get("/ota/public-key", &k).await.expect(200);
    let public = key.json["data"]["public_key"].as_str().unwrap().to_string();
    assert!(verify(&public, &p));
    let mut forged = p.clone();
    forged["manifest"] = json!(p["manifest"].as_str().unwrap().replace("2.4.1", "2.4.2"));
    assert!(!verify(&public, &forged));
    let licenses_key = app.get("/licenses/public-key", &k).await.expect(200);
    assert_eq!(licenses_key.json["data"]["public_key"], public.as_str());
    // Stored once, under its SHA-256; nothing left in the upload area.
    let blob = dir.join("sha256").join(&sha[..2]).join(&sha);
    assert_eq!(std::fs::read(&blob).unwrap(), bytes);
    assert!(files_under(&dir.join("tmp")).is_empty());

    // The same name and version again: 409, and the file stays for the first package.
    let (status, body) = upload(&app, &k, bytes.clone(), &[("version", "2.4.1")]).await;
    assert_eq!(status, 409, "{body}");
    assert!(blob.exists());
    // Refusals name the field; a refused upload leaves nothing behind.
    let (status, body) = upload(&app, &k, bytes.clone(), &[]).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["details"][0]["field"], "version", "{body}");
    let (status, body) = upload(&app, &k, bytes.clone(), &[("version", "has space")]).await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = upload(&app, &k, Vec::new(), &[("version", "1")]).await;
    assert_eq!(status, 400, "{body}");
    let no_file = app
        .client
        .post(format!("{}/ota/packages", app.base))
        .bearer_auth(&k)
        .multipart(reqwest::multipart::Form::new().text("version", "9"))
        .send()
        .await
        .unwrap();
    assert_eq!(no_file.status().as_u16(), 400);
    let not_multipart = app
        .post("/ota/packages", &k, json!({"version": "1"}))
        .await
        .expect(400);
    assert_eq!(not_multipart.code(), "validation_error");
    assert!(files_under(&dir.join("tmp")).is_empty());
    // An upload cut off midway leaves nothing behind either.
    cut_upload(&app, &k).await;
    wait_for("the cut upload's file to go", 10, || async {
        files_under(&dir.join("tmp")).is_empty().then_some(())
    })
    .await;
    assert_eq!(files_under(&dir.join("sha256")).len(), 1);

    // Release once.
    let r = app
        .post(&format!("/ota/packages/{id}/release"), &k, json!({}))
        .await
        .expect(200);
    assert_eq!(r.json["data"]["status"], "released");
    assert!(r.json["data"]["released_at"].is_string());
    let again = app
        .post(&format!("/ota/packages/{id}/release"), &k, json!({}))
        .await
        .expect(409);
    assert_eq!(again.json["error"]["code"], "package_already_released");
    let listed = app.get("/ota/packages", &k).await.expect(200);
    assert_eq!(listed.json["meta"]["total"], 1);

    // Download whole, then resumed: bytes of the file, never gzip.
    let (status, headers, body) = download(&app, &id, &k, None).await;
    assert_eq!(status, 200);
    assert_eq!(body, bytes);
    assert_eq!(headers["accept-ranges"], "bytes");
    assert!(headers.get("content-encoding").is_none());
    assert_eq!(headers["content-length"], "300000");
    assert_eq!(headers["x-checksum-sha256"], sha.as_str());
    let (status, headers, tail) = download(&app, &id, &k, Some("bytes=123456-")).await;
    assert_eq!(status, 206);
    assert_eq!(headers["content-range"], "bytes 123456-299999/300000");
    assert_eq!(tail, bytes[123_456..]);
    let (status, _, _) = download(&app, &id, &k, Some("bytes=400000-")).await;
    assert_eq!(status, 416);

    // A device downloads with its own password: released packages only; nothing else.
    let device = app
        .post(
            "/fleet/devices",
            &k,
            json!({"name": "gw", "serial_number": "SN-OTA-1"}),
        )
        .await
        .expect(201);
    let password = device.json["data"]["mqtt"]["password"]
        .as_str()
        .unwrap()
        .to_string();
    let (status, _, body) = download(&app, &id, &password, Some("bytes=0-99")).await;
    assert_eq!(status, 206);
    assert_eq!(body, bytes[..100]);
    app.get("/ota/public-key", &password).await.expect(200);
    let refused = app.get("/fleet/devices", &password).await.expect(401);
    assert!(refused.text.contains("device"), "{}", refused.text);
    app.get(&format!("/ota/packages/{id}"), &password)
        .await
        .expect(401);
    let (status, body) = upload(&app, &k, firmware(1000), &[("version", "3.0")]).await;
    assert_eq!(status, 201);
    let draft = body["data"]["id"].as_str().unwrap().to_string();
    let (status, _, _) = download(&app, &draft, &password, None).await;
    assert_eq!(status, 404, "a device gets released packages only");
    let (status, _, _) = download(&app, &draft, &k, None).await;
    assert_eq!(status, 200, "people read drafts");
    let (status, _, _) = download(&app, &id, "pdm_not-a-device-password", None).await;
    assert_eq!(status, 401);

    // Scopes and tenancy.
    let reader = app.key(&[plantd_model::Scope::ReadAssets]).await;
    let (status, _) = upload(&app, &reader, firmware(10), &[("version", "4")]).await;
    assert_eq!(status, 403);
    app.post(
        &format!("/ota/packages/{draft}/release"),
        &reader,
        json!({}),
    )
    .await
    .expect(403);
    app.get(&format!("/ota/packages/{id}"), &reader)
        .await
        .expect(200);
    let (_, other) = app.other_org("Other OTA", Tier::Enterprise).await;
    app.get(&format!("/ota/packages/{id}"), &other)
        .await
        .expect(404);
    let (status, _, _) = download(&app, &id, &other, None).await;
    assert_eq!(status, 404);
    app.post(&format!("/ota/packages/{draft}/release"), &other, json!({}))
        .await
        .expect(404);
    let theirs = app.get("/ota/packages", &other).await.expect(200);
    assert_eq!(theirs.json["meta"]["total"], 0);
    let their_key = app.get("/ota/public-key", &other).await.expect(200);
    assert_ne!(their_key.json["data"]["public_key"], public.as_str());
}

/// Sends part of a multipart upload and closes the connection.
async fn cut_upload(app: &TestApp, key: &str) {
    use tokio::io::AsyncWriteExt;
    let mut s = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    let head = format!(
        "POST /v1/ota/packages HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: multipart/form-data; boundary=XyZ\r\nContent-Length: 10000000\r\n\r\n\
         --XyZ\r\nContent-Disposition: form-data; name=\"version\"\r\n\r\n7.0\r\n\
         --XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"cut.bin\"\r\n\
         Content-Type: application/octet-stream\r\n\r\n",
        app.addr
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(&firmware(200_000)).await.unwrap();
    s.flush().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(s);
}

/// How a simulated device answers an update.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Behave {
    /// Downloads, verifies the SHA-256 and the signature, reports every step, succeeds.
    Succeed,
    /// Fails its health check (and rolls back by itself).
    Fail,
    /// Never answers.
    Silent,
    /// Receives a corrupted file: its SHA-256 check fails.
    Corrupted,
}

struct SimDevice {
    id: String,
    password: String,
}

/// Registers `n` devices in `group` and connects each as a simulated device.
async fn fleet(
    app: &TestApp,
    mqtt: std::net::SocketAddr,
    group: &str,
    behave: &[Behave],
) -> Vec<SimDevice> {
    let mut out = Vec::new();
    for (i, b) in behave.iter().enumerate() {
        let d = app
            .post(
                "/fleet/devices",
                &app.admin_key,
                json!({"name": format!("gw-{i}"), "serial_number": format!("SN-{}-{i}", plantd_test_support::unique_name()), "group_ids": [group]}),
            )
            .await
            .expect(201)
            .json["data"]
            .clone();
        let sim = SimDevice {
            id: d["id"].as_str().unwrap().to_string(),
            password: d["mqtt"]["password"].as_str().unwrap().to_string(),
        };
        let (dev, code) = connect(options(mqtt, &sim.id, &sim.id, &sim.password)).await;
        assert_eq!(code, ConnectReturnCode::Success);
        tokio::spawn(run_device(dev, sim.id.clone(), sim.password.clone(), *b));
        out.push(sim);
    }
    out
}

async fn report(dev: &Device, id: &str, deployment: &str, state: &str, message: Option<&str>) {
    let body = json!({"deployment_id": deployment, "state": state, "message": message});
    dev.client
        .publish(
            format!("plantd/devices/{id}/ota"),
            QoS::AtLeastOnce,
            false,
            body.to_string(),
        )
        .await
        .unwrap();
}

/// A device's side of SPEC 3 rule 2: download, verify (SHA-256, Ed25519 signature), back up,
/// apply, health check; and a rollback when told.
async fn run_device(mut dev: Device, id: String, password: String, behave: Behave) {
    dev.client
        .subscribe(format!("plantd/devices/{id}/commands"), QoS::AtLeastOnce)
        .await
        .unwrap();
    let http = reqwest::Client::new();
    while let Some(p) = next_publish(&mut dev, 600).await {
        let command: Value = serde_json::from_slice(&p.payload).unwrap();
        let params = &command["params"];
        let deployment = params["deployment_id"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        match command["command"].as_str() {
            Some("ota.update") => {
                if behave == Behave::Silent {
                    continue;
                }
                report(&dev, &id, &deployment, "downloading", None).await;
                let mut bytes = http
                    .get(params["download_url"].as_str().unwrap())
                    .bearer_auth(&password)
                    .send()
                    .await
                    .unwrap()
                    .bytes()
                    .await
                    .unwrap()
                    .to_vec();
                if behave == Behave::Corrupted {
                    bytes[7] ^= 0xff;
                }
                report(&dev, &id, &deployment, "verifying", None).await;
                let package = &params["package"];
                if hex::encode(Sha256::digest(&bytes)) != package["sha256"].as_str().unwrap() {
                    report(
                        &dev,
                        &id,
                        &deployment,
                        "failed",
                        Some("sha256 mismatch: the download is corrupt"),
                    )
                    .await;
                    continue;
                }
                let key: Value = http
                    .get(params["public_key_url"].as_str().unwrap())
                    .bearer_auth(&password)
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                if !verify(key["data"]["public_key"].as_str().unwrap(), package) {
                    report(&dev, &id, &deployment, "failed", Some("bad signature")).await;
                    continue;
                }
                for step in ["backing_up", "installing", "health_check"] {
                    report(&dev, &id, &deployment, step, None).await;
                }
                if behave == Behave::Fail {
                    report(
                        &dev,
                        &id,
                        &deployment,
                        "failed",
                        Some("health check failed; rolled back to the previous version"),
                    )
                    .await;
                } else {
                    report(&dev, &id, &deployment, "succeeded", None).await;
                }
            }
            Some("ota.rollback") => {
                report(
                    &dev,
                    &id,
                    &deployment,
                    "rolled_back",
                    Some("back on the previous version"),
                )
                .await;
            }
            _ => {}
        }
    }
}

async fn wait_status(app: &TestApp, id: &str, status: &str, secs: u64) -> Value {
    wait_for(&format!("deployment {id} to be {status}"), secs, || async {
        let d = app
            .get(&format!("/ota/deployments/{id}"), &app.admin_key)
            .await
            .expect(200)
            .json["data"]
            .clone();
        (d["status"] == status).then_some(d)
    })
    .await
}

pub(crate) async fn device_states(app: &TestApp, id: &str) -> Vec<Value> {
    app.get(
        &format!("/ota/deployments/{id}/devices?per_page=100"),
        &app.admin_key,
    )
    .await
    .expect(200)
    .items()
}

async fn group(app: &TestApp, name: &str) -> String {
    app.post("/fleet/groups", &app.admin_key, json!({"name": name}))
        .await
        .expect(201)
        .id()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_phase_above_its_threshold_stops_and_rolls_back() {
    let (app, _dir) = ota_app().await;
    let channel = app.start_mqtt().await;
    let k = app.admin_key.clone();
    let g = group(&app, "Line 7").await;
    // Devices are put in phases in id order: the first ten form phase 1, three of which fail.
    let mut behave = vec![Behave::Succeed; 20];
    behave[1] = Behave::Fail;
    behave[4] = Behave::Fail;
    behave[8] = Behave::Fail;
    let devices = fleet(&app, channel.local_addr.unwrap(), &g, &behave).await;
    let package = released(&app, firmware(64 * 1024), "5.0.0").await;
    let mut stream = app.subscribe(json!({"type": "subscribe"})).await;

    let created = app
        .post(
            "/ota/deployments",
            &k,
            json!({"name": "5.0 to line 7", "package_id": package["id"], "targets": {"type": "group", "group_id": g},
                   "strategy": "phased", "rollback_enabled": true,
                   "phases": [{"percent": 50, "failure_threshold_percent": 20}, {"percent": 100}]}),
        )
        .await
        .expect(201);
    let id = created.id();
    assert_eq!(created.json["data"]["status"], "scheduled");
    assert_eq!(created.json["data"]["device_counts"]["pending"], 20);
    let d = wait_status(&app, &id, "rolled_back", 60).await;
    assert!(
        d["reason"].as_str().unwrap().contains("phase 1: 3 of 10"),
        "{d}"
    );
    assert_eq!(d["current_phase"], 1);
    // Every device of phase 1 that installed it returns to its previous version; phase 2 was
    // never told.
    let states = wait_for("rollbacks to be reported", 30, || async {
        let s = device_states(&app, &id).await;
        s.iter()
            .all(|x| {
                x["state"] != "rolling_back"
                    && x["state"] != "succeeded"
                    && ![
                        "notified",
                        "downloading",
                        "verifying",
                        "backing_up",
                        "installing",
                        "health_check",
                    ]
                    .contains(&x["state"].as_str().unwrap())
            })
            .then_some(s)
    })
    .await;
    let count = |phase: u64, state: &str| {
        states
            .iter()
            .filter(|x| x["phase"] == phase && x["state"] == state)
            .count()
    };
    assert_eq!(count(1, "failed"), 3, "{states:?}");
    assert_eq!(count(1, "rolled_back"), 7, "{states:?}");
    assert_eq!(count(2, "cancelled"), 10, "{states:?}");
    let failed = states.iter().find(|x| x["state"] == "failed").unwrap();
    assert!(failed["message"].as_str().unwrap().contains("health check"));
    assert!(
        states[0]["device_name"]
            .as_str()
            .unwrap()
            .starts_with("gw-")
    );
    // The failed devices' update commands are answered as failed in their command history.
    let failing = &devices[1].id;
    let commands = app
        .get(&format!("/fleet/devices/{failing}/commands"), &k)
        .await
        .expect(200)
        .items();
    assert_eq!(commands[0]["command"], "ota.update");
    assert_eq!(commands[0]["status"], "failed");
    // Announced on the stream: created, phase 1 started, failed, rolled back.
    let mut seen = Vec::new();
    while !seen.contains(&"ota.deployment.rolled_back".to_string()) {
        let m = plantd_test_support::stream::next_of_type(&mut stream, "ota").await;
        assert_eq!(m["data"]["id"], id.as_str());
        seen.push(m["event"].as_str().unwrap().to_string());
    }
    for e in [
        "ota.deployment.created",
        "ota.deployment.phase_started",
        "ota.deployment.failed",
    ] {
        assert!(seen.iter().any(|s| s == e), "{seen:?}");
    }
    // Final: cancel and roll back again are refused.
    let c = app
        .post(&format!("/ota/deployments/{id}/cancel"), &k, json!({}))
        .await
        .expect(409);
    assert_eq!(c.json["error"]["code"], "deployment_finished");
    app.post(&format!("/ota/deployments/{id}/rollback"), &k, json!({}))
        .await
        .expect(409);
    // The engine's own acts are audited as the platform's.
    let audit = app
        .get(
            "/audit/logs?event_types=ota_deployment.advance&per_page=50",
            &k,
        )
        .await
        .expect(200)
        .items();
    assert!(
        audit
            .iter()
            .any(|a| a["actor_type"] == "platform" && a["resource_id"] == id.as_str()),
        "{audit:?}"
    );
    channel.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phases_walk_to_completion_with_timeouts_corruption_and_newcomers() {
    let (app, _dir) = ota_app().await;
    let channel = app.start_mqtt().await;
    let k = app.admin_key.clone();
    let g = group(&app, "Press hall").await;
    let mut behave = vec![Behave::Succeed; 20];
    // In the last phase (ids 10 to 19), one never answers and one receives a corrupt file:
    // 2 of 10 failed is not above the threshold.
    behave[15] = Behave::Silent;
    behave[17] = Behave::Corrupted;
    let devices = fleet(&app, channel.local_addr.unwrap(), &g, &behave).await;
    let package = released(&app, firmware(100_000), "6.1").await;
    let created = app
        .post(
            "/ota/deployments",
            &k,
            json!({"name": "6.1", "package_id": package["id"], "targets": {"type": "group", "group_id": g},
                   "strategy": "phased", "device_timeout_seconds": 4,
                   "phases": [{"count": 2, "wait_for_continue": true}, {"percent": 50, "pause_seconds": 1}, {"percent": 100}]}),
        )
        .await
        .expect(201);
    let id = created.id();
    let d = wait_status(&app, &id, "paused", 30).await;
    assert_eq!(d["current_phase"], 1);
    assert_eq!(d["phase_progress"][0]["succeeded"], 2);
    assert!(d["resume_at"].is_null(), "waits for a person: {d}");
    // One deployment at a time per device.
    let busy = app
        .post(
            "/ota/deployments",
            &k,
            json!({"name": "again", "package_id": package["id"], "targets": {"type": "devices", "device_ids": [devices[0].id]}}),
        )
        .await
        .expect(409);
    assert_eq!(busy.json["error"]["code"], "devices_in_active_deployment");
    // A device joining the group while it runs is included (in the last phase).
    let newcomer = fleet(&app, channel.local_addr.unwrap(), &g, &[Behave::Succeed]).await;
    let joined = wait_for("the newcomer to join", 20, || async {
        let s = device_states(&app, &id).await;
        s.iter()
            .find(|x| x["device_id"] == newcomer[0].id.as_str())
            .cloned()
    })
    .await;
    assert_eq!(joined["phase"], 3);
    assert_eq!(joined["state"], "pending");
    let resumed = app
        .post(&format!("/ota/deployments/{id}/continue"), &k, json!({}))
        .await
        .expect(200);
    assert_eq!(resumed.json["data"]["status"], "in_progress");
    assert_eq!(resumed.json["data"]["current_phase"], 2);
    let d = wait_status(&app, &id, "completed", 60).await;
    assert_eq!(d["device_counts"]["succeeded"], 19, "{d}");
    assert_eq!(d["device_counts"]["failed"], 2, "{d}");
    assert!(d["finished_at"].is_string());
    let states = device_states(&app, &id).await;
    let of = |i: usize| {
        states
            .iter()
            .find(|x| x["device_id"] == devices[i].id.as_str())
            .unwrap()
            .clone()
    };
    assert_eq!(of(15)["state"], "failed");
    assert!(
        of(15)["message"]
            .as_str()
            .unwrap()
            .contains("no answer in time"),
        "{:?}",
        of(15)
    );
    assert_eq!(of(17)["state"], "failed");
    assert!(
        of(17)["message"]
            .as_str()
            .unwrap()
            .contains("sha256 mismatch")
    );
    assert_eq!(of(0)["state"], "succeeded");
    app.post(&format!("/ota/deployments/{id}/continue"), &k, json!({}))
        .await
        .expect(409);
    app.post(&format!("/ota/deployments/{id}/cancel"), &k, json!({}))
        .await
        .expect(409);

    // A manual rollback of the completed deployment: every device that installed it returns.
    let back = app
        .post(&format!("/ota/deployments/{id}/rollback"), &k, json!({}))
        .await
        .expect(200);
    assert_eq!(back.json["data"]["status"], "rolled_back");
    let d = wait_for("19 rollbacks", 30, || async {
        let d = app
            .get(&format!("/ota/deployments/{id}"), &k)
            .await
            .expect(200)
            .json["data"]
            .clone();
        (d["device_counts"]["rolled_back"] == 19).then_some(d)
    })
    .await;
    assert_eq!(d["device_counts"]["failed"], 2);
    app.post(&format!("/ota/deployments/{id}/rollback"), &k, json!({}))
        .await
        .expect(409);
    let listed = app
        .get("/ota/deployments?status=rolled_back", &k)
        .await
        .expect(200);
    assert_eq!(listed.json["meta"]["total"], 1);
    channel.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_tenancy_refusals_and_the_rate_limit() {
    let (app, _dir) = ota_app().await;
    let channel = app.start_mqtt().await;
    let k = app.admin_key.clone();
    let g = group(&app, "Packaging").await;
    let devices = fleet(
        &app,
        channel.local_addr.unwrap(),
        &g,
        &[Behave::Succeed; 10],
    )
    .await;
    let package = released(&app, firmware(5_000), "1.2").await;
    let body = json!({"name": "1.2", "package_id": package["id"], "targets": {"type": "tags", "tags": ["none-has-this"]}});
    let none = app.post("/ota/deployments", &k, body).await.expect(400);
    assert!(none.text.contains("targets"), "{}", none.text);
    // Draft packages do not deploy.
    let (_, draft) = upload(&app, &k, firmware(10), &[("version", "1.3")]).await;
    let r = app
        .post(
            "/ota/deployments",
            &k,
            json!({"name": "d", "package_id": draft["data"]["id"], "targets": {"type": "group", "group_id": g}}),
        )
        .await
        .expect(409);
    assert_eq!(r.json["error"]["code"], "package_not_released");
    let r = app
        .post(
            "/ota/deployments",
            &k,
            json!({"name": "d", "package_id": package["id"], "targets": {"type": "group", "group_id": g},
                   "phases": [{"percent": 60}, {"percent": 40}]}),
        )
        .await
        .expect(400);
    assert!(r.text.contains("phases[1].percent"), "{}", r.text);
    let r = app
        .post(
            "/ota/deployments",
            &k,
            json!({"name": "d", "package_id": package["id"], "targets": {"type": "devices", "device_ids": [devices[0].id, "nope"]}}),
        )
        .await
        .expect(400);
    assert!(r.text.contains("targets.device_ids"), "{}", r.text);

    // A webhook subscribed to OTA events (its receiver answers nothing; the deliveries are what
    // is checked).
    let sink = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = app
        .post(
            "/webhooks",
            &k,
            json!({"url": format!("http://{}/hook", sink.local_addr().unwrap()), "events": ["ota.deployment.created", "ota.deployment.cancelled"], "secret": "a-long-enough-secret-0123456789"}),
        )
        .await
        .expect(201)
        .id();
    // Cancel while the first phase waits for a person: the rest are never told.
    let created = app
        .post(
            "/ota/deployments",
            &k,
            json!({"name": "1.2 to packaging", "package_id": package["id"], "targets": {"type": "group", "group_id": g},
                   "phases": [{"count": 3, "wait_for_continue": true}, {"percent": 100}]}),
        )
        .await
        .expect(201);
    let id = created.id();
    wait_status(&app, &id, "paused", 30).await;
    let reader = app.key(&[plantd_model::Scope::ReadAssets]).await;
    app.post(&format!("/ota/deployments/{id}/cancel"), &reader, json!({}))
        .await
        .expect(403);
    let (_, other) = app.other_org("Other fleet", Tier::Enterprise).await;
    app.get(&format!("/ota/deployments/{id}"), &other)
        .await
        .expect(404);
    app.post(&format!("/ota/deployments/{id}/cancel"), &other, json!({}))
        .await
        .expect(404);
    app.get(&format!("/ota/deployments/{id}/devices"), &other)
        .await
        .expect(404);
    // Another organization cannot deploy this organization's package, nor to its group.
    let r = app
        .post(
            "/ota/deployments",
            &other,
            json!({"name": "x", "package_id": package["id"], "targets": {"type": "group", "group_id": g}}),
        )
        .await
        .expect(400);
    assert!(r.text.contains("package_id"), "{}", r.text);
    let c = app
        .post(&format!("/ota/deployments/{id}/cancel"), &k, json!({}))
        .await
        .expect(200);
    assert_eq!(c.json["data"]["status"], "cancelled");
    assert_eq!(c.json["data"]["device_counts"]["succeeded"], 3);
    assert_eq!(c.json["data"]["device_counts"]["cancelled"], 7);
    app.post(&format!("/ota/deployments/{id}/cancel"), &k, json!({}))
        .await
        .expect(409);
    let deliveries = app
        .get(&format!("/webhooks/{hook}/deliveries"), &k)
        .await
        .expect(200)
        .items();
    let mut events: Vec<&str> = deliveries
        .iter()
        .map(|d| d["event"].as_str().unwrap())
        .collect();
    events.sort_unstable();
    assert_eq!(
        events,
        ["ota.deployment.cancelled", "ota.deployment.created"]
    );
    let cancelled = deliveries
        .iter()
        .find(|d| d["event"] == "ota.deployment.cancelled")
        .unwrap();
    let payload = &cancelled["payload"];
    assert_eq!(payload["event"], "ota.deployment.cancelled");
    assert_eq!(payload["data"]["id"], id.as_str());
    assert_eq!(payload["data"]["status"], "cancelled");
    drop(sink);
    // The devices are free for the next deployment.
    let next = app
        .post(
            "/ota/deployments",
            &k,
            json!({"name": "all", "package_id": package["id"], "targets": {"type": "devices", "device_ids": devices.iter().map(|d| d.id.clone()).collect::<Vec<_>>()},
                   "strategy": "all_at_once"}),
        )
        .await
        .expect(201);
    let d = wait_status(&app, &next.id(), "completed", 60).await;
    assert_eq!(d["device_counts"]["succeeded"], 10);
    assert_eq!(d["phases"].as_array().unwrap().len(), 1);

    // SPEC 8.5: 10 deployments an hour (a starter organization's key, whatever the answers).
    let (_, starter) = app.other_org("Starter OTA", Tier::Starter).await;
    for _ in 0..10 {
        app.post("/ota/deployments", &starter, json!({"name": "x"}))
            .await
            .expect(400);
    }
    let limited = app
        .post("/ota/deployments", &starter, json!({"name": "x"}))
        .await
        .expect(429);
    assert_eq!(limited.code(), "rate_limited");
    let anonymous = app
        .call(Method::GET, "/ota/deployments", None, None)
        .await
        .expect(401);
    assert_eq!(anonymous.code(), "authentication_error");
    channel.stop().await;
}

/// An independent device: paho-mqtt, requests and cryptography (python) take part in one
/// deployment end to end: the update command over MQTT, a download interrupted and resumed
/// with Range, the SHA-256 and the Ed25519 signature verified, each step reported. Needs
/// `PLANTD_TEST_PYTHON_OTA` (set by `.ci/run`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_device_takes_an_update_end_to_end() {
    let Some(python) = plantd_test_support::peer(
        "PLANTD_TEST_PYTHON_OTA",
        "to a python3 with paho-mqtt, requests and cryptography",
    ) else {
        return;
    };
    let (app, _dir) = ota_app().await;
    let channel = app.start_mqtt().await;
    let port = channel.local_addr.unwrap().port().to_string();
    let stdout = plantd_test_support::run_interop(
        &python,
        "ota_device.py",
        &[&app.base, &app.admin_key, "127.0.0.1", &port],
    )
    .await;
    plantd_test_support::printed_every(
        &stdout,
        &[
            "uploaded and released",
            "update command received",
            "resumed range",
            "sha256",
            "signature",
            "deployment completed",
        ],
    );
    let d = app
        .get("/ota/deployments", &app.admin_key)
        .await
        .expect(200)
        .items();
    let devices = device_states(&app, d[0]["id"].as_str().unwrap()).await;
    assert_eq!(devices[0]["state"], "succeeded");
    assert_eq!(devices[0]["device_name"], "paho OTA device");
    channel.stop().await;
}
