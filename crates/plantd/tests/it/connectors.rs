//! Data source connectors end to end, over sockets: the platform (in-process server on port 0)
//! connects to the real simulator (`plantd sim start`, a child process) over OPC UA and Modbus
//! TCP, and to the machine's Mosquitto over MQTT (where `PLANTD_TEST_MQTT_URL` names it).

use plantd_test_support::stream::next_of_type;
use plantd_test_support::{ServerProcess, TestApp, spawn_app, unique_name, wait_for};
use reqwest::Method;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_plantd");

pub(crate) struct Sim {
    process: ServerProcess,
    pub(crate) opcua_port: u16,
    pub(crate) modbus_port: u16,
    dir: PathBuf,
}

/// Starts the simulator; ports 0 pick free ones.
pub(crate) fn start_sim(name: &str, opcua_port: u16, modbus_port: u16) -> Sim {
    start_sim_with(name, opcua_port, modbus_port, None)
}

/// The simulator with a YAML configuration.
fn start_sim_with(name: &str, opcua_port: u16, modbus_port: u16, config: Option<&str>) -> Sim {
    let dir = plantd_test_support::temp_dir(&format!("connector-{name}"));
    let pki = dir.join("pki");
    let (o, m) = (opcua_port.to_string(), modbus_port.to_string());
    let config_path = dir.join("sim.yaml");
    let mut args = vec![
        "sim",
        "start",
        "--host",
        "127.0.0.1",
        "--port",
        &o,
        "--api-port",
        "0",
        "--modbus-port",
        &m,
        "--seed",
        "5",
        "--pki-dir",
        pki.to_str().unwrap(),
    ];
    if let Some(text) = config {
        std::fs::write(&config_path, text).unwrap();
        args.extend(["--config", config_path.to_str().unwrap()]);
    }
    let process = ServerProcess::launch(BIN, &args, "certificates:");
    let port_after = |prefix: &str| -> u16 {
        let line = process
            .printed
            .iter()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} in {:?}", process.printed));
        let addr = line
            .split_whitespace()
            .next()
            .unwrap()
            .trim_end_matches('/');
        addr.rsplit(':').next().unwrap().parse().unwrap()
    };
    let opcua_port = port_after("OPC UA endpoint: ");
    let modbus_port = port_after("Modbus TCP: ");
    Sim {
        process,
        opcua_port,
        modbus_port,
        dir,
    }
}

impl Sim {
    pub(crate) fn stop(mut self) -> (u16, u16) {
        self.process.stop("TERM");
        let _ = std::fs::remove_dir_all(&self.dir);
        (self.opcua_port, self.modbus_port)
    }
}

async fn create_source(app: &TestApp, body: Value) -> String {
    let r = app
        .call(
            Method::POST,
            "/data-sources",
            Some(&app.admin_key),
            Some(body),
        )
        .await
        .expect(201);
    r.id()
}

async fn source(app: &TestApp, id: &str) -> Value {
    app.call(
        Method::GET,
        &format!("/data-sources/{id}"),
        Some(&app.admin_key),
        None,
    )
    .await
    .expect(200)
    .json["data"]
        .clone()
}

async fn wait_status(app: &TestApp, id: &str, status: &str, secs: u64) -> Value {
    wait_for(&format!("source {id} {status}"), secs, || async {
        let s = source(app, id).await;
        (s["status"] == status).then_some(s)
    })
    .await
}

async fn test_source(app: &TestApp, id: &str) -> Value {
    app.call(
        Method::POST,
        &format!("/data-sources/{id}/test"),
        Some(&app.admin_key),
        None,
    )
    .await
    .expect(200)
    .json["data"]
        .clone()
}

/// Raw points of one series in the last 10 minutes.
pub(crate) async fn points(app: &TestApp, asset: &str, tag: &str) -> Vec<Value> {
    let start =
        plantd_model::Timestamp::from_millis(plantd_model::Timestamp::now().millis() - 600_000)
            .to_rfc3339();
    let end =
        plantd_model::Timestamp::from_millis(plantd_model::Timestamp::now().millis() + 60_000)
            .to_rfc3339();
    let r = app
        .call(
            Method::GET,
            &format!(
                "/telemetry?asset_id={asset}&tag_name={tag}&start={start}&end={end}&per_page=100"
            ),
            Some(&app.admin_key),
            None,
        )
        .await
        .expect(200);
    r.json["data"].as_array().cloned().unwrap_or_default()
}

pub(crate) async fn latest(app: &TestApp, asset: &str, tag: &str) -> Option<Value> {
    let r = app
        .call(
            Method::GET,
            &format!("/telemetry/latest?asset_id={asset}"),
            Some(&app.admin_key),
            None,
        )
        .await
        .expect(200);
    r.json["data"]
        .as_array()?
        .iter()
        .find(|v| v["tag_name"] == tag)
        .cloned()
}

/// Waits for a point of `asset/tag` stamped after `since`.
async fn fresh_point(
    app: &TestApp,
    asset: &str,
    tag: &str,
    since: plantd_model::Timestamp,
    secs: u64,
) {
    wait_for(
        &format!("a point of {asset}/{tag} after {since:?}"),
        secs,
        || async {
            let l = latest(app, asset, tag).await?;
            let ts = plantd_model::Timestamp::parse(l["timestamp"].as_str()?).ok()?;
            (ts > since).then_some(())
        },
    )
    .await;
}

/// The simulator goes away and comes back on the same ports: the source turns disconnected
/// and says why (and `test` says connection refused), then reconnects by itself and points
/// flow again.
async fn outage(app: &TestApp, id: &str, sim: Sim, name: &str) -> Sim {
    let (opcua_port, modbus_port) = sim.stop();
    let down = wait_status(app, id, "disconnected", 30).await;
    assert!(down["last_error"].as_str().is_some(), "{down}");
    let t = test_source(app, id).await;
    assert_eq!(t["success"], false, "{t}");
    assert!(
        t["message"]
            .as_str()
            .unwrap()
            .contains("connection refused"),
        "{t}"
    );
    let sim = start_sim(name, opcua_port, modbus_port);
    let back_at = plantd_model::Timestamp::now();
    wait_status(app, id, "connected", 60).await;
    fresh_point(app, "Pump_01", "Vibration_X", back_at, 30).await;
    sim
}

