//! Fleet (issue 28): devices, groups and enrollment tokens over HTTP with their refusals and
//! tenancy; and the MQTT device channel with a real MQTT client (rumqttc, MQTT 3.1.1): logins,
//! own-topic rights, telemetry acknowledged once durable, heartbeats and health, commands with
//! their answers and time to live, status turning offline, and a deleted device disconnected.

use plantd_app::AppConfig;
use plantd_model::Tier;
use plantd_test_support::mqtt::{connect, next_publish, options};
use plantd_test_support::{TestApp, spawn_app, spawn_app_with, wait_for};
use reqwest::Method;
use rumqttc::{ConnectReturnCode, MqttOptions, Packet, QoS};
use serde_json::{Value, json};
use std::time::Duration;

async fn register(app: &TestApp, key: &str, serial: &str, extra: Value) -> Value {
    let mut body = json!({"name": format!("Gateway {serial}"), "serial_number": serial});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    app.post("/fleet/devices", key, body).await.expect(201).json["data"].clone()
}

fn ids(list: &Value) -> Vec<String> {
    list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn devices_groups_and_enrollment_tokens() {
    let app = spawn_app().await;
    let k = app.admin_key.clone();
    let group = app
        .post(
            "/fleet/groups",
            &k,
            json!({"name": "Line 1", "description": "press line"}),
        )
        .await
        .expect(201)
        .json["data"]
        .clone();
    let gid = group["id"].as_str().unwrap().to_string();
    assert_eq!(group["device_count"], 0);
    app.post("/fleet/groups", &k, json!({"name": "Line 1"}))
        .await
        .expect(409);

    // An operator registers a device: the record, unknown until first contact, with its MQTT
    // credentials shown once.
    let d1 = register(
        &app,
        &k,
        "SN-1",
        json!({"tags": ["press", "north"], "group_ids": [gid], "metadata": {"site": "A"}}),
    )
    .await;
    let d1_id = d1["id"].as_str().unwrap().to_string();
    assert_eq!(d1["status"], "unknown");
    assert_eq!(d1["asset_id"], d1_id);
    assert_eq!(d1["group_ids"], json!([gid]));
    assert_eq!(d1["mqtt"]["username"], d1_id);
    assert_eq!(d1["mqtt"]["client_id"], d1_id);
    assert!(d1["mqtt"]["password"].as_str().unwrap().starts_with("pdm_"));
    assert_eq!(
        d1["mqtt"]["topics"]["commands"],
        format!("plantd/devices/{d1_id}/commands")
    );
    let read = app
        .get(&format!("/fleet/devices/{d1_id}"), &k)
        .await
        .expect(200);
    assert!(read.json["data"].get("mqtt").is_none(), "{}", read.text);
    assert!(!read.text.contains("pdm_"));
    // A serial number registers once.
    let dup = app
        .post(
            "/fleet/devices",
            &k,
            json!({"name": "again", "serial_number": "SN-1"}),
        )
        .await
        .expect(409);
    assert_eq!(dup.code(), "conflict");
    // A group that is not there is named.
    let bad = app
        .post(
            "/fleet/devices",
            &k,
            json!({"name": "x", "serial_number": "SN-X", "group_ids": ["nope"]}),
        )
        .await
        .expect(400);
    assert!(bad.text.contains("group_ids"), "{}", bad.text);
    // Nothing without a key or a token.
    let anonymous = app
        .call(
            Method::POST,
            "/fleet/devices",
            None,
            Some(json!({"name": "x", "serial_number": "SN-Y"})),
        )
        .await
        .expect(401);
    assert!(
        anonymous.text.contains("enrollment_token"),
        "{}",
        anonymous.text
    );
    // A read-only key cannot register.
    let reader = app.key(&[plantd_model::Scope::ReadAssets]).await;
    app.post(
        "/fleet/devices",
        &reader,
        json!({"name": "x", "serial_number": "SN-Z"}),
    )
    .await
    .expect(403);

    // Enrollment tokens: the secret once, then never.
    let past = app
        .post(
            "/fleet/enrollment/token",
            &k,
            json!({"expires_at": "2020-01-01T00:00:00Z"}),
        )
        .await
        .expect(400);
    assert!(past.text.contains("expires_at"));
    app.post("/fleet/enrollment/token", &k, json!({"max_uses": 0}))
        .await
        .expect(400);
    let token = app
        .post(
            "/fleet/enrollment/token",
            &k,
            json!({"group_id": gid, "tags": ["enrolled"], "max_uses": 1}),
        )
        .await
        .expect(201)
        .json["data"]
        .clone();
    let secret = token["token"].as_str().unwrap().to_string();
    assert!(secret.starts_with("pde_"));
    let tokens = app.get("/fleet/enrollment/tokens", &k).await.expect(200);
    assert!(!tokens.text.contains(&secret));
    assert_eq!(tokens.json["data"][0]["uses"], 0);
    // An empty body makes an unlimited token.
    let open = app
        .call(Method::POST, "/fleet/enrollment/token", Some(&k), None)
        .await
        .expect(201);
    assert!(open.json["data"]["max_uses"].is_null());

    // A device enrolls itself: no API key, the token's group and tags besides its own.
    let d2 = app
        .call(
            Method::POST,
            "/fleet/devices",
            None,
            Some(json!({"name": "self", "serial_number": "SN-2", "tags": ["own"], "enrollment_token": secret})),
        )
        .await
        .expect(201)
        .json["data"]
        .clone();
    assert_eq!(d2["group_ids"], json!([gid]));
    assert_eq!(d2["tags"], json!(["own", "enrolled"]));
    // Used up, unknown, both credentials, revoked.
    let used = app
        .call(
            Method::POST,
            "/fleet/devices",
            None,
            Some(json!({"name": "x", "serial_number": "SN-3", "enrollment_token": secret})),
        )
        .await
        .expect(409);
    assert_eq!(used.code(), "enrollment_token_used_up", "{}", used.text);
    app.call(
        Method::POST,
        "/fleet/devices",
        None,
        Some(json!({"name": "x", "serial_number": "SN-3", "enrollment_token": "pde_nothing"})),
    )
    .await
    .expect(401);
    app.post(
        "/fleet/devices",
        &k,
        json!({"name": "x", "serial_number": "SN-3", "enrollment_token": secret}),
    )
    .await
    .expect(400);
    let open_id = open.json["data"]["id"].as_str().unwrap();
    let open_secret = open.json["data"]["token"].as_str().unwrap();
    let revoked = app
        .call(
            Method::POST,
            &format!("/fleet/enrollment/tokens/{open_id}/revoke"),
            Some(&k),
            None,
        )
        .await
        .expect(200);
    assert!(revoked.json["data"]["revoked_at"].is_string());
    let refused = app
        .call(
            Method::POST,
            "/fleet/devices",
            None,
            Some(json!({"name": "x", "serial_number": "SN-4", "enrollment_token": open_secret})),
        )
        .await
        .expect(409);
    assert_eq!(refused.code(), "enrollment_token_revoked");

    // Filters: status, group, tags (all of them).
    let d3 = register(&app, &k, "SN-5", json!({"tags": ["press"]})).await;
    let d3_id = d3["id"].as_str().unwrap().to_string();
    let d2_id = d2["id"].as_str().unwrap().to_string();
    let by_group = app
        .get(&format!("/fleet/devices?group_id={gid}"), &k)
        .await
        .expect(200);
    assert_eq!(ids(&by_group.json), vec![d1_id.clone(), d2_id.clone()]);
    let by_tags = app
        .get("/fleet/devices?tags=press,north", &k)
        .await
        .expect(200);
    assert_eq!(ids(&by_tags.json), vec![d1_id.clone()]);
    let by_tag = app.get("/fleet/devices?tags=press", &k).await.expect(200);
    assert_eq!(ids(&by_tag.json), vec![d1_id.clone(), d3_id.clone()]);
    let unknown = app
        .get("/fleet/devices?status=unknown&per_page=2", &k)
        .await
        .expect(200);
    assert_eq!(unknown.json["meta"]["total"], 3);
    assert_eq!(unknown.json["data"].as_array().unwrap().len(), 2);
    app.get("/fleet/devices?status=asleep", &k)
        .await
        .expect(400);
    assert_eq!(
        app.get(&format!("/fleet/groups/{gid}"), &k)
            .await
            .expect(200)
            .json["data"]["device_count"],
        2
    );

    // PUT sets the groups; deleting a group keeps its devices.
    let moved = app
        .put(
            &format!("/fleet/devices/{d3_id}"),
            &k,
            json!({"group_ids": [gid], "name": "renamed"}),
        )
        .await
        .expect(200);
    assert_eq!(moved.json["data"]["group_ids"], json!([gid]));
    assert_eq!(moved.json["data"]["tags"], json!(["press"]));
    app.put(
        &format!("/fleet/groups/{gid}"),
        &k,
        json!({"description": "new"}),
    )
    .await
    .expect(200);
    app.delete(&format!("/fleet/groups/{gid}"), &k)
        .await
        .expect(204);
    let after = app
        .get(&format!("/fleet/devices/{d3_id}"), &k)
        .await
        .expect(200);
    assert_eq!(after.json["data"]["group_ids"], json!([]));

    // Another organization sees none of it: its ids behave as missing ones.
    let (_b, b) = app.other_org("B Corp", Tier::Professional).await;
    assert_eq!(
        app.get("/fleet/devices", &b).await.expect(200).json["meta"]["total"],
        0
    );
    assert_eq!(
        app.get("/fleet/enrollment/tokens", &b)
            .await
            .expect(200)
            .json["meta"]["total"],
        0
    );
    for path in [
        format!("/fleet/devices/{d1_id}"),
        format!("/fleet/devices/{d1_id}/health"),
        format!("/fleet/devices/{d1_id}/commands"),
    ] {
        assert_eq!(app.get(&path, &b).await.expect(404).code(), "not_found");
    }
    app.post(
        &format!("/fleet/devices/{d1_id}/command"),
        &b,
        json!({"command": "reboot"}),
    )
    .await
    .expect(404);
    app.delete(&format!("/fleet/devices/{d1_id}"), &b)
        .await
        .expect(404);
    app.call(
        Method::POST,
        &format!("/fleet/enrollment/tokens/{open_id}/revoke"),
        Some(&b),
        None,
    )
    .await
    .expect(404);
    // B may use the same serial number: serials are unique per organization.
    register(&app, &b, "SN-1", json!({})).await;
    app.get(&format!("/fleet/devices/{d1_id}"), &k)
        .await
        .expect(200);
    app.delete(&format!("/fleet/devices/{d1_id}"), &k)
        .await
        .expect(204);
    app.get(&format!("/fleet/devices/{d1_id}"), &k)
        .await
        .expect(404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn devices_speak_mqtt() {
    let app = spawn_app_with(AppConfig {
        device_offline_after: Duration::from_secs(10),
        ..AppConfig::default()
    })
    .await;
    let k = app.admin_key.clone();
    let channel = app.start_mqtt().await;
    let addr = channel.local_addr.unwrap();
    let a = register(&app, &k, "MQ-A", json!({})).await;
    let b = register(&app, &k, "MQ-B", json!({})).await;
    let (a_id, a_pw) = (
        a["id"].as_str().unwrap(),
        a["mqtt"]["password"].as_str().unwrap(),
    );
    let b_id = b["id"].as_str().unwrap();
    let topics = &a["mqtt"]["topics"];

    // Wrong password, unknown device, anonymous, a client id that is not the device's.
    let (_, code) = connect(options(addr, a_id, a_id, "pdm_wrong")).await;
    assert_eq!(code, ConnectReturnCode::BadUserNamePassword);
    let (_, code) = connect(options(addr, "nobody", "nobody", a_pw)).await;
    assert_eq!(code, ConnectReturnCode::BadUserNamePassword);
    let (_, code) = connect(MqttOptions::new("anon", addr.ip().to_string(), addr.port())).await;
    assert_eq!(code, ConnectReturnCode::BadUserNamePassword);
    let (_, code) = connect(options(addr, "other-id", a_id, a_pw)).await;
    assert_ne!(code, ConnectReturnCode::Success);

    let (mut dev, code) = connect(options(addr, a_id, a_id, a_pw)).await;
    assert_eq!(code, ConnectReturnCode::Success);
    // Only its own command topic: B's is refused.
    dev.client
        .subscribe(format!("plantd/devices/{b_id}/commands"), QoS::AtLeastOnce)
        .await
        .unwrap();
    dev.client
        .subscribe(topics["commands"].as_str().unwrap(), QoS::AtLeastOnce)
        .await
        .unwrap();
    let mut acks = Vec::new();
    while acks.len() < 2 {
        match tokio::time::timeout(Duration::from_secs(10), dev.incoming.recv()).await {
            Ok(Some(Packet::SubAck(s))) => acks.push(s.return_codes[0]),
            Ok(Some(_)) => {}
            other => panic!("no SUBACK: {other:?}"),
        }
    }
    assert_eq!(acks[0], rumqttc::SubscribeReasonCode::Failure);
    assert!(matches!(acks[1], rumqttc::SubscribeReasonCode::Success(_)));

    // Telemetry: a point without asset_id is the device's; stored as HTTP ingest stores it.
    let now = chrono_now();
    dev.client
        .publish(
            topics["telemetry"].as_str().unwrap(),
            QoS::AtLeastOnce,
            false,
            json!({"data": [{"tag_name": "pressure", "value": 4.2, "timestamp": now}]}).to_string(),
        )
        .await
        .unwrap();
    // As B: refused (the broker drops it), nothing stored for B.
    dev.client
        .publish(
            format!("plantd/devices/{b_id}/telemetry"),
            QoS::AtLeastOnce,
            false,
            json!({"data": [{"tag_name": "pressure", "value": 9.9, "timestamp": now}]}).to_string(),
        )
        .await
        .unwrap();
    // A malformed payload is dropped and the channel goes on.
    dev.client
        .publish(
            topics["telemetry"].as_str().unwrap(),
            QoS::AtLeastOnce,
            false,
            "not json",
        )
        .await
        .unwrap();
    dev.client
        .publish(
            topics["heartbeat"].as_str().unwrap(),
            QoS::AtLeastOnce,
            false,
            json!({"cpu_percent": 12.5, "memory_percent": 40, "firmware_version": "1.4.2"})
                .to_string(),
        )
        .await
        .unwrap();
    let latest = wait_for("the device's point and heartbeat figures", 20, || async {
        let r = app
            .get(&format!("/telemetry/latest?asset_id={a_id}"), &k)
            .await;
        let tags: Vec<String> = r.json["data"]
            .as_array()?
            .iter()
            .filter_map(|p| p["tag_name"].as_str().map(String::from))
            .collect();
        (tags.contains(&"pressure".to_string()) && tags.contains(&"cpu_percent".to_string()))
            .then_some(r.json)
    })
    .await;
    let pressure = latest["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["tag_name"] == "pressure")
        .unwrap();
    assert_eq!(pressure["value"], 4.2);
    let b_latest = app
        .get(&format!("/telemetry/latest?asset_id={b_id}"), &k)
        .await
        .expect(200);
    assert_eq!(
        b_latest.json["data"],
        json!([]),
        "B's asset must have nothing"
    );
    let health = wait_for("the device online with its heartbeat", 20, || async {
        let h = app
            .get(&format!("/fleet/devices/{a_id}/health"), &k)
            .await
            .expect(200)
            .json;
        (h["data"]["status"] == "online" && h["data"]["heartbeat"]["cpu_percent"] == 12.5)
            .then_some(h)
    })
    .await;
    assert_eq!(health["data"]["firmware_version"], "1.4.2");
    assert_eq!(health["data"]["status_history"][0]["status"], "online");

    // A device is a source of its organization: points naming it (its history sent again, a
    // model's scores of its points) are taken through the API too; another id is not.
    app.post(
        "/telemetry",
        &k,
        json!({"data_source_id": a_id, "data": [{"asset_id": a_id, "tag_name": "pressure", "value": 4.1, "timestamp": now}]}),
    )
    .await
    .expect(200);
    app.post(
        "/telemetry",
        &k,
        json!({"data": [{"asset_id": a_id, "tag_name": "pressure", "value": 4.1, "timestamp": now, "data_source_id": "nope"}]}),
    )
    .await
    .expect(400);

    // What its tags measure (an edge agent tells its cloud): recorded, a person's words win, a
    // message with a bad range is dropped whole.
    app.put(
        &format!("/assets/{a_id}/tags/flow"),
        &k,
        json!({"unit": "m3/h"}),
    )
    .await
    .expect(200);
    let tags_topic = topics["tags"].as_str().unwrap();
    dev.client
        .publish(
            tags_topic,
            QoS::AtLeastOnce,
            false,
            json!({"tags": [{"asset_id": a_id, "tag_name": "level", "unit": "m",
                             "eu_range": {"low": 5.0, "high": 1.0}}]})
            .to_string(),
        )
        .await
        .unwrap();
    dev.client
        .publish(
            tags_topic,
            QoS::AtLeastOnce,
            false,
            json!({"tags": [
                {"asset_id": a_id, "tag_name": "pressure", "unit": "bar", "description": "Outlet pressure",
                 "eu_range": {"low": 0.0, "high": 10.0}},
                {"asset_id": a_id, "tag_name": "flow", "unit": "l/min"}]})
            .to_string(),
        )
        .await
        .unwrap();
    let pressure_tag = wait_for("the device's word on its tag", 20, || async {
        let r = app.get(&format!("/assets/{a_id}/tags/pressure"), &k).await;
        r.json["data"]["unit"].is_string().then_some(r.json)
    })
    .await;
    assert_eq!(pressure_tag["data"]["unit"], "bar", "{pressure_tag}");
    assert_eq!(pressure_tag["data"]["eu_range"]["high"], 10.0);
    let flow = app
        .get(&format!("/assets/{a_id}/tags/flow"), &k)
        .await
        .expect(200);
    assert_eq!(flow.json["data"]["unit"], "m3/h", "{}", flow.text);
    app.get(&format!("/assets/{a_id}/tags/level"), &k)
        .await
        .expect(404);

    // A command: delivered as its JSON on the command topic, answered, recorded.
    let cmd = app
        .post(
            &format!("/fleet/devices/{a_id}/command"),
            &k,
            json!({"command": "reboot", "params": {"delay_s": 5}}),
        )
        .await
        .expect(201)
        .json["data"]
        .clone();
    assert_eq!(cmd["status"], "queued");
    let got = next_publish(&mut dev, 15)
        .await
        .expect("the command arrives");
    let delivered: Value = serde_json::from_slice(&got.payload).unwrap();
    assert_eq!(delivered["id"], cmd["id"]);
    assert_eq!(delivered["command"], "reboot");
    assert_eq!(delivered["params"]["delay_s"], 5);
    dev.client
        .publish(
            topics["command_results"].as_str().unwrap(),
            QoS::AtLeastOnce,
            false,
            json!({"id": cmd["id"], "status": "succeeded", "result": {"rebooted": true}})
                .to_string(),
        )
        .await
        .unwrap();
    let done = wait_for("the command answered", 15, || async {
        let list = app
            .get(&format!("/fleet/devices/{a_id}/commands"), &k)
            .await
            .expect(200)
            .json;
        (list["data"][0]["status"] == "succeeded").then_some(list)
    })
    .await;
    assert_eq!(done["data"][0]["result"]["rebooted"], true);
    assert!(done["data"][0]["sent_at"].is_string());

    // A command for a device that is not connected waits, then expires at its time to live.
    let lonely = app
        .post(
            &format!("/fleet/devices/{b_id}/command"),
            &k,
            json!({"command": "ping", "ttl_seconds": 1}),
        )
        .await
        .expect(201);
    assert_eq!(lonely.json["data"]["status"], "queued");
    wait_for("the command expired", 15, || async {
        let list = app
            .get(&format!("/fleet/devices/{b_id}/commands"), &k)
            .await
            .expect(200)
            .json;
        (list["data"][0]["status"] == "expired").then_some(())
    })
    .await;
    app.post(
        &format!("/fleet/devices/{b_id}/command"),
        &k,
        json!({"command": "ping", "ttl_seconds": 0}),
    )
    .await
    .expect(400);

    // Silence turns the device offline (10 s here), with the history and the `online` tag.
    drop(dev);
    let health = wait_for("the device offline", 30, || async {
        let h = app
            .get(&format!("/fleet/devices/{a_id}/health"), &k)
            .await
            .expect(200)
            .json;
        (h["data"]["status"] == "offline").then_some(h)
    })
    .await;
    let history: Vec<&str> = health["data"]["status_history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["status"].as_str().unwrap())
        .collect();
    assert_eq!(history.first(), Some(&"offline"), "{history:?}");
    assert_eq!(history.last(), Some(&"online"), "{history:?}");
    let online = app
        .get(
            &format!("/telemetry/latest?asset_id={a_id}&tags=online"),
            &k,
        )
        .await
        .expect(200);
    assert_eq!(online.json["data"][0]["value"], 0.0);

    // A deleted device is disconnected and refused from then on.
    let (mut dev, code) = connect(options(addr, a_id, a_id, a_pw)).await;
    assert_eq!(code, ConnectReturnCode::Success);
    app.delete(&format!("/fleet/devices/{a_id}"), &k)
        .await
        .expect(204);
    let cut = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match dev.incoming.recv().await {
                Some(Packet::Disconnect) | None => return,
                Some(_) => {}
            }
        }
    })
    .await;
    assert!(cut.is_ok(), "the deleted device was not disconnected");
    let (_, code) = connect(options(addr, a_id, a_id, a_pw)).await;
    assert_eq!(code, ConnectReturnCode::BadUserNamePassword);
    // The logins are audited.
    let logs = app
        .get("/audit/logs?event_types=device.connect", &k)
        .await
        .expect(200);
    assert!(
        logs.json["meta"]["total"].as_u64().unwrap() >= 3,
        "{}",
        logs.text
    );
    channel.stop().await;
}

/// An independent device: paho-mqtt (python) enrolls two devices with a token, then as one of
/// them over MQTT 3.1.1 and 5, plain and TLS, subscribes (its own topic granted, the other's
/// refused), publishes telemetry and heartbeats with QoS 1, answers a command; a wrong
/// password is refused. Needs `PLANTD_TEST_PYTHON_MQTT` (a python3 with paho-mqtt, set by
/// `.ci/run`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paho_mqtt_devices_interoperate() {
    let Some(python) =
        plantd_test_support::peer("PLANTD_TEST_PYTHON_MQTT", "to a python3 with paho-mqtt")
    else {
        return;
    };
    let app = spawn_app().await;
    let dir = plantd_test_support::temp_dir("mqtt-tls");
    plantd_test_support::private_ca(&dir);
    let channel = app
        .start_mqtt_tls(Some((dir.join("cert.pem"), dir.join("key.pem"))))
        .await;
    let (port, tls_port) = (
        channel.local_addr.unwrap().port().to_string(),
        channel.tls_local_addr.unwrap().port().to_string(),
    );
    let ca = dir.join("ca.pem");
    let stdout = plantd_test_support::run_interop(
        &python,
        "mqtt_device.py",
        &[
            &app.base,
            &app.admin_key,
            "127.0.0.1",
            &port,
            &tls_port,
            ca.to_str().unwrap(),
        ],
    )
    .await;
    plantd_test_support::printed_every(
        &stdout,
        &["3.1.1 plain", "3.1.1 tls", "5 plain", "5 tls", "refused"],
    );
    let k = &app.admin_key;
    let devices = app
        .get("/fleet/devices?tags=paho", k)
        .await
        .expect(200)
        .json;
    let a = devices["data"][0]["id"].as_str().unwrap().to_string();
    let b = devices["data"][1]["id"].as_str().unwrap().to_string();
    let latest = app
        .get(&format!("/telemetry/latest?asset_id={a}"), k)
        .await
        .expect(200);
    for tag in [
        "paho_311",
        "paho_311_tls",
        "paho_5",
        "paho_5_tls",
        "cpu_percent",
    ] {
        assert!(latest.text.contains(tag), "{tag}: {}", latest.text);
    }
    let commands = app
        .get(&format!("/fleet/devices/{a}/commands"), k)
        .await
        .expect(200)
        .json;
    let statuses: Vec<&str> = commands["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses.len(), 4);
    wait_for("every command answered", 10, || async {
        let c = app
            .get(&format!("/fleet/devices/{a}/commands"), k)
            .await
            .expect(200)
            .json;
        c["data"]
            .as_array()?
            .iter()
            .all(|c| c["status"] == "succeeded")
            .then_some(())
    })
    .await;
    let health = app
        .get(&format!("/fleet/devices/{a}/health"), k)
        .await
        .expect(200)
        .json;
    assert_eq!(health["data"]["firmware_version"], "2.0.0");
    let b_latest = app
        .get(&format!("/telemetry/latest?asset_id={b}"), k)
        .await
        .expect(200);
    assert_eq!(b_latest.json["data"], json!([]));
    channel.stop().await;
    let _ = std::fs::remove_dir_all(dir);
}

/// Two nodes on one PostgreSQL: a device connected to node A gets a command created on node B
/// (within node A's 2 s look for queued commands), and a deletion on B disconnects it from A.
/// SQLite has one server per database by design.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_made_on_another_node_reaches_the_device() {
    if std::env::var(plantd_test_support::TEST_DATABASE_ENV).is_err() {
        eprintln!(
            "skipped: set {} to run the two-node test on PostgreSQL",
            plantd_test_support::TEST_DATABASE_ENV
        );
        return;
    }
    let node_a = spawn_app().await;
    let node_b = node_a.another_node().await;
    let k = node_a.admin_key.clone();
    let channel = node_a.start_mqtt().await;
    let addr = channel.local_addr.unwrap();
    let d = register(&node_b, &k, "NODE-1", json!({})).await;
    let (id, pw) = (
        d["id"].as_str().unwrap(),
        d["mqtt"]["password"].as_str().unwrap(),
    );
    let (mut dev, code) = connect(options(addr, id, id, pw)).await;
    assert_eq!(code, ConnectReturnCode::Success);
    dev.client
        .subscribe(
            d["mqtt"]["topics"]["commands"].as_str().unwrap(),
            QoS::AtLeastOnce,
        )
        .await
        .unwrap();
    let cmd = node_b
        .post(
            &format!("/fleet/devices/{id}/command"),
            &k,
            json!({"command": "from-b"}),
        )
        .await
        .expect(201);
    let got = next_publish(&mut dev, 15)
        .await
        .expect("node A delivers B's command");
    let got: Value = serde_json::from_slice(&got.payload).unwrap();
    assert_eq!(got["id"], cmd.json["data"]["id"]);
    node_b
        .delete(&format!("/fleet/devices/{id}"), &k)
        .await
        .expect(204);
    let cut = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match dev.incoming.recv().await {
                Some(Packet::Disconnect) | None => return,
                Some(_) => {}
            }
        }
    })
    .await;
    assert!(cut.is_ok(), "a device deleted on B stays connected to A");
    channel.stop().await;
}

