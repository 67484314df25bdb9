//! The edge (issue 34): assets provisioned from a CSV, a YAML file and a QR label become data
//! sources that read the real simulator (Modbus TCP and OPC UA, a child process); a file with
//! bad lines names each and imports nothing; a second import updates; tenancy and scopes.

use crate::connectors::{latest, points, start_sim};
use crate::ml_datasets::form;
use plantd_model::Scope;
use plantd_test_support::{TestApp, spawn_app, wait_for};
use reqwest::Method;
use serde_json::{Value, json};

pub(crate) fn fields(body: &Value) -> Vec<String> {
    body["error"]["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["field"].as_str().unwrap().to_string())
        .collect()
}

async fn source_names(app: &TestApp, key: &str) -> Vec<String> {
    let list = app.get("/data-sources?per_page=100", key).await.expect(200);
    list.json["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csv_yaml_and_qr_imports_provision_data_sources() {
    let sim = start_sim("provision", 0, 0);
    let app = spawn_app().await;
    let k = app.admin_key.clone();

    // A CSV as the raw body: a pump over Modbus (Vibration_X at register 0, Motor_Temperature
    // at 6: the simulator's map) and a motor over OPC UA (its nodes by the simulator's naming).
    let csv = format!(
        "asset_id,asset_type,protocol,host,port,sensors\n\
         Pump_01,centrifugal_pump,modbus,127.0.0.1,{},Vibration_X:0;Motor_Temperature:6\n\
         Motor_01,electric_motor,opcua,127.0.0.1,{},Speed;Stator_Temperature\n",
        sim.modbus_port, sim.opcua_port
    );
    let r = app
        .raw(
            Method::POST,
            "/provisioning/import/csv",
            Some(&k),
            "text/csv",
            &csv,
        )
        .await
        .expect(200);
    assert_eq!(r.json["data"]["imported"], 2, "{}", r.json);
    assert_eq!(r.json["data"]["created"], 2);
    assert_eq!(r.json["data"]["assets"][0]["asset_id"], "Pump_01");
    let pump_source = r.json["data"]["assets"][0]["data_source_id"]
        .as_str()
        .unwrap()
        .to_string();
    let ds = app
        .get(&format!("/data-sources/{pump_source}"), &k)
        .await
        .expect(200);
    assert_eq!(ds.json["data"]["name"], "Pump_01");
    assert_eq!(ds.json["data"]["type"], "modbus");
    let temps = wait_for("the pump's Motor_Temperature over Modbus", 30, || async {
        let p = points(&app, "Pump_01", "Motor_Temperature").await;
        (p.len() >= 2).then_some(p)
    })
    .await;
    for p in &temps {
        let v = p["value"].as_f64().unwrap();
        assert!((20.0..=120.0).contains(&v), "{p}");
        assert_eq!(
            p["data_source_id"].as_str().unwrap_or(&pump_source),
            pump_source
        );
    }
    let speed = wait_for("the motor's Speed over OPC UA", 30, || {
        latest(&app, "Motor_01", "Speed")
    })
    .await;
    assert!(speed["value"].as_f64().unwrap() >= 0.0, "{speed}");

    // Bad lines are each named (line numbers of the file) and nothing is imported.
    let before = source_names(&app, &k).await;
    let bad = "asset_id,asset_type,protocol,host,port,sensors\n\
               Tank_01,tank,modbus,127.0.0.1,502,Level:0\n\
               Tank_02,tank,modbus,127.0.0.1,70000,Level:0\n\
               Tank_03,tank,modbus,127.0.0.1,502,Level\n\
               Tank_04,tank,bacnet,127.0.0.1,47808,Level:1\n\
               Tank_01,tank,modbus,127.0.0.1,502,Level:2\n";
    let (status, body) = form(&app, &k, "/provisioning/import/csv", Some(bad), &[]).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "validation_error");
    let f = fields(&body);
    for expected in [
        "line 3.port",
        "line 4.sensors",
        "line 5.protocol",
        "line 6.asset_id",
    ] {
        assert!(f.contains(&expected.to_string()), "{expected} in {f:?}");
    }
    assert!(!f.iter().any(|x| x.starts_with("line 2")), "{f:?}");
    assert_eq!(
        source_names(&app, &k).await,
        before,
        "nothing half imported"
    );
    let (status, body) = form(
        &app,
        &k,
        "/provisioning/import/csv",
        Some("asset_id,type\n"),
        &[],
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(fields(&body)[0], "header", "{body}");
    let r = app
        .raw(
            Method::POST,
            "/provisioning/import/csv",
            Some(&k),
            "text/csv",
            "",
        )
        .await
        .expect(400);
    assert_eq!(r.json["error"]["details"][0]["field"], "file");

    // YAML (multipart), with SPEC 2.17's keys: an entry linked to an unknown asset is named.
    let yaml = format!(
        "assets:\n\
         \x20 - id: Pump_01\n\
         \x20   type: centrifugal_pump\n\
         \x20   protocol: modbus\n\
         \x20   host: 127.0.0.1\n\
         \x20   port: {}\n\
         \x20   update_rate_ms: 500\n\
         \x20   initial_state: running\n\
         \x20   sensors:\n\
         \x20     - name: Vibration_Y\n\
         \x20       address: 2\n\
         \x20     - Flow_Rate:14\n\
         \x20 - id: Spare_Motor\n\
         \x20   type: electric_motor\n\
         \x20   protocol: opcua\n\
         \x20   host: 127.0.0.1\n\
         \x20   port: {}\n\
         \x20   enabled: false\n\
         \x20   linked_to: Pump_01\n\
         \x20   sensors: [Speed]\n",
        sim.modbus_port, sim.opcua_port
    );
    let (status, body) = form(&app, &k, "/provisioning/import/yaml", Some(&yaml), &[]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["created"], 1, "{body}");
    assert_eq!(body["data"]["updated"], 1);
    let ds = app
        .get(&format!("/data-sources/{pump_source}"), &k)
        .await
        .expect(200);
    assert_eq!(
        ds.json["data"]["config"]["poll_interval_ms"], 500,
        "{}",
        ds.json
    );
    assert_eq!(
        ds.json["data"]["config"]["registers"][1]["tag_name"],
        "Flow_Rate"
    );
    wait_for("Vibration_Y after the update", 30, || {
        latest(&app, "Pump_01", "Vibration_Y")
    })
    .await;
    let (status, body) = form(&app, &k, "/provisioning/import/yaml", Some("- id: Lonely\n  type: pump\n  protocol: modbus\n  host: 127.0.0.1\n  sensors: \"A:0\"\n  linked_to: Nobody\n  colour: red\n"), &[])
    .await;
    assert_eq!(status, 400, "{body}");
    let f = fields(&body);
    assert!(f.contains(&"assets[0].linked_to".to_string()), "{f:?}");
    assert!(f.contains(&"assets[0].colour".to_string()), "{f:?}");

    // A QR label: Modbus TCP on port 502 unless it says otherwise.
    let r = app
        .post(
            "/provisioning/import/qr",
            &k,
            json!({"id": "Tank_07", "t": "tank", "h": "10.1.2.3", "s": [{"n": "Level", "a": 0}, {"n": "Temp", "a": 2}]}),
        )
        .await
        .expect(200);
    let tank = r.json["data"]["assets"][0]["data_source_id"]
        .as_str()
        .unwrap()
        .to_string();
    let ds = app
        .get(&format!("/data-sources/{tank}"), &k)
        .await
        .expect(200);
    assert_eq!(
        ds.json["data"]["endpoint"], "modbus://10.1.2.3:502/1",
        "{}",
        ds.json
    );
    let r = app
        .post(
            "/provisioning/import/qr",
            &k,
            json!({"id": "Tank_08", "t": "tank", "h": "10.1.2.3", "s": [{"n": "Level"}], "x": 1}),
        )
        .await
        .expect(400);
    let f = fields(&r.json);
    assert!(f.contains(&"x".to_string()), "{f:?}");
    assert!(f.contains(&"label.sensors".to_string()), "{f:?}");

    // What was provisioned, and how.
    let list = app.get("/provisioning/assets", &k).await.expect(200);
    let assets = list.json["data"].as_array().unwrap();
    let methods: Vec<(String, String)> = assets
        .iter()
        .map(|a| {
            (
                a["asset_id"].as_str().unwrap().to_string(),
                a["method"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        methods,
        [
            ("Motor_01".into(), "csv".into()),
            ("Pump_01".into(), "yaml".into()),
            ("Spare_Motor".into(), "yaml".into()),
            ("Tank_07".into(), "qr".into())
        ]
    );
    let spare = assets
        .iter()
        .find(|a| a["asset_id"] == "Spare_Motor")
        .unwrap();
    assert_eq!(spare["linked_to"], "Pump_01");
    assert_eq!(spare["enabled"], false);

    // Tenancy: another organization sees none of it, and its Pump_01 is its own.
    let (_other, other_key) = app
        .other_org("Other Plant", plantd_model::Tier::Professional)
        .await;
    let list = app
        .get("/provisioning/assets", &other_key)
        .await
        .expect(200);
    assert_eq!(list.json["data"], json!([]));
    let r = app
        .post(
            "/provisioning/import/qr",
            &other_key,
            json!({"id": "Pump_01", "t": "pump", "h": "10.9.9.9", "s": [{"n": "Flow", "a": 0}]}),
        )
        .await
        .expect(200);
    assert_eq!(r.json["data"]["created"], 1);
    let ds = app
        .get(&format!("/data-sources/{pump_source}"), &k)
        .await
        .expect(200);
    assert_eq!(
        ds.json["data"]["endpoint"],
        format!("modbus://127.0.0.1:{}/1", sim.modbus_port)
    );

    // Imports take write:assets; the list read:assets.
    let reader = app.key(&[Scope::ReadAssets]).await;
    app.get("/provisioning/assets", &reader).await.expect(200);
    app.post(
        "/provisioning/import/qr",
        &reader,
        json!({"id": "T", "t": "tank", "h": "10.1.2.3", "s": [{"n": "L", "a": 0}]}),
    )
    .await
    .expect(403);
    sim.stop();
}

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_plantd");

pub(crate) fn run(args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(BIN)
        .args(args)
        .output()
        .expect("run plantd");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Starts `plantd edge ARGS` on a free port of loopback and returns it with an admin key
/// made by `plantd keys create --data-dir`.
fn start_agent(dir: &str, args: &[&str]) -> (plantd_test_support::ServerProcess, String) {
    start_agent_with_env(dir, args, &[])
}

/// `plantd edge` in `dir` with `args` and environment variables; its admin key.
pub(crate) fn start_agent_with_env(
    dir: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> (plantd_test_support::ServerProcess, String) {
    launch_agent(BIN, "127.0.0.1:0", dir, args, env)
}

/// `bin edge --listen LISTEN --data-dir DIR ARGS` with environment variables; its admin key.
pub(crate) fn launch_agent(
    bin: &str,
    listen: &str,
    dir: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> (plantd_test_support::ServerProcess, String) {
    let mut all = vec!["edge", "--listen", listen, "--data-dir", dir];
    all.extend_from_slice(args);
    let mut agent = plantd_test_support::ServerProcess::launch_with_env(bin, &all, env, "stop:");
    agent.base = agent.printed_after("listening on ").unwrap();
    (agent, admin_key(dir))
}

/// A new admin key of the agent whose data is in `dir` (`plantd keys create`).
pub(crate) fn admin_key(dir: &str) -> String {
    let (ok, key, err) = run(&[
        "keys",
        "create",
        "--name",
        "ops",
        "--scopes",
        "admin",
        "--data-dir",
        dir,
    ]);
    assert!(ok, "{err}");
    key.trim().to_string()
}

/// A one-use enrollment token of `cloud`.
pub(crate) async fn enrollment_token(cloud: &TestApp) -> String {
    cloud
        .post(
            "/fleet/enrollment/token",
            &cloud.admin_key,
            json!({"max_uses": 1}),
        )
        .await
        .expect(201)
        .json["data"]["token"]
        .as_str()
        .unwrap()
        .to_string()
}

/// `GET /v1{path}` of an agent, as a client that keeps to the rate limit: a `429` (a test that
/// polls for minutes on a slow machine) is tried again after its `Retry-After`.
pub(crate) async fn agent_get(base: &str, key: &str, path: &str) -> Value {
    for _ in 0..60 {
        let r = reqwest::Client::new()
            .get(format!("{base}/v1{path}"))
            .bearer_auth(key)
            .send()
            .await
            .unwrap();
        if r.status() == 429 {
            let wait = r
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
                .unwrap_or(1);
            tokio::time::sleep(std::time::Duration::from_secs(wait.clamp(1, 60))).await;
            continue;
        }
        assert_eq!(r.status(), 200, "GET {path}");
        return r.json().await.unwrap();
    }
    panic!("GET {path}: still rate limited after 60 tries");
}

async fn agent_latest(base: &str, key: &str, asset: &str, tag: &str) -> Option<f64> {
    let body = agent_get(base, key, &format!("/telemetry/latest?asset_id={asset}")).await;
    body["data"]
        .as_array()?
        .iter()
        .find(|p| p["tag_name"] == tag)
        .and_then(|p| p["value"].as_f64())
}

/// `plantd edge` as a user starts it: an unknown mode is refused with the list; `demo` mode
/// stores generated data of the simulated plant with no device connection; `development`
/// mode preloads the simulator's assets, read over Modbus TCP and OPC UA; the configuration
/// shows the mode and SPEC 8.6's retention; SIGTERM stops it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_edge_agent_runs_in_each_mode() {
    let dir = plantd_test_support::temp_dir("edge-modes");
    let (ok, _, err) = run(&[
        "edge",
        "--mode",
        "staging",
        "--data-dir",
        dir.join("x").to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(
        err.contains("unknown DEPLOYMENT_MODE 'staging'")
            && err.contains("production, development, demo"),
        "{err}"
    );
    assert!(!dir.join("x").exists(), "refused before anything is made");

    let demo_dir = dir.join("demo");
    let (mut agent, key) = start_agent(demo_dir.to_str().unwrap(), &["--mode", "demo"]);
    assert!(
        agent
            .printed
            .iter()
            .any(|l| l.contains("edge agent: demo mode")),
        "{:?}",
        agent.printed
    );
    let config = agent_get(&agent.base, &key, "/edge/config").await;
    assert_eq!(
        config["data"],
        json!({"mode": "demo", "cloud": null, "regions": [], "forwarding": null, "retention": {"raw_days": 7, "minute_days": 30, "hour_days": 365,
               "day_days": 1825, "ml_predictions_days": 90, "alert_history_days": 365}})
    );
    let v = wait_for("generated Vibration_X of Pump_01", 30, || {
        agent_latest(&agent.base, &key, "Pump_01", "Vibration_X")
    })
    .await;
    assert!((0.0..=10.0).contains(&v), "{v}");
    assert!(agent.stop("TERM").success());

    let sim = start_sim("edge-development", 0, 0);
    let dev_dir = dir.join("development");
    let (opcua, modbus) = (sim.opcua_port.to_string(), sim.modbus_port.to_string());
    let (mut agent, key) = start_agent(
        dev_dir.to_str().unwrap(),
        &[
            "--mode",
            "development",
            "--sim-opcua-port",
            &opcua,
            "--sim-modbus-port",
            &modbus,
        ],
    );
    let assets = agent_get(&agent.base, &key, "/provisioning/assets").await;
    let ids: Vec<&str> = assets["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["asset_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["HVAC_01", "Motor_01", "Pump_01"]);
    assert_eq!(assets["data"][0]["method"], "development");
    let temp = wait_for("Pump_01 over Modbus", 30, || {
        agent_latest(&agent.base, &key, "Pump_01", "Motor_Temperature")
    })
    .await;
    assert!((20.0..=120.0).contains(&temp), "{temp}");
    wait_for("Motor_01 over OPC UA", 30, || {
        agent_latest(&agent.base, &key, "Motor_01", "Speed")
    })
    .await;
    assert!(agent.stop("TERM").success());
    sim.stop();
    let _ = std::fs::remove_dir_all(dir);
}

/// USB auto-import: the watched mount directory does not exist yet; a stick appears with a
/// `twinbox_config.csv` in a folder: it is imported once and marked; a YAML with a bad entry is
/// refused (named in the watch's list, not marked); the stick removed is noticed. Admin only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_usb_stick_is_imported_once() {
    let app = spawn_app().await;
    let k = app.admin_key.clone();
    let root = plantd_test_support::temp_dir("usb");
    let mount = root.join("usb0");
    let path = mount.to_str().unwrap().to_string();
    let writer = app.key(&[Scope::WriteAssets, Scope::ReadAssets]).await;
    app.post(
        "/provisioning/usb/watch/start",
        &writer,
        json!({"path": path}),
    )
    .await
    .expect(403);
    app.post(
        "/provisioning/usb/watch/start",
        &k,
        json!({"path": "relative/dir"}),
    )
    .await
    .expect(400);
    app.get("/provisioning/usb/watch", &k).await.expect(404);
    let w = app
        .post("/provisioning/usb/watch/start", &k, json!({"path": path}))
        .await
        .expect(200);
    assert_eq!(w.json["data"]["present"], false, "{}", w.json);

    // The stick arrives: a folder with the CSV (written elsewhere, then moved in whole).
    let stick = root.join("stick");
    std::fs::create_dir_all(stick.join("site-a")).unwrap();
    std::fs::write(
        stick.join("site-a/twinbox_config.csv"),
        "asset_id,asset_type,protocol,host,port,sensors\nUSB_Pump,centrifugal_pump,modbus,127.0.0.1,502,Flow:0\n",
    )
    .unwrap();
    std::fs::rename(&stick, &mount).unwrap();
    let csv = mount.join("site-a/twinbox_config.csv");
    wait_for("the stick's CSV imported and marked", 30, || async {
        let marked = mount.join("site-a/twinbox_config.csv.imported").exists();
        let list = app.get("/provisioning/assets", &k).await.expect(200);
        let usb = list.json["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["asset_id"] == "USB_Pump" && a["method"] == "usb");
        (marked && usb).then_some(())
    })
    .await;
    let watch = app.get("/provisioning/usb/watch", &k).await.expect(200);
    assert_eq!(watch.json["data"]["present"], true);
    assert_eq!(
        watch.json["data"]["imports"][0]["imported"], 1,
        "{}",
        watch.json
    );
    assert_eq!(
        watch.json["data"]["imports"][0]["file"],
        csv.to_str().unwrap()
    );

    // A YAML with a bad entry is refused, named, and left unmarked.
    std::fs::write(
        mount.join("plant.yaml"),
        "assets:\n  - id: USB_Motor\n    type: electric_motor\n    protocol: opcua\n    host: 127.0.0.1\n    port: 99999\n    sensors: [Speed]\n",
    )
    .unwrap();
    let refused = wait_for("the YAML refused", 30, || async {
        let watch = app.get("/provisioning/usb/watch", &k).await.expect(200);
        watch.json["data"]["imports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["file"].as_str().unwrap().ends_with("plant.yaml"))
            .cloned()
    })
    .await;
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("assets[0].port"),
        "{refused}"
    );
    assert!(!mount.join("plant.yaml.imported").exists());
    // Imported once: the CSV is not imported again (its asset keeps its first import time).
    let first =
        app.get("/provisioning/assets", &k).await.expect(200).json["data"][0]["updated_at"].clone();
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    let again =
        app.get("/provisioning/assets", &k).await.expect(200).json["data"][0]["updated_at"].clone();
    assert_eq!(first, again);

    // The stick removed.
    std::fs::remove_dir_all(&mount).unwrap();
    wait_for("the stick's removal noticed", 30, || async {
        let watch = app.get("/provisioning/usb/watch", &k).await.expect(200);
        (watch.json["data"]["present"] == false).then_some(())
    })
    .await;
    let _ = std::fs::remove_dir_all(root);
}

/// An agent enrolls with its cloud at start (`--enroll TOKEN --cloud URL`) and becomes a fleet
/// device there; the assets an operator registers for it in the cloud are pulled by its cloud
/// sync and provisioned; a restart keeps the enrollment (the one-use token is not asked again);
/// a device reads only its own assets; an agent not enrolled is told so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enrolled_agent_syncs_its_assets_from_the_cloud() {
    let cloud = spawn_app().await;
    let k = cloud.admin_key.clone();
    let root = format!("http://{}", cloud.addr);
    let token = enrollment_token(&cloud).await;
    let dir = plantd_test_support::temp_dir("edge-enroll");
    let d = dir.to_str().unwrap().to_string();
    let (mut agent, ek) = start_agent(&d, &["--enroll", &token, "--cloud", &root]);
    assert!(
        agent
            .printed
            .iter()
            .any(|l| l.starts_with("edge agent: enrolled with ")),
        "{:?}",
        agent.printed
    );
    let config = agent_get(&agent.base, &ek, "/edge/config").await;
    assert_eq!(config["data"]["cloud"]["url"], root.as_str());
    let device_id = config["data"]["cloud"]["device_id"]
        .as_str()
        .unwrap()
        .to_string();
    let device = cloud
        .get(&format!("/fleet/devices/{device_id}"), &k)
        .await
        .expect(200);
    assert_eq!(device.json["data"]["tags"], json!(["edge"]));
    assert!(
        device.json["data"]["serial_number"]
            .as_str()
            .unwrap()
            .starts_with("edge-")
    );

    // The operator registers the agent's assets in the cloud; a bad row is named.
    let path = format!("/fleet/devices/{device_id}/assets");
    let row = json!({"asset_id": "Cloud_Pump", "asset_type": "centrifugal_pump", "protocol": "modbus",
                     "host": "10.0.0.9", "port": 502, "sensors": "Flow_Rate:14;Motor_Speed:18"});
    let bad = cloud
        .put(
            &path,
            &k,
            json!({"assets": [row, {"asset_id": "X", "asset_type": "t", "protocol": "modbus", "host": "h", "port": 0, "sensors": "A:0"}]}),
        )
        .await
        .expect(400);
    assert_eq!(bad.json["error"]["details"][0]["field"], "assets[1].port");
    let set = cloud
        .put(&path, &k, json!({"assets": [row]}))
        .await
        .expect(200);
    assert_eq!(set.json["data"]["assets"][0]["port"], 502);
    assert_eq!(
        cloud.get(&path, &k).await.expect(200).json["data"],
        set.json["data"]
    );

    // The agent's sync provisions them.
    let r = reqwest::Client::new()
        .post(format!("{}/v1/provisioning/sync/cloud", agent.base))
        .bearer_auth(&ek)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let report: Value = r.json().await.unwrap();
    assert_eq!(report["data"]["imported"], 1, "{report}");
    let assets = agent_get(&agent.base, &ek, "/provisioning/assets").await;
    assert_eq!(assets["data"][0]["asset_id"], "Cloud_Pump");
    assert_eq!(assets["data"][0]["method"], "cloud");

    // A restart keeps the enrollment: the used-up token is not presented again.
    assert!(agent.stop("TERM").success());
    let (mut agent, ek) = start_agent(&d, &["--enroll", &token, "--cloud", &root]);
    assert!(
        agent
            .printed
            .iter()
            .any(|l| l.contains(&format!("as device {device_id} (since"))),
        "{:?}",
        agent.printed
    );
    let config = agent_get(&agent.base, &ek, "/edge/config").await;
    assert_eq!(config["data"]["cloud"]["device_id"], device_id.as_str());
    assert!(agent.stop("TERM").success());

    // Another device's password reads only that device's assets.
    let other = cloud
        .post(
            "/fleet/devices",
            &k,
            json!({"name": "Other", "serial_number": "OTHER-1"}),
        )
        .await
        .expect(201);
    let other_pw = other.json["data"]["mqtt"]["password"].as_str().unwrap();
    let other_id = other.json["data"]["id"].as_str().unwrap();
    cloud.get(&path, other_pw).await.expect(404);
    let own = cloud
        .get(&format!("/fleet/devices/{other_id}/assets"), other_pw)
        .await
        .expect(200);
    assert_eq!(own.json["data"]["assets"], json!([]));
    assert_eq!(own.json["data"]["updated_at"], Value::Null);
    // Other routes stay closed to a device.
    cloud.get("/fleet/devices", other_pw).await.expect(401);

    // An instance that never enrolled is told so.
    let r = cloud
        .post("/provisioning/sync/cloud", &k, json!({}))
        .await
        .expect(409);
    assert_eq!(r.code(), "not_enrolled");
    // A wrong token is the cloud's refusal, said.
    let r = cloud
        .post(
            "/edge/enroll",
            &k,
            json!({"cloud_url": root, "token": "pde_nope"}),
        )
        .await
        .expect(409);
    assert_eq!(r.code(), "cloud_unreachable");
    assert!(r.text.contains("enrollment token"), "{}", r.text);
    let _ = std::fs::remove_dir_all(dir);
}

/// Clone: one device's configuration (provisioned assets and the rules that watch them)
/// exported as one document and applied on another; a second import updates rather than
/// duplicates; a document naming an asset it does not hold is refused whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configuration_is_cloned_to_another_device() {
    let app = spawn_app().await;
    let k = app.admin_key.clone();
    let r = app
        .post(
            "/provisioning/import/qr",
            &k,
            json!({"id": "Tank_07", "t": "tank", "h": "10.1.2.3", "s": [{"n": "Level", "a": 0}]}),
        )
        .await
        .expect(200);
    let tank_source = r.json["data"]["assets"][0]["data_source_id"].clone();
    app.post(
        "/alert-rules",
        &k,
        json!({"name": "Tank high", "severity": "warning", "data_source_id": tank_source,
               "condition": {"tag_name": "Level", "operator": "gt", "value": 90, "duration_seconds": 0}}),
    )
    .await
    .expect(201);
    // A rule on a device is left out: its id means nothing elsewhere.
    let dev = app
        .post(
            "/fleet/devices",
            &k,
            json!({"name": "G", "serial_number": "G-1"}),
        )
        .await
        .expect(201);
    app.post(
        "/alert-rules",
        &k,
        json!({"name": "Gateway offline", "severity": "critical", "data_source_id": dev.json["data"]["id"],
               "condition": {"tag_name": "online", "operator": "lt", "value": 1, "duration_seconds": 0}}),
    )
    .await
    .expect(201);
    let doc = app
        .post("/provisioning/clone", &k, json!({"action": "export"}))
        .await
        .expect(200)
        .json["data"]
        .clone();
    assert_eq!(doc["format"], "plantd-edge-config");
    assert_eq!(doc["assets"][0]["asset_id"], "Tank_07");
    assert_eq!(doc["alert_rules"].as_array().unwrap().len(), 1);
    assert_eq!(doc["alert_rules"][0]["asset"], "Tank_07");
    assert_eq!(doc["left_out"]["alert_rules"], 1);

    // Another device (here another organization) takes it, as JSON and as a file.
    let (_other, ok_key) = app
        .other_org("Second site", plantd_model::Tier::Enterprise)
        .await;
    let r = app
        .post(
            "/provisioning/clone",
            &ok_key,
            json!({"action": "import", "file": doc}),
        )
        .await
        .expect(200);
    assert_eq!(r.json["data"]["assets"]["created"], 1, "{}", r.json);
    assert_eq!(r.json["data"]["alert_rules_created"], 1);
    let (status, body) = form(
        &app,
        &ok_key,
        "/provisioning/clone",
        Some(&doc.to_string()),
        &[],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["assets"]["updated"], 1);
    assert_eq!(body["data"]["alert_rules_updated"], 1);
    let rules = app.get("/alert-rules", &ok_key).await.expect(200);
    let rules = rules.json["data"].as_array().unwrap().clone();
    assert_eq!(rules.len(), 1);
    let source = app
        .get("/provisioning/assets", &ok_key)
        .await
        .expect(200)
        .json["data"][0]["data_source_id"]
        .clone();
    assert_eq!(
        rules[0]["data_source_id"], source,
        "the rule watches the new device's source"
    );
    let list = app.get("/provisioning/assets", &ok_key).await.expect(200);
    assert_eq!(list.json["data"][0]["method"], "clone");

    // A document whose rule names an asset it does not hold is refused whole.
    let mut bad = doc.clone();
    bad["alert_rules"][0]["asset"] = json!("Nowhere");
    bad["assets"][0]["asset_id"] = json!("Tank_99");
    let r = app
        .post(
            "/provisioning/clone",
            &ok_key,
            json!({"action": "import", "file": bad}),
        )
        .await
        .expect(400);
    assert_eq!(
        r.json["error"]["details"][0]["field"],
        "alert_rules[0].asset"
    );
    let names: Vec<String> = app
        .get("/provisioning/assets", &ok_key)
        .await
        .expect(200)
        .json["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["asset_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["Tank_07"], "nothing written");
    app.post("/provisioning/clone", &ok_key, json!({"action": "import"}))
        .await
        .expect(400);
    app.post(
        "/provisioning/clone",
        &ok_key,
        json!({"action": "import", "file": {"format": "x"}}),
    )
    .await
    .expect(400);
}

/// Two imports creating the same asset at the same moment: each is applied whole or refused
/// (409, to send again), never a server error, and the asset is one data source.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simultaneous_imports_of_one_asset_never_fail_half_way() {
    let app = spawn_app().await;
    let k = app.admin_key.clone();
    for round in 0..10 {
        let label = json!({"id": format!("Race_{round}"), "t": "tank", "h": "10.1.2.3",
                           "s": [{"n": "Level", "a": 0}]});
        let (a, b) = tokio::join!(
            app.post("/provisioning/import/qr", &k, label.clone()),
            app.post("/provisioning/import/qr", &k, label.clone())
        );
        for r in [&a, &b] {
            assert!(
                r.status == 200 || (r.status == 409 && r.code() == "conflict"),
                "{}: {}",
                r.status,
                r.text
            );
        }
        assert!(a.status == 200 || b.status == 200, "one of them is applied");
    }
    let names = source_names(&app, &k).await;
    for round in 0..10 {
        let name = format!("Race_{round}");
        assert_eq!(names.iter().filter(|n| **n == name).count(), 1, "{names:?}");
    }
}