/// OPC UA: browse, subscribe, store; the source follows the simulator going away and coming
/// back with no manual step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opcua_source_streams_from_the_simulator_and_reconnects() {
    let sim = start_sim("opcua", 0, 0);
    let endpoint = format!("opc.tcp://127.0.0.1:{}/", sim.opcua_port);
    let app = spawn_app().await;
    let id = create_source(
        &app,
        json!({"name": "sim", "type": "opcua", "config": {
            "endpoint": endpoint, "publishing_interval_ms": 200, "sampling_interval_ms": 100}}),
    )
    .await;
    let connected = wait_status(&app, &id, "connected", 60).await;
    assert!(
        connected["tag_count"].as_i64().unwrap() >= 40,
        "{connected}"
    );
    assert_eq!(connected["last_error"], Value::Null, "{connected}");

    let pts = wait_for("Pump_01/Vibration_X points", 30, || async {
        let p = points(&app, "Pump_01", "Vibration_X").await;
        (p.len() >= 3).then_some(p)
    })
    .await;
    for p in &pts {
        let v = p["value"].as_f64().unwrap();
        assert!((0.0..=10.0).contains(&v), "{p}");
        assert_eq!(p["quality"], "good", "{p}");
    }
    // Latest follows the stream.
    let first = wait_for("latest Vibration_X", 10, || {
        latest(&app, "Pump_01", "Vibration_X")
    })
    .await;
    let later = wait_for("a newer latest", 15, || async {
        let l = latest(&app, "Pump_01", "Vibration_X").await?;
        (l["timestamp"] != first["timestamp"]).then_some(l)
    })
    .await;
    assert!(later["timestamp"].as_str() > first["timestamp"].as_str());
    // Booleans arrive as 1/0.
    let run = wait_for("Run_Status", 10, || latest(&app, "Pump_01", "Run_Status")).await;
    assert!(run["value"] == 1.0 || run["value"] == 0.0, "{run}");

    let t = test_source(&app, &id).await;
    assert_eq!(t["success"], true, "{t}");
    assert!(
        t["message"]
            .as_str()
            .unwrap()
            .contains("server state Running"),
        "{t}"
    );
    assert!(t["latency_ms"].as_f64().unwrap() > 0.0);

    // The simulator goes away: the source is disconnected and says why; it comes back on the
    // same port: the source reconnects by itself and points flow again.
    let sim = outage(&app, &id, sim, "opcua-again").await;
    let opcua_port = sim.opcua_port;

    // Switched off: no connector, and it says so; switched on again: connected.
    app.call(
        Method::PUT,
        &format!("/data-sources/{id}"),
        Some(&app.admin_key),
        Some(json!({"enabled": false})),
    )
    .await
    .expect(200);
    let off = wait_status(&app, &id, "disconnected", 20).await;
    assert_eq!(off["enabled"], false);
    assert!(
        off["last_error"].as_str().unwrap().contains("disabled"),
        "{off}"
    );
    app.call(
        Method::PUT,
        &format!("/data-sources/{id}"),
        Some(&app.admin_key),
        Some(json!({"enabled": true})),
    )
    .await
    .expect(200);
    wait_status(&app, &id, "connected", 60).await;

    // An explicit node list instead of browsing.
    let listed = create_source(
        &app,
        json!({"name": "listed", "type": "opcua", "config": {
            "endpoint": format!("opc.tcp://127.0.0.1:{opcua_port}/"),
            "nodes": [{"node_id": "ns=2;s=Pump_01.Flow_Rate", "asset_id": "P-101", "tag_name": "flow"}],
            "publishing_interval_ms": 200, "sampling_interval_ms": 100}}),
    )
    .await;
    let s = wait_status(&app, &listed, "connected", 60).await;
    assert_eq!(s["tag_count"], 1, "{s}");
    wait_for("listed node points", 30, || async {
        (!points(&app, "P-101", "flow").await.is_empty()).then_some(())
    })
    .await;

    // A changed config restarts the connector: browsing from one asset's folder finds only
    // that asset's variables.
    app.call(
        Method::PUT,
        &format!("/data-sources/{id}"),
        Some(&app.admin_key),
        Some(json!({"config": {
            "endpoint": format!("opc.tcp://127.0.0.1:{opcua_port}/"), "root_node": "ns=2;s=Pump_01",
            "publishing_interval_ms": 200}})),
    )
    .await
    .expect(200);
    let narrowed = wait_for("the narrower browse", 60, || async {
        let s = source(&app, &id).await;
        (s["status"] == "connected" && s["tag_count"].as_i64()? < 41).then_some(s)
    })
    .await;
    let pump_tags = narrowed["tag_count"].as_i64().unwrap();
    assert!((5..=15).contains(&pump_tags), "{narrowed}");

    // Deleted: the connector stops (the simulator sees its sessions go).
    for id in [&id, &listed] {
        app.call(
            Method::DELETE,
            &format!("/data-sources/{id}"),
            Some(&app.admin_key),
            None,
        )
        .await
        .expect(204);
    }
    let status_url = sim
        .process
        .printed
        .iter()
        .find_map(|l| l.strip_prefix("control API: "))
        .unwrap()
        .to_string();
    wait_for("the simulator's sessions to close", 30, || async {
        let s: Value = plantd_test_support::client()
            .get(&status_url)
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        (s["data"]["sessions"] == 0).then_some(())
    })
    .await;
    sim.stop();
}

/// A signed and encrypted session (Basic256Sha256): the connector creates its key pair, trusts
/// the server's certificate, and streams; a source asking for no security is told what the
/// server offers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opcua_source_with_sign_and_encrypt() {
    let sim = start_sim_with(
        "opcua-secure",
        0,
        0,
        Some(
            "security:\n  mode: SignAndEncrypt\n  policy: Basic256Sha256\nassets:\n  - id: Pump_01\n    type: centrifugal_pump\n",
        ),
    );
    let endpoint = format!("opc.tcp://127.0.0.1:{}/", sim.opcua_port);
    let app = spawn_app().await;
    let id = create_source(
        &app,
        json!({"name": "secure", "type": "opcua", "config": {
            "endpoint": endpoint, "security_mode": "SignAndEncrypt",
            "security_policy": "Basic256Sha256", "publishing_interval_ms": 200}}),
    )
    .await;
    wait_status(&app, &id, "connected", 60).await;
    wait_for("points over the encrypted session", 30, || async {
        (!points(&app, "Pump_01", "Vibration_X").await.is_empty()).then_some(())
    })
    .await;
    let t = test_source(&app, &id).await;
    assert_eq!(t["success"], true, "{t}");
    assert!(
        t["message"]
            .as_str()
            .unwrap()
            .contains("SignAndEncrypt/Basic256Sha256"),
        "{t}"
    );
    let plain = create_source(
        &app,
        json!({"name": "plain", "type": "opcua", "config": {"endpoint": endpoint}}),
    )
    .await;
    let t = test_source(&app, &plain).await;
    assert_eq!(t["success"], false, "{t}");
    assert!(
        t["message"]
            .as_str()
            .unwrap()
            .contains("it offers SignAndEncrypt/Basic256Sha256"),
        "{t}"
    );
    sim.stop();
}

