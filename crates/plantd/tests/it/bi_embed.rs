//! Embedded dashboards (issue 32) over HTTP: guest tokens issued by administrators only while
//! embedding is on, opening their own dashboards' widget data and nothing else (not another
//! dashboard, not the API, nothing once expired), under the `member` role's rules and the
//! token's own clauses; the kiosk page framed only from the organization's allowed origins.

use plantd_app::AppConfig;
use plantd_model::{Scope, Tier, Timestamp};
use plantd_test_support::{TestApp, spawn_app_with};
use serde_json::{Value, json};
use std::time::Duration;

/// 30 points a minute apart, up to now, of `t` on each asset (values 0..29).
async fn ingest_recent(app: &TestApp, key: &str, assets: &[&str]) {
    let now = Timestamp::now().millis();
    let mut points = Vec::new();
    for a in assets {
        for i in 0..30_i64 {
            points.push(json!({"asset_id": a, "tag_name": "t", "value": i as f64,
                "timestamp": Timestamp::from_millis(now - (29 - i) * 60_000 - 1_000).to_rfc3339()}));
        }
    }
    app.post("/telemetry", key, json!({"data": points}))
        .await
        .expect(200);
}

fn layout() -> Value {
    json!({"columns": 12,
    "variables": [{"name": "pump", "label": "Pump", "type": "asset", "default": "pump-1", "options": ["pump-1", "pump-2"]}],
    "widgets": [
        {"id": "chosen", "type": "stat", "title": "Chosen pump", "x": 0, "y": 8, "w": 4, "h": 2,
         "query": {"asset_id": "$pump", "tags": ["t"]}},
        {"id": "trend", "type": "line_chart", "title": "Pump 1", "x": 0, "y": 0, "w": 8, "h": 4,
         "query": {"asset_id": "pump-1", "tags": ["t"], "range": "1h"}},
        {"id": "now", "type": "stat", "title": "Pump 1 now", "x": 8, "y": 0, "w": 4, "h": 2,
         "query": {"asset_id": "pump-1", "tags": ["t"]}},
        {"id": "other", "type": "table", "title": "Pump 2", "x": 8, "y": 2, "w": 4, "h": 2,
         "query": {"asset_id": "pump-2", "tags": ["t"]}},
        {"id": "day", "type": "line_chart", "title": "Pump 2 today", "x": 0, "y": 4, "w": 6, "h": 3,
         "query": {"asset_id": "pump-2", "tags": ["t"], "range": "24h", "aggregation": "max"}},
        {"id": "alerts", "type": "alert_list", "title": "Open alerts", "x": 6, "y": 4, "w": 6, "h": 3},
        {"id": "note", "type": "text", "title": "", "x": 0, "y": 7, "w": 12, "h": 1, "text": "Line 3"}
    ]})
}

fn widget<'a>(data: &'a Value, id: &str) -> &'a Value {
    data["widgets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["id"] == id)
        .unwrap_or_else(|| panic!("no widget {id} in {data}"))
}

/// The points of a widget's first series.
fn points(data: &Value, id: &str) -> usize {
    widget(data, id)["series"][0]["points"]
        .as_array()
        .map_or(0, Vec::len)
}

fn latest(data: &Value, id: &str) -> Value {
    widget(data, id)["latest"][0]["value"].clone()
}

