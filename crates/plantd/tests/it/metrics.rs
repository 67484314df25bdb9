//! `GET /metrics`: the server's own metrics in Prometheus' text format, read by a scrape as
//! Prometheus would, and checked by `promtool check metrics` where it is installed
//! (`PLANTD_TEST_PROMTOOL`, as `.ci/run` sets).

use plantd_test_support::spawn_app;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_scraped_in_prometheus_text() {
    let app = spawn_app().await;
    let at = plantd_model::Timestamp::from_millis(plantd_model::Timestamp::now().millis() - 1_000);
    app.post(
        "/telemetry",
        &app.admin_key,
        json!({"data": [{"asset_id": "M", "tag_name": "T", "value": 1.0, "timestamp": at.to_rfc3339()}]}),
    )
    .await
    .expect(200);
    app.get("/data-sources", &app.admin_key).await.expect(200);
    app.get("/no-such-route", &app.admin_key).await.expect(404);
    let _stream = app.open_stream(&app.admin_key).await;

    let r = plantd_test_support::client()
        .get(format!("http://{}/metrics", app.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4"),
        "{:?}",
        r.headers()
    );
    let text = r.text().await.unwrap();
    for expected in [
        "# TYPE plantd_http_requests_total counter",
        "route=\"/v1/telemetry\"",
        "route=\"/v1/data-sources\"",
        "route=\"unmatched\"",
        "status=\"404\"",
        "plantd_http_request_duration_seconds_bucket",
        "plantd_ingest_points_total",
        "plantd_ingest_batches_total",
        "plantd_ingest_queue_batches",
        "plantd_telemetry_log_points",
        "plantd_telemetry_unsealed_blocks",
        "plantd_telemetry_sealer_passes_total",
        "plantd_telemetry_sealer_rewrites_total",
        "plantd_alert_outbox_events",
        "plantd_deliveries_pending{kind=\"webhook\"}",
        "plantd_db_pool_connections{state=\"idle\"}",
        "plantd_connectors{state=\"connected\"}",
        "plantd_stream_clients",
    ] {
        assert!(text.contains(expected), "{expected} missing in:\n{text}");
    }
    if let Some(promtool) = plantd_test_support::peer(
        "PLANTD_TEST_PROMTOOL",
        "to promtool (Debian's prometheus package)",
    ) {
        promtool_accepts(&promtool, &text);
    }
}

/// `promtool check metrics` reads the scrape on its stdin and finds nothing wrong.
fn promtool_accepts(promtool: &str, text: &str) {
    use std::io::Write;
    let mut child = std::process::Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool starts");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The sealer's counters move with its work: a point in a closed window is sealed by a
/// background pass, which `/metrics` then counts; a pass after that rewrites nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_the_sealers_passes_and_rewrites() {
    let app = spawn_app().await;
    let hours_ago = plantd_model::Timestamp::from_millis(
        plantd_model::Timestamp::now().millis() - 3 * 3_600_000,
    );
    app.post(
        "/telemetry",
        &app.admin_key,
        json!({"data": [{"asset_id": "M", "tag_name": "T", "value": 1.0, "timestamp": hours_ago.to_rfc3339()}]}),
    )
    .await
    .expect(200);
    let counter = |text: &str, name: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
    };
    // The sealer passes every few seconds; a minute is far more than it needs.
    let mut seen = None;
    for _ in 0..600 {
        let text = plantd_test_support::client()
            .get(format!("http://{}/metrics", app.addr))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let passes = counter(&text, "plantd_telemetry_sealer_passes_total");
        let rewrites = counter(&text, "plantd_telemetry_sealer_rewrites_total");
        match seen {
            None if rewrites >= 1.0 => seen = Some((passes, rewrites)),
            Some((p, r)) if passes >= p + 1.0 => {
                assert_eq!(rewrites, r, "nothing was left for a later pass");
                return;
            }
            _ => {}
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the sealer's counters did not move within a minute: {seen:?}");
}