/// A server that wants a user name and password: the configured user connects and streams; a
/// wrong password and an anonymous source are told their identity was rejected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opcua_source_with_username_and_password() {
    let sim = start_sim_with(
        "opcua-users",
        0,
        0,
        Some(
            "security:\n  mode: SignAndEncrypt\n  policy: Basic256Sha256\n  users:\n    - username: operator\n      password: s3cret\nassets:\n  - id: Pump_01\n    type: centrifugal_pump\n",
        ),
    );
    let endpoint = format!("opc.tcp://127.0.0.1:{}/", sim.opcua_port);
    let app = spawn_app().await;
    let secure = |user: &str, password: &str| {
        json!({"endpoint": endpoint, "security_mode": "SignAndEncrypt",
               "security_policy": "Basic256Sha256", "username": user, "password": password,
               "publishing_interval_ms": 200})
    };
    let id = create_source(
        &app,
        json!({"name": "operator", "type": "opcua", "config": secure("operator", "s3cret")}),
    )
    .await;
    wait_status(&app, &id, "connected", 60).await;
    wait_for("points as operator", 30, || async {
        (!points(&app, "Pump_01", "Flow_Rate").await.is_empty()).then_some(())
    })
    .await;
    let wrong = create_source(
        &app,
        json!({"name": "wrong password", "type": "opcua", "config": secure("operator", "guess")}),
    )
    .await;
    let t = test_source(&app, &wrong).await;
    assert_eq!(t["success"], false, "{t}");
    assert!(
        t["message"].as_str().unwrap().contains("user identity"),
        "{t}"
    );
    let anonymous = create_source(
        &app,
        json!({"name": "anonymous", "type": "opcua", "config": {
            "endpoint": endpoint, "security_mode": "SignAndEncrypt",
            "security_policy": "Basic256Sha256"}}),
    )
    .await;
    let t = test_source(&app, &anonymous).await;
    assert_eq!(t["success"], false, "{t}");
    sim.stop();
}

/// Several nodes on one PostgreSQL database: one runs the connectors (one OPC UA session, not
/// one per node); when it stops, another takes over with no manual step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_runs_the_connectors_and_another_takes_over() {
    if std::env::var(plantd_test_support::TEST_DATABASE_ENV).is_err() {
        eprintln!(
            "skipped: set {} to run the two-node test on PostgreSQL",
            plantd_test_support::TEST_DATABASE_ENV
        );
        return;
    }
    let sim = start_sim("two-nodes", 0, 0);
    let status_url = sim
        .process
        .printed
        .iter()
        .find_map(|l| l.strip_prefix("control API: "))
        .unwrap()
        .to_string();
    let sessions = || async {
        let s: Value = plantd_test_support::client()
            .get(&status_url)
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        s["data"]["sessions"].as_u64()
    };
    let node_a = spawn_app().await;
    let id = create_source(
        &node_a,
        json!({"name": "sim", "type": "opcua", "config": {
            "endpoint": format!("opc.tcp://127.0.0.1:{}/", sim.opcua_port),
            "publishing_interval_ms": 200}}),
    )
    .await;
    wait_status(&node_a, &id, "connected", 60).await;
    let node_b = node_a.another_node().await;
    // Node B sees the source (shared database) but opens no session of its own.
    wait_status(&node_b, &id, "connected", 10).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(sessions().await, Some(1));
    node_a.stop().await;
    let stopped_at = plantd_model::Timestamp::now();
    fresh_point(&node_b, "Pump_01", "Vibration_X", stopped_at, 60).await;
    wait_status(&node_b, &id, "connected", 30).await;
    wait_for("one session", 30, || async {
        (sessions().await == Some(1)).then_some(())
    })
    .await;
    sim.stop();
}

/// Bad endpoints and wrong security settings: clear test results, disconnected sources that
/// say why, and a service that goes on answering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_opcua_settings_give_clear_results() {
    let sim = start_sim("opcua-bad", 0, 0);
    let app = spawn_app().await;
    let refused = create_source(
        &app,
        json!({"name": "nothing there", "type": "opcua", "config": {"endpoint": "opc.tcp://127.0.0.1:1/"}}),
    )
    .await;
    let t = test_source(&app, &refused).await;
    assert_eq!(t["success"], false);
    assert!(
        t["message"]
            .as_str()
            .unwrap()
            .contains("connection refused"),
        "{t}"
    );
    let unknown_host = create_source(
        &app,
        json!({"name": "no such host", "type": "opcua", "config": {"endpoint": "opc.tcp://no-such-host.invalid:4840/"}}),
    )
    .await;
    let t = test_source(&app, &unknown_host).await;
    assert!(
        t["message"]
            .as_str()
            .unwrap()
            .contains("could not resolve host"),
        "{t}"
    );
    // The simulator offers security None only.
    let secure = create_source(
        &app,
        json!({"name": "wrong security", "type": "opcua", "config": {
            "endpoint": format!("opc.tcp://127.0.0.1:{}/", sim.opcua_port),
            "security_mode": "SignAndEncrypt", "security_policy": "Basic256Sha256"}}),
    )
    .await;
    let t = test_source(&app, &secure).await;
    assert_eq!(t["success"], false);
    let message = t["message"].as_str().unwrap();
    assert!(
        message.contains("wrong security settings") && message.contains("None/None"),
        "{t}"
    );
    let s = wait_for("the connector's reason", 30, || async {
        let s = source(&app, &secure).await;
        s["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("wrong security settings"))
            .then_some(s)
    })
    .await;
    assert_eq!(s["status"], "disconnected");
    // A port that is not OPC UA (the simulator's Modbus server).
    let not_opcua = create_source(
        &app,
        json!({"name": "modbus port", "type": "opcua", "config": {
            "endpoint": format!("opc.tcp://127.0.0.1:{}/", sim.modbus_port)}}),
    )
    .await;
    let t = test_source(&app, &not_opcua).await;
    assert_eq!(t["success"], false, "{t}");
    // The service still answers while its connectors fail (the deadline only keeps a hang from
    // stalling the suite; speed is measured in plantd-bench).
    tokio::time::timeout(
        Duration::from_secs(30),
        app.call(Method::GET, "/data-sources", Some(&app.admin_key), None),
    )
    .await
    .expect("the API answers while connectors fail")
    .expect(200);
    sim.stop();
}