async fn token(app: &TestApp, key: &str, body: Value) -> String {
    let r = app
        .post("/bi-embed/guest-token", key, body)
        .await
        .expect(200);
    r.json["data"]["token"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guest_tokens_open_only_their_dashboard_under_their_rules_until_they_expire() {
    let app = spawn_app_with(AppConfig {
        // Long enough for the steps below on a loaded machine; the end waits it out.
        guest_token_ttl: Duration::from_secs(20),
        ..AppConfig::default()
    })
    .await;
    let k = app.admin_key.clone();
    ingest_recent(&app, &k, &["pump-1", "pump-2"]).await;
    let d1 = app
        .post(
            "/dashboards",
            &k,
            json!({"name": "Pumps", "layout": layout()}),
        )
        .await
        .expect(201)
        .id();
    let d2 = app
        .post(
            "/dashboards",
            &k,
            json!({"name": "Boilers", "layout": layout()}),
        )
        .await
        .expect(201)
        .id();

    // Off until an administrator turns it on.
    let r = app.get("/bi-embed/dashboards", &k).await.expect(403);
    assert!(r.text.contains("bi_embed_enabled"), "{}", r.text);
    app.post("/bi-embed/guest-token", &k, json!({"dashboard_id": d1}))
        .await
        .expect(403);
    let r = app
        .put(
            "/bi/config",
            &k,
            json!({"bi_embed_enabled": true, "embed_allowed_origins": ["portal.example.com"]}),
        )
        .await
        .expect(400);
    assert_eq!(
        r.json["error"]["details"][0]["field"],
        "embed_allowed_origins[0]"
    );
    app.put("/bi/config", &k, json!({"bi_embed_enabled": true, "embed_allowed_origins": ["https://portal.example.com", "http://10.0.0.5:8080/"]}))
        .await
        .expect(200);
    let listed = app
        .get("/bi-embed/dashboards", &k)
        .await
        .expect(200)
        .items();
    let mut names: Vec<_> = listed.iter().map(|d| d["name"].as_str().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["Boilers", "Pumps"]);
    assert_eq!(listed[0].as_object().unwrap().len(), 2, "{{id, name}}");

    // Administrators only; bad requests name their field.
    let reader = app.key(&[Scope::ReadTelemetry]).await;
    app.post(
        "/bi-embed/guest-token",
        &reader,
        json!({"dashboard_id": d1}),
    )
    .await
    .expect(403);
    for (body, field) in [
        (json!({"dashboard_id": "no-such"}), "dashboard_id"),
        (
            json!({"dashboard_id": d1, "resources": [{"type": "chart", "id": d2}]}),
            "resources[0].type",
        ),
        (
            json!({"dashboard_id": d1, "rls": [{"clause": "value > 1"}]}),
            "rls[0].clause",
        ),
        (
            json!({"dashboard_id": d1, "rls": [{"table": "users", "clause": "true"}]}),
            "rls[0].table",
        ),
        (
            json!({"dashboard_id": d1, "rls": [{"table": "telemetry", "clause": "nope = 1"}]}),
            "rls[0].clause",
        ),
    ] {
        let r = app
            .post("/bi-embed/guest-token", &k, body)
            .await
            .expect(400);
        assert_eq!(r.json["error"]["details"][0]["field"], field, "{}", r.text);
    }

    // A token with no clause of its own sees both pumps.
    let before = Timestamp::now().millis();
    let issued = app
        .post(
            "/bi-embed/guest-token",
            &k,
            json!({"dashboard_id": d1, "resources": [{"type": "dashboard", "id": d1}]}),
        )
        .await
        .expect(200);
    let open = issued.json["data"]["token"].as_str().unwrap().to_string();
    let expires = Timestamp::parse(issued.json["data"]["expires_at"].as_str().unwrap()).unwrap();
    let after = Timestamp::now().millis();
    // The token's expiry is in whole seconds (its `exp`).
    assert!(
        (before / 1_000 * 1_000 + 20_000..=after + 20_000).contains(&expires.millis()),
        "expires at {} for a token asked for between {before} and {after}",
        expires.millis()
    );
    let data = app
        .get(&format!("/bi-embed/embed/{d1}/data"), &open)
        .await
        .expect(200)
        .json["data"]
        .clone();
    assert_eq!(data["name"], "Pumps");
    assert!(points(&data, "trend") >= 25, "{data}");
    assert_eq!(latest(&data, "now"), json!(29.0));
    assert_eq!(latest(&data, "other"), json!(29.0));
    assert!(points(&data, "day") >= 1, "{data}");
    assert_eq!(widget(&data, "note")["text"], "Line 3");
    // Variables: the default, or the one the address chooses among those offered.
    assert_eq!(widget(&data, "chosen")["asset_id"], "pump-1");
    assert_eq!(
        data["variables"],
        json!([{"name": "pump", "label": "Pump", "value": "pump-1", "options": ["pump-1", "pump-2"]}])
    );
    let chosen = app
        .get(&format!("/bi-embed/embed/{d1}/data?var-pump=pump-2"), &open)
        .await
        .expect(200)
        .json["data"]
        .clone();
    assert_eq!(widget(&chosen, "chosen")["asset_id"], "pump-2");
    assert_eq!(latest(&chosen, "chosen"), json!(29.0));
    for (query, field) in [
        ("var-pump=pump-9", "var-pump"),
        ("var-other=x", "var-other"),
    ] {
        let r = app
            .get(&format!("/bi-embed/embed/{d1}/data?{query}"), &open)
            .await
            .expect(400);
        assert_eq!(r.json["error"]["details"][0]["field"], field, "{}", r.text);
    }
    assert!(widget(&data, "alerts").get("error").is_none(), "{data}");

    // The token's clause (no table: every table a dashboard reads) hides pump 2 everywhere.
    let scoped = token(
        &app,
        &k,
        json!({"dashboard_id": d1, "rls": [{"clause": "asset_id = 'pump-1'"}]}),
    )
    .await;
    let data = app
        .get(&format!("/bi-embed/embed/{d1}/data"), &scoped)
        .await
        .expect(200)
        .json["data"]
        .clone();
    assert_eq!(latest(&data, "now"), json!(29.0));
    assert_eq!(latest(&data, "other"), Value::Null, "{data}");
    assert_eq!(points(&data, "day"), 0, "{data}");

    // The member role's rules apply to guests as well.
    app.post("/bi/rls/rules", &k, json!({"name": "no pump 1", "table": "telemetry", "clause": "asset_id <> 'pump-1'", "roles": ["member"]}))
        .await
        .expect(201);
    let data = app
        .get(&format!("/bi-embed/embed/{d1}/data"), &open)
        .await
        .expect(200)
        .json["data"]
        .clone();
    assert_eq!(points(&data, "trend"), 0, "{data}");
    assert_eq!(latest(&data, "now"), Value::Null);
    assert_eq!(latest(&data, "other"), json!(29.0));

    // The kiosk page, by ?token=, framed only by the allowed origins.
    let page = app
        .call(
            reqwest::Method::GET,
            &format!("/bi-embed/embed/{d1}?token={open}"),
            None,
            None,
        )
        .await
        .expect(200);
    let csp = page.header("content-security-policy").unwrap();
    assert!(
        csp.contains("frame-ancestors 'self' https://portal.example.com http://10.0.0.5:8080;"),
        "{csp}"
    );
    assert!(page.header("x-frame-options").is_none());
    assert_eq!(page.header("referrer-policy"), Some("no-referrer"));
    assert!(page.text.contains("Pumps") && page.text.contains("/assets/embed.js"));
    // The origins a new token may come from (postMessage), as the page's script reads them.
    assert!(
        page.text
            .contains("data-origins=\"https://portal.example.com http://10.0.0.5:8080\""),
        "{}",
        page.text
    );

    // Nothing else: another dashboard, the API, another organization's dashboard.
    app.get(&format!("/bi-embed/embed/{d2}/data"), &open)
        .await
        .expect(403);
    app.call(
        reqwest::Method::GET,
        &format!("/bi-embed/embed/{d2}?token={open}"),
        None,
        None,
    )
    .await
    .expect(403);
    for path in [
        "/telemetry/latest?asset_id=pump-1",
        "/dashboards",
        "/bi/query/history",
    ] {
        app.get(path, &open).await.expect(401);
    }
    app.post("/bi/query/execute", &open, json!({"sql": "SELECT 1"}))
        .await
        .expect(401);
    let (_b_org, b) = app.other_org("B Corp", Tier::Enterprise).await;
    app.put("/bi/config", &b, json!({"bi_embed_enabled": true}))
        .await
        .expect(200);
    let r = app
        .post("/bi-embed/guest-token", &b, json!({"dashboard_id": d1}))
        .await
        .expect(400);
    assert_eq!(r.json["error"]["details"][0]["field"], "dashboard_id");
    // No token, a forged one, an access key in its place.
    app.call(
        reqwest::Method::GET,
        &format!("/bi-embed/embed/{d1}/data"),
        None,
        None,
    )
    .await
    .expect(401);
    let mut forged: Vec<String> = open.split('.').map(str::to_string).collect();
    forged[1] = forged[1].chars().rev().collect();
    app.get(&format!("/bi-embed/embed/{d1}/data"), &forged.join("."))
        .await
        .expect(401);
    app.get(&format!("/bi-embed/embed/{d1}/data"), &k)
        .await
        .expect(401);

    // Turning embedding off closes every token at once.
    app.put("/bi/config", &k, json!({"bi_embed_enabled": false}))
        .await
        .expect(200);
    app.get(&format!("/bi-embed/embed/{d1}/data"), &open)
        .await
        .expect(403);
    app.put("/bi/config", &k, json!({"bi_embed_enabled": true}))
        .await
        .expect(200);

    // Expired: refused everywhere.
    let left = expires.millis() - Timestamp::now().millis();
    tokio::time::sleep(Duration::from_millis(left.max(0) as u64 + 1_200)).await;
    let r = app
        .get(&format!("/bi-embed/embed/{d1}/data"), &open)
        .await
        .expect(401);
    assert!(r.text.contains("expired"), "{}", r.text);
    let page = app
        .call(
            reqwest::Method::GET,
            &format!("/bi-embed/embed/{d1}?token={open}"),
            None,
            None,
        )
        .await
        .expect(401);
    assert_eq!(page.code(), "authentication_error");
    assert!(page.text.contains("expired"), "{}", page.text);
    // A browser (an iframe) is shown the refusal as a page.
    let shown = app
        .client
        .get(format!("{}/bi-embed/embed/{d1}?token={open}", app.base))
        .header("accept", "text/html,application/xhtml+xml")
        .send()
        .await
        .unwrap();
    assert_eq!(shown.status(), 401);
    let text = shown.text().await.unwrap();
    assert!(
        text.contains("<p class=\"error\" role=\"alert\">the guest token has expired"),
        "{text}"
    );
}
