//! The edge agent's uplink (issue 34): an agent in development mode reads the simulator (a
//! child process), enrolls with its cloud and forwards its points over the cloud's MQTT device
//! channel; it sends heartbeats and answers commands; while the cloud is unreachable (both its
//! API and its MQTT channel cut, for several minutes) the points wait on the agent, its local
//! alert rules keep firing, and when the cloud returns every point arrives: the counts on both
//! sides are equal, asset by asset.

use crate::connectors::start_sim;
use crate::edge::{agent_get, enrollment_token, start_agent_with_env};
use plantd_model::Timestamp;
use plantd_test_support::relay::Relay;
use plantd_test_support::{TestApp, spawn_app, wait_for};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const ASSETS: [&str; 3] = ["HVAC_01", "Motor_01", "Pump_01"];

fn window(from: i64) -> String {
    let t = |ms: i64| Timestamp::from_millis(ms).to_rfc3339().replace('+', "%2B");
    format!(
        "start={}&end={}",
        t(from),
        t(Timestamp::now().millis() + 60_000)
    )
}

/// Points of `asset` since `from` as the cloud counts them.
async fn cloud_count(cloud: &TestApp, asset: &str, from: i64) -> u64 {
    let r = cloud
        .get(
            &format!("/telemetry?asset_id={asset}&{}&per_page=1", window(from)),
            &cloud.admin_key,
        )
        .await
        .expect(200);
    r.json["meta"]["total"].as_u64().unwrap()
}

/// Points of `asset` since `from` as the agent counts them.
async fn agent_count(base: &str, key: &str, asset: &str, from: i64) -> u64 {
    let r = agent_get(
        base,
        key,
        &format!("/telemetry?asset_id={asset}&{}&per_page=1", window(from)),
    )
    .await;
    r["meta"]["total"].as_u64().unwrap()
}

