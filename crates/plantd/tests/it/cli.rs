//! The `plantd` binary as a user runs it: first start prints the login once, operator commands
//! work beside the running server and print only what they create, SIGTERM stops it gracefully,
//! and a typo'd database URL is an error.

use plantd_test_support::ServerProcess;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_plantd");

fn start(args: &[&str]) -> ServerProcess {
    ServerProcess::start(BIN, args)
}

fn run(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(BIN).args(args).output().expect("run plantd");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The JSON a request answers, or `None` when it cannot be had (yet).
async fn get_json(request: reqwest::RequestBuilder) -> Option<serde_json::Value> {
    request.send().await.ok()?.json().await.ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_start_operator_commands_and_graceful_shutdown() {
    let (db_url, temp_dir) = plantd_test_support::fresh_database().await;
    let data_dir = temp_dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("plantd-cli-{}", plantd_test_support::unique_name()))
    });
    let data_dir = data_dir.to_str().unwrap().to_string();
    let storage = [
        "--data-dir",
        data_dir.as_str(),
        "--database-url",
        db_url.as_str(),
    ];
    let mut server = start(&storage);
    let printed = server.printed.join("\n");
    assert!(printed.contains("admin@localhost"), "{printed}");
    let password = server
        .printed_after("login password: ")
        .expect("password printed");
    assert!(password.len() >= 16);

    // One server per SQLite database: a second one refuses to start.
    if temp_dir.is_some() {
        let (ok, _, err) = run(&[&["serve", "--listen", "127.0.0.1:0"][..], &storage].concat());
        assert!(
            !ok && err.contains("another plantd server is already using"),
            "{err}"
        );
    }

    // Operator commands beside the running server print only what they create.
    let (ok, key, err) = run(&[
        &["keys", "create", "--name", "ops", "--scopes", "admin"][..],
        &storage,
    ]
    .concat());
    assert!(ok, "{err}");
    let key = key.trim_end().to_string();
    assert!(
        key.starts_with("pdk_") && !key.contains('\n'),
        "stdout must be the key alone: {key:?}"
    );
    let client = plantd_test_support::client();
    let me: serde_json::Value = client
        .get(format!("{}/v1/users/me", server.base))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(me["data"]["email"], "admin@localhost");
    assert_eq!(me["data"]["role"], "owner");
    let org: serde_json::Value = client
        .get(format!("{}/v1/organizations/current", server.base))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(org["data"]["name"], "Default");
    assert_eq!(org["data"]["tier"], "enterprise");

    let (ok, org_id, err) = run(&[
        &["orgs", "create", "--name", "Line 2", "--tier", "trial"][..],
        &storage,
    ]
    .concat());
    assert!(ok, "{err}");
    let org_id = org_id.trim().to_string();
    assert_eq!(org_id.len(), 36, "stdout must be the id alone: {org_id:?}");
    // A failover where no secondary copy is held is refused, saying so.
    let (ok, _, err) = run(&[
        &["orgs", "failover", &org_id, "--region", "eu-west"][..],
        &storage,
    ]
    .concat());
    assert!(!ok);
    assert!(err.contains("holds no secondary copy"), "{err}");
    let (ok, _, err) = run(&[
        &[
            "users",
            "create",
            "--email",
            "tech@plant.example",
            "--password",
            "long-enough-1",
            "--org",
            &org_id,
            "--role",
            "admin",
        ][..],
        &storage,
    ]
    .concat());
    assert!(ok, "{err}");
    let (ok, trial_key, err) = run(&[
        &[
            "keys",
            "create",
            "--name",
            "t",
            "--scopes",
            "read:assets",
            "--org",
            &org_id,
            "--expires-at",
            "2099-01-01T00:00:00Z",
        ][..],
        &storage,
    ]
    .concat());
    assert!(ok, "{err}");
    let r = client
        .get(format!("{}/v1/data-sources", server.base))
        .bearer_auth(trial_key.trim())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["x-ratelimit-limit"],
        "60",
        "trial tier limits apply"
    );

    // Refusals are clear and exit non-zero.
    let (ok, out, err) = run(&[
        &["keys", "create", "--name", "x", "--scopes", "root"][..],
        &storage,
    ]
    .concat());
    assert!(
        !ok && out.is_empty() && err.contains("unknown scope"),
        "{err}"
    );
    let (ok, _, err) = run(&[
        &[
            "keys", "create", "--name", "x", "--scopes", "admin", "--org", "nope",
        ][..],
        &storage,
    ]
    .concat());
    assert!(
        !ok && err.contains("organization nope does not exist"),
        "{err}"
    );
    let (ok, _, err) = run(&[
        &["orgs", "create", "--name", "x", "--tier", "gold"][..],
        &storage,
    ]
    .concat());
    assert!(!ok && err.contains("unknown tier"), "{err}");

    let status = server.stop("TERM");
    assert!(
        status.success(),
        "graceful shutdown exits 0, got {status:?}"
    );
    drop(server);

    // A second start does not print a password again, and the data is still there.
    let mut again = start(&storage);
    assert!(
        !again.printed.join("\n").contains("login password"),
        "{:?}",
        again.printed
    );
    let r = client
        .get(format!("{}/v1/health", again.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = client
        .get(format!("{}/v1/data-sources", again.base))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    again.stop("TERM");
    if temp_dir.is_none() {
        let _ = std::fs::remove_dir_all(&data_dir);
    }
}

#[test]
fn a_typod_database_url_is_an_error_not_a_file() {
    let dir = std::env::temp_dir().join(format!(
        "plantd-typo-{}",
        plantd_test_support::unique_name()
    ));
    let dir_s = dir.to_str().unwrap();
    let (ok, _, err) = run(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        dir_s,
        "--database-url",
        "postgress://root@127.0.0.1/test",
    ]);
    assert!(!ok);
    assert!(err.contains("unsupported scheme 'postgress'"), "{err}");
    let (ok, _, err) = run(&[
        "keys",
        "create",
        "--name",
        "k",
        "--scopes",
        "admin",
        "--data-dir",
        dir_s,
        "--database-url",
        "sqlite3:x.db",
    ]);
    assert!(!ok && err.contains("unsupported scheme"), "{err}");
    assert!(!dir.join("plantd.db").exists() && !std::path::Path::new("x.db").exists());
    let (ok, _, err) = run(&["serve", "--listen", "not-an-address", "--data-dir", dir_s]);
    assert!(!ok && err.contains("--listen"), "{err}");
    let config = dir.with_extension("toml");
    std::fs::write(&config, "lisen = \"127.0.0.1:1\"\n").unwrap();
    let (ok, _, err) = run(&[
        "serve",
        "--config",
        config.to_str().unwrap(),
        "--data-dir",
        dir_s,
    ]);
    assert!(!ok && err.contains("invalid config file"), "{err}");
    let _ = std::fs::remove_file(config);
    let _ = std::fs::remove_dir_all(dir);
}

