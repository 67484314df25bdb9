//! BI SQL (issue 32) over HTTP: every table scoped to the caller's organization, row-level
//! security inside the engine (also against a query that would make hidden rows fail), the
//! refusals (syntax with position, statements that are not queries, another database), the
//! row, time and concurrency limits, history, saved queries and the configuration.

use plantd_app::operator;
use plantd_model::org::Role;
use plantd_model::{Scope, Tier, Timestamp};
use plantd_test_support::{TestApp, spawn_app};
use serde_json::{Value, json};

use crate::identity::session;

const HOUR: i64 = 3_600_000;

fn base() -> i64 {
    (Timestamp::now().millis() - 2 * 86_400_000).div_euclid(HOUR) * HOUR
}

/// `n` points a minute apart of each asset's tag `t`, values 0..n.
async fn ingest(app: &TestApp, key: &str, assets: &[&str], n: i64) {
    let mut points = Vec::new();
    for a in assets {
        for i in 0..n {
            points.push(json!({"asset_id": a, "tag_name": "t", "value": i as f64,
                "timestamp": Timestamp::from_millis(base() + i * 60_000).to_rfc3339()}));
        }
    }
    app.post("/telemetry", key, json!({"data": points}))
        .await
        .expect(200);
}

async fn sql(app: &TestApp, key: &str, sql: &str) -> Value {
    let r = app
        .post("/bi/query/execute", key, json!({"sql": sql}))
        .await
        .expect(200);
    r.json["data"].clone()
}

/// A member's session in the test organization.
async fn member(app: &TestApp, email: &str) -> String {
    operator::create_user(
        &app.store,
        Some(&app.org_id),
        email,
        "station-7-valve",
        Role::Member,
    )
    .await
    .expect("member");
    session(app, email, "station-7-valve").await
}

