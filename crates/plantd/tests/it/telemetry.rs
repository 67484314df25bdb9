//! Telemetry over HTTP: ingest validation and atomicity, replacement, raw and aggregated queries
//! (exact against the raw points, under late, out-of-order and replaced points), latest values,
//! tier and endpoint limits, scopes; retention at the storage level.

use plantd_model::{Scope, Tier, Timestamp};
use plantd_test_support::{TestApp, spawn_app};
use serde_json::{Value, json};
use std::collections::BTreeMap;

const HOUR: i64 = 3_600_000;

fn ts(ms: i64) -> String {
    Timestamp::from_millis(ms).to_rfc3339()
}

/// An hour boundary two days ago: inside the raw retention, with whole days around it.
fn base() -> i64 {
    let now = Timestamp::now().millis();
    (now - 2 * 86_400_000).div_euclid(HOUR) * HOUR
}

fn point(asset: &str, tag: &str, value: f64, at: i64) -> Value {
    json!({"asset_id": asset, "tag_name": tag, "value": value, "timestamp": ts(at)})
}

async fn ingest(app: &TestApp, key: &str, points: Vec<Value>) -> usize {
    let r = app
        .post("/telemetry", key, json!({"data": points}))
        .await
        .expect(200);
    r.json["data"]["accepted"].as_u64().unwrap() as usize
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingest_replace_and_raw_query() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    let b = base();
    let n = ingest(
        &app,
        k,
        vec![
            point("Pump_01", "Flow", 10.0, b + 2000),
            point("Pump_01", "Flow", 11.0, b),
            point("Pump_01", "Speed", 1450.0, b + 1000),
        ],
    )
    .await;
    assert_eq!(n, 3);
    // Same asset, tag and timestamp: replaces (documented), within a batch the last one wins.
    let n = ingest(
        &app,
        k,
        vec![
            point("Pump_01", "Flow", 99.0, b),
            point("Pump_01", "Flow", 12.5, b),
        ],
    )
    .await;
    assert_eq!(n, 1);
    let q = format!(
        "/telemetry?asset_id=Pump_01&start={}&end={}",
        ts(b),
        ts(b + HOUR)
    );
    let r = app.get(&q.replace('+', "%2B"), k).await.expect(200);
    assert_eq!(r.json["meta"]["total"], 3);
    let rows = r.json["data"].as_array().unwrap();
    let seen: Vec<_> = rows
        .iter()
        .map(|p| {
            (
                p["timestamp"].as_str().unwrap().to_string(),
                p["tag_name"].as_str().unwrap().to_string(),
                p["value"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            (ts(b), "Flow".into(), 12.5),
            (ts(b + 1000), "Speed".into(), 1450.0),
            (ts(b + 2000), "Flow".into(), 10.0)
        ]
    );
    assert!(
        rows.iter()
            .all(|p| p["quality"] == "good" && p["asset_id"] == "Pump_01")
    );
    // Pagination and the tag filter.
    let r = app
        .get(
            &format!(
                "/telemetry?asset_id=Pump_01&tag_name=Flow&start={}&end={}&per_page=1&page=2",
                ts(b),
                ts(b + HOUR)
            ),
            k,
        )
        .await
        .expect(200);
    assert_eq!(r.json["meta"]["total"], 2);
    assert_eq!(r.json["data"][0]["value"], 10.0);
    // Default range: the last hour, which holds none of these points.
    assert_eq!(
        app.get("/telemetry?asset_id=Pump_01", k)
            .await
            .expect(200)
            .json["meta"]["total"],
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_atomic_and_names_each_bad_point() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    let b = base();
    let mut points: Vec<Value> = (0..5)
        .map(|i| point("A", "T", i as f64, b + i * 1000))
        .collect();
    points[3]["value"] = json!("high");
    points[4]["timestamp"] = json!("2001-01-01T00:00:00Z");
    let r = app
        .post("/telemetry", k, json!({"data": points}))
        .await
        .expect(400);
    assert_eq!(r.code(), "validation_error");
    let fields: Vec<_> = r.json["error"]["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["field"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(fields, ["data[3].value", "data[4].timestamp"]);
    let q = format!("/telemetry?asset_id=A&start={}&end={}", ts(b), ts(b + HOUR));
    assert_eq!(
        app.get(&q, k).await.expect(200).json["meta"]["total"],
        0,
        "nothing of a refused batch is stored"
    );
    for (body, field) in [
        (json!({"data": []}), "data"),
        (
            json!({"data": [point("", "T", 1.0, b)]}),
            "data[0].asset_id",
        ),
        (
            json!({"data": [point("A", "a,b", 1.0, b)]}),
            "data[0].tag_name",
        ),
        (
            json!({"data": [{"asset_id": "A", "tag_name": "T", "timestamp": ts(b)}]}),
            "data[0].value",
        ),
        (
            json!({"data": [point("A", "T", 1.0, Timestamp::now().millis() + 3 * 86_400_000)]}),
            "data[0].timestamp",
        ),
        (
            json!({"data": [point("A", "T", 1.0, b)], "data_source_id": "nope"}),
            "data_source_id",
        ),
        (
            json!({"data": [{"asset_id": "A", "tag_name": "T", "value": 1, "timestamp": ts(b), "data_source_id": "nope"}]}),
            "data[0].data_source_id",
        ),
        (json!({"points": []}), "points"),
    ] {
        let r = app.post("/telemetry", k, body.clone()).await.expect(400);
        assert!(
            r.json["error"]["details"]
                .as_array()
                .unwrap()
                .iter()
                .any(|d| d["field"] == field),
            "{body}: {}",
            r.text
        );
    }
    let too_many: Vec<Value> = (0..10_001).map(|i| point("A", "T", 1.0, b + i)).collect();
    assert_eq!(
        app.post("/telemetry", k, json!({"data": too_many}))
            .await
            .expect(400)
            .json["error"]["details"][0]["field"],
        "data"
    );
    // A data source links its assets; queries filter by it.
    let ds = app
        .post(
            "/data-sources",
            k,
            json!({"name": "PLC", "type": "modbus", "config": {"host": "h"}}),
        )
        .await
        .expect(201);
    let ds_id = ds.json["data"]["id"].as_str().unwrap();
    app.post(
        "/telemetry",
        k,
        json!({"data_source_id": ds_id, "data": [point("Linked", "T", 1.0, b)]}),
    )
    .await
    .expect(200);
    ingest(&app, k, vec![point("Unlinked", "T", 2.0, b)]).await;
    let r = app
        .get(
            &format!(
                "/telemetry?data_source_id={ds_id}&start={}&end={}",
                ts(b),
                ts(b + HOUR)
            ),
            k,
        )
        .await
        .expect(200);
    assert_eq!(r.json["meta"]["total"], 1);
    assert_eq!(r.json["data"][0]["asset_id"], "Linked");
}

/// Aggregates over HTTP: the query's parameters reach the telemetry store and its rows come back
/// in the envelope, paginated; bad parameters are refused. (Rollup exactness under late,
/// out-of-order and replaced points is tested on the store itself, `tsdb/src/tests.rs`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aggregates_answer_over_http_with_their_parameters() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    let b = base() - 24 * HOUR;
    // Three hours of points every 20 s, sent in two batches, the later carrying earlier times.
    let times: Vec<i64> = (0..540).map(|i| b + 22 * HOUR + i * 20_000).collect();
    let (late, early) = times.split_at(270);
    for chunk in [early, late] {
        ingest(
            &app,
            k,
            chunk
                .iter()
                .map(|&t| point("P", "V", (t % 7) as f64, t))
                .collect(),
        )
        .await;
    }
    let mut hours: BTreeMap<i64, Vec<f64>> = BTreeMap::new();
    for &t in &times {
        hours
            .entry(t.div_euclid(HOUR) * HOUR)
            .or_default()
            .push((t % 7) as f64);
    }
    let q = format!(
        "/telemetry?asset_id=P&aggregation=max&interval=1h&start={}&end={}&per_page=2",
        ts(b),
        ts(b + 48 * HOUR)
    );
    let mut got = Vec::new();
    for page in 1..=2 {
        let r = app.get(&format!("{q}&page={page}"), k).await.expect(200);
        assert_eq!(r.json["meta"]["total"], 3, "{}", r.text);
        got.extend(r.items());
    }
    assert_eq!(got.len(), 3);
    for (row, (hour, values)) in got.iter().zip(&hours) {
        assert_eq!(row["timestamp"].as_str().unwrap(), ts(*hour));
        assert_eq!(row["asset_id"], "P");
        assert_eq!(row["tag_name"], "V");
        assert_eq!(row["count"].as_u64().unwrap() as usize, values.len());
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        assert_eq!(row["value"].as_f64().unwrap(), max);
    }
    // Without an interval: one row per series over the range.
    let r = app
        .get(
            &format!(
                "/telemetry?asset_id=P&aggregation=count&start={}&end={}",
                ts(b),
                ts(b + 48 * HOUR)
            ),
            k,
        )
        .await
        .expect(200);
    assert_eq!(r.json["data"][0]["value"], 540.0, "{}", r.text);
    // Interval without aggregation means avg; bad parameters are refused.
    let r = app
        .get(
            &format!(
                "/telemetry?asset_id=P&interval=1h&start={}&end={}",
                ts(b),
                ts(b + 48 * HOUR)
            ),
            k,
        )
        .await
        .expect(200);
    assert!(r.json["data"][0]["count"].is_u64());
    for bad in [
        "aggregation=median",
        "interval=2h",
        "start=yesterday",
        &format!("start={}&end={}", ts(b + HOUR), ts(b)),
    ] {
        let r = app.get(&format!("/telemetry?asset_id=P&{bad}"), k).await;
        assert_eq!(
            (r.status.as_u16(), r.code()),
            (400, "validation_error"),
            "{bad}: {}",
            r.text
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latest_values_follow_timestamps_not_arrival() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    let b = base();
    assert_eq!(
        app.get("/telemetry/latest?asset_id=M1", k)
            .await
            .expect(200)
            .json["data"],
        json!([])
    );
    ingest(
        &app,
        k,
        vec![
            point("M1", "Temp", 40.0, b + 5000),
            point("M1", "Speed", 1500.0, b),
        ],
    )
    .await;
    let r = app
        .get("/telemetry/latest?asset_id=M1", k)
        .await
        .expect(200);
    assert_eq!(r.json["data"].as_array().unwrap().len(), 2);
    // An older point arriving later does not change the latest; a newer one does.
    ingest(&app, k, vec![point("M1", "Temp", 10.0, b + 1000)]).await;
    ingest(&app, k, vec![point("M1", "Speed", 1600.0, b + 9000)]).await;
    let r = app
        .get("/telemetry/latest?asset_id=M1&tags=Temp,Speed", k)
        .await
        .expect(200);
    let rows = r.json["data"].as_array().unwrap();
    assert_eq!(rows[0]["tag_name"], "Speed");
    assert_eq!(rows[0]["value"], 1600.0);
    assert_eq!(rows[1]["tag_name"], "Temp");
    assert_eq!(rows[1]["value"], 40.0);
    assert_eq!(rows[1]["timestamp"], ts(b + 5000));
    assert_eq!(rows[1]["asset_id"], "M1");
    let only = app
        .get("/telemetry/latest?asset_id=M1&tags=Temp", k)
        .await
        .expect(200);
    assert_eq!(only.json["data"].as_array().unwrap().len(), 1);
    assert_eq!(
        app.get("/telemetry/latest", k).await.expect(400).json["error"]["details"][0]["field"],
        "asset_id"
    );
    assert_eq!(
        app.get("/telemetry/latest?tags=Temp", k)
            .await
            .expect(400)
            .code(),
        "validation_error"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scopes_tier_limits_and_endpoint_limits() {
    let app = spawn_app().await;
    let b = base();
    let reader = app.key(&[Scope::ReadTelemetry]).await;
    let writer = app.key(&[Scope::WriteTelemetry]).await;
    assert_eq!(
        app.post(
            "/telemetry",
            &reader,
            json!({"data": [point("A", "T", 1.0, b)]})
        )
        .await
        .expect(403)
        .code(),
        "authorization_error"
    );
    assert_eq!(
        app.get("/telemetry?asset_id=A", &writer)
            .await
            .expect(403)
            .code(),
        "authorization_error"
    );
    ingest(&app, &writer, vec![point("A", "T", 1.0, b)]).await;

    // Trial: 1,000 points per minute per organization.
    let (_, trial) = app.other_org("Trial Plant", Tier::Trial).await;
    let secs = Timestamp::now().unix_seconds() % 60;
    if secs > 45 {
        tokio::time::sleep(std::time::Duration::from_secs((61 - secs) as u64)).await;
    }
    let batch: Vec<Value> = (0..1000).map(|i| point("A", "T", 1.0, b + i)).collect();
    ingest(&app, &trial, batch).await;
    let r = app
        .post(
            "/telemetry",
            &trial,
            json!({"data": [point("A", "T", 1.0, b - 1)]}),
        )
        .await
        .expect(429);
    assert_eq!(r.code(), "rate_limited");
    assert!(r.json["error"]["retry_after"].as_u64().unwrap() >= 1);
    assert!(
        r.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("telemetry ingestion limit of 1000 per minute"),
        "{}",
        r.text
    );
    let usage = app
        .get("/organizations/current/usage", &trial)
        .await
        .expect(200);
    assert_eq!(usage.json["data"]["telemetry_points"]["current"], 1000);
    assert_eq!(usage.json["data"]["telemetry_points"]["limit"], 10_000);

    // GET /telemetry: 100 requests per minute per key (SPEC 8.5).
    let secs = Timestamp::now().unix_seconds() % 60;
    if secs > 45 {
        tokio::time::sleep(std::time::Duration::from_secs((61 - secs) as u64)).await;
    }
    for _ in 0..100 {
        app.get("/telemetry?asset_id=A", &reader).await.expect(200);
    }
    let r = app.get("/telemetry?asset_id=A", &reader).await.expect(429);
    assert!(
        r.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("endpoint limit of 100 per minute"),
        "{}",
        r.text
    );
    app.get("/telemetry/latest?asset_id=A", &reader)
        .await
        .expect(200);
}

/// `writers` tasks at once, each posting `rounds` batches `batch(writer, round, base)`.
async fn concurrent_writers(
    app: &TestApp,
    writers: i64,
    rounds: i64,
    b: i64,
    batch: fn(i64, i64, i64) -> Vec<Value>,
) {
    let mut tasks = Vec::new();
    for w in 0..writers {
        let (client, url, key) = (
            app.client.clone(),
            format!("{}/telemetry", app.base),
            app.admin_key.clone(),
        );
        tasks.push(tokio::spawn(async move {
            for round in 0..rounds {
                let r = client
                    .post(&url)
                    .bearer_auth(&key)
                    .json(&json!({"data": batch(w, round, b)}))
                    .send()
                    .await
                    .unwrap();
                let status = r.status();
                assert_eq!(status, 200, "{}", r.text().await.unwrap_or_default());
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

/// Concurrent batches sending the same keys: rollups match the raw points that won.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_batches_replacing_each_other_keep_rollups_exact() {
    // Writers send the same keys with different values at once: batches that meet in one group
    // commit replace each other's points, and the rollups must match the raw points that won.
    let app = spawn_app().await;
    let b = base();
    // Each round reaches into new timestamps that the other writers reach too.
    concurrent_writers(&app, 8, 20, b, |w, round, b| {
        (0..90)
            .map(|i| {
                let value = (w * 1000 + round * 7 + i) as f64;
                point("R", "V", value, b + (round * 30 + i) * 1_000)
            })
            .collect()
    })
    .await;
    let k = app.admin_key.as_str();
    let mut values: Vec<(i64, f64)> = Vec::new();
    for page in 1.. {
        let raw = app
            .get(
                &format!(
                    "/telemetry?asset_id=R&start={}&end={}&per_page=100&page={page}",
                    ts(b),
                    ts(b + HOUR)
                ),
                k,
            )
            .await
            .expect(200);
        let rows = raw.json["data"].as_array().unwrap();
        if rows.is_empty() {
            break;
        }
        values.extend(rows.iter().map(|p| {
            let t = plantd_model::Timestamp::parse(p["timestamp"].as_str().unwrap()).unwrap();
            (t.millis(), p["value"].as_f64().unwrap())
        }));
    }
    assert_eq!(values.len(), 19 * 30 + 90);
    for (interval, width) in [("1m", 60_000_i64), ("1h", HOUR), ("1d", 86_400_000)] {
        let mut expected: std::collections::BTreeMap<i64, (f64, f64, f64, f64)> =
            Default::default();
        for (t, v) in &values {
            let e = expected.entry(t - t.rem_euclid(width)).or_insert((
                0.0,
                0.0,
                f64::INFINITY,
                f64::NEG_INFINITY,
            ));
            e.0 += 1.0;
            e.1 += v;
            e.2 = e.2.min(*v);
            e.3 = e.3.max(*v);
        }
        for (agg, pick) in [("count", 0_usize), ("sum", 1), ("min", 2), ("max", 3)] {
            let q = format!(
                "/telemetry?asset_id=R&aggregation={agg}&interval={interval}&start={}&end={}",
                ts(b - 86_400_000),
                ts(b + 86_400_000)
            );
            let r = app.get(&q, k).await.expect(200);
            let got: Vec<(i64, f64)> = r.json["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|row| {
                    let t =
                        plantd_model::Timestamp::parse(row["timestamp"].as_str().unwrap()).unwrap();
                    (t.millis(), row["value"].as_f64().unwrap())
                })
                .collect();
            let want: Vec<(i64, f64)> = expected
                .iter()
                .map(|(t, e)| (*t, [e.0, e.1, e.2, e.3][pick]))
                .collect();
            assert_eq!(got, want, "{agg} per {interval}");
        }
    }
}

/// Concurrent batches into the same series and minute: every rollup still counts every point.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_batches_into_one_bucket_keep_rollups_exact() {
    let app = spawn_app().await;
    let b = base();
    // All writers interleave timestamps inside the same minute.
    concurrent_writers(&app, 8, 25, b, |w, round, b| {
        (0..200)
            .map(|i| point("C", "V", 1.0, b + (round * 1600 + i * 8 + w)))
            .collect()
    })
    .await;
    let k = app.admin_key.as_str();
    let raw = app
        .get(
            &format!(
                "/telemetry?asset_id=C&start={}&end={}&per_page=1",
                ts(b),
                ts(b + HOUR)
            ),
            k,
        )
        .await
        .expect(200);
    assert_eq!(raw.json["meta"]["total"], 40_000);
    for interval in ["1m", "1h", "1d"] {
        let q = format!(
            "/telemetry?asset_id=C&aggregation=count&interval={interval}&start={}&end={}",
            ts(b - 86_400_000),
            ts(b + 86_400_000)
        );
        let r = app.get(&q, k).await.expect(200);
        let total: f64 = r.json["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| row["value"].as_f64().unwrap())
            .sum();
        assert_eq!(total, 40_000.0, "{interval}: {}", r.text);
    }
}

/// Every ingest leaves one audit record: a stored batch commits it with its points, a refused
/// one is recorded as a failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_ingest_is_audited_once() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    let b = base();
    ingest(&app, k, vec![point("Audited", "T", 1.0, b)]).await;
    app.post(
        "/telemetry",
        k,
        json!({"data": [point("Audited", "T", f64::MAX, b), {"asset_id": "x"}]}),
    )
    .await
    .expect(400);
    let r = app
        .get("/audit/logs?event_types=telemetry.ingest", k)
        .await
        .expect(200);
    let records = r.json["data"].as_array().unwrap();
    assert_eq!(records.len(), 2, "{}", r.text);
    // Newest first.
    assert_eq!(records[0]["outcome"], "failure");
    assert_eq!(records[0]["status_code"], 400);
    assert_eq!(records[0]["error_code"], "validation_error");
    assert_eq!(records[1]["outcome"], "success");
    assert_eq!(records[1]["status_code"], 200);
    assert_eq!(records[1]["severity"], "info");
    assert_eq!(records[1]["path"], "/v1/telemetry");
    assert_eq!(records[1]["method"], "POST");
    assert!(
        records[1]["request_id"]
            .as_str()
            .is_some_and(|id| !id.is_empty())
    );
}

/// Values come back bit for bit, whatever their form.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_round_trip_exactly() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    let b = base();
    let values = [
        0.1,
        1.0 / 3.0,
        -0.0,
        5e-324,
        1e-300,
        -2.5e300,
        f64::MAX,
        123_456.789_012_345_67,
        9_007_199_254_740_993.0,
    ];
    let points: Vec<Value> = values
        .iter()
        .enumerate()
        .map(|(i, v)| point("Exact", "V", *v, b + i as i64 * 1000))
        .collect();
    ingest(&app, k, points).await;
    let r = app
        .get(
            &format!(
                "/telemetry?asset_id=Exact&start={}&end={}",
                ts(b),
                ts(b + HOUR)
            ),
            k,
        )
        .await
        .expect(200);
    let got: Vec<u64> = r.json["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["value"].as_f64().unwrap().to_bits())
        .collect();
    // -0 is stored as 0 (documented): SQLite cannot keep the sign of zero.
    let want: Vec<u64> = values.iter().map(|v| (v + 0.0).to_bits()).collect();
    assert_eq!(got, want, "{}", r.text);
}

/// `GET /telemetry/series`: raw points when two per pixel fit, else exact minimum, maximum and
/// average per bucket, at most one bucket per pixel; several tags in one request; another
/// organization sees nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn series_are_downsampled_to_the_chart_width() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    let b = base();
    // 3,000 points a second apart for T, a sawtooth; 10 points for U.
    let points: Vec<Value> = (0..3000)
        .map(|i| point("P", "T", (i % 97) as f64, b + i * 1000))
        .chain((0..10).map(|i| point("P", "U", i as f64, b + i * 60_000)))
        .collect();
    assert_eq!(ingest(&app, k, points).await, 3010);
    let range = format!("start={}&end={}", ts(b), ts(b + HOUR));
    let wide = app
        .get(
            &format!("/telemetry/series?asset_id=P&tags=T,U&{range}&width=1500"),
            k,
        )
        .await
        .expect(200);
    let s = &wide.json["data"]["series"];
    assert_eq!(s[0]["tag_name"], "T");
    assert_eq!(s[0]["downsampled"], false);
    assert_eq!(s[0]["points"], 3000);
    assert_eq!(s[0]["t"].as_array().unwrap().len(), 3000);
    assert_eq!(s[0]["t"][1], b + 1000);
    assert_eq!(s[0]["value"][96], 96.0);
    assert_eq!(s[1]["tag_name"], "U");
    assert_eq!(s[1]["value"].as_array().unwrap().len(), 10);

    // 100 px: 3,600 s / 100 = 36 s, so one-minute buckets (60 of them) with exact extremes.
    let narrow = app
        .get(
            &format!("/telemetry/series?asset_id=P&tags=T&{range}&width=100"),
            k,
        )
        .await
        .expect(200);
    let t = &narrow.json["data"]["series"][0];
    assert_eq!(t["downsampled"], true, "{}", narrow.text);
    assert_eq!(t["bucket_ms"], 60_000);
    assert_eq!(t["points"], 3000);
    let starts = t["t"].as_array().unwrap();
    assert_eq!(starts.len(), 50, "3,000 s of points fill 50 minutes");
    for (m, start) in starts.iter().enumerate() {
        let values: Vec<f64> = (m as i64 * 60..m as i64 * 60 + 60)
            .map(|i| (i % 97) as f64)
            .collect();
        assert_eq!(start.as_i64().unwrap(), b + m as i64 * 60_000);
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let avg = values.iter().sum::<f64>() / 60.0;
        assert_eq!(t["min"][m].as_f64().unwrap(), min);
        assert_eq!(t["max"][m].as_f64().unwrap(), max);
        assert!((t["avg"][m].as_f64().unwrap() - avg).abs() < 1e-9);
    }
    assert!(t.get("value").is_none());

    for (query, field) in [
        ("tags=T", "asset_id"),
        ("asset_id=P", "tags"),
        ("asset_id=P&tags=a,b,c,d,e,f,g,h,i", "tags"),
        ("asset_id=P&tags=T&width=5", "width"),
        (
            "asset_id=P&tags=T&start=2026-01-02T00:00:00Z&end=2026-01-01T00:00:00Z",
            "end",
        ),
    ] {
        let r = app
            .get(&format!("/telemetry/series?{query}"), k)
            .await
            .expect(400);
        assert_eq!(r.json["error"]["details"][0]["field"], field, "{query}");
    }
    let (_, other) = app.other_org("Other plant", Tier::Professional).await;
    let theirs = app
        .get(
            &format!("/telemetry/series?asset_id=P&tags=T&{range}"),
            &other,
        )
        .await
        .expect(200);
    assert_eq!(theirs.json["data"]["series"][0]["points"], 0);
    assert_eq!(theirs.json["data"]["series"][0]["t"], json!([]));
    app.stop().await;
}

/// `GET /telemetry/export`: every raw point of the range in one response (more than one
/// internal chunk), CSV or NDJSON, series by series and each by time, values exact; tag and
/// range filters; refusals name the field; another organization exports nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_streams_every_raw_point() {
    let app = spawn_app().await;
    let k = app.admin_key.as_str();
    let b = base();
    for part in 0..3 {
        let points: Vec<Value> = (part * 8_000..(part + 1) * 8_000)
            .map(|i| point("P", "T", i as f64 / 7.0, b + i * 100))
            .collect();
        assert_eq!(ingest(&app, k, points).await, 8_000);
    }
    let extra: Vec<Value> = (0..5)
        .map(|i| point("P", "U", -(i as f64), b + i * 1000))
        .chain([point("Q", "T", 1.0, b)])
        .collect();
    ingest(&app, k, extra).await;
    let range = format!("start={}&end={}", ts(b), ts(b + HOUR));

    let csv = app
        .get(&format!("/telemetry/export?asset_id=P&{range}"), k)
        .await
        .expect(200);
    assert_eq!(csv.header("content-type"), Some("text/csv; charset=utf-8"));
    let lines: Vec<&str> = csv.text.lines().collect();
    assert_eq!(lines[0], "timestamp,asset_id,tag_name,value,quality");
    assert_eq!(lines.len(), 1 + 24_000 + 5, "every point of P, none of Q");
    for (i, line) in lines[1..24_001].iter().enumerate() {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f[0], ts(b + i as i64 * 100), "T by time");
        assert_eq!((f[1], f[2], f[4]), ("P", "T", "good"));
        assert_eq!(f[3].parse::<f64>().unwrap(), i as f64 / 7.0, "values exact");
    }
    assert!(
        lines[24_001].starts_with(&format!("{},P,U,0,good", ts(b))),
        "{}",
        lines[24_001]
    );

    let nd = app
        .get(
            &format!("/telemetry/export?asset_id=P&tags=U&format=ndjson&{range}"),
            k,
        )
        .await
        .expect(200);
    assert_eq!(nd.header("content-type"), Some("application/x-ndjson"));
    let rows: Vec<Value> = nd
        .text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 5);
    assert_eq!(
        rows[4],
        json!({"timestamp": ts(b + 4000), "asset_id": "P", "tag_name": "U", "value": -4.0, "quality": "good"})
    );

    // The range is half-open, as for queries.
    let part = app
        .get(
            &format!(
                "/telemetry/export?asset_id=P&tags=T&start={}&end={}",
                ts(b + 100),
                ts(b + 400)
            ),
            k,
        )
        .await
        .expect(200);
    assert_eq!(part.text.lines().count(), 1 + 3);

    // A name holding a quote is quoted as CSV requires.
    ingest(&app, k, vec![point("Say \"hi\"", "T", 2.5, b)]).await;
    let quoted = app
        .get(
            &format!("/telemetry/export?asset_id=Say%20%22hi%22&{range}"),
            k,
        )
        .await
        .expect(200);
    let want = format!("{},\"Say \"\"hi\"\"\",T,2.5,good", ts(b));
    assert_eq!(quoted.text.lines().nth(1), Some(want.as_str()));

    for (query, field) in [
        ("tags=T", "asset_id"),
        ("asset_id=P&format=xml", "format"),
        (
            "asset_id=P&start=2026-01-02T00:00:00Z&end=2026-01-01T00:00:00Z",
            "end",
        ),
    ] {
        let r = app
            .get(&format!("/telemetry/export?{query}"), k)
            .await
            .expect(400);
        assert_eq!(r.json["error"]["details"][0]["field"], field, "{query}");
    }
    // Compressed for a client that asks (the stream ends cleanly through the encoder too).
    let gz = app
        .client
        .get(format!(
            "{}/telemetry/export?asset_id=P&tags=U&{range}",
            app.base
        ))
        .bearer_auth(k)
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(gz.status(), 200);
    assert_eq!(gz.headers()["content-encoding"], "gzip");
    assert_eq!(
        &gz.bytes().await.unwrap()[..2],
        &[0x1f, 0x8b],
        "a whole gzip stream"
    );
    let (_, other) = app.other_org("Other plant", Tier::Professional).await;
    let theirs = app
        .get(&format!("/telemetry/export?asset_id=P&{range}"), &other)
        .await
        .expect(200);
    assert_eq!(theirs.text.lines().count(), 1, "the header only");
    app.stop().await;
}
