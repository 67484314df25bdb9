//! Alert rules and alerts over HTTP: validation, evaluation of ingested points in event time,
//! the alert lifecycle, and alert events on the live stream.

use plantd_model::Timestamp;
use plantd_test_support::stream::next_of_type;
use plantd_test_support::{TestApp, spawn_app};
use serde_json::{Value, json};

async fn source(app: &TestApp) -> String {
    app.post(
        "/data-sources",
        &app.admin_key,
        json!({"name": "PLC", "type": "modbus", "enabled": false, "config": {"host": "plc.invalid"}}),
    )
    .await
    .expect(201)
    .id()
}

async fn rule(app: &TestApp, body: Value) -> String {
    app.post("/alert-rules", &app.admin_key, body)
        .await
        .expect(201)
        .id()
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
    let r = app
        .post(
            "/telemetry",
            &app.admin_key,
            json!({"data_source_id": ds, "data": data}),
        )
        .await
        .expect(200);
    // Where the time went: the write, then the alert rules (both before the answer).
    let timing = r.header("server-timing").unwrap_or_default().to_string();
    let stage = |name: &str| {
        timing
            .split(", ")
            .find_map(|p| p.strip_prefix(name))
            .and_then(|d| d.parse::<f64>().ok())
    };
    assert!(
        stage("write;dur=").is_some_and(|d| d >= 0.0) && stage("alerts;dur=").is_some(),
        "Server-Timing: {timing:?}"
    );
}