/// Modbus: the register map is polled and stored with scale and offset; an illegal address
/// costs only its own tag and is named; the source follows the simulator away and back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modbus_source_polls_the_simulator_and_reconnects() {
    let sim = start_sim("modbus", 0, 0);
    let app = spawn_app().await;
    let id = create_source(
        &app,
        json!({"name": "plc", "type": "modbus", "config": {
            "host": "127.0.0.1", "port": sim.modbus_port, "unit_id": 1,
            "poll_interval_ms": 200, "asset_id": "Pump_01",
            "registers": [
                {"tag_name": "Vibration_X", "kind": "input", "address": 0, "data_type": "f32"},
                {"tag_name": "Speed_x2", "kind": "holding", "address": 18, "data_type": "f32", "scale": 2, "offset": 1},
                {"tag_name": "Run_Status", "kind": "coil", "address": 0},
                {"tag_name": "Nothing", "kind": "input", "address": 20, "data_type": "f32"}
            ]}}),
    )
    .await;
    let s = wait_status(&app, &id, "connected", 30).await;
    assert_eq!(s["tag_count"], 4, "{s}");
    let pts = wait_for("Vibration_X points", 30, || async {
        let p = points(&app, "Pump_01", "Vibration_X").await;
        (p.len() >= 3).then_some(p)
    })
    .await;
    for p in &pts {
        assert!((0.0..=10.0).contains(&p["value"].as_f64().unwrap()), "{p}");
        assert_eq!(p["data_source_id"].as_str().unwrap_or(&id), id);
    }
    // Live stream subscribers get connector points like ingested ones.
    let mut ws = app
        .subscribe(json!({"type": "subscribe", "data_source_id": id}))
        .await;
    let event = next_of_type(&mut ws, "telemetry").await;
    assert_eq!(event["data"][0]["asset_id"], "Pump_01", "{event}");
    drop(ws);
    let speed = wait_for("Speed_x2", 10, || latest(&app, "Pump_01", "Speed_x2")).await;
    let v = speed["value"].as_f64().unwrap();
    assert!(v > 1.0 && v <= 7201.0, "{speed}");
    let run = wait_for("Run_Status", 10, || latest(&app, "Pump_01", "Run_Status")).await;
    assert_eq!(run["value"], 1.0);
    // The unmapped address costs only its own tag, and is named.
    let s = wait_for("the illegal address to be named", 20, || async {
        let s = source(&app, &id).await;
        s["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("Nothing") && e.contains("illegal data address"))
            .then_some(s)
    })
    .await;
    assert_eq!(s["status"], "connected");
    assert!(latest(&app, "Pump_01", "Nothing").await.is_none());

    let t = test_source(&app, &id).await;
    assert_eq!(t["success"], true, "{t}");
    assert!(
        t["message"].as_str().unwrap().contains("input register 0"),
        "{t}"
    );
    // A map whose first register does not exist: the test says so.
    let bad = create_source(
        &app,
        json!({"name": "bad map", "type": "modbus", "config": {
            "host": "127.0.0.1", "port": sim.modbus_port, "asset_id": "x",
            "registers": [{"tag_name": "t", "kind": "holding", "address": 20}]}}),
    )
    .await;
    let t = test_source(&app, &bad).await;
    assert_eq!(t["success"], false, "{t}");
    assert!(
        t["message"]
            .as_str()
            .unwrap()
            .contains("illegal data address"),
        "{t}"
    );

    let sim = outage(&app, &id, sim, "modbus-again").await;
    sim.stop();
}

/// A trial organization's connector is held to the tier's ingestion limit (1,000 points per
/// minute): what is over is not stored, the source says so, and the connector keeps running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connector_points_obey_the_tier_limits() {
    let sim = start_sim("limits", 0, 0);
    let app = spawn_app().await;
    let org =
        plantd_app::operator::create_org(&app.store, "Trial plant", plantd_model::Tier::Trial)
            .await
            .unwrap();
    let (_, key) = plantd_app::operator::create_key(
        &app.store,
        Some(&org.id),
        "trial admin",
        &[plantd_model::Scope::Admin],
        None,
    )
    .await
    .unwrap();
    let created = app
        .call(
            Method::POST,
            "/data-sources",
            Some(&key),
            Some(json!({"name": "fast plc", "type": "modbus", "config": {
                "host": "127.0.0.1", "port": sim.modbus_port, "asset_id": "Pump_01",
                "poll_interval_ms": 10,
                "registers": [
                    {"tag_name": "a", "kind": "input", "address": 0, "data_type": "f32"},
                    {"tag_name": "b", "kind": "input", "address": 2, "data_type": "f32"},
                    {"tag_name": "c", "kind": "input", "address": 4, "data_type": "f32"},
                    {"tag_name": "d", "kind": "input", "address": 6, "data_type": "f32"}]}})),
        )
        .await
        .expect(201);
    let id = created.id();
    let s = wait_for("the limit to be named", 60, || async {
        let s = app
            .call(
                Method::GET,
                &format!("/data-sources/{id}"),
                Some(&key),
                None,
            )
            .await
            .expect(200)
            .json["data"]
            .clone();
        s["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("points not stored") && e.contains("rate limit"))
            .then_some(s)
    })
    .await;
    assert_eq!(s["status"], "connected", "{s}");
    let usage = app
        .call(
            Method::GET,
            "/organizations/current/usage",
            Some(&key),
            None,
        )
        .await
        .expect(200);
    let stored = usage.json["data"]["telemetry_points"]["current"]
        .as_u64()
        .unwrap();
    // Minute windows are aligned to the clock: the test's few seconds may touch two.
    assert!(stored <= 2_000, "{usage:?}");
    sim.stop();
}

/// A TCP relay to the broker that the test can cut and restore, to lose the connection to a
/// real broker on demand.
struct Relay {
    port: u16,
    task: tokio::task::JoinHandle<()>,
}