/// `plantd up`: the platform and the simulator in one process; the demo plant is created at the
/// first start (data appears through the OPC UA data source) and not again at the second;
/// Ctrl-C stops both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_starts_a_live_demo_plant_once() {
    let data_dir =
        std::env::temp_dir().join(format!("plantd-up-{}", plantd_test_support::unique_name()));
    let data_dir = data_dir.to_str().unwrap().to_string();
    let args = [
        "up",
        "--listen",
        "127.0.0.1:0",
        "--sim-port",
        "0",
        "--data-dir",
        data_dir.as_str(),
    ];
    let base_of = |p: &ServerProcess| p.printed_after("listening on ").expect("address printed");
    let mut first = ServerProcess::launch(BIN, &args, "  (shown once");
    let printed = first.printed.join("\n");
    assert!(
        printed.contains("web console: http://127.0.0.1:"),
        "{printed}"
    );
    assert!(
        printed.contains("created device group \"Plant edge\", dashboard \"Pump station\", dashboard \"Motor\", dashboard \"HVAC\", alert rule \"Pump vibration high\""),
        "{printed}"
    );
    assert!(printed.contains("first start: created organization \"Demo plant\""));
    let password = first
        .printed_after("login password: ")
        .expect("password printed");
    let base = base_of(&first);
    let client = plantd_test_support::client();
    let login: serde_json::Value = client
        .post(format!("{base}/v1/auth/login"))
        .json(&serde_json::json!({"email": "admin@localhost", "password": password}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = login["data"]["session_token"].as_str().unwrap().to_string();
    let get = |path: &str| {
        let (client, url, token) = (client.clone(), format!("{base}/v1{path}"), token.clone());
        async move {
            client
                .get(url)
                .bearer_auth(token)
                .send()
                .await
                .unwrap()
                .json::<serde_json::Value>()
                .await
                .unwrap()
        }
    };
    // Live data from the simulator through the demo data source.
    let mut latest = serde_json::Value::Null;
    for _ in 0..300 {
        latest = get("/telemetry/latest?asset_id=Pump_01&tags=Vibration_X").await;
        if latest["data"].as_array().is_some_and(|a| !a.is_empty()) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(latest["data"][0]["tag_name"], "Vibration_X", "{latest}");
    // ...which came the whole way: the simulator's Modbus TCP, the edge agent, MQTT. The agent
    // is a device of the demo's group, online, and its own console answers.
    let devices = get("/fleet/devices").await;
    assert_eq!(devices["meta"]["total"], 1, "{devices}");
    assert_eq!(devices["data"][0]["status"], "online", "{devices}");
    let groups = get("/fleet/groups").await;
    assert_eq!(groups["data"][0]["name"], "Plant edge", "{groups}");
    assert_eq!(devices["data"][0]["group_ids"][0], groups["data"][0]["id"]);
    let rules = get("/alert-rules").await;
    assert!(
        rules["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["data_source_id"] == groups["data"][0]["id"]),
        "the demo rules watch the edge's group: {rules}"
    );
    let edge = first
        .printed_after("edge agent: http://")
        .expect("the edge agent's address printed");
    let edge = format!("http://{}", edge.split_whitespace().next().unwrap());
    let health = client
        .get(format!("{edge}/v1/health"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let dashboards = get("/dashboards").await;
    let names: Vec<&str> = dashboards["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["HVAC", "Motor", "Pump station"]);
    assert_eq!(get("/alert-rules").await["meta"]["total"], 4);
    assert!(first.stop("INT").success(), "Ctrl-C stops cleanly");

    let mut second = ServerProcess::launch(BIN, &args, "log in as admin@localhost");
    let printed = second.printed.join("\n");
    assert!(printed.contains("already set up"), "{printed}");
    assert!(!printed.contains("login password"), "{printed}");
    assert!(printed.contains("edge agent: http://"), "{printed}");
    let base = base_of(&second);
    let dashboards: serde_json::Value = client
        .get(format!("{base}/v1/dashboards"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(dashboards["meta"]["total"], 3, "nothing created twice");
    assert!(second.stop("INT").success());
    let _ = std::fs::remove_dir_all(&data_dir);
}

/// Every command and subcommand answers `--help` with its usage.
#[test]
fn every_command_answers_help() {
    for args in [
        vec![],
        vec!["up"],
        vec!["serve"],
        vec!["keys"],
        vec!["keys", "create"],
        vec!["keys", "rotate-signing"],
        vec!["orgs", "create"],
        vec!["orgs", "failover"],
        vec!["users", "create"],
        vec!["license", "verify"],
        vec!["sim"],
        vec!["sim", "start"],
        vec!["sim", "scenario", "enable"],
        vec!["sim", "status"],
    ] {
        let out = std::process::Command::new(BIN)
            .args(&args)
            .arg("--help")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{args:?}: {text}");
        assert!(text.contains("Usage: plantd"), "{args:?}: {text}");
    }
}

/// A healthy first start of `plantd up` logs nothing (default logging): the welcome stands
/// alone and last, while the demo source connects and data flows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_first_start_ends_with_the_welcome() {
    use std::io::{BufRead, BufReader, Read};
    let dir = plantd_test_support::temp_dir("up-quiet");
    let mut child = std::process::Command::new(BIN)
        .args([
            "up",
            "--listen",
            "127.0.0.1:0",
            "--sim-port",
            "0",
            "--data-dir",
        ])
        .arg(&dir)
        .env_remove("PLANTD_LOG")
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut welcome = Vec::new();
    loop {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "{welcome:?}");
        let line = line.trim_end().to_string();
        let last = line.starts_with("stop: Ctrl-C");
        welcome.push(line);
        if last {
            break;
        }
    }
    let after = |marker: &str| {
        welcome
            .iter()
            .find_map(|l| l.split_once(marker).map(|(_, v)| v.trim().to_string()))
            .unwrap_or_else(|| panic!("{marker} in {welcome:?}"))
    };
    let base = after("listening on ");
    let password = after("login password: ");
    let control = after("--api-url ");
    assert!(
        welcome.iter().any(|l| l.contains("bearing_failure")),
        "{welcome:?}"
    );
    let client = plantd_test_support::client();
    let token = client
        .post(format!("{base}/v1/auth/login"))
        .json(&serde_json::json!({"email": "admin@localhost", "password": password}))
        .send()
        .await
        .unwrap()
        .json::<serde_json::Value>()
        .await
        .unwrap()["data"]["session_token"]
        .as_str()
        .unwrap()
        .to_string();
    plantd_test_support::wait_for("live values from the simulator", 60, || async {
        let latest = get_json(
            client
                .get(format!("{base}/v1/telemetry/latest?asset_id=Pump_01"))
                .bearer_auth(&token),
        )
        .await?;
        latest["data"]
            .as_array()
            .filter(|a| a.len() > 5)
            .map(|_| ())
    })
    .await;
    // The edge agent reads the motor and the HVAC unit over OPC UA: a session of its own.
    plantd_test_support::wait_for("an OPC UA session on the simulator", 60, || async {
        let status = get_json(client.get(format!("{control}/api/status"))).await?;
        (status["data"]["sessions"].as_u64().unwrap_or(0) >= 1).then_some(())
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let _ = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    assert!(child.wait().unwrap().success());
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    let mut logged = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut logged)
        .unwrap();
    assert_eq!(rest, "", "nothing is printed after the welcome");
    // sqlx reports a statement or a wait for a connection over its threshold (1-2 s): that
    // says the machine was loaded (the suite runs in parallel), not that the start was unwell.
    let logged: Vec<&str> = logged
        .lines()
        .filter(|l| !l.contains("slow statement") && !l.contains("exceeded slow threshold"))
        .collect();
    assert_eq!(
        logged,
        Vec::<&str>::new(),
        "nothing is logged in a healthy start"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// A demo plant made by an earlier `plantd up` read the simulator through an OPC UA data source
/// of its own: seeding it again turns that source off (the edge agent reads the simulator now)
/// and moves its rules to the edge's device group, creating nothing twice.
#[tokio::test]
async fn an_earlier_demo_plant_moves_to_the_edge() {
    let t = plantd_test_support::spawn_app().await;
    let key = &t.admin_key;
    let source = t
        .post(
            "/data-sources",
            key,
            serde_json::json!({"name": "Simulator (OPC UA)", "type": "opcua",
                "config": {"endpoint": "opc.tcp://127.0.0.1:4840/", "security_mode": "None"}}),
        )
        .await
        .expect(201)
        .id();
    let rule = t
        .post(
            "/alert-rules",
            key,
            serde_json::json!({"name": "Pump vibration high", "severity": "critical",
                "data_source_id": source, "asset_id": "Pump_01",
                "condition": {"tag_name": "Vibration_X", "operator": "gt", "value": 5.0, "duration_seconds": 30}}),
        )
        .await
        .expect(201)
        .id();
    let report = t.app.seed_demo(&t.org_id).await.unwrap();
    assert!(
        report
            .created
            .iter()
            .any(|c| c.contains("\"Simulator (OPC UA)\" turned off")),
        "{:?}",
        report.created
    );
    assert!(
        !report
            .created
            .iter()
            .any(|c| c.contains("\"Pump vibration high\"")),
        "{:?}",
        report.created
    );
    let source = t
        .get(&format!("/data-sources/{source}"), key)
        .await
        .expect(200);
    assert_eq!(source.json["data"]["enabled"], false, "{}", source.text);
    let rule = t
        .get(&format!("/alert-rules/{rule}"), key)
        .await
        .expect(200);
    assert_eq!(
        rule.json["data"]["data_source_id"],
        report.group_id.as_str()
    );
    assert_eq!(t.get("/alert-rules", key).await.json["meta"]["total"], 4);
    // Again: nothing more.
    let again = t.app.seed_demo(&t.org_id).await.unwrap();
    assert!(again.created.is_empty(), "{:?}", again.created);
    assert_eq!(again.group_id, report.group_id);
    t.stop().await;
}
