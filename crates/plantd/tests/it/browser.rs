//! The console in a real browser: headless Chromium driven through WebDriver (python selenium,
//! `tests/browser/console.py`) against `plantd up` with its simulator. Logs in, builds a
//! dashboard with a line chart of Pump_01 / Vibration_X, sees it draw and then grow without a
//! reload, raises an alert and acknowledges it on the alerts page, sees the overview's values
//! follow the stream, works the ML pages (datasets, labeling, training followed live, a model
//! tested, deployed and undeployed), runs SQL in SQL Lab (table, chart, saved, a refusal with
//! its position) and tests a row-level-security rule, provisions assets from a CSV and a QR
//! label, adds a pump from a template in the edge agent's setup wizard, and finds no errors in
//! the browser's console. Screenshots
//! go to a folder the test prints.

use plantd_test_support::ServerProcess;

const BIN: &str = env!("CARGO_BIN_EXE_plantd");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_in_a_real_browser() {
    let Some(python) = plantd_test_support::peer(
        "PLANTD_TEST_PYTHON_BROWSER",
        "to a python3 with selenium (and install chromium and chromium-driver)",
    ) else {
        return;
    };
    let data_dir = std::env::temp_dir().join(format!(
        "plantd-browser-{}",
        plantd_test_support::unique_name()
    ));
    let data_dir = data_dir.to_str().unwrap().to_string();
    let server = ServerProcess::launch(
        BIN,
        &[
            "up",
            "--listen",
            "127.0.0.1:0",
            "--sim-port",
            "0",
            "--data-dir",
            &data_dir,
        ],
        "  (shown once",
    );
    let base = server
        .printed_after("listening on ")
        .expect("address printed");
    let password = server
        .printed_after("login password: ")
        .expect("password printed");
    let sim = server
        .printed_after("simulator: ")
        .expect("simulator printed");
    let modbus = sim
        .split("Modbus TCP ")
        .nth(1)
        .and_then(|m| m.split_whitespace().next())
        .and_then(|m| m.rsplit(':').next())
        .expect("the simulator's Modbus port printed")
        .to_string();
    let sim = sim.split_whitespace().next().unwrap().to_string();
    let edge = server
        .printed_after("edge agent: http://")
        .expect("the edge agent printed");
    let edge = format!("http://{}", edge.split_whitespace().next().unwrap());
    let shots = std::env::temp_dir().join("plantd-console-screenshots");
    let _ = std::fs::remove_dir_all(&shots);
    std::fs::create_dir_all(&shots).unwrap();
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/browser/console.py");
    let out = tokio::process::Command::new(python)
        .arg(script)
        .arg(&base)
        .arg(&password)
        .arg(&shots)
        .arg(&sim)
        .arg(&edge)
        .arg(&modbus)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("console screenshots: {}", shots.display());
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for step in [
        "login",
        "dashboard_created",
        "chart_drawn",
        "live_points_drawn",
        "alert_appeared_live",
        "alert_acknowledged",
        "overview_live",
        "overview_search_live",
        "data_source_browsed",
        "fleet_pages",
        "ota_pages",
        "ml_dataset_uploaded",
        "ml_dataset_page",
        "ml_labeling_keys",
        "ml_version_and_validation",
        "ml_telemetry_trend",
        "ml_training_live",
        "ml_model_page",
        "ml_model_deploy",
        "sql_lab",
        "rls_page",
        "reports_page",
        "embed_page",
        "regions_page",
        "provisioning_page",
        "edge_setup",
        "no_console_errors",
    ] {
        assert!(
            stdout.contains(&format!("ok {step}")),
            "{step}: {stdout}\n{stderr}"
        );
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&data_dir);
}