async fn relay(port: u16, target: String) -> Relay {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        let mut conns = tokio::task::JoinSet::new();
        while let Ok((mut inbound, _)) = listener.accept().await {
            let target = target.clone();
            conns.spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    Relay { port, task }
}

/// MQTT against the machine's Mosquitto: JSON payloads in the three shapes, the connection lost
/// and found again, and the broker's answer in `test`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mqtt_source_maps_payloads_from_mosquitto_and_reconnects() {
    let Some(url) = plantd_test_support::peer(
        "PLANTD_TEST_MQTT_URL",
        "(e.g. mqtt://127.0.0.1:1883) to run against a broker",
    ) else {
        return;
    };
    let broker = plantd_model::data_source::parse_url(&url).unwrap();
    let broker_addr = format!("{}:{}", broker.host, broker.port.unwrap_or(1883));
    let relay1 = relay(0, broker_addr.clone()).await;
    let app = spawn_app().await;
    let prefix = format!("plantd-test/{}", unique_name());
    let id = create_source(
        &app,
        json!({"name": "broker", "type": "mqtt", "config": {
            "broker_url": format!("mqtt://127.0.0.1:{}", relay1.port),
            "topics": [format!("{prefix}/#")], "qos": 1,
            "asset_id_topic_level": 2, "tag_name_topic_level": 3}}),
    )
    .await;
    wait_status(&app, &id, "connected", 30).await;
    let t = test_source(&app, &id).await;
    assert_eq!(t["success"], true, "{t}");
    assert!(t["message"].as_str().unwrap().contains("CONNACK"), "{t}");

    let publisher = publisher(&broker).await;
    let publish = |topic: String, payload: String| {
        let publisher = publisher.clone();
        async move {
            publisher
                .publish(topic, rumqttc::QoS::AtLeastOnce, false, payload)
                .await
                .unwrap();
        }
    };
    // A minute ago, whole seconds.
    let stamp = plantd_model::Timestamp::from_millis(
        (plantd_model::Timestamp::now().millis() / 1000 - 60) * 1000,
    );
    publish(
        format!("{prefix}/M1/Temp"),
        json!({"value": 41.5, "timestamp": stamp.to_rfc3339()}).to_string(),
    )
    .await;
    publish(format!("{prefix}/M1/Speed"), "1450".to_string()).await;
    publish(
        format!("{prefix}/M2/any"),
        json!([{"asset_id": "M2", "values": {"Flow": 3.25, "Open": true}}]).to_string(),
    )
    .await;
    publish(format!("{prefix}/M3/x"), "not json".to_string()).await;
    let temp = wait_for("M1/Temp", 20, || latest(&app, "M1", "Temp")).await;
    assert_eq!(temp["value"], 41.5);
    assert_eq!(temp["timestamp"], stamp.to_rfc3339());
    wait_for("M1/Speed", 20, || latest(&app, "M1", "Speed")).await;
    let open = wait_for("M2/Open", 20, || latest(&app, "M2", "Open")).await;
    assert_eq!(open["value"], 1.0);
    let s = wait_for("the bad payload to be named", 20, || async {
        let s = source(&app, &id).await;
        s["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("not JSON"))
            .then_some(s)
    })
    .await;
    assert_eq!(s["status"], "connected");
    assert!(s["tag_count"].as_i64().unwrap() >= 4, "{s}");

    // The connection is cut: disconnected; restored: connected again, and messages published
    // meanwhile (QoS 1, persistent session) arrive.
    let port = relay1.port;
    relay1.task.abort();
    let _ = relay1.task.await;
    let down = wait_status(&app, &id, "disconnected", 90).await;
    assert!(down["last_error"].as_str().is_some(), "{down}");
    publish(format!("{prefix}/M9/Level"), "7".to_string()).await;
    let relay2 = relay(port, broker_addr).await;
    wait_status(&app, &id, "connected", 90).await;
    let level = wait_for("a message published while away", 20, || {
        latest(&app, "M9", "Level")
    })
    .await;
    assert_eq!(level["value"], 7.0);
    relay2.task.abort();

    // Wrong credentials are the broker's answer, when it checks them; an unreachable broker is
    // refused at the network.
    let nothing = create_source(
        &app,
        json!({"name": "no broker", "type": "mqtt", "config": {
            "broker_url": "mqtt://127.0.0.1:1", "topics": ["#"]}}),
    )
    .await;
    let t = test_source(&app, &nothing).await;
    assert_eq!(t["success"], false);
    assert!(
        t["message"]
            .as_str()
            .unwrap()
            .contains("connection refused"),
        "{t}"
    );
}

/// A publisher connected to the broker (a client id of its own, so tests run side by side).
pub(crate) async fn publisher(
    broker: &plantd_model::data_source::ParsedUrl,
) -> rumqttc::AsyncClient {
    let opts = rumqttc::MqttOptions::new(
        format!(
            "plantd-test-pub-{}",
            plantd_test_support::unique_name().replace(['.', ' '], "-")
        ),
        broker.host.clone(),
        broker.port.unwrap_or(1883),
    );
    let (client, mut events) = rumqttc::AsyncClient::new(opts, 16);
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let mut ready = Some(ready_tx);
        while let Ok(e) = events.poll().await {
            if let rumqttc::Event::Incoming(rumqttc::Packet::ConnAck(_)) = e
                && let Some(tx) = ready.take()
            {
                let _ = tx.send(());
            }
        }
    });
    tokio::time::timeout(Duration::from_secs(10), ready_rx)
        .await
        .expect("publisher connects to the broker")
        .unwrap();
    client
}

