//! The control API over a real socket.

use plantd_sim::control::{SimState, router, spawn_clock};
use plantd_sim::{SimConfig, Simulation};
use serde_json::{Value, json};
use std::time::Duration;

async fn serve() -> (String, std::sync::Arc<SimState>) {
    let sim = Simulation::new(&SimConfig::default_plant(), 7, 1_767_225_600.0).unwrap();
    let state = SimState::new(sim, 7);
    spawn_clock(state.clone(), Duration::from_millis(20));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = router(state.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, state)
}

async fn call(method: &str, url: &str, body: Option<Value>) -> (u16, Value) {
    let client = plantd_test_support::client();
    let mut req = client.request(method.parse().unwrap(), url);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn value_of(vars: &Value, asset: &str, name: &str) -> Value {
    vars["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["asset_id"] == asset && v["name"] == name)
        .map(|v| v["value"].clone())
        .unwrap()
}

#[tokio::test]
async fn status_start_stop_scenarios_and_overrides() {
    let (url, _) = serve().await;
    let (s, body) = call("GET", &format!("{url}/api/status"), None).await;
    assert_eq!(s, 200);
    assert_eq!(body["data"]["state"], "running");
    assert_eq!(body["data"]["assets"], 8);
    assert_eq!(body["data"]["variables"], 45);
    assert_eq!(body["data"]["active_scenarios"], json!(["normal"]));

    // Stop freezes values; start resumes.
    let (s, body) = call("POST", &format!("{url}/api/simulation/stop"), None).await;
    assert_eq!((s, body["data"]["state"].as_str()), (200, Some("stopped")));
    let before = call("GET", &format!("{url}/api/variables"), None).await.1;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let after = call("GET", &format!("{url}/api/variables"), None).await.1;
    assert_eq!(before, after);
    call("POST", &format!("{url}/api/simulation/start"), None).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let resumed = call("GET", &format!("{url}/api/variables"), None).await.1;
    assert_ne!(after, resumed);

    // Scenarios.
    let (s, body) = call(
        "POST",
        &format!("{url}/api/scenarios/bearing_failure/enable"),
        None,
    )
    .await;
    assert_eq!(s, 200);
    let enabled: Vec<&str> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["enabled"] == true)
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(enabled, ["bearing_failure"]);
    let (s, body) = call("POST", &format!("{url}/api/scenarios/meteor/enable"), None).await;
    assert_eq!(
        (s, body["error"]["code"].as_str()),
        (404, Some("not_found"))
    );
    call(
        "POST",
        &format!("{url}/api/scenarios/bearing_failure/disable"),
        None,
    )
    .await;
    let status = call("GET", &format!("{url}/api/status"), None).await.1;
    assert_eq!(status["data"]["active_scenarios"], json!(["normal"]));

    // Overrides.
    let path = format!("{url}/api/variables/Pump_01/Vibration_X");
    let (s, _) = call("POST", &path, Some(json!({"value": 8.25}))).await;
    assert_eq!(s, 200);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let vars = call("GET", &format!("{url}/api/variables"), None).await.1;
    assert_eq!(value_of(&vars, "Pump_01", "Vibration_X"), json!(8.25));
    let (s, body) = call("POST", &path, Some(json!({"value": 12}))).await;
    assert_eq!(s, 400);
    assert_eq!(body["error"]["code"], "validation_error");
    assert!(body["error"]["message"].as_str().unwrap().contains("0..10"));
    let (s, _) = call("POST", &path, Some(json!({"value": "high"}))).await;
    assert_eq!(s, 400);
    let (s, _) = call("POST", &path, Some(json!({}))).await;
    assert_eq!(s, 400);
    let (s, body) = call(
        "POST",
        &format!("{url}/api/variables/Pump_99/Vibration_X"),
        Some(json!({"value": 1})),
    )
    .await;
    assert_eq!(
        (s, body["error"]["code"].as_str()),
        (404, Some("not_found"))
    );
    let (s, _) = call(
        "POST",
        &format!("{url}/api/variables/Pump_01/Nope"),
        Some(json!({"value": 1})),
    )
    .await;
    assert_eq!(s, 404);
    let (s, _) = call("DELETE", &path, None).await;
    assert_eq!(s, 204);
    let (s, body) = call("GET", &format!("{url}/api/nothing"), None).await;
    assert_eq!(
        (s, body["error"]["code"].as_str()),
        (404, Some("not_found"))
    );
    let (s, _) = call("GET", &format!("{url}/api/simulation/stop"), None).await;
    assert_eq!(s, 405);
}

#[tokio::test]
async fn a_bad_configuration_is_refused_and_the_running_one_stays() {
    let (url, _) = serve().await;
    let client = plantd_test_support::client();
    let r = client
        .post(format!("{url}/api/config"))
        .body("assets:\n  - id: P\n    type: rocket\n")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("assets[0].type (line 3)"), "{message}");
    let status = call("GET", &format!("{url}/api/status"), None).await.1;
    assert_eq!(status["data"]["assets"], 8);
    let r = client
        .post(format!("{url}/api/config"))
        .body("assets:\n  - id: Tank_07\n    type: level_sensor\n    update_rate_ms: 100\n")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let status = call("GET", &format!("{url}/api/status"), None).await.1;
    assert_eq!(status["data"]["assets"], 1);
    let vars = call("GET", &format!("{url}/api/variables"), None).await.1;
    assert_eq!(value_of(&vars, "Tank_07", "Unit"), json!("%"));
}