/// The external-broker mode against Mosquitto with the documented ACL
/// (`config/mosquitto-plantd.acl`) and a password file: Mosquitto authenticates the devices and
/// keeps each to its topics; plantd, one client of it, stores their telemetry and heartbeats and
/// delivers commands. Needs `PLANTD_TEST_MOSQUITTO_BIN` (and `mosquitto_passwd`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_mosquitto_carries_the_device_channel() {
    let Some(mosquitto) = plantd_test_support::peer(
        "PLANTD_TEST_MOSQUITTO_BIN",
        "to a mosquitto program (with mosquitto_passwd) to run the external broker test",
    ) else {
        return;
    };
    let app = spawn_app().await;
    let k = app.admin_key.clone();
    let a = register(&app, &k, "EXT-A", json!({})).await;
    let b = register(&app, &k, "EXT-B", json!({})).await;
    let (a_id, a_pw) = (
        a["id"].as_str().unwrap(),
        a["mqtt"]["password"].as_str().unwrap(),
    );
    let b_id = b["id"].as_str().unwrap();
    let dir = plantd_test_support::temp_dir("mosquitto-ext");
    let passwords = dir.join("passwords");
    let add = |user: &str, pw: &str, create: bool| {
        let mut cmd = std::process::Command::new("mosquitto_passwd");
        if create {
            cmd.arg("-c");
        }
        let out = cmd
            .arg("-b")
            .arg(&passwords)
            .arg(user)
            .arg(pw)
            .output()
            .expect("run mosquitto_passwd");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    add("plantd", "plantd-secret", true);
    add(a_id, a_pw, false);
    add(b_id, b["mqtt"]["password"].as_str().unwrap(), false);
    let acl =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/mosquitto-plantd.acl");
    std::fs::copy(&acl, dir.join("acl")).unwrap();
    {
        // Mosquitto started as root reads its files as the mosquitto user.
        use std::os::unix::fs::PermissionsExt;
        for f in ["passwords", "acl"] {
            std::fs::set_permissions(dir.join(f), std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    std::fs::write(
        dir.join("mosquitto.conf"),
        format!(
            "listener {port} 127.0.0.1\nallow_anonymous false\npassword_file {}\nacl_file {}\n",
            passwords.display(),
            dir.join("acl").display()
        ),
    )
    .unwrap();
    let mut broker = std::process::Command::new(&mosquitto)
        .arg("-c")
        .arg(dir.join("mosquitto.conf"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for("mosquitto to listen", 10, || async {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()
            .map(|_| ())
    })
    .await;
    let channel = plantd_mqtt::start_external(
        app.app.clone(),
        plantd_mqtt::ExternalBroker {
            host: "127.0.0.1".into(),
            port,
            username: Some("plantd".into()),
            password: Some("plantd-secret".into()),
            client_id: format!("plantd-{}", plantd_test_support::unique_name()),
        },
    );
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    // Mosquitto refuses a wrong password.
    let (_, code) = connect(options(addr, a_id, a_id, "pdm_wrong")).await;
    assert_ne!(code, ConnectReturnCode::Success);
    let (mut dev, code) = connect(options(addr, a_id, a_id, a_pw)).await;
    assert_eq!(code, ConnectReturnCode::Success);
    dev.client
        .subscribe(
            a["mqtt"]["topics"]["commands"].as_str().unwrap(),
            QoS::AtLeastOnce,
        )
        .await
        .unwrap();
    let topics = &a["mqtt"]["topics"];
    let now = chrono_now();
    // plantd subscribes once connected: publish until the first point is in.
    wait_for("telemetry through the external broker", 20, || async {
        dev.client
            .publish(
                topics["telemetry"].as_str().unwrap(),
                QoS::AtLeastOnce,
                false,
                json!({"data": [{"tag_name": "flow", "value": 7.5, "timestamp": now}]}).to_string(),
            )
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        latest_has(&app, a_id, "flow").await.then_some(())
    })
    .await;
    // The ACL keeps A from publishing as B: nothing reaches plantd for B.
    dev.client
        .publish(
            format!("plantd/devices/{b_id}/telemetry"),
            QoS::AtLeastOnce,
            false,
            json!({"data": [{"tag_name": "flow", "value": 1.0, "timestamp": now}]}).to_string(),
        )
        .await
        .unwrap();
    dev.client
        .publish(
            topics["heartbeat"].as_str().unwrap(),
            QoS::AtLeastOnce,
            false,
            json!({"temperature_c": 41.0}).to_string(),
        )
        .await
        .unwrap();
    wait_for("the heartbeat", 20, || async {
        latest_has(&app, a_id, "temperature_c").await.then_some(())
    })
    .await;
    assert!(!latest_has(&app, b_id, "flow").await);
    // A command reaches the (online) device through the broker, and its answer comes back.
    let cmd = app
        .post(
            &format!("/fleet/devices/{a_id}/command"),
            &k,
            json!({"command": "calibrate"}),
        )
        .await
        .expect(201);
    let got = next_publish(&mut dev, 15)
        .await
        .expect("the command arrives through Mosquitto");
    let got: Value = serde_json::from_slice(&got.payload).unwrap();
    assert_eq!(got["id"], cmd.json["data"]["id"]);
    dev.client
        .publish(
            topics["command_results"].as_str().unwrap(),
            QoS::AtLeastOnce,
            false,
            json!({"id": got["id"], "status": "failed", "result": {"error": "sensor busy"}})
                .to_string(),
        )
        .await
        .unwrap();
    wait_for("the answer", 15, || async {
        let list = app
            .get(&format!("/fleet/devices/{a_id}/commands"), &k)
            .await
            .expect(200)
            .json;
        (list["data"][0]["status"] == "failed").then_some(())
    })
    .await;
    channel.abort();
    let _ = broker.kill();
    let _ = broker.wait();
    let _ = std::fs::remove_dir_all(dir);
}

async fn latest_has(app: &TestApp, asset: &str, tag: &str) -> bool {
    let r = app
        .get(
            &format!("/telemetry/latest?asset_id={asset}"),
            &app.admin_key,
        )
        .await;
    r.json["data"]
        .as_array()
        .is_some_and(|d| d.iter().any(|p| p["tag_name"] == tag))
}

/// A device's status changes are announced: on the live stream to a subscription of its asset,
/// to a webhook subscribed to `device.online` and `device.offline`, and to alert rules watching
/// the device or its group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_changes_reach_the_stream_and_webhooks() {
    use std::sync::{Arc, Mutex};
    let app = spawn_app_with(AppConfig {
        device_offline_after: Duration::from_secs(10),
        ..AppConfig::default()
    })
    .await;
    let k = app.admin_key.clone();
    let got: Arc<Mutex<Vec<Value>>> = Arc::default();
    let seen = got.clone();
    let hook = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |body: String| {
            let seen = seen.clone();
            async move {
                seen.lock()
                    .unwrap()
                    .push(serde_json::from_str(&body).unwrap_or(Value::Null));
                axum::http::StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, hook).await });
    app.post(
        "/webhooks",
        &k,
        json!({"url": url, "events": ["device.online", "device.offline"], "secret": "a-long-enough-secret-0123456789"}),
    )
    .await
    .expect(201);
    let channel = app.start_mqtt().await;
    let group = app
        .post("/fleet/groups", &k, json!({"name": "Line 1"}))
        .await
        .expect(201)
        .id();
    let d = register(&app, &k, "EV-1", json!({"group_ids": [group]})).await;
    let (id, pw) = (
        d["id"].as_str().unwrap(),
        d["mqtt"]["password"].as_str().unwrap(),
    );
    // An alert rule watches a device group (or a device): its devices' `online` tag.
    let rule = |watched: &str| {
        json!({"name": "Gateway offline", "severity": "critical", "data_source_id": watched,
               "condition": {"tag_name": "online", "operator": "lt", "value": 1, "duration_seconds": 0}})
    };
    app.post("/alert-rules", &k, rule(&group)).await.expect(201);
    app.post("/alert-rules", &k, rule(id)).await.expect(201);
    // Another organization's device or group is not a rule's to watch.
    let (_b, b) = app
        .other_org("B Corp", plantd_model::Tier::Professional)
        .await;
    let r = app.post("/alert-rules", &b, rule(&group)).await.expect(400);
    assert_eq!(r.json["error"]["details"][0]["field"], "data_source_id");
    app.post("/alert-rules", &b, rule(id)).await.expect(400);
    let mut ws = app
        .subscribe(json!({"type": "subscribe", "asset_id": id}))
        .await;
    let (dev, code) = connect(options(channel.local_addr.unwrap(), id, id, pw)).await;
    assert_eq!(code, ConnectReturnCode::Success);
    let online = plantd_test_support::stream::next_of_type(&mut ws, "device").await;
    assert_eq!(online["event"], "device.online");
    assert_eq!(online["data"]["id"], id);
    drop(dev);
    let offline = tokio::time::timeout(
        Duration::from_secs(30),
        plantd_test_support::stream::next_of_type(&mut ws, "device"),
    )
    .await
    .expect("offline within 30 s");
    assert_eq!(offline["event"], "device.offline");
    let events = wait_for("both webhook deliveries", 30, || async {
        let events: Vec<String> = got
            .lock()
            .unwrap()
            .iter()
            .filter_map(|b| b["event"].as_str().map(String::from))
            .collect();
        (events.len() >= 2).then_some(events)
    })
    .await;
    assert_eq!(events, ["device.online", "device.offline"]);
    assert_eq!(got.lock().unwrap()[0]["data"]["id"], id);
    // Both rules fired on the device going offline, and clear when it is back.
    let alerts = |status: &'static str| {
        let app = &app;
        let k = &k;
        async move {
            app.get(&format!("/alerts?status={status}"), k)
                .await
                .expect(200)
                .items()
        }
    };
    let fired = wait_for("the offline alerts", 30, || async {
        let a = alerts("active").await;
        (a.len() == 2).then_some(a)
    })
    .await;
    for a in &fired {
        assert_eq!(a["asset_id"], id);
        assert_eq!(a["data_source_id"], id);
        assert_eq!(a["tag_name"], "online");
        assert_eq!(a["value"], 0.0);
    }
    let (dev, code) = connect(options(channel.local_addr.unwrap(), id, id, pw)).await;
    assert_eq!(code, ConnectReturnCode::Success);
    wait_for("the offline alerts resolved", 30, || async {
        let a = alerts("resolved").await;
        (a.len() == 2 && alerts("active").await.is_empty()).then_some(())
    })
    .await;
    drop(dev);
    channel.stop().await;
}

/// Now in RFC 3339 (whole seconds).
fn chrono_now() -> String {
    plantd_model::Timestamp::now().to_string()
}

/// Commands waiting for a device that is away never hold up another device's: with more
/// queued for an absent device than a delivery pass used to read, a connected device still
/// gets its command at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_for_a_device_away_do_not_hold_up_others() {
    let app = spawn_app().await;
    let k = app.admin_key.clone();
    let channel = app.start_mqtt().await;
    let away = register(&app, &k, "AWAY-1", json!({})).await;
    let here = register(&app, &k, "HERE-1", json!({})).await;
    let away_id = away["id"].as_str().unwrap();
    for i in 0..1001 {
        app.app
            .send_command(
                &app.org_id,
                away_id,
                plantd_app::fleet::NewCommand {
                    command: format!("wait-{i}"),
                    params: None,
                    ttl_seconds: None,
                },
            )
            .await
            .unwrap();
    }
    let (id, pw) = (
        here["id"].as_str().unwrap(),
        here["mqtt"]["password"].as_str().unwrap(),
    );
    let (mut dev, code) = connect(options(channel.local_addr.unwrap(), id, id, pw)).await;
    assert_eq!(code, ConnectReturnCode::Success);
    dev.client
        .subscribe(format!("plantd/devices/{id}/commands"), QoS::AtLeastOnce)
        .await
        .unwrap();
    let sent = app
        .post(
            &format!("/fleet/devices/{id}/command"),
            &k,
            json!({"command": "ping"}),
        )
        .await
        .expect(201)
        .id();
    let got = next_publish(&mut dev, 10)
        .await
        .expect("the command within 10 s");
    let command: Value = serde_json::from_slice(&got.payload).unwrap();
    assert_eq!(command["id"], sent.as_str());
    assert_eq!(command["command"], "ping");
    channel.stop().await;
}

/// A device's telemetry is acknowledged only once stored: while storage fails (a fault put
/// into the telemetry log's table by a trigger), its PUBACK waits and the message is handed
/// again; once storage works, it is stored and acknowledged. Nothing is acknowledged unstored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_message_waits_through_a_storage_fault_and_is_acknowledged_once_stored() {
    let app = spawn_app().await;
    let k = app.admin_key.clone();
    let channel = app.start_mqtt().await;
    let d = register(&app, &k, "FAULT-1", json!({})).await;
    let (id, pw) = (
        d["id"].as_str().unwrap(),
        d["mqtt"]["password"].as_str().unwrap(),
    );
    let (mut dev, code) = connect(options(channel.local_addr.unwrap(), id, id, pw)).await;
    assert_eq!(code, ConnectReturnCode::Success);
    let sqlite = app.store.backend() == plantd_store::Backend::Sqlite;
    let (inject, heal): (&[&str], &str) = if sqlite {
        (
            &[
                "CREATE TRIGGER test_fault BEFORE INSERT ON telemetry_log BEGIN SELECT RAISE(ABORT, 'a storage fault put by the test'); END",
            ],
            "DROP TRIGGER test_fault",
        )
    } else {
        (
            &[
                "CREATE FUNCTION test_fault() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'a storage fault put by the test'; END $$",
                "CREATE TRIGGER test_fault BEFORE INSERT ON telemetry_log FOR EACH STATEMENT EXECUTE FUNCTION test_fault()",
            ],
            "DROP TRIGGER test_fault ON telemetry_log",
        )
    };
    for sql in inject {
        sqlx::query(sqlx::AssertSqlSafe(*sql))
            .execute(app.store.pool())
            .await
            .unwrap();
    }
    let point = json!({"data": [{"tag_name": "flow", "value": 17.5, "timestamp": chrono_now()}]});
    dev.client
        .publish(
            format!("plantd/devices/{id}/telemetry"),
            QoS::AtLeastOnce,
            false,
            point.to_string(),
        )
        .await
        .unwrap();
    // Storage fails for 4 s (the message is handed again after 1 s, then 2 s): no PUBACK.
    let until = tokio::time::Instant::now() + Duration::from_secs(4);
    while let Ok(Some(p)) = tokio::time::timeout_at(until, dev.incoming.recv()).await {
        assert!(
            !matches!(p, Packet::PubAck(_)),
            "a message was acknowledged while it could not be stored"
        );
    }
    assert!(!latest_has(&app, id, "flow").await);
    sqlx::query(sqlx::AssertSqlSafe(heal))
        .execute(app.store.pool())
        .await
        .unwrap();
    loop {
        match tokio::time::timeout(Duration::from_secs(60), dev.incoming.recv()).await {
            Ok(Some(Packet::PubAck(_))) => break,
            Ok(Some(_)) => {}
            other => panic!("no PUBACK within 60 s of storage working again: {other:?}"),
        }
    }
    // Acknowledged means stored.
    assert!(latest_has(&app, id, "flow").await);
    let metrics = app.app.metrics_text().await.unwrap();
    assert!(
        metrics.contains("plantd_mqtt_messages_retried_total{topic=\"telemetry\"}"),
        "{metrics}"
    );
    channel.stop().await;
}