/// MQTT over TLS: a Mosquitto of the test's own with a TLS listener (certificate made with
/// openssl for this run) and a plain one. With the certificate as `ca_file` the source connects
/// and maps what is published; without it the handshake fails and `test` says bad certificate.
/// Needs the `mosquitto` and `openssl` programs, named by `PLANTD_TEST_MOSQUITTO_BIN` (set by
/// `.ci/run`); skipped where absent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mqtt_over_tls_with_a_private_certificate_authority() {
    let Some(mosquitto) = plantd_test_support::peer(
        "PLANTD_TEST_MOSQUITTO_BIN",
        "to a mosquitto program (and have openssl) to run the TLS test",
    ) else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("plantd-mqtt-tls-{}", unique_name()));
    std::fs::create_dir_all(&dir).unwrap();
    // A certificate authority of this run, and the broker's certificate signed by it.
    plantd_test_support::private_ca(&dir);
    // Mosquitto started as root reads its files as the mosquitto user.
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.join("key.pem"), std::fs::Permissions::from_mode(0o644))
            .unwrap();
    }
    let free_port = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    };
    let (tls_port, plain_port) = (free_port(), free_port());
    std::fs::write(
        dir.join("mosquitto.conf"),
        format!(
            "listener {tls_port} 127.0.0.1\ncertfile {}\nkeyfile {}\nlistener {plain_port} 127.0.0.1\nallow_anonymous true\n",
            dir.join("cert.pem").display(),
            dir.join("key.pem").display()
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
    wait_for("the test broker to listen", 10, || async {
        tokio::net::TcpStream::connect(("127.0.0.1", plain_port))
            .await
            .ok()
            .map(|_| ())
    })
    .await;
    let app = spawn_app().await;
    let ca = dir.join("ca.pem").display().to_string();
    let id = create_source(
        &app,
        json!({"name": "tls", "type": "mqtt", "config": {
            "broker_url": format!("mqtts://localhost:{tls_port}"), "ca_file": ca,
            "topics": ["tls/#"], "asset_id_topic_level": 1, "tag_name_topic_level": 2}}),
    )
    .await;
    let t = test_source(&app, &id).await;
    assert_eq!(t["success"], true, "{t}");
    wait_status(&app, &id, "connected", 30).await;
    let plain =
        plantd_model::data_source::parse_url(&format!("mqtt://127.0.0.1:{plain_port}")).unwrap();
    let publisher = publisher(&plain).await;
    publisher
        .publish(
            "tls/Line_2/Pressure",
            rumqttc::QoS::AtLeastOnce,
            false,
            "3.5",
        )
        .await
        .unwrap();
    let p = wait_for("a value over TLS", 20, || {
        latest(&app, "Line_2", "Pressure")
    })
    .await;
    assert_eq!(p["value"], 3.5);
    let untrusted = create_source(
        &app,
        json!({"name": "no ca", "type": "mqtt", "config": {
            "broker_url": format!("mqtts://localhost:{tls_port}"), "topics": ["tls/#"]}}),
    )
    .await;
    let t = test_source(&app, &untrusted).await;
    assert_eq!(t["success"], false, "{t}");
    assert!(
        t["message"].as_str().unwrap().contains("bad certificate"),
        "{t}"
    );
    let _ = broker.kill();
    let _ = broker.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A value that does not change (the pump's speed while it runs) stays fresh while its OPC UA
/// source is connected, long past any age-based rule (its subscription's keep-alives confirm
/// it), and turns stale once the simulator stops; points sent through the API carry their own
/// time as `confirmed_at`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_constant_value_stays_fresh_while_its_source_confirms_it() {
    let sim = start_sim("stale", 0, 0);
    let endpoint = format!("opc.tcp://127.0.0.1:{}/", sim.opcua_port);
    let app = spawn_app().await;
    let id = create_source(
        &app,
        json!({"name": "sim", "type": "opcua", "config": {"endpoint": endpoint}}),
    )
    .await;
    wait_status(&app, &id, "connected", 60).await;
    // The pump starts up first; then its speed holds.
    let first = wait_for("a steady Motor_Speed", 90, || async {
        let a = latest(&app, "Pump_01", "Motor_Speed").await?;
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
        let b = latest(&app, "Pump_01", "Motor_Speed").await?;
        (a["timestamp"] == b["timestamp"]).then_some(b)
    })
    .await;
    assert_eq!(first["stale"], false, "{first}");
    // Longer than the 30 s after which an unconfirmed value would be stale.
    tokio::time::sleep(std::time::Duration::from_secs(35)).await;
    let later = latest(&app, "Pump_01", "Motor_Speed").await.unwrap();
    assert_eq!(
        later["value"], first["value"],
        "the speed is constant: {later}"
    );
    assert_eq!(
        later["timestamp"], first["timestamp"],
        "no new point: {later}"
    );
    assert_eq!(later["stale"], false, "still confirmed: {later}");
    let confirmed =
        plantd_model::Timestamp::parse(later["confirmed_at"].as_str().unwrap()).unwrap();
    assert!(
        plantd_model::Timestamp::now().millis() - confirmed.millis() < 5_000,
        "{later}"
    );

    sim.stop();
    wait_for("the value to turn stale", 45, || async {
        let l = latest(&app, "Pump_01", "Motor_Speed").await?;
        (l["stale"] == true).then_some(())
    })
    .await;

    let at = plantd_model::Timestamp::from_millis(plantd_model::Timestamp::now().millis() - 2_000);
    app.post(
        "/telemetry",
        &app.admin_key,
        json!({"data": [{"asset_id": "Tank_9", "tag_name": "Level", "value": 3.0, "timestamp": at.to_rfc3339()}]}),
    )
    .await
    .expect(200);
    let api = latest(&app, "Tank_9", "Level").await.unwrap();
    assert_eq!(api["stale"], false, "{api}");
    assert_eq!(api["confirmed_at"], api["timestamp"], "{api}");
}

/// What the device says its tags measure (OPC UA `EngineeringUnits` and `EURange`) reaches
/// `GET /v1/assets/{asset_id}/tags` and the overview; a person's description is kept over the
/// device's, also after a reconnect; refusals name their field; another organization sees
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_carry_what_the_device_says_they_measure() {
    let sim = start_sim("tags", 0, 0);
    let endpoint = format!("opc.tcp://127.0.0.1:{}/", sim.opcua_port);
    let app = spawn_app().await;
    let k = app.admin_key.clone();
    let id = create_source(
        &app,
        json!({"name": "sim", "type": "opcua", "config": {"endpoint": endpoint}}),
    )
    .await;
    wait_status(&app, &id, "connected", 60).await;
    let vibration = wait_for("Vibration_X described by the device", 30, || async {
        let r = app.get("/assets/Pump_01/tags/Vibration_X", &k).await;
        (r.status == 200
            && r.json["data"]["source"] == "device"
            && r.json["data"]["has_data"] == true)
            .then(|| r.json["data"].clone())
    })
    .await;
    assert_eq!(vibration["unit"], "mm/s", "{vibration}");
    assert_eq!(
        vibration["eu_range"],
        json!({"low": 0.0, "high": 10.0}),
        "{vibration}"
    );
    assert_eq!(vibration["has_data"], true, "{vibration}");
    let list = app
        .get("/assets/Pump_01/tags?per_page=100", &k)
        .await
        .expect(200);
    let names: Vec<&str> = list.json["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["tag_name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"Motor_Speed") && names.contains(&"Vibration_X"),
        "{names:?}"
    );

    // A person's words stay, also when the connector reads the device again.
    let mine = app
        .put(
            "/assets/Pump_01/tags/Vibration_X",
            &k,
            json!({"description": "Drive-end bearing, horizontal", "unit": "mm/s RMS"}),
        )
        .await
        .expect(200);
    assert_eq!(mine.json["data"]["source"], "user");
    assert_eq!(
        mine.json["data"]["eu_range"]["high"], 10.0,
        "absent fields keep their value"
    );
    app.put(
        &format!("/data-sources/{id}"),
        &k,
        json!({"enabled": false}),
    )
    .await
    .expect(200);
    wait_status(&app, &id, "disconnected", 30).await;
    app.put(&format!("/data-sources/{id}"), &k, json!({"enabled": true}))
        .await
        .expect(200);
    wait_status(&app, &id, "connected", 60).await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let kept = app
        .get("/assets/Pump_01/tags/Vibration_X", &k)
        .await
        .expect(200);
    assert_eq!(kept.json["data"]["unit"], "mm/s RMS", "{}", kept.text);
    assert_eq!(
        kept.json["data"]["description"],
        "Drive-end bearing, horizontal"
    );

    // A tag described before its first point; refusals name the field.
    let planned = app
        .put(
            "/assets/Tank_9/tags/Level",
            &k,
            json!({"unit": "m", "eu_range": {"low": 0, "high": 12.5}}),
        )
        .await
        .expect(200);
    assert_eq!(planned.json["data"]["has_data"], false);
    let bad = app
        .put(
            "/assets/Tank_9/tags/Level",
            &k,
            json!({"eu_range": {"low": 5, "high": 5}, "unit": "x".repeat(40)}),
        )
        .await
        .expect(400);
    let fields: Vec<&str> = bad.json["error"]["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["unit", "eu_range.high"], "{}", bad.text);
    let cleared = app
        .put("/assets/Tank_9/tags/Level", &k, json!({"eu_range": null}))
        .await
        .expect(200);
    assert_eq!(cleared.json["data"]["eu_range"], Value::Null);
    assert_eq!(cleared.json["data"]["unit"], "m");
    app.get("/assets/Tank_9/tags/Volume", &k).await.expect(404);
    app.get("/assets/%FF/tags/Level", &k).await.expect(404);
    // Names no tag can have are not found on reading, refused on writing.
    app.get("/assets/Tank%2C9/tags/Level", &k).await.expect(404);
    let empty = app.get("/assets/Tank%2C9/tags", &k).await.expect(200);
    assert_eq!(empty.json["meta"]["total"], 0);
    let bad = app
        .put("/assets/Tank%2C9/tags/Level", &k, json!({"unit": "m"}))
        .await
        .expect(400);
    assert_eq!(bad.json["error"]["details"][0]["field"], "asset_id");

    // Tenancy: another organization's key sees none of it.
    let (_, other) = app
        .other_org("Other plant", plantd_model::Tier::Starter)
        .await;
    app.get("/assets/Pump_01/tags/Vibration_X", &other)
        .await
        .expect(404);
    let none = app.get("/assets/Pump_01/tags", &other).await.expect(200);
    assert_eq!(none.json["meta"]["total"], 0);
    sim.stop();
}

async fn browse(app: &TestApp, id: &str, query: &str) -> plantd_test_support::Reply {
    app.get(&format!("/data-sources/{id}/browse{query}"), &app.admin_key)
        .await
}

fn entry<'a>(entries: &'a Value, name: &str) -> &'a Value {
    entries
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["browse_name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {entries}"))
}

