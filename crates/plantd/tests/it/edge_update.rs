//! The edge agent updates itself (issue 34, SPEC 3 rule 2): an OTA deployment that targets the
//! agent's device makes it download the package (the plantd binary itself, a real file of
//! hundreds of megabytes), verify its SHA-256 and signature, back up, replace its binary and
//! restart into it (the same process id), which passes its health check (connected to the
//! cloud, reading the simulator): the deployment completes. A second package starts but cannot
//! reach the cloud: its health check fails, the agent puts the version before back, restarts
//! into it and reports `failed`, which stops the deployment; the binary on disk is the one
//! before again.

use crate::connectors::start_sim;
use crate::edge::{BIN, agent_get, enrollment_token, launch_agent};
use crate::edge_uplink::free_port;
use crate::ota::{device_states, released};
use plantd_test_support::{TestApp, spawn_app_with, temp_dir, wait_for};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::path::Path;

fn sha256_of(path: &Path) -> String {
    hex::encode(Sha256::digest(std::fs::read(path).unwrap()))
}

fn executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Deploys `package` to the device at once and waits for the deployment to end.
async fn deploy(cloud: &TestApp, package: &Value, device_id: &str) -> (String, Value) {
    let id = cloud
        .post(
            "/ota/deployments",
            &cloud.admin_key,
            json!({"name": format!("agent to {}", package["version"]), "package_id": package["id"],
                   "targets": {"type": "devices", "device_ids": [device_id]},
                   "strategy": "all_at_once", "device_timeout_seconds": 600}),
        )
        .await
        .expect(201)
        .id();
    let done = wait_for(&format!("deployment {id} to end"), 600, || async {
        let d = cloud
            .get(&format!("/ota/deployments/{id}"), &cloud.admin_key)
            .await
            .expect(200)
            .json["data"]
            .clone();
        matches!(
            d["status"].as_str(),
            Some("completed" | "failed" | "rolled_back")
        )
        .then_some(d)
    })
    .await;
    (id, done)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_updates_itself_and_rolls_back_a_version_that_fails_its_health_check() {
    let dir = temp_dir("edge-update");
    let cloud = spawn_app_with(plantd_app::AppConfig {
        ota_dir: dir.join("cloud-ota"),
        ..plantd_app::AppConfig::default()
    })
    .await;
    let k = cloud.admin_key.clone();
    let channel = cloud.start_mqtt().await;
    let token = enrollment_token(&cloud).await;
    let sim = start_sim("edge-update", 0, 0);
    // The agent runs from its own copy of the binary: the update replaces it.
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let installed = bin.join("plantd");
    std::fs::copy(BIN, &installed).unwrap();
    executable(&installed);
    let first = sha256_of(&installed);
    let config = dir.join("plantd.toml");
    std::fs::write(
        &config,
        "[edge]\nheartbeat_interval_secs = 1\nupdate_health_check_secs = 20\n",
    )
    .unwrap();
    let agent_dir = dir.join("agent");
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let listen = format!("127.0.0.1:{port}");
    let (opcua, modbus) = (sim.opcua_port.to_string(), sim.modbus_port.to_string());
    let mqtt_url = format!("mqtt://{}", channel.local_addr.unwrap());
    let cloud_root = format!("http://{}", cloud.addr);
    let (mut agent, ek) = launch_agent(
        installed.to_str().unwrap(),
        &listen,
        agent_dir.to_str().unwrap(),
        &[
            "--config",
            config.to_str().unwrap(),
            "--mode",
            "development",
            "--sim-opcua-port",
            &opcua,
            "--sim-modbus-port",
            &modbus,
            "--enroll",
            &token,
            "--cloud",
            &cloud_root,
        ],
        &[("PLANTD_MQTT_URL", &mqtt_url)],
    );
    let pid = agent.child.id();
    let device_id = agent_get(&base, &ek, "/edge/config").await["data"]["cloud"]["device_id"]
        .as_str()
        .unwrap()
        .to_string();
    // Before the update: connected, reading the simulator.
    wait_for(
        "the agent connected and reading its sources",
        90,
        || async {
            let c = agent_get(&base, &ek, "/edge/config").await;
            let sources = agent_get(&base, &ek, "/data-sources").await;
            let read = sources["data"]
                .as_array()
                .is_some_and(|l| !l.is_empty() && l.iter().all(|s| s["status"] == "connected"));
            (c["data"]["forwarding"]["connected"] == true && read).then_some(())
        },
    )
    .await;

    // 1. A working new version: the binary with a build note appended (another file, the same
    //    program).
    let mut bytes = std::fs::read(BIN).unwrap();
    bytes.extend_from_slice(b"\nplantd 2.0.0 (test build)\n");
    let good_sha = hex::encode(Sha256::digest(&bytes));
    let good = released(&cloud, bytes, "2.0.0").await;
    let (id, done) = deploy(&cloud, &good, &device_id).await;
    let states = device_states(&cloud, &id).await;
    assert_eq!(done["status"], "completed", "{done} {states:?}");
    assert_eq!(states[0]["state"], "succeeded", "{states:?}");
    assert!(
        states[0]["message"]
            .as_str()
            .unwrap()
            .contains("version 2.0.0 is running"),
        "{states:?}"
    );
    // The same process, now the new binary, says so in its heartbeat.
    assert_eq!(sha256_of(&installed), good_sha);
    assert_eq!(agent.child.id(), pid);
    assert!(agent.child.try_wait().unwrap().is_none());
    wait_for("the heartbeat of version 2.0.0", 60, || async {
        let h = cloud
            .get(&format!("/fleet/devices/{device_id}/health"), &k)
            .await
            .expect(200);
        (h.json["data"]["heartbeat"]["firmware_version"] == "2.0.0").then_some(())
    })
    .await;
    // The backup of the version before is kept (binary, configuration file, configuration).
    let backup = agent_dir.join("update/backups").join(&id);
    assert_eq!(sha256_of(&backup.join("plantd")), first);
    assert!(backup.join("config.toml").exists());
    let document: Value =
        serde_json::from_slice(&std::fs::read(backup.join("configuration.json")).unwrap()).unwrap();
    assert_eq!(document["format"], "plantd-edge-config");
    assert_eq!(
        document["assets"].as_array().unwrap().len(),
        3,
        "{document}"
    );

    // 2. A version that cannot reach the cloud: it starts (it is plantd) with an MQTT address
    //    where nothing listens.
    let closed = free_port();
    let real = dir.join("real-plantd");
    std::fs::copy(BIN, &real).unwrap();
    executable(&real);
    let script = format!(
        "#!/bin/sh\nPLANTD_MQTT_URL=mqtt://127.0.0.1:{closed} exec {} \"$@\"\n",
        real.display()
    );
    let bad = released(&cloud, script.into_bytes(), "3.0.0").await;
    let (id, done) = deploy(&cloud, &bad, &device_id).await;
    let states = device_states(&cloud, &id).await;
    assert!(
        matches!(done["status"].as_str(), Some("failed" | "rolled_back")),
        "{done}"
    );
    assert_eq!(states[0]["state"], "failed", "{states:?}");
    let message = states[0]["message"].as_str().unwrap();
    assert!(
        message.contains("rolled back to 2.0.0") && message.contains("not connected to the cloud"),
        "{message}"
    );
    // Back on 2.0.0: its binary in place, the same process, forwarding again.
    assert_eq!(sha256_of(&installed), good_sha);
    assert_eq!(agent.child.id(), pid);
    wait_for("the agent back and forwarding", 60, || async {
        let r = reqwest::Client::new()
            .get(format!("{base}/v1/edge/config"))
            .bearer_auth(&ek)
            .send()
            .await
            .ok()?;
        let c: Value = r.json().await.ok()?;
        (c["data"]["forwarding"]["connected"] == true).then_some(())
    })
    .await;
    let h = cloud
        .get(&format!("/fleet/devices/{device_id}/health"), &k)
        .await
        .expect(200);
    assert_eq!(h.json["data"]["heartbeat"]["firmware_version"], "2.0.0");
    assert!(!agent_dir.join("update/pending.json").exists());
    // The downloads are gone once reported; the backups stay their day.
    wait_for("the downloads dropped", 30, || async {
        (!agent_dir.join("update/download").exists()).then_some(())
    })
    .await;
    assert!(backup.join("plantd").exists());
    assert!(agent.stop("TERM").success());
    sim.stop();
    let _ = std::fs::remove_dir_all(dir);
}