fn field_of(r: &plantd_test_support::Reply) -> String {
    r.json["error"]["details"][0]["field"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_table_answers_only_the_callers_organization() {
    let app = spawn_app().await;
    let a = app.admin_key.clone();
    let (_b_org, b) = app.other_org("B Corp", Tier::Enterprise).await;
    ingest(&app, &a, &["pump-1", "pump-2"], 30).await;
    ingest(&app, &b, &["pump-1", "b-only"], 10).await;
    for (key, name) in [(&a, "A PLC"), (&b, "B PLC")] {
        app.post(
            "/data-sources",
            key,
            json!({"name": name, "type": "opcua", "config": {"endpoint": "opc.tcp://plc.invalid:4840", "username": "op", "password": "hunter2"}}),
        )
        .await
        .expect(201);
    }

    let out = sql(&app, &a, "SELECT asset_id, count(*) AS n, sum(value) AS s FROM telemetry GROUP BY asset_id ORDER BY asset_id").await;
    assert_eq!(out["columns"], json!(["asset_id", "n", "s"]));
    assert_eq!(
        out["rows"],
        json!([["pump-1", 30, 435.0], ["pump-2", 30, 435.0]])
    );
    assert_eq!(out["row_count"], 2);
    assert!(out["execution_time_ms"].is_u64());
    assert!(out.get("truncated").is_none());
    let out = sql(
        &app,
        &b,
        "SELECT asset_id, count(*) FROM telemetry GROUP BY asset_id ORDER BY asset_id",
    )
    .await;
    assert_eq!(out["rows"], json!([["b-only", 10], ["pump-1", 10]]));

    // Every table, from both sides: B's names never reach A.
    for table in [
        "telemetry",
        "telemetry_1m",
        "telemetry_1h",
        "telemetry_1d",
        "alerts",
        "alert_rules",
        "data_sources",
        "devices",
    ] {
        let out = sql(&app, &a, &format!("SELECT * FROM {table}")).await;
        let text = out.to_string();
        assert!(
            !text.contains("b-only") && !text.contains("B PLC"),
            "{table}: {text}"
        );
    }
    // Rollups are exact: the minute table's counts and sums add up to the raw points'.
    let m = sql(&app, &a, "SELECT sum(count), sum(sum), min(min), max(max) FROM telemetry_1m WHERE asset_id = 'pump-1'").await;
    assert_eq!(m["rows"], json!([[30, 435.0, 0.0, 29.0]]));
    let h = sql(&app, &a, "SELECT sum(count) FROM telemetry_1h").await;
    assert_eq!(h["rows"], json!([[60]]));
    // The README's query: rollups of the last days, by peak.
    let r = sql(&app, &a, "SELECT asset_id, tag_name, sum(sum) / sum(count) AS average, max(max) AS peak FROM telemetry_1h \
        WHERE bucket > now() - INTERVAL '3 days' GROUP BY asset_id, tag_name ORDER BY peak DESC LIMIT 10").await;
    assert_eq!(r["rows"].as_array().map(Vec::len), Some(2), "{r}");
    // Timestamps come back as RFC 3339; filters on time narrow the scan and still hold.
    let t = sql(&app, &a, &format!(
        "SELECT timestamp, value, quality FROM telemetry WHERE asset_id = 'pump-2' AND timestamp >= TIMESTAMP '{}' ORDER BY timestamp LIMIT 2",
        Timestamp::from_millis(base() + 28 * 60_000).to_rfc3339()
    )).await;
    assert_eq!(
        t["rows"][0],
        json!([
            Timestamp::from_millis(base() + 28 * 60_000).to_rfc3339(),
            28.0,
            "good"
        ])
    );
    assert_eq!(t["row_count"], 2);
    // No secret is a column.
    let ds = sql(&app, &a, "SELECT * FROM data_sources").await;
    assert!(!ds.to_string().contains("hunter2"), "{ds}");
    assert_eq!(ds["rows"][0][1], "A PLC");
    // The only database is plantd; it may be named.
    let r = app
        .post(
            "/bi/query/execute",
            &a,
            json!({"sql": "SELECT 1", "database": "postgres"}),
        )
        .await
        .expect(400);
    assert_eq!(field_of(&r), "database");
    app.post(
        "/bi/query/execute",
        &a,
        json!({"sql": "SELECT count(*) FROM plantd.public.telemetry", "database": "plantd"}),
    )
    .await
    .expect(200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_queries_run_and_refusals_say_why() {
    let app = spawn_app().await;
    let a = app.admin_key.clone();
    let r = app
        .post("/bi/query/execute", &a, json!({"sql": "SELEC 1"}))
        .await
        .expect(400);
    assert_eq!(r.code(), "validation_error");
    assert_eq!(field_of(&r), "sql");
    assert!(r.text.contains("Line: 1, Column: 1"), "{}", r.text);
    assert!(
        r.text.contains("sql parser error: Expected"),
        "the parser's words: {}",
        r.text
    );
    for bad in [
        "CREATE EXTERNAL TABLE x STORED AS CSV LOCATION '/etc/passwd'",
        "DROP TABLE telemetry",
        "INSERT INTO telemetry VALUES (now(), 'a', 't', 1, 'good')",
        "SET datafusion.execution.batch_size = 1",
        "SELECT 1; SELECT 2",
        "SELECT * FROM nowhere",
        "SELECT nothing FROM telemetry",
        "SELECT repeat('x', 2000000000)",
        "",
    ] {
        let r = app
            .post("/bi/query/execute", &a, json!({"sql": bad}))
            .await
            .expect(400);
        assert_eq!(field_of(&r), "sql", "{bad}: {}", r.text);
    }
    // A runtime error of the user's own query is the user's: a 400, not a 500.
    let r = app
        .post("/bi/query/execute", &a, json!({"sql": "SELECT 1 / 0"}))
        .await
        .expect(400);
    assert_eq!(field_of(&r), "sql");
    // Members run SQL; the configuration and rules are for administrators.
    let reader = app.key(&[Scope::ReadTelemetry]).await;
    sql(&app, &reader, "SELECT 1").await;
    app.get("/bi/config", &reader).await.expect(403);
    app.get("/bi/rls/rules", &reader).await.expect(403);
    let writer = app.key(&[Scope::WriteTelemetry]).await;
    app.post("/bi/query/execute", &writer, json!({"sql": "SELECT 1"}))
        .await
        .expect(403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_filter_inside_the_engine_for_the_roles_they_name() {
    let app = spawn_app().await;
    let a = app.admin_key.clone();
    ingest(&app, &a, &["pump-1", "pump-2", "pump-3"], 5).await;
    let mia = member(&app, "mia@example.com").await;
    let owner = session(&app, "owner@example.com", "station-7-valve").await;

    // A clause is checked against the table when saved.
    for (body, field) in [
        (
            json!({"name": "x", "table": "telemetry", "clause": "nope = 1"}),
            "clause",
        ),
        (
            json!({"name": "x", "table": "telemetry", "clause": "value +"}),
            "clause",
        ),
        (
            json!({"name": "x", "table": "telemetry", "clause": "value + 1"}),
            "clause",
        ),
        (
            json!({"name": "x", "table": "secrets", "clause": "true"}),
            "table",
        ),
        (
            json!({"name": "x", "table": "telemetry", "clause": "true", "roles": []}),
            "roles",
        ),
    ] {
        let r = app
            .post("/bi/rls/rules", &a, body.clone())
            .await
            .expect(400);
        assert_eq!(field_of(&r), field, "{body}: {}", r.text);
    }
    let rule = app
        .post(
            "/bi/rls/rules",
            &a,
            json!({"name": "members see pumps 1 and 2", "table": "telemetry",
                   "clause": "asset_id IN ('pump-1', 'pump-2')", "roles": ["member"]}),
        )
        .await
        .expect(201);
    assert_eq!(rule.json["data"]["roles"], json!(["member"]));
    let second = app
        .post(
            "/bi/rls/rules",
            &a,
            json!({"name": "and not pump 2", "table": "telemetry", "clause": "asset_id <> 'pump-2'"}),
        )
        .await
        .expect(201);
    assert_eq!(
        second.json["data"]["roles"],
        json!(["owner", "admin", "member"])
    );

    let count = "SELECT asset_id, count(*) FROM telemetry GROUP BY asset_id ORDER BY asset_id";
    // The member is under both rules (ANDed): pump 1 only, in raw points and everything
    // computed from them.
    assert_eq!(sql(&app, &mia, count).await["rows"], json!([["pump-1", 5]]));
    // Also where the query reads none of the clause's columns (the scan reads them for the
    // clause only), or no column at all.
    for (q, rows) in [
        ("SELECT count(*) FROM telemetry", json!([[5]])),
        (
            "SELECT sum(value), max(timestamp) FROM telemetry WHERE value >= 1",
            json!([[
                10.0,
                Timestamp::from_millis(base() + 4 * 60_000).to_rfc3339()
            ]]),
        ),
        (
            "SELECT quality, count(*) FROM telemetry GROUP BY quality",
            json!([["good", 5]]),
        ),
    ] {
        assert_eq!(sql(&app, &mia, q).await["rows"], rows, "{q}");
    }
    // The owner is under the second rule only, and so is an API key acting for the owner
    // (the operator's key does).
    let owners = json!([["pump-1", 5], ["pump-3", 5]]);
    assert_eq!(sql(&app, &owner, count).await["rows"], owners);
    assert_eq!(sql(&app, &a, count).await["rows"], owners);
    // The user's own SQL cannot get around it: a filter that fails on a hidden row never
    // sees one, nor does a self-join or a subquery.
    for q in [
        "SELECT count(*) FROM telemetry WHERE 1 / (CASE WHEN asset_id = 'pump-3' THEN 0 ELSE 1 END) = 1",
        "SELECT count(*) FROM telemetry x JOIN telemetry y ON x.timestamp = y.timestamp WHERE y.asset_id = 'pump-3'",
        "SELECT count(*) FROM (SELECT * FROM telemetry) t WHERE t.asset_id <> 'pump-1'",
    ] {
        let out = sql(&app, &mia, q).await;
        let n = out["rows"][0][0].as_i64().unwrap();
        assert!(n == 5 || n == 0, "{q}: {out}");
    }
    // The test shows what a role sees, with the conditions applied.
    let t = app
        .post("/bi/rls/test", &a, json!({"sql": count, "role": "member"}))
        .await
        .expect(200);
    assert_eq!(
        t.json["data"]["effective_filter"],
        "telemetry: (asset_id <> 'pump-2') AND (asset_id IN ('pump-1', 'pump-2'))"
    );
    assert_eq!(t.json["data"]["rows"], json!([["pump-1", 5]]));
    let rule_id = rule.id();
    let t = app
        .post(
            "/bi/rls/test",
            &a,
            json!({"sql": count, "rule_id": rule_id}),
        )
        .await
        .expect(200);
    assert_eq!(t.json["data"]["row_count"], 2);
    let r = app
        .post("/bi/rls/test", &a, json!({"role": "member"}))
        .await
        .expect(400);
    assert_eq!(field_of(&r), "sql");
    // A changed rule applies at once; a deleted one no more.
    app.put(
        &format!("/bi/rls/rules/{rule_id}"),
        &a,
        json!({"clause": "asset_id = 'pump-3'"}),
    )
    .await
    .expect(200);
    assert_eq!(sql(&app, &mia, count).await["rows"], json!([["pump-3", 5]]));
    app.delete(&format!("/bi/rls/rules/{rule_id}"), &a)
        .await
        .expect(204);
    app.delete(&format!("/bi/rls/rules/{}", second.id()), &a)
        .await
        .expect(204);
    assert_eq!(
        sql(&app, &mia, count).await["rows"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    let (_, b) = app.other_org("B Corp", Tier::Enterprise).await;
    app.delete(&format!("/bi/rls/rules/{rule_id}"), &b)
        .await
        .expect(404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_time_and_concurrency_limits_hold_and_history_keeps_every_run() {
    let app = spawn_app().await;
    let a = app.admin_key.clone();
    let config = app.get("/bi/config", &a).await.expect(200);
    assert_eq!(
        config.json["data"],
        json!({"bi_embed_enabled": false, "sql_lab_enabled": true, "chart_builder_enabled": true,
               "max_concurrent_queries": 5, "query_timeout_seconds": 300, "row_limit": 10000,
               "embed_allowed_origins": []})
    );
    for (body, field) in [
        (
            json!({"max_concurrent_queries": 0}),
            "max_concurrent_queries",
        ),
        (
            json!({"query_timeout_seconds": 3601}),
            "query_timeout_seconds",
        ),
        (json!({"row_limit": 0}), "row_limit"),
    ] {
        let r = app.put("/bi/config", &a, body).await.expect(400);
        assert_eq!(field_of(&r), field);
    }
    app.put(
        "/bi/config",
        &a,
        json!({"row_limit": 5, "query_timeout_seconds": 1, "max_concurrent_queries": 1}),
    )
    .await
    .expect(200);

    let many = "SELECT * FROM generate_series(1, 100)";
    let out = sql(&app, &a, many).await;
    assert_eq!(
        (out["row_count"].as_u64(), out["truncated"].as_bool()),
        (Some(5), Some(true))
    );
    let r = app
        .post("/bi/query/execute", &a, json!({"sql": many, "limit": 3}))
        .await
        .expect(200);
    assert_eq!(r.json["data"]["row_count"], 3);
    let r = app
        .post(
            "/bi/query/execute",
            &a,
            json!({"sql": "SELECT * FROM generate_series(1, 5)", "limit": 50}),
        )
        .await
        .expect(200);
    assert!(r.json["data"].get("truncated").is_none(), "{}", r.text);

    // Past the time limit the query is cancelled; while it runs, the organization's one slot
    // is taken.
    let endless = "SELECT count(*) FROM generate_series(1, 1000000000000) a WHERE a.value % 7 = 3";
    let slow = {
        let client = app.client.clone();
        let url = format!("{}/bi/query/execute", app.base);
        let key = a.clone();
        tokio::spawn(async move {
            client
                .post(url)
                .bearer_auth(key)
                .json(&json!({"sql": endless}))
                .send()
                .await
                .expect("send")
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let busy = app
        .post("/bi/query/execute", &a, json!({"sql": "SELECT 1"}))
        .await
        .expect(429);
    assert_eq!(busy.code(), "rate_limited");
    let cancelled = slow.await.expect("join");
    assert_eq!(cancelled.status().as_u16(), 400);
    let body: Value = cancelled.json().await.expect("json");
    assert!(body.to_string().contains("cancelled"), "{body}");
    // The slot came back.
    sql(&app, &a, "SELECT 1").await;

    // Turned off, execute is refused.
    app.put("/bi/config", &a, json!({"sql_lab_enabled": false}))
        .await
        .expect(200);
    app.post("/bi/query/execute", &a, json!({"sql": "SELECT 1"}))
        .await
        .expect(403);
    app.put("/bi/config", &a, json!({"sql_lab_enabled": true}))
        .await
        .expect(200);

    // History: every run with its outcome, newest first; a member sees only their own.
    let mia = member(&app, "mia@example.com").await;
    sql(&app, &mia, "SELECT 2").await;
    let all = app
        .get("/bi/query/history?per_page=100", &a)
        .await
        .expect(200);
    let runs = all.items();
    assert_eq!(runs[0]["sql"], "SELECT 2");
    assert!(
        runs.iter()
            .any(|r| r["status"] == "timeout" && r["sql"] == endless)
    );
    assert!(
        runs.iter()
            .any(|r| r["status"] == "success" && r["row_count"] == 5)
    );
    let own = app.get("/bi/query/history", &mia).await.expect(200);
    assert_eq!(own.items().len(), 1);
    assert_eq!(own.items()[0]["status"], "success");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saved_queries_belong_to_their_organization() {
    let app = spawn_app().await;
    let a = app.admin_key.clone();
    let r = app
        .post("/bi/query/save", &a, json!({"name": "", "sql": "SELECT 1"}))
        .await
        .expect(400);
    assert_eq!(field_of(&r), "name");
    let r = app
        .post(
            "/bi/query/save",
            &a,
            json!({"name": "x", "sql": "SELECT 1", "database": "other"}),
        )
        .await
        .expect(400);
    assert_eq!(field_of(&r), "database");
    let saved = app
        .post(
            "/bi/query/save",
            &a,
            json!({"name": "pumps", "sql": "SELECT count(*) FROM telemetry", "description": "how many points"}),
        )
        .await
        .expect(201);
    let id = saved.id();
    assert_eq!(saved.json["data"]["database"], "plantd");
    let list = app.get("/bi/query/saved", &a).await.expect(200);
    assert_eq!(list.items().len(), 1);
    let changed = app
        .put(
            &format!("/bi/query/saved/{id}"),
            &a,
            json!({"name": "all points"}),
        )
        .await
        .expect(200);
    assert_eq!(changed.json["data"]["name"], "all points");
    assert_eq!(
        changed.json["data"]["sql"],
        "SELECT count(*) FROM telemetry"
    );

    let (_, b) = app.other_org("B Corp", Tier::Enterprise).await;
    app.get(&format!("/bi/query/saved/{id}"), &b)
        .await
        .expect(404);
    app.put(
        &format!("/bi/query/saved/{id}"),
        &b,
        json!({"name": "mine"}),
    )
    .await
    .expect(404);
    app.delete(&format!("/bi/query/saved/{id}"), &b)
        .await
        .expect(404);
    assert!(
        app.get("/bi/query/saved", &b)
            .await
            .expect(200)
            .items()
            .is_empty()
    );
    app.delete(&format!("/bi/query/saved/{id}"), &a)
        .await
        .expect(204);
    app.get(&format!("/bi/query/saved/{id}"), &a)
        .await
        .expect(404);
}