/// Browsing a source: the simulator's address space level by level (objects to open, variables
/// with their data types, named as the connector stores them, and whether they are collected);
/// choosing variables (`config.nodes`) changes what is collected; bad nodes, unknown nodes and
/// unreachable devices are clear refusals; a Modbus source shows its register map; another
/// organization's source is missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browsing_a_source_shows_what_it_offers_and_choosing_changes_what_is_collected() {
    let sim = start_sim("browse", 0, 0);
    let endpoint = format!("opc.tcp://127.0.0.1:{}/", sim.opcua_port);
    let app = spawn_app().await;
    let k = app.admin_key.clone();
    let id = create_source(
        &app,
        json!({"name": "sim", "type": "opcua", "config": {"endpoint": endpoint}}),
    )
    .await;
    wait_for(
        "Pump_01 / Vibration_X stored from the source",
        60,
        || async {
            let r = app.get("/assets/Pump_01/tags/Vibration_X", &k).await;
            (r.json["data"]["has_data"] == true).then_some(())
        },
    )
    .await;

    let objects = browse(&app, &id, "").await.expect(200).json["data"].clone();
    let simulation = entry(&objects, "Simulation");
    assert_eq!(simulation["node_class"], "Object", "{objects}");
    assert_eq!(simulation["has_children"], true);
    let node = simulation["node_id"].as_str().unwrap().to_string();
    let assets = browse(&app, &id, &format!("?node={}", urlencode(&node)))
        .await
        .expect(200)
        .json["data"]
        .clone();
    let pump = entry(&assets, "Pump_01")["node_id"]
        .as_str()
        .unwrap()
        .to_string();
    let vars = browse(&app, &id, &format!("?node={}", urlencode(&pump)))
        .await
        .expect(200)
        .json["data"]
        .clone();
    let vib = entry(&vars, "Vibration_X");
    assert_eq!(vib["node_class"], "Variable");
    assert_eq!(vib["data_type"], "Double", "{vib}");
    assert_eq!(vib["numeric"], true);
    assert_eq!(
        (vib["asset_id"].as_str(), vib["tag_name"].as_str()),
        (Some("Pump_01"), Some("Vibration_X"))
    );
    assert_eq!(vib["collected"], true, "browsing from the root collects it");
    let vib_node = vib["node_id"].as_str().unwrap().to_string();

    // Choose one variable: only it is collected from now on.
    let mut config = source(&app, &id).await["config"].clone();
    config["nodes"] =
        json!([{"node_id": vib_node, "asset_id": "Pump_01", "tag_name": "Vibration_X"}]);
    app.put(
        &format!("/data-sources/{id}"),
        &k,
        json!({ "config": config }),
    )
    .await
    .expect(200);
    let vars = browse(&app, &id, &format!("?node={}", urlencode(&pump)))
        .await
        .expect(200)
        .json["data"]
        .clone();
    assert_eq!(entry(&vars, "Vibration_X")["collected"], true);
    assert_eq!(entry(&vars, "Motor_Speed")["collected"], false, "{vars}");
    wait_for("the source to collect the one variable", 60, || async {
        let s = source(&app, &id).await;
        (s["status"] == "connected" && s["tag_count"] == 1).then_some(())
    })
    .await;

    // Refusals.
    let bad = browse(&app, &id, "?node=not%20a%20node").await.expect(400);
    assert_eq!(bad.json["error"]["details"][0]["field"], "node");
    browse(&app, &id, "?node=ns%3D2%3Bs%3DNo_such_node")
        .await
        .expect(404);
    let down = create_source(
        &app,
        json!({"name": "down", "type": "opcua", "enabled": false, "config": {"endpoint": "opc.tcp://127.0.0.1:1/"}}),
    )
    .await;
    let r = browse(&app, &down, "").await.expect(409);
    assert_eq!(r.json["error"]["code"], "device_unavailable");
    assert!(
        r.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("127.0.0.1:1"),
        "{}",
        r.json
    );
    browse(&app, &id, "?listen_seconds=0").await.expect(400);

    // Modbus: the register map.
    let modbus = create_source(
        &app,
        json!({"name": "plc", "type": "modbus", "enabled": false, "config": {"host": "127.0.0.1",
            "port": sim.modbus_port, "asset_id": "Pump_01", "registers": [
            {"tag_name": "Vibration_X", "kind": "input", "address": 0, "data_type": "f32"},
            {"tag_name": "Running", "kind": "coil", "address": 0, "data_type": "bool"}]}}),
    )
    .await;
    let map = browse(&app, &modbus, "").await.expect(200).json["data"].clone();
    assert_eq!(entry(&map, "Vibration_X")["node_id"], "input:0", "{map}");
    assert_eq!(entry(&map, "Running")["data_type"], "bool");
    assert_eq!(entry(&map, "Running")["asset_id"], "Pump_01");
    browse(&app, &modbus, "?node=x").await.expect(400);

    // Tenancy, and the scope: browsing asks the device with the source's credentials.
    let (_, other) = app
        .other_org("Other plant", plantd_model::Tier::Starter)
        .await;
    app.get(&format!("/data-sources/{id}/browse"), &other)
        .await
        .expect(404);
    let reader = app.key(&[plantd_model::Scope::ReadAssets]).await;
    app.get(&format!("/data-sources/{id}/browse"), &reader)
        .await
        .expect(403);
    sim.stop();
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Browsing an independent OPC UA server (python asyncua): objects under Objects, a Double and
/// a String variable (the String not a number plantd can store), a nested object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browsing_an_independent_opcua_server() {
    let Some(python) = plantd_test_support::peer(
        "PLANTD_TEST_PYTHON_OPCUA",
        "to a python3 with asyncua installed",
    ) else {
        return;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/interop/opcua_server.py");
    let mut server = ServerProcess::launch(
        &python,
        &[script.to_str().unwrap(), &port.to_string()],
        "ready",
    );
    let app = spawn_app().await;
    let id = create_source(
        &app,
        json!({"name": "boiler", "type": "opcua", "enabled": false,
            "config": {"endpoint": format!("opc.tcp://127.0.0.1:{port}/")}}),
    )
    .await;
    let objects = browse(&app, &id, "").await.expect(200).json["data"].clone();
    let boiler = entry(&objects, "Boiler")["node_id"]
        .as_str()
        .unwrap()
        .to_string();
    let level = browse(&app, &id, &format!("?node={}", urlencode(&boiler)))
        .await
        .expect(200)
        .json["data"]
        .clone();
    let t = entry(&level, "Temperature");
    assert_eq!(
        (t["data_type"].as_str(), t["numeric"].as_bool()),
        (Some("Double"), Some(true)),
        "{level}"
    );
    assert_eq!(t["asset_id"], "Boiler");
    let label = entry(&level, "Label");
    assert_eq!(
        (label["data_type"].as_str(), label["numeric"].as_bool()),
        (Some("String"), Some(false))
    );
    let burner = entry(&level, "Burner");
    assert_eq!(
        (
            burner["node_class"].as_str(),
            burner["has_children"].as_bool()
        ),
        (Some("Object"), Some(true))
    );
    let inner = browse(
        &app,
        &id,
        &format!("?node={}", urlencode(burner["node_id"].as_str().unwrap())),
    )
    .await
    .expect(200)
    .json["data"]
        .clone();
    assert_eq!(entry(&inner, "Flame")["data_type"], "Boolean");
    server.stop("KILL");
}