async fn forwarding(base: &str, key: &str) -> Value {
    agent_get(base, key, "/edge/config").await["data"]["forwarding"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_forwards_over_mqtt_and_loses_nothing_while_its_cloud_is_away() {
    let offline = Duration::from_secs(
        std::env::var("PLANTD_TEST_EDGE_OFFLINE_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(180),
    );
    let from = Timestamp::now().millis() - 60_000;
    let cloud = spawn_app().await;
    let k = cloud.admin_key.clone();
    let channel = cloud.start_mqtt().await;
    // The agent reaches the cloud through relays that the test cuts: the cloud is away.
    let api = Relay::start(cloud.addr.to_string()).await;
    let mqtt = Relay::start(channel.local_addr.unwrap().to_string()).await;
    let token = enrollment_token(&cloud).await;
    let sim = start_sim("edge-uplink", 0, 0);
    let dir = plantd_test_support::temp_dir("edge-uplink");
    let config = dir.join("plantd.toml");
    std::fs::write(
        &config,
        "[edge]\nheartbeat_interval_secs = 1\nbackfill_points_per_second = 200\n",
    )
    .unwrap();
    let (opcua, modbus) = (sim.opcua_port.to_string(), sim.modbus_port.to_string());
    let cloud_root = format!("http://{}", api.addr);
    let mqtt_url = format!("mqtt://{}", mqtt.addr);
    let agent_dir = dir.join("agent");
    let (mut agent, ek) = start_agent_with_env(
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
    let base = agent.base.clone();
    let edge = agent_get(&base, &ek, "/edge/config").await["data"].clone();
    let device_id = edge["cloud"]["device_id"].as_str().unwrap().to_string();
    assert_eq!(edge["regions"][0]["mqtt"], mqtt_url.as_str(), "{edge}");

    // Live: the agent's points reach the cloud, as its device's.
    wait_for("the agent's points in the cloud", 60, || async {
        (cloud_count(&cloud, "Pump_01", from).await > 0).then_some(())
    })
    .await;
    let f = forwarding(&base, &ek).await;
    assert_eq!(f["connected"], true, "{f}");
    assert!(f["forwarded_points"].as_u64().unwrap() > 0, "{f}");
    // Heartbeats: the cloud shows the device online with its figures.
    let health = wait_for("the agent's heartbeat", 30, || async {
        let h = cloud
            .get(&format!("/fleet/devices/{device_id}/health"), &k)
            .await
            .expect(200);
        (h.json["data"]["heartbeat"]["firmware_version"].is_string()).then_some(h.json)
    })
    .await;
    assert_eq!(health["data"]["status"], "online", "{health}");
    assert!(
        health["data"]["heartbeat"]["uptime_seconds"].is_number(),
        "{health}"
    );

    // Commands: the cloud asks, the agent answers.
    let path = format!("/fleet/devices/{device_id}/command");
    let ping = cloud
        .post(&path, &k, json!({"command": "ping"}))
        .await
        .expect(201)
        .id();
    let unknown = cloud
        .post(&path, &k, json!({"command": "format_disk"}))
        .await
        .expect(201)
        .id();
    let commands = wait_for("the agent's answers", 30, || async {
        let list = cloud
            .get(&format!("/fleet/devices/{device_id}/commands"), &k)
            .await
            .expect(200);
        let items = list.items();
        let done = items
            .iter()
            .filter(|c| c["status"] == "succeeded" || c["status"] == "failed")
            .count();
        (done == 2).then_some(items)
    })
    .await;
    let by_id = |id: &str| commands.iter().find(|c| c["id"] == id).unwrap().clone();
    assert_eq!(by_id(&ping)["status"], "succeeded");
    assert!(by_id(&ping)["result"]["version"].is_string());
    assert_eq!(by_id(&unknown)["status"], "failed");
    assert!(
        by_id(&unknown)["result"]["error"]
            .as_str()
            .unwrap()
            .contains("unknown command"),
        "{:?}",
        by_id(&unknown)
    );

    // The cloud is away: API and MQTT unreachable.
    api.down();
    mqtt.down();
    let away = Instant::now();
    wait_for("the agent to notice", 90, || async {
        (forwarding(&base, &ek).await["connected"] == false).then_some(())
    })
    .await;
    // Local alert rules keep working: a rule made now fires on the agent.
    let assets = agent_get(&base, &ek, "/provisioning/assets").await;
    let pump_source = assets["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["asset_id"] == "Pump_01")
        .unwrap()["data_source_id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = reqwest::Client::new()
        .post(format!("{base}/v1/alert-rules"))
        .bearer_auth(&ek)
        .json(&json!({"name": "Pump running", "severity": "warning", "data_source_id": pump_source,
                      "condition": {"tag_name": "Motor_Temperature", "operator": "gt", "value": -1000.0,
                                    "duration_seconds": 0}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    wait_for("a local alert while the cloud is away", 60, || async {
        let a = agent_get(&base, &ek, "/alerts?status=active").await;
        a["data"]
            .as_array()
            .is_some_and(|l| l.iter().any(|x| x["rule_name"] == "Pump running"))
            .then_some(())
    })
    .await;
    let left = offline.saturating_sub(away.elapsed());
    tokio::time::sleep(left).await;
    let f = forwarding(&base, &ek).await;
    assert_eq!(f["connected"], false, "{f}");
    let kept = f["pending_points"].as_u64().unwrap();
    assert!(kept > 0, "{f}");

    // The cloud returns: what was kept arrives, at most 200 points a second, beside live data.
    api.up().await;
    mqtt.up().await;
    let back = Instant::now();
    wait_for("the agent to reconnect", 90, || async {
        (forwarding(&base, &ek).await["connected"] == true).then_some(())
    })
    .await;
    // No more points: the simulator stops (the connectors then read nothing).
    sim.stop();
    wait_for("the outbox drained", 300, || async {
        (forwarding(&base, &ek).await["pending_points"] == 0).then_some(())
    })
    .await;
    let drained = back.elapsed();
    let mut total = 0;
    for asset in ASSETS {
        let (here, there) = (
            agent_count(&base, &ek, asset, from).await,
            cloud_count(&cloud, asset, from).await,
        );
        assert_eq!(
            here, there,
            "{asset}: the agent stored {here} points, the cloud {there}"
        );
        total += here;
    }
    println!(
        "edge uplink: {total} points in all, {kept} kept during {} s away, backlog sent in {:.1} s after the cloud returned (bound 200 points/s)",
        offline.as_secs(),
        drained.as_secs_f64()
    );
    // The backlog went at the bounded rate, not at once.
    assert!(
        drained.as_secs_f64() >= (kept as f64 / 200.0) * 0.5,
        "{kept} points in {drained:?}"
    );
    assert!(agent.stop("TERM").success());
    let _ = std::fs::remove_dir_all(dir);
}

/// Points of `asset` in `[from, to)` ms, as an instance's API counts them.
async fn count_between(base: &str, key: &str, asset: &str, from: i64, to: i64) -> u64 {
    let t = |ms: i64| Timestamp::from_millis(ms).to_rfc3339().replace('+', "%2B");
    let r = agent_get(
        base,
        key,
        &format!(
            "/telemetry?asset_id={asset}&start={}&end={}&per_page=1",
            t(from),
            t(to)
        ),
    )
    .await;
    r["meta"]["total"].as_u64().unwrap()
}

/// A loopback port free now.
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Failover between two regional clouds: an agent enrolled in us-east forwards there; us-east
/// is lost, the operator fails the organization over to eu-west (its secondary copy holds the
/// device), and after 3 failed health checks the agent moves to eu-west and forwards there,
/// what it kept meanwhile included. us-east coming back does not pull it back (the
/// organization now lives in eu-west).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_fails_over_to_the_region_that_took_its_organization() {
    let Some(nats) = plantd_test_support::peer(
        "PLANTD_TEST_NATS_URL",
        "(e.g. nats://127.0.0.1:4222, with JetStream) for two regional clouds",
    ) else {
        return;
    };
    let (me, mw) = (free_port(), free_port());
    let (east, west, ua, ub) = crate::region_migration::two_regions(
        &nats,
        true,
        |c| {
            c.regions.standby_every = Duration::from_secs(5);
            c.regions.mqtt_url = Some(format!("mqtt://127.0.0.1:{me}"));
        },
        |c| {
            c.key_cache_ttl = Duration::from_secs(1);
            c.regions.mqtt_url = Some(format!("mqtt://127.0.0.1:{mw}"));
        },
    )
    .await;
    let west = west.unwrap();
    let channel = |app: &TestApp, port: u16| {
        let app = app.app.clone();
        async move {
            plantd_mqtt::start(
                app,
                &plantd_mqtt::MqttSettings {
                    listen: format!("127.0.0.1:{port}").parse().unwrap(),
                    tls: None,
                },
            )
            .await
            .unwrap()
        }
    };
    let east_mqtt = channel(&east, me).await;
    let _west_mqtt = channel(&west, mw).await;
    let (k, org) = (east.admin_key.clone(), east.org_id.clone());
    let token = enrollment_token(&east).await;
    let dir = plantd_test_support::temp_dir("edge-failover");
    let config = dir.join("plantd.toml");
    std::fs::write(
        &config,
        "[edge]\nheartbeat_interval_secs = 1\n[edge.regions]\nhealth_check_interval_seconds = 1\nfailover_threshold = 3\n",
    )
    .unwrap();
    let agent_dir = dir.join("agent");
    let (mut agent, ek) = start_agent_with_env(
        agent_dir.to_str().unwrap(),
        &[
            "--config",
            config.to_str().unwrap(),
            "--mode",
            "demo",
            "--enroll",
            &token,
            "--cloud",
            &ua,
        ],
        &[],
    );
    let base = agent.base.clone();
    let edge = agent_get(&base, &ek, "/edge/config").await["data"].clone();
    let order: Vec<(&str, &str)> = edge["regions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["region"].as_str().unwrap(),
                r["mqtt"].as_str().unwrap_or(""),
            )
        })
        .collect();
    let (east_mqtt_url, west_mqtt_url) = (
        format!("mqtt://127.0.0.1:{me}"),
        format!("mqtt://127.0.0.1:{mw}"),
    );
    assert_eq!(
        order,
        [
            ("us-east", east_mqtt_url.as_str()),
            ("eu-west", west_mqtt_url.as_str())
        ],
        "{edge}"
    );
    assert_eq!(edge["regions"][1]["api"], ub.as_str());
    let started = Timestamp::now().millis() - 5_000;
    wait_for("the agent's points in us-east", 60, || async {
        let n = count_between(
            &east.base.replace("/v1", ""),
            &k,
            "Pump_01",
            started,
            started + 3_600_000,
        )
        .await;
        (n > 0).then_some(())
    })
    .await;
    // The secondary copy, taken after the enrollment, holds the device.
    let enrolled = Timestamp::now().millis();
    wait_for("a secondary copy with the device", 60, || async {
        west.store
            .standby_copy(&org, "held")
            .await
            .unwrap()
            .filter(|c| c.copied_at.millis() > enrolled)
    })
    .await;

    // us-east is lost; the operator fails the organization over to eu-west.
    // From `down` on, no point of the agent can reach us-east: its MQTT channel is gone. (Taken
    // before the rest of us-east stops: that takes long enough for the agent to have moved
    // already, and a window starting after the move would miss the points it kept meanwhile.)
    east_mqtt.stop().await;
    let down = Timestamp::now().millis();
    east.stop().await;
    plantd_app::operator::fail_over(&west.store, &org, "eu-west")
        .await
        .unwrap();
    let f = wait_for("the agent in eu-west", 90, || async {
        let f = forwarding(&base, &ek).await;
        (f["region"] == "eu-west" && f["connected"] == true).then_some(f)
    })
    .await;
    assert_eq!(f["failovers"][0]["from"], "us-east", "{f}");
    assert_eq!(f["failovers"][0]["to"], "eu-west", "{f}");
    assert!(
        f["failovers"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("3 failed health checks"),
        "{f}"
    );
    // What the agent stored from the loss on reaches eu-west, every point: a window of at least
    // 5 s after the loss, over once the agent has stored it (the demo stores its tags every second).
    let until = (Timestamp::now().millis() - 2_000).max(down + 5_000);
    while Timestamp::now().millis() < until + 2_000 {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    wait_for("the kept points in eu-west", 60, || async {
        let pending = forwarding(&base, &ek).await["pending_points"]
            .as_u64()
            .unwrap();
        let here = count_between(&base, &ek, "Pump_01", down, until).await;
        let there = count_between(&west.base.replace("/v1", ""), &k, "Pump_01", down, until).await;
        (pending < 200 && here > 0 && here == there).then_some(())
    })
    .await;
    assert!(agent.stop("TERM").success());
    let _ = std::fs::remove_dir_all(dir);
}
