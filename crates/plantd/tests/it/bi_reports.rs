//! BI reports (issue 32) over HTTP: the routes and their refusals, tenancy, a run by hand and
//! a run by schedule mailed through a real SMTP server (aiosmtpd) with a PDF whose text
//! `pdftotext` (poppler-utils) reads back, a CSV under the creator's row-level security, and a
//! scheduled run made once by two nodes sharing the database.

use base64::Engine;
use plantd_app::AppConfig;
use plantd_model::{Scope, Tier, Timestamp};
use plantd_test_support::{SmtpSink, TestApp, peer, spawn_app, spawn_app_with, wait_for};
use serde_json::{Value, json};
use std::time::Duration;

async fn ingest_recent(app: &TestApp, key: &str) {
    let now = Timestamp::now().millis();
    let mut points = Vec::new();
    for a in ["pump-1", "pump-2"] {
        for i in 0..30_i64 {
            points.push(json!({"asset_id": a, "tag_name": "t", "value": i as f64,
                "timestamp": Timestamp::from_millis(now - (29 - i) * 60_000 - 1_000).to_rfc3339()}));
        }
    }
    app.post("/telemetry", key, json!({"data": points}))
        .await
        .expect(200);
}

async fn dashboard(app: &TestApp, key: &str) -> String {
    let layout = json!({"columns": 12, "widgets": [
        {"id": "trend", "type": "line_chart", "title": "Pump 1 pressure", "x": 0, "y": 0, "w": 8, "h": 4,
         "query": {"asset_id": "pump-1", "tags": ["t"], "range": "1h"}},
        {"id": "other", "type": "table", "title": "Pump 2 now", "x": 8, "y": 0, "w": 4, "h": 4,
         "query": {"asset_id": "pump-2", "tags": ["t"]}},
        {"id": "alerts", "type": "alert_list", "title": "Open alerts", "x": 0, "y": 4, "w": 6, "h": 3},
        {"id": "note", "type": "text", "title": "Shift notes", "x": 6, "y": 4, "w": 6, "h": 3, "text": "Seal on pump 2 replaced"}
    ]});
    app.post(
        "/dashboards",
        key,
        json!({"name": "Pump station", "layout": layout}),
    )
    .await
    .expect(201)
    .id()
}

fn field(r: &plantd_test_support::Reply) -> String {
    r.json["error"]["details"][0]["field"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_routes_refusals_and_tenancy() {
    let app = spawn_app().await;
    let k = app.admin_key.clone();
    let d = dashboard(&app, &k).await;
    let good = json!({"name": "Morning pumps", "dashboard_id": d, "schedule": "0 6 * * MON-FRI",
        "format": "csv", "recipients": ["ops@plant.example"]});
    for (change, wanted) in [
        (json!({"schedule": "0 6 * * * *"}), "schedule"),
        (json!({"schedule": "0 25 * * *"}), "schedule"),
        (json!({"recipients": ["not an address"]}), "recipients[0]"),
        (json!({"recipients": []}), "recipients"),
        (json!({"dashboard_id": "no-such"}), "dashboard_id"),
        (json!({"format": "xlsx"}), "format"),
        (json!({"name": ""}), "name"),
    ] {
        let mut body = good.clone();
        for (k2, v) in change.as_object().unwrap() {
            body[k2] = v.clone();
        }
        let r = app.post("/bi/reports", &k, body).await.expect(400);
        assert_eq!(field(&r), wanted, "{}", r.text);
    }
    let reader = app.key(&[Scope::ReadTelemetry]).await;
    app.post("/bi/reports", &reader, good.clone())
        .await
        .expect(403);
    app.get("/bi/reports", &reader).await.expect(403);

    let created = app.post("/bi/reports", &k, good.clone()).await.expect(201);
    let report = created.json["data"].clone();
    let id = report["id"].as_str().unwrap().to_string();
    assert_eq!(report["format"], "csv");
    assert_eq!(report["enabled"], true);
    assert_eq!(report["dashboard_id"], d);
    let next = Timestamp::parse(report["next_run_at"].as_str().unwrap()).unwrap();
    assert!(next > Timestamp::now());
    assert!(
        report["next_run_at"]
            .as_str()
            .unwrap()
            .contains("T06:00:00"),
        "{report}"
    );
    assert!(report.get("run_as").is_none(), "{report}");
    assert_eq!(
        app.get("/bi/reports", &k).await.expect(200).items().len(),
        1
    );
    assert_eq!(
        app.get(&format!("/bi/reports/{id}"), &k)
            .await
            .expect(200)
            .json["data"],
        report
    );
    let off = app
        .put(
            &format!("/bi/reports/{id}"),
            &k,
            json!({"enabled": false, "format": "pdf"}),
        )
        .await
        .expect(200);
    assert_eq!(off.json["data"]["next_run_at"], Value::Null);
    assert_eq!(off.json["data"]["format"], "pdf");
    let r = app
        .put(
            &format!("/bi/reports/{id}"),
            &k,
            json!({"schedule": "sometimes"}),
        )
        .await
        .expect(400);
    assert_eq!(field(&r), "schedule");

    // Another organization sees none of it.
    let (_b_org, b) = app.other_org("B Corp", Tier::Enterprise).await;
    assert!(
        app.get("/bi/reports", &b)
            .await
            .expect(200)
            .items()
            .is_empty()
    );
    for path in [
        format!("/bi/reports/{id}"),
        format!("/bi/reports/{id}/runs"),
    ] {
        app.get(&path, &b).await.expect(404);
    }
    app.post(&format!("/bi/reports/{id}/run"), &b, json!({}))
        .await
        .expect(404);
    app.put(&format!("/bi/reports/{id}"), &b, json!({"enabled": true}))
        .await
        .expect(404);
    app.delete(&format!("/bi/reports/{id}"), &b)
        .await
        .expect(404);
    let r = app.post("/bi/reports", &b, good.clone()).await.expect(400);
    assert_eq!(field(&r), "dashboard_id");

    // Without an SMTP relay a run is recorded as failed, with the reason.
    let run = app
        .post(&format!("/bi/reports/{id}/run"), &k, json!({}))
        .await
        .expect(200);
    assert_eq!(run.json["data"]["status"], "error", "{}", run.text);
    assert_eq!(run.json["data"]["trigger"], "manual");
    assert!(
        run.json["data"]["error"]
            .as_str()
            .unwrap()
            .contains("[smtp]")
    );
    let runs = app
        .get(&format!("/bi/reports/{id}/runs"), &k)
        .await
        .expect(200)
        .items();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0], run.json["data"]);

    app.delete(&format!("/bi/reports/{id}"), &k)
        .await
        .expect(204);
    app.get(&format!("/bi/reports/{id}"), &k).await.expect(404);
    app.get(&format!("/bi/reports/{id}/runs"), &k)
        .await
        .expect(404);
}