async fn alerts(app: &TestApp, query: &str) -> Vec<Value> {
    app.get(&format!("/alerts?{query}"), &app.admin_key)
        .await
        .expect(200)
        .items()
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
    let mut ws = app
        .subscribe(json!({"type": "subscribe", "asset_id": "Pump_01"}))
        .await;
    // The subscription's confirmation first.
    next_of_type(&mut ws, "subscribed").await;
    ingest(&app, &ds, t0, &[(1, 1.0), (2, 9.0)]).await;
    let event = next_of_type(&mut ws, "alert").await;
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
    let hook_id = hook.id();
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
    let log = app
        .wait_list(&format!("/webhooks/{hook_id}/deliveries"), |d| {
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
    let log = app
        .wait_list(&format!("/webhooks/{hook_id}/deliveries"), |d| {
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

/// Email through a real SMTP server (python aiosmtpd requiring STARTTLS with a certificate of
/// this run's own CA, and AUTH; its first answer is a transient 451) and Slack posts to a local
/// HTTP server (first answer 500): both retried and delivered, with what they say checked;
/// channels without settings are logged as failed with the reason; acknowledging tells nobody;
/// a Slack URL that is gone (404) fails at once. Needs `PLANTD_TEST_PYTHON_SMTP` (a python3
/// with aiosmtpd, set by `.ci/run`) and openssl; skipped where absent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn email_and_slack_notifications_are_sent_retried_and_logged() {
    let Some(python) = plantd_test_support::peer(
        "PLANTD_TEST_PYTHON_SMTP",
        "to a python3 with aiosmtpd installed",
    ) else {
        return;
    };
    let sink = plantd_test_support::SmtpSink::start(&python, true);
    let smtp = sink.config.clone();
    let app = plantd_test_support::spawn_app_with(plantd_app::AppConfig {
        smtp: Some(smtp),
        ..Default::default()
    })
    .await;
    let k = app.admin_key.as_str();
    let settings = app
        .get("/organizations/current/notifications", k)
        .await
        .expect(200);
    assert_eq!(
        settings.json["data"],
        json!({"email_recipients": [], "slack_webhook_url": null, "email_configured": true, "updated_at": null})
    );
    for (body, field) in [
        (json!({"email_recipients": ["nope"]}), "email_recipients[0]"),
        (
            json!({"email_recipients": ["a@b.example", "A@b.example"]}),
            "email_recipients[1]",
        ),
        (json!({"slack_webhook_url": "ftp://x"}), "slack_webhook_url"),
    ] {
        let r = app
            .put("/organizations/current/notifications", k, body)
            .await
            .expect(400);
        assert_eq!(r.json["error"]["details"][0]["field"], field, "{}", r.text);
    }
    let reader = app.key(&[plantd_model::Scope::ReadAlerts]).await;
    app.get("/organizations/current/notifications", &reader)
        .await
        .expect(403);
    app.get("/notifications", &reader).await.expect(200);
    app.get("/notifications?channel=sms", k).await.expect(400);

    // Nothing set yet: the alert's notifications fail at once, saying why.
    let ds = source(&app).await;
    rule(
        &app,
        json!({"name": "Vibration high", "severity": "critical", "data_source_id": ds,
               "notifications": ["email", "slack"],
               "condition": {"tag_name": "Vibration_X", "operator": "gt", "value": 7.0, "duration_seconds": 0}}),
    )
    .await;
    let t0 = t0();
    ingest(&app, &ds, t0, &[(0, 9.0)]).await;
    let log = app.wait_list("/notifications", |l| l.len() == 2).await;
    for n in &log {
        assert_eq!(n["status"], "failed", "{n}");
        assert_eq!(n["attempts"], 0);
        assert_eq!(n["event"], "alert.triggered");
    }
    let email = log.iter().find(|n| n["channel"] == "email").unwrap();
    assert!(
        email["last_error"]
            .as_str()
            .unwrap()
            .starts_with("no email recipients"),
        "{email}"
    );
    let slack = log.iter().find(|n| n["channel"] == "slack").unwrap();
    assert!(
        slack["last_error"]
            .as_str()
            .unwrap()
            .starts_with("no Slack webhook URL"),
        "{slack}"
    );

    // Settings made: the resolution goes out by both channels, each on its second attempt.
    let (slack_url, slack_got) = receiver().await;
    let r = app
        .put(
            "/organizations/current/notifications",
            k,
            json!({"email_recipients": ["ops@plant.example", " Maint@Plant.example"], "slack_webhook_url": slack_url}),
        )
        .await
        .expect(200);
    assert_eq!(
        r.json["data"]["email_recipients"],
        json!(["ops@plant.example", "maint@plant.example"])
    );
    let alert_id = alerts(&app, "").await[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    app.post(&format!("/alerts/{alert_id}/resolve"), k, json!({}))
        .await
        .expect(200);
    let log = app
        .wait_list("/notifications?status=delivered", |l| l.len() == 2)
        .await;
    for n in &log {
        assert_eq!(n["event"], "alert.resolved", "{n}");
        assert_eq!(n["attempts"], 2, "{n}");
        assert_eq!(n["alert_id"], alert_id.as_str());
    }
    let email = log.iter().find(|n| n["channel"] == "email").unwrap();
    assert_eq!(email["target"], "ops@plant.example, maint@plant.example");
    assert_eq!(
        email["subject"],
        "[plantd] Resolved: Vibration high on Pump_01"
    );
    let slack = log.iter().find(|n| n["channel"] == "slack").unwrap();
    assert!(
        !slack["target"].as_str().unwrap().contains("/hook"),
        "the Slack URL's path is not shown: {slack}"
    );
    let mail = sink.messages();
    assert_eq!(mail.len(), 1, "{mail:?}");
    assert_eq!(mail[0]["mail_from"], "alerts@plant.example");
    assert_eq!(
        mail[0]["rcpt_tos"],
        json!(["ops@plant.example", "maint@plant.example"])
    );
    assert_eq!(mail[0]["tls"], true, "STARTTLS was used");
    assert_eq!(mail[0]["authenticated"], true);
    let data = mail[0]["data"].as_str().unwrap();
    assert!(
        data.contains("Subject: [plantd] Resolved: Vibration high on Pump_01"),
        "{data}"
    );
    assert!(data.contains("Condition:   Vibration_X gt 7"), "{data}");
    // Threaded under the (never delivered) triggered message's id.
    assert!(
        data.contains(&format!(
            "In-Reply-To: <{alert_id}.triggered@plant.example>"
        )),
        "{data}"
    );
    assert!(
        data.contains(&format!("Message-ID: <{alert_id}.resolved@plant.example>")),
        "{data}"
    );
    assert!(data.contains("Value:       9 at "), "{data}");
    {
        let got = slack_got.lock().unwrap();
        assert_eq!(got.len(), 2, "a 500, then the delivery");
        let body: Value = serde_json::from_str(&got[1].1).unwrap();
        let text = body["text"].as_str().unwrap();
        assert!(
            text.starts_with(":white_check_mark: *CRITICAL* resolved: *Vibration high*"),
            "{text}"
        );
    }

    // The condition breaks and holds again: a new alert, told at the first attempt.
    ingest(&app, &ds, t0, &[(10, 1.0), (20, 9.5)]).await;
    let log = app
        .wait_list("/notifications?status=delivered&channel=email", |l| {
            l.len() == 2
        })
        .await;
    assert_eq!(log[0]["event"], "alert.triggered");
    assert_eq!(log[0]["attempts"], 1);
    assert_eq!(
        log[0]["subject"],
        "[plantd] CRITICAL alert triggered: Vibration high on Pump_01"
    );
    app.wait_list("/notifications?status=delivered&channel=slack", |l| {
        l.len() == 2
    })
    .await;
    let mail = sink.messages();
    assert_eq!(mail.len(), 2);
    assert!(
        mail[1]["data"]
            .as_str()
            .unwrap()
            .contains("Value:       9.5 at "),
        "{}",
        mail[1]
    );

    // Acknowledging tells nobody; a Slack URL that is gone fails without retries.
    let alert_id = alerts(&app, "status=active").await[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    app.post(
        &format!("/alerts/{alert_id}/acknowledge"),
        k,
        json!({"note": "on it"}),
    )
    .await
    .expect(200);
    app.put(
        "/organizations/current/notifications",
        k,
        json!({"slack_webhook_url": slack_url.replace("/hook", "/gone")}),
    )
    .await
    .expect(200);
    app.post(&format!("/alerts/{alert_id}/resolve"), k, json!({}))
        .await
        .expect(200);
    let gone = app
        .wait_list("/notifications?channel=slack&status=failed", |l| {
            l.len() == 2
        })
        .await;
    assert_eq!(gone[0]["attempts"], 1, "{gone:?}");
    assert!(
        gone[0]["last_error"]
            .as_str()
            .unwrap()
            .contains("Slack answered 404"),
        "{gone:?}"
    );
    let all = app
        .wait_list(
            &format!("/notifications?alert_id={alert_id}&channel=email"),
            |l| l.len() == 2 && l.iter().all(|n| n["status"] == "delivered"),
        )
        .await;
    assert!(
        all.iter().all(|n| n["event"] != "alert.acknowledged"),
        "{all:?}"
    );
    let mail = sink.messages();
    assert_eq!(mail.len(), 3);
    assert!(
        mail[2]["data"]
            .as_str()
            .unwrap()
            .contains("Note:        on it")
    );
}

/// `POST /v1/alerts`: an alert from outside the rule engine is validated, deduplicated by its
/// key while open, and follows the lifecycle of every alert: the stream, webhooks, the
/// notification log, acknowledge and resolve, audit, scopes and tenancy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alerts_from_outside_the_rule_engine_follow_the_lifecycle() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    let ds = source(&app).await;
    let (_, other_key) = app.other_org("Other", plantd_model::Tier::Enterprise).await;
    let other_ds = source_of(&app, &other_key).await;
    for (body, field) in [
        (
            json!({"severity": "critical", "asset_id": "Pump_01"}),
            "title",
        ),
        (
            json!({"severity": "urgent", "asset_id": "Pump_01", "title": "x"}),
            "severity",
        ),
        (
            json!({"severity": "info", "asset_id": "Pump,01", "title": "x"}),
            "asset_id",
        ),
        (
            json!({"severity": "info", "asset_id": "P", "title": "x", "tags": ["a", "a"]}),
            "tags[1]",
        ),
        (
            json!({"severity": "info", "asset_id": "P", "title": "x", "notifications": ["pager"]}),
            "notifications[0]",
        ),
        (
            json!({"severity": "info", "asset_id": "P", "title": "x", "triggered_at": "2999-01-01T00:00:00Z"}),
            "triggered_at",
        ),
        (
            json!({"severity": "info", "asset_id": "P", "title": "x", "data_source_id": other_ds}),
            "data_source_id",
        ),
        (
            json!({"severity": "info", "asset_id": "P", "title": "x", "rule_id": "r"}),
            "rule_id",
        ),
    ] {
        let r = app.post("/alerts", k, body).await.expect(400);
        assert_eq!(r.json["error"]["details"][0]["field"], field, "{}", r.text);
    }

    // Subscribers: a webhook (its first answer is 500), the stream, the email channel (no SMTP
    // relay here: the notification is logged as failed, with the reason).
    let (url, got) = receiver().await;
    app.post(
        "/webhooks",
        k,
        json!({"url": url, "events": ["alert.triggered", "alert.resolved"]}),
    )
    .await
    .expect(201);
    let mut ws = app
        .subscribe(json!({"type": "subscribe", "asset_id": "Pump_07"}))
        .await;
    next_of_type(&mut ws, "subscribed").await;

    let body = json!({
        "severity": "warning", "asset_id": "Pump_07", "message": "Bearing noise reported\nby the gateway",
        "source": "edge-gw-7", "data_source_id": ds, "tag_name": "Noise", "value": 81.5,
        "tags": ["line-2", "bearing"], "notifications": ["email"], "dedup_key": "gw7-bearing"
    });
    let r = app.post("/alerts", k, body.clone()).await.expect(201);
    let alert = r.json["data"].clone();
    let id = alert["id"].as_str().unwrap().to_string();
    assert_eq!(alert["status"], "active");
    assert_eq!(
        alert["title"], "Bearing noise reported",
        "the message's first line"
    );
    assert_eq!(alert["source"], "edge-gw-7");
    assert_eq!(alert["rule_id"], Value::Null);
    assert_eq!(alert["tags"], json!(["line-2", "bearing"]));
    assert_eq!(alert["notifications"], json!(["email"]));
    assert_eq!(alert["value"], 81.5);
    // The endpoint limit of SPEC 8.5 binds for this (unlimited) organization.
    assert_eq!(r.header("x-ratelimit-limit"), Some("100"));

    // The same key while the alert is open: the open alert, nothing new.
    let again = app.post("/alerts", k, body.clone()).await.expect(200);
    assert_eq!(again.json["data"]["id"], id.as_str());
    assert_eq!(alerts(&app, "status=active").await.len(), 1);

    let event = next_of_type(&mut ws, "alert").await;
    assert_eq!(event["event"], "alert.triggered");
    assert_eq!(event["data"]["id"], id.as_str());
    let notes = app
        .wait_list(&format!("/notifications?alert_id={id}"), |l| l.len() == 1)
        .await;
    assert_eq!(notes[0]["status"], "failed");
    assert!(
        notes[0]["last_error"]
            .as_str()
            .unwrap()
            .contains("email is not configured on this server"),
        "{notes:?}"
    );
    assert!(
        notes[0]["subject"]
            .as_str()
            .unwrap()
            .contains("WARNING alert triggered: Bearing noise reported on Pump_07")
    );

    // Another organization sees nothing of it and cannot move it.
    assert!(
        app.get("/alerts", &other_key).await.expect(200).json["data"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    app.post(&format!("/alerts/{id}/resolve"), &other_key, json!({}))
        .await
        .expect(404);
    // Scopes: reading alerts does not create them.
    let reader = app.key(&[plantd_model::Scope::ReadAlerts]).await;
    app.post("/alerts", &reader, body.clone()).await.expect(403);
    let writer = app.key(&[plantd_model::Scope::WriteAlerts]).await;
    app.post(
        "/alerts",
        &writer,
        json!({"severity": "info", "asset_id": "Tank_3", "title": "Level sensor replaced"}),
    )
    .await
    .expect(201);

    // The lifecycle of every alert.
    app.post(
        &format!("/alerts/{id}/acknowledge"),
        k,
        json!({"note": "crew on site"}),
    )
    .await
    .expect(200);
    let resolved = app
        .post(&format!("/alerts/{id}/resolve"), k, json!({}))
        .await
        .expect(200);
    assert_eq!(resolved.json["data"]["status"], "resolved");
    app.post(&format!("/alerts/{id}/resolve"), k, json!({}))
        .await
        .expect(409);
    assert_eq!(
        next_of_type(&mut ws, "alert").await["event"],
        "alert.acknowledged"
    );
    assert_eq!(
        next_of_type(&mut ws, "alert").await["event"],
        "alert.resolved"
    );
    // Resolved: the key is free again.
    let fresh = app.post("/alerts", k, body).await.expect(201);
    assert_ne!(fresh.json["data"]["id"], id.as_str());

    // The webhook got the trigger (on its second attempt) and the resolution, signed.
    let hooks = app.wait_list("/webhooks", |_| true).await;
    let hook_id = hooks[0]["id"].as_str().unwrap().to_string();
    let delivered = |d: &[Value], event: &str| {
        d.iter().any(|x| {
            x["payload"]["data"]["id"] == id.as_str()
                && x["event"] == event
                && x["status"] == "delivered"
        })
    };
    app.wait_list(&format!("/webhooks/{hook_id}/deliveries"), |d| {
        delivered(d, "alert.triggered") && delivered(d, "alert.resolved")
    })
    .await;
    assert!(got.lock().unwrap().len() >= 3);

    // Audited as alert.create, refused or not.
    let audit = app
        .get("/audit/logs?event_types=alert.create&per_page=100", k)
        .await
        .expect(200);
    let outcomes = |o: &str| {
        audit.json["data"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["outcome"] == o)
            .count()
    };
    assert_eq!(
        (outcomes("success"), outcomes("failure")),
        (4, 9),
        "{}",
        audit.text
    );
}

/// A data source of the organization whose admin key is `key`.
async fn source_of(app: &TestApp, key: &str) -> String {
    app.post(
        "/data-sources",
        key,
        json!({"name": "PLC", "type": "modbus", "enabled": false, "config": {"host": "plc.invalid"}}),
    )
    .await
    .expect(201)
    .id()
}
