//! Alert rules and alerts over HTTP: validation, evaluation of ingested points in event time,
//! the alert lifecycle, and alert events on the live stream.

use futures_util::{SinkExt, StreamExt};
use plantd_model::Timestamp;
use plantd_test_support::{TestApp, spawn_app};
use serde_json::{Value, json};
use std::time::Duration;

async fn source(app: &TestApp) -> String {
    app.post(
        "/data-sources",
        &app.admin_key,
        json!({"name": "PLC", "type": "modbus", "enabled": false, "config": {"host": "plc.invalid"}}),
    )
    .await
    .expect(201)
    .json["data"]["id"]
        .as_str()
        .unwrap()
        .to_string()
}

async fn rule(app: &TestApp, body: Value) -> String {
    app.post("/alert-rules", &app.admin_key, body)
        .await
        .expect(201)
        .json["data"]["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Ingests (seconds after `t0`, value) points of Pump_01/Vibration_X from `ds`.
async fn ingest(app: &TestApp, ds: &str, t0: i64, points: &[(i64, f64)]) {
    let data: Vec<Value> = points
        .iter()
        .map(|&(s, v)| {
            json!({"asset_id": "Pump_01", "tag_name": "Vibration_X", "value": v,
                   "timestamp": Timestamp::from_millis(t0 + s * 1000).to_rfc3339()})
        })
        .collect();
    app.post(
        "/telemetry",
        &app.admin_key,
        json!({"data_source_id": ds, "data": data}),
    )
    .await
    .expect(200);
}

async fn alerts(app: &TestApp, query: &str) -> Vec<Value> {
    app.get(&format!("/alerts?{query}"), &app.admin_key)
        .await
        .expect(200)
        .json["data"]
        .as_array()
        .unwrap()
        .clone()
}

fn t0() -> i64 {
    (Timestamp::now().millis() / 1000 - 3600) * 1000
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_are_validated_and_managed() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    let ds = source(&app).await;
    let created = app
        .post(
            "/alert-rules",
            k,
            json!({"name": "High vibration", "severity": "warning", "data_source_id": ds,
                   "condition": {"tag_name": "Vibration_X", "operator": "gt", "value": 7.0, "duration_seconds": 30},
                   "notifications": ["email", "slack"]}),
        )
        .await
        .expect(201);
    let r = &created.json["data"];
    assert_eq!(r["enabled"], true);
    assert_eq!(r["auto_resolve"], true);
    assert_eq!(r["asset_id"], Value::Null);
    assert_eq!(r["condition"]["max_gap_seconds"], 60);
    let id = r["id"].as_str().unwrap();

    for (body, field) in [
        (
            json!({"name": "x", "severity": "urgent", "data_source_id": ds, "condition": {"tag_name": "t", "operator": "gt", "value": 1, "duration_seconds": 0}}),
            "severity",
        ),
        (
            json!({"name": "x", "severity": "info", "data_source_id": ds, "condition": {"tag_name": "t", "operator": "bigger", "value": 1, "duration_seconds": 0}}),
            "condition.operator",
        ),
        (
            json!({"name": "x", "severity": "info", "data_source_id": ds, "condition": {"tag_name": "t", "operator": "gt", "value": 1, "duration_seconds": -1}}),
            "condition.duration_seconds",
        ),
        (
            json!({"name": "x", "severity": "info", "data_source_id": ds, "condition": {"tag_name": "t", "operator": "gt", "value": 1, "duration_seconds": 0}, "notifications": ["pager"]}),
            "notifications[0]",
        ),
        (
            json!({"name": "x", "severity": "info", "data_source_id": "nope", "condition": {"tag_name": "t", "operator": "gt", "value": 1, "duration_seconds": 0}}),
            "data_source_id",
        ),
        (
            json!({"name": "", "severity": "info", "data_source_id": ds, "condition": {"tag_name": "t", "operator": "gt", "value": 1, "duration_seconds": 0}}),
            "name",
        ),
    ] {
        let r = app.post("/alert-rules", k, body).await.expect(400);
        assert_eq!(r.json["error"]["details"][0]["field"], field, "{}", r.text);
    }

    let updated = app
        .put(
            &format!("/alert-rules/{id}"),
            k,
            json!({"severity": "critical", "asset_id": "Pump_01"}),
        )
        .await
        .expect(200);
    assert_eq!(updated.json["data"]["severity"], "critical");
    assert_eq!(updated.json["data"]["asset_id"], "Pump_01");
    assert_eq!(updated.json["data"]["condition"]["value"], 7.0);
    let off = app
        .post(&format!("/alert-rules/{id}/disable"), k, json!({}))
        .await
        .expect(200);
    assert_eq!(off.json["data"]["enabled"], false);
    let on = app
        .post(&format!("/alert-rules/{id}/enable"), k, json!({}))
        .await
        .expect(200);
    assert_eq!(on.json["data"]["enabled"], true);
    assert_eq!(
        app.get("/alert-rules", k).await.expect(200).json["meta"]["total"],
        1
    );
    app.delete(&format!("/alert-rules/{id}"), k)
        .await
        .expect(204);
    assert_eq!(
        app.get(&format!("/alert-rules/{id}"), k)
            .await
            .expect(404)
            .code(),
        "not_found"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alert_fires_once_and_follows_its_lifecycle() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    let ds = source(&app).await;
    rule(
        &app,
        json!({"name": "High vibration", "severity": "critical", "data_source_id": ds, "auto_resolve": false,
               "condition": {"tag_name": "Vibration_X", "operator": "gt", "value": 7.0, "duration_seconds": 0}}),
    )
    .await;
    let t0 = t0();
    ingest(&app, &ds, t0, &[(0, 5.0)]).await;
    assert!(alerts(&app, "").await.is_empty());
    // A point of the same asset and tag without the data source is not the rule's.
    app.post(
        "/telemetry",
        k,
        json!({"data": [{"asset_id": "Pump_01", "tag_name": "Vibration_X", "value": 9.0,
                          "timestamp": Timestamp::from_millis(t0 + 500).to_rfc3339()}]}),
    )
    .await
    .expect(200);
    assert!(alerts(&app, "").await.is_empty());
    ingest(&app, &ds, t0, &[(1, 8.0), (2, 9.0)]).await;
    let open = alerts(&app, "status=active").await;
    assert_eq!(open.len(), 1, "{open:?}");
    let a = &open[0];
    assert_eq!(a["value"], 8.0);
    assert_eq!(a["threshold"], 7.0);
    assert_eq!(a["operator"], "gt");
    assert_eq!(a["severity"], "critical");
    assert_eq!(a["asset_id"], "Pump_01");
    assert_eq!(
        a["triggered_at"],
        Timestamp::from_millis(t0 + 1000).to_rfc3339()
    );
    let id = a["id"].as_str().unwrap();

    let acked = app
        .post(
            &format!("/alerts/{id}/acknowledge"),
            k,
            json!({"note": "crew on the way"}),
        )
        .await
        .expect(200);
    assert_eq!(acked.json["data"]["status"], "acknowledged");
    assert_eq!(acked.json["data"]["note"], "crew on the way");
    assert!(acked.json["data"]["acknowledged_by"].is_string());
    assert_eq!(
        app.post(&format!("/alerts/{id}/acknowledge"), k, json!({}))
            .await
            .expect(409)
            .code(),
        "conflict"
    );
    // Still open (acknowledged): more matching points open nothing new.
    ingest(&app, &ds, t0, &[(3, 9.5)]).await;
    assert_eq!(alerts(&app, "").await.len(), 1);
    let resolved = app
        .post(&format!("/alerts/{id}/resolve"), k, json!({}))
        .await
        .expect(200);
    assert_eq!(resolved.json["data"]["status"], "resolved");
    assert_eq!(
        app.post(&format!("/alerts/{id}/resolve"), k, json!({}))
            .await
            .expect(409)
            .code(),
        "conflict"
    );
    // Resolved by hand while the condition holds: no new alert until it breaks and holds again.
    ingest(&app, &ds, t0, &[(4, 9.0)]).await;
    assert_eq!(alerts(&app, "").await.len(), 1);
    ingest(&app, &ds, t0, &[(5, 1.0), (6, 8.0)]).await;
    assert_eq!(alerts(&app, "status=active").await.len(), 1);
    assert_eq!(alerts(&app, "").await.len(), 2);
    assert_eq!(alerts(&app, "severity=info").await.len(), 0);
    let later = Timestamp::from_millis(t0 + 5500).to_rfc3339();
    assert_eq!(alerts(&app, &format!("start={later}")).await.len(), 1);
    assert_eq!(alerts(&app, &format!("end={later}")).await.len(), 1);
    assert_eq!(
        app.get("/alerts?status=open", k).await.expect(400).code(),
        "validation_error"
    );
    assert_eq!(
        app.post("/alerts/nope/resolve", k, json!({}))
            .await
            .expect(404)
            .code(),
        "not_found"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditions_are_timed_by_the_points_timestamps() {
    let app = spawn_app().await;
    let ds = source(&app).await;
    rule(
        &app,
        json!({"name": "Sustained", "severity": "warning", "data_source_id": ds,
               "condition": {"tag_name": "Vibration_X", "operator": "gte", "value": 7.0, "duration_seconds": 30}}),
    )
    .await;
    let t0 = t0();
    // Held from 10 s; one batch delivers a minute of points at once.
    ingest(&app, &ds, t0, &[(0, 1.0), (10, 7.0), (20, 8.0), (35, 8.0)]).await;
    assert!(alerts(&app, "").await.is_empty());
    ingest(&app, &ds, t0, &[(40, 7.5), (45, 9.0)]).await;
    let fired = alerts(&app, "").await;
    assert_eq!(fired.len(), 1);
    assert_eq!(
        fired[0]["triggered_at"],
        Timestamp::from_millis(t0 + 40_000).to_rfc3339()
    );
    // Auto-resolve once broken for 30 s.
    ingest(&app, &ds, t0, &[(50, 1.0), (70, 1.0)]).await;
    assert_eq!(alerts(&app, "status=active").await.len(), 1);
    ingest(&app, &ds, t0, &[(80, 1.0)]).await;
    let done = alerts(&app, "status=resolved").await;
    assert_eq!(done.len(), 1);
    assert_eq!(done[0]["resolved_by"], "auto");
    // A gap longer than max_gap_seconds (60) restarts the timing.
    ingest(
        &app,
        &ds,
        t0,
        &[(100, 8.0), (120, 8.0), (300, 8.0), (320, 8.0)],
    )
    .await;
    assert_eq!(alerts(&app, "status=active").await.len(), 0);
    ingest(&app, &ds, t0, &[(330, 8.0)]).await;
    assert_eq!(alerts(&app, "status=active").await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabled_rules_do_not_fire_and_alerts_reach_the_stream() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    let ds = source(&app).await;
    let id = rule(
        &app,
        json!({"name": "Off", "severity": "info", "data_source_id": ds, "enabled": false,
               "condition": {"tag_name": "Vibration_X", "operator": "gt", "value": 7.0, "duration_seconds": 0}}),
    )
    .await;
    let t0 = t0();
    ingest(&app, &ds, t0, &[(0, 9.0)]).await;
    assert!(alerts(&app, "").await.is_empty());
    app.post(&format!("/alert-rules/{id}/enable"), k, json!({}))
        .await
        .expect(200);
    let url = format!("ws://{}/v1/ws?access_token={k}", app.addr);
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    ws.send(tokio_tungstenite::tungstenite::Message::Text(
        json!({"type": "subscribe", "asset_id": "Pump_01"})
            .to_string()
            .into(),
    ))
    .await
    .unwrap();
    // The subscription's confirmation first.
    let _ = tokio::time::timeout(Duration::from_secs(5), ws.next())
        .await
        .unwrap();
    ingest(&app, &ds, t0, &[(1, 1.0), (2, 9.0)]).await;
    let event = loop {
        let msg = tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .expect("an alert event within 5 s")
            .unwrap()
            .unwrap();
        if let tokio_tungstenite::tungstenite::Message::Text(t) = msg {
            let v: Value = serde_json::from_str(t.as_str()).unwrap();
            if v["type"] == "alert" {
                break v;
            }
        }
    };
    assert_eq!(event["event"], "alert.triggered");
    assert_eq!(event["data"]["rule_name"], "Off");
    assert_eq!(event["data"]["status"], "active");
}

/// A receiver of webhook posts: the first answer is 500 (to make the sender retry), then 200.
async fn receiver() -> (
    String,
    std::sync::Arc<std::sync::Mutex<Vec<(axum::http::HeaderMap, String)>>>,
) {
    use std::sync::{Arc, Mutex};
    let got: Arc<Mutex<Vec<(axum::http::HeaderMap, String)>>> = Arc::default();
    let seen = got.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: axum::http::HeaderMap, body: String| {
            let seen = seen.clone();
            async move {
                let mut seen = seen.lock().unwrap();
                seen.push((headers, body));
                if seen.len() == 1 {
                    axum::http::StatusCode::INTERNAL_SERVER_ERROR
                } else {
                    axum::http::StatusCode::OK
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, got)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_are_signed_retried_and_logged() {
    use hmac::{Hmac, Mac};
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    for (body, field) in [
        (
            json!({"url": "ftp://x", "events": ["alert.triggered"]}),
            "url",
        ),
        (json!({"url": "http://x", "events": ["nope"]}), "events[0]"),
        (
            json!({"url": "http://x", "events": ["alert.triggered"], "secret": "short"}),
            "secret",
        ),
    ] {
        let r = app.post("/webhooks", k, body).await.expect(400);
        assert_eq!(r.json["error"]["details"][0]["field"], field, "{}", r.text);
    }
    let (url, got) = receiver().await;
    let secret = "a-long-enough-secret-0123456789";
    let hook = app
        .post(
            "/webhooks",
            k,
            json!({"url": url, "events": ["alert.triggered", "alert.resolved"], "secret": secret}),
        )
        .await
        .expect(201);
    assert_eq!(hook.json["data"]["secret"], secret);
    let hook_id = hook.json["data"]["id"].as_str().unwrap().to_string();
    let listed = app.get("/webhooks", k).await.expect(200);
    assert!(
        listed.json["data"][0].get("secret").is_none(),
        "secret is write-only"
    );

    let ds = source(&app).await;
    rule(
        &app,
        json!({"name": "Hook me", "severity": "critical", "data_source_id": ds,
               "condition": {"tag_name": "Vibration_X", "operator": "gt", "value": 7.0, "duration_seconds": 0}}),
    )
    .await;
    let t0 = t0();
    ingest(&app, &ds, t0, &[(0, 9.0)]).await;
    // Delivered on the second attempt (the first got a 500).
    let log = wait_deliveries(&app, &hook_id, |d| {
        d.len() == 1 && d[0]["status"] == "delivered"
    })
    .await;
    assert_eq!(log[0]["attempts"], 2, "{log:?}");
    assert_eq!(log[0]["last_status_code"], 200);
    assert_eq!(log[0]["event"], "alert.triggered");
    {
        let got = got.lock().unwrap();
        assert_eq!(got.len(), 2);
        let (headers, body) = &got[1];
        assert_eq!(headers["x-plantd-event"], "alert.triggered");
        let sig = headers["x-plantd-signature"].to_str().unwrap();
        let (t, v1) = sig
            .strip_prefix("t=")
            .and_then(|s| s.split_once(",v1="))
            .unwrap();
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(format!("{t}.{body}").as_bytes());
        assert_eq!(v1, hex::encode(mac.finalize().into_bytes()), "signature");
        assert!((Timestamp::now().unix_seconds() - t.parse::<i64>().unwrap()).abs() < 60);
        let payload: Value = serde_json::from_str(body).unwrap();
        assert_eq!(payload["event"], "alert.triggered");
        assert_eq!(payload["data"]["rule_name"], "Hook me");
        assert_eq!(payload["id"], log[0]["id"]);
    }
    // Acknowledged is not subscribed; resolved is.
    let alert = &alerts(&app, "").await[0];
    let id = alert["id"].as_str().unwrap();
    app.post(&format!("/alerts/{id}/acknowledge"), k, json!({}))
        .await
        .expect(200);
    app.post(&format!("/alerts/{id}/resolve"), k, json!({}))
        .await
        .expect(200);
    let log = wait_deliveries(&app, &hook_id, |d| {
        d.len() == 2 && d.iter().all(|x| x["status"] == "delivered")
    })
    .await;
    assert_eq!(log[0]["event"], "alert.resolved");
    app.delete(&format!("/webhooks/{hook_id}"), k)
        .await
        .expect(204);
    assert_eq!(
        app.get(&format!("/webhooks/{hook_id}/deliveries"), k)
            .await
            .expect(404)
            .code(),
        "not_found"
    );
}

async fn wait_deliveries(
    app: &TestApp,
    hook_id: &str,
    done: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let log = app
            .get(&format!("/webhooks/{hook_id}/deliveries"), &app.admin_key)
            .await
            .expect(200)
            .json["data"]
            .as_array()
            .unwrap()
            .clone();
        if done(&log) {
            return log;
        }
        assert!(std::time::Instant::now() < deadline, "deliveries: {log:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