/// The attachment of a mail the sink accepted: its file name and bytes.
fn attachment(mail: &Value) -> (String, Vec<u8>) {
    let data = mail["data"].as_str().unwrap();
    let at = data
        .find("Content-Disposition: attachment")
        .unwrap_or_else(|| panic!("no attachment in {data}"));
    let part = &data[at..];
    let name = part
        .split("filename=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap_or_default()
        .to_string();
    let body_start = part
        .find("\r\n\r\n")
        .map(|i| i + 4)
        .or_else(|| part.find("\n\n").map(|i| i + 2))
        .unwrap();
    let body: String = part[body_start..]
        .lines()
        .take_while(|l| !l.starts_with("--"))
        .collect::<Vec<_>>()
        .join("");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(body.trim())
        .unwrap_or_else(|e| panic!("attachment is not base64 ({e}): {body:.200}"));
    (name, bytes)
}

fn pdf_text(pdftotext: &str, pdf: &[u8]) -> String {
    let dir = plantd_test_support::temp_dir("plantd-report-pdf");
    let file = dir.join("report.pdf");
    std::fs::write(&file, pdf).unwrap();
    let out = std::process::Command::new(pdftotext)
        .arg("-layout")
        .arg(&file)
        .arg("-")
        .output()
        .expect("run pdftotext");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_are_mailed_by_hand_and_by_schedule_once_across_nodes() {
    let Some(python) = peer(
        "PLANTD_TEST_PYTHON_SMTP",
        "to a python3 with aiosmtpd installed",
    ) else {
        return;
    };
    let Some(pdftotext) = peer(
        "PLANTD_TEST_PDFTOTEXT",
        "to pdftotext (Debian's poppler-utils)",
    ) else {
        return;
    };
    let sink = SmtpSink::start(&python, false);
    let config = || AppConfig {
        smtp: Some(sink.config.clone()),
        report_poll_interval: Duration::from_millis(300),
        ..AppConfig::default()
    };
    let app = spawn_app_with(config()).await;
    let k = app.admin_key.clone();
    ingest_recent(&app, &k).await;
    let d = dashboard(&app, &k).await;

    // By hand, as PDF, to two recipients.
    let id = app
        .post(
            "/bi/reports",
            &k,
            json!({"name": "Morning pumps", "dashboard_id": d, "schedule": "0 6 * * *",
                "format": "pdf", "recipients": ["ops@plant.example", "lead@plant.example"]}),
        )
        .await
        .expect(201)
        .id();
    let run = app
        .post(&format!("/bi/reports/{id}/run"), &k, json!({}))
        .await
        .expect(200);
    let run = run.json["data"].clone();
    assert_eq!(run["status"], "success", "{run}");
    assert_eq!(
        run["recipients"],
        json!(["ops@plant.example", "lead@plant.example"])
    );
    let mails = sink.messages();
    assert_eq!(mails.len(), 1);
    assert_eq!(
        mails[0]["rcpt_tos"],
        json!(["ops@plant.example", "lead@plant.example"])
    );
    assert!(
        mails[0]["data"]
            .as_str()
            .unwrap()
            .contains("Subject: Morning pumps (Pump station)")
    );
    let (name, pdf) = attachment(&mails[0]);
    assert!(
        name.starts_with("Morning-pumps-") && name.ends_with(".pdf"),
        "{name}"
    );
    assert!(pdf.starts_with(b"%PDF-"));
    assert_eq!(run["size_bytes"], json!(pdf.len()));
    let text = pdf_text(&pdftotext, &pdf);
    for wanted in [
        "Morning pumps",
        "Dashboard: Pump station",
        "Time range:",
        "Generated:",
        "Pump 1 pressure (pump-1)",
        "Pump 2 now (pump-2)",
        "29.00",
        "Open alerts",
        "No open alerts.",
        "Seal on pump 2 replaced",
    ] {
        assert!(
            text.contains(wanted),
            "{wanted:?} not in the PDF's text:\n{text}"
        );
    }

    // As CSV, under the creator's rules (the admin key acts for the organization's owner).
    app.post(
        "/bi/rls/rules",
        &k,
        json!({"name": "no pump 2", "table": "telemetry", "clause": "asset_id <> 'pump-2'", "roles": ["owner"]}),
    )
    .await
    .expect(201);
    let csv_id = app
        .post(
            "/bi/reports",
            &k,
            json!({"name": "Pumps CSV", "dashboard_id": d, "schedule": "0 6 * * *",
                "format": "csv", "recipients": ["ops@plant.example"]}),
        )
        .await
        .expect(201)
        .id();
    app.post(&format!("/bi/reports/{csv_id}/run"), &k, json!({}))
        .await
        .expect(200);
    let mails = sink.messages();
    let (name, csv) = attachment(&mails[1]);
    assert!(name.ends_with(".csv"), "{name}");
    let csv = String::from_utf8(csv).unwrap();
    assert!(csv.starts_with(
        "widget_id,widget_title,widget_type,asset_id,tag,timestamp,value,quality,detail"
    ));
    assert!(
        csv.lines().filter(|l| l.starts_with("trend,")).count() >= 25,
        "{csv}"
    );
    let hidden: Vec<&str> = csv.lines().filter(|l| l.starts_with("other,")).collect();
    assert_eq!(hidden, ["other,Pump 2 now,table,pump-2,t,,,,"], "{csv}");

    // By schedule: the run due a minute ago (missed while no node ran) is made once, by one of
    // two nodes polling the shared database.
    let node_b = app.another_node_with(config()).await;
    app.delete(&format!("/bi/reports/{csv_id}"), &k)
        .await
        .expect(204);
    let due = Timestamp::now().millis() - 60_000;
    let pool = sqlx::AnyPool::connect(&app.database_url).await.unwrap();
    sqlx::query("UPDATE bi_reports SET next_run_at = $1 WHERE id = $2")
        .bind(due)
        .bind(id.clone())
        .execute(&pool)
        .await
        .unwrap();
    let scheduled = wait_for("the scheduled run", 30, || async {
        let runs = app
            .get(&format!("/bi/reports/{id}/runs"), &k)
            .await
            .expect(200)
            .items();
        runs.into_iter()
            .find(|r| r["trigger"] == "schedule" && r["status"] != "running")
    })
    .await;
    assert_eq!(scheduled["status"], "success", "{scheduled}");
    assert_eq!(
        Timestamp::parse(scheduled["scheduled_for"].as_str().unwrap())
            .unwrap()
            .millis(),
        due
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let runs = app
        .get(&format!("/bi/reports/{id}/runs"), &k)
        .await
        .expect(200)
        .items();
    assert_eq!(
        runs.iter().filter(|r| r["trigger"] == "schedule").count(),
        1,
        "{runs:?}"
    );
    assert_eq!(sink.messages().len(), 3);
    let report = app.get(&format!("/bi/reports/{id}"), &k).await.expect(200);
    let next = Timestamp::parse(report.json["data"]["next_run_at"].as_str().unwrap()).unwrap();
    assert!(
        next > Timestamp::now(),
        "the next run is after now: {}",
        report.text
    );

    // A run its node never finished (it stopped mid-run) is recorded as failed.
    let started = Timestamp::now().millis() - 3 * 3_600_000;
    sqlx::query(
        "INSERT INTO bi_report_runs (id, org_id, report_id, trigger_kind, scheduled_for, status, error, format, \
         size_bytes, recipients, started_at, finished_at) \
         VALUES ('cut-off', $1, $2, 'schedule', NULL, 'running', NULL, 'pdf', NULL, '[]', $3, NULL)",
    )
    .bind(app.org_id.clone())
    .bind(id.clone())
    .bind(started)
    .execute(&pool)
    .await
    .unwrap();
    let cut = wait_for("the cut-off run marked failed", 30, || async {
        let runs = app
            .get(&format!("/bi/reports/{id}/runs"), &k)
            .await
            .expect(200)
            .items();
        runs.into_iter()
            .find(|r| r["id"] == "cut-off" && r["status"] == "error")
    })
    .await;
    assert!(
        cut["error"].as_str().unwrap().contains("interrupted"),
        "{cut}"
    );
    node_b.stop().await;
}