/// Browsing an MQTT source: the topics the broker carries under a filter while listening
/// (retained messages at once), with a sample payload, and whether the source's topic filters
/// collect them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browsing_an_mqtt_broker_lists_the_topics_it_carries() {
    let Some(url) = plantd_test_support::peer(
        "PLANTD_TEST_MQTT_URL",
        "(e.g. mqtt://127.0.0.1:1883) to run against a broker",
    ) else {
        return;
    };
    let broker = plantd_model::data_source::parse_url(&url).unwrap();
    let prefix = format!("plantd-browse-{}", unique_name());
    let client = publisher(&broker).await;
    for (topic, payload) in [
        (
            format!("{prefix}/line1/temp"),
            r#"{"value": 21.5}"#.to_string(),
        ),
        (format!("{prefix}/line2/state"), "running".to_string()),
    ] {
        client
            .publish(topic, rumqttc::QoS::AtLeastOnce, true, payload)
            .await
            .unwrap();
    }
    let app = spawn_app().await;
    let id = create_source(
        &app,
        json!({"name": "broker", "type": "mqtt", "enabled": false, "config": {
            "broker_url": url, "topics": [format!("{prefix}/line1/#")]}}),
    )
    .await;
    let q = format!(
        "?node={}&listen_seconds=2",
        urlencode(&format!("{prefix}/#"))
    );
    let topics = wait_for("both retained topics heard", 30, || async {
        let r = browse(&app, &id, &q).await.expect(200);
        (r.json["data"].as_array().unwrap().len() == 2).then_some(r.json["data"].clone())
    })
    .await;
    let temp = entry(&topics, "temp");
    assert_eq!(temp["node_id"], format!("{prefix}/line1/temp"));
    assert_eq!(temp["node_class"], "Topic");
    assert_eq!(temp["data_type"], "json");
    assert_eq!(temp["sample"], r#"{"value": 21.5}"#);
    assert_eq!(temp["collected"], true);
    let state = entry(&topics, "state");
    assert_eq!(
        (state["data_type"].as_str(), state["collected"].as_bool()),
        (Some("text"), Some(false))
    );
    browse(&app, &id, "?node=a/%23/b").await.expect(400);
    browse(&app, &id, "?listen_seconds=31").await.expect(400);
    // Clear the retained messages.
    for t in ["line1/temp", "line2/state"] {
        let _ = client
            .publish(
                format!("{prefix}/{t}"),
                rumqttc::QoS::AtLeastOnce,
                true,
                Vec::<u8>::new(),
            )
            .await;
    }
}

/// Sparkplug B from an independent encoder: pysparkplug payloads (published with paho-mqtt
/// through Mosquitto) decoded into points: births with aliases, data by alias, signed integers
/// zero-extended by pysparkplug, a sequence gap answered with an NCMD rebirth request, and a
/// death that turns the node's and device's tags bad. Needs `PLANTD_TEST_MQTT_URL` and
/// `PLANTD_TEST_PYTHON_SPARKPLUG` (a python3 with pysparkplug and paho-mqtt, set by `.ci/run`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sparkplug_b_from_pysparkplug() {
    let Some(url) = plantd_test_support::peer(
        "PLANTD_TEST_MQTT_URL",
        "(e.g. mqtt://127.0.0.1:1883) to run against a broker",
    ) else {
        return;
    };
    let Some(python) = plantd_test_support::peer(
        "PLANTD_TEST_PYTHON_SPARKPLUG",
        "to a python3 with pysparkplug and paho-mqtt",
    ) else {
        return;
    };
    let broker = plantd_model::data_source::parse_url(&url).unwrap();
    let app = spawn_app().await;
    let group = format!("plantd{}", unique_name().replace(['-', '_'], ""));
    let id = create_source(
        &app,
        json!({"name": "sparkplug", "type": "mqtt", "config": {
            "broker_url": url, "topics": [format!("spBv1.0/{group}/#")], "qos": 1,
            "payload_format": "sparkplug_b"}}),
    )
    .await;
    wait_status(&app, &id, "connected", 30).await;
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/interop/sparkplug_node.py");
    let out = tokio::process::Command::new(python)
        .arg(script)
        .arg(&broker.host)
        .arg(broker.port.unwrap_or(1883).to_string())
        .arg(&group)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for step in ["data", "rebirth requested", "reborn", "death"] {
        assert!(stdout.contains(&format!("ok {step}")), "{step}: {stdout}");
    }
    let node = format!("{group}:edge1");
    let pump = format!("{group}:edge1:pump");
    let temp = wait_for("Temperature bad after the death", 20, || async {
        latest(&app, &node, "Temperature")
            .await
            .filter(|t| t["quality"] == "bad")
    })
    .await;
    assert_eq!(temp["value"], 30.0, "the reborn value, then bad");
    let offset = latest(&app, &node, "Offset").await.unwrap();
    assert_eq!(offset["value"], -2.0, "a zero-extended INT16 read signed");
    assert_eq!(offset["quality"], "bad");
    let pressure = wait_for("Pressure bad", 20, || async {
        latest(&app, &pump, "Pressure")
            .await
            .filter(|t| t["quality"] == "bad")
    })
    .await;
    assert_eq!(pressure["value"], -1.0);
    // The gap's value (99) was refused, never stored.
    let series = app
        .get(
            &format!("/telemetry?asset_id={node}&tag_name=Temperature&per_page=100"),
            &app.admin_key,
        )
        .await
        .expect(200);
    assert!(!series.text.contains("99.0"), "{}", series.text);
    assert!(series.text.contains("22.5"), "{}", series.text);
}
