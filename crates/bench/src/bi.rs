//! `plantd-bench bi`: SQL over 10,000,000 raw points (1,000 series, `A0`..`A99` x `T0`..`T9`, of
//! 10,000 one-minute points, about a week) through `POST /v1/bi/query/execute`, beside DuckDB
//! (PyPI, in memory, the same points made by the same formula) and beside `GET /v1/telemetry`'s
//! aggregation where it answers the same question: (a) the hourly average of one tag over a
//! day, (b) a full scan with a filter on value, (c) a GROUP BY asset over a week (plantd from
//! its hourly rollups, DuckDB from the raw points, the same numbers). p50 of 5 runs each, the
//! server otherwise idle; DuckDB runs after the server has stopped, on the same 2 threads.
//! With `PLANTD_BENCH_PAUSE_FILE=path`, the queries wait, once storage has settled, until that
//! file exists: time to look at the database (the line it prints names it) before they run.

use anyhow::{Result, bail};
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::harness::{Options, Probe, backends, connect, drop_database, post_json, start_server};
use crate::sim::wait_idle;
use crate::telemetry::wait_settled;

const SERIES: i64 = 1_000;
const POINTS: i64 = 10_000;
const MINUTE: i64 = 60_000;
const DAY: i64 = 86_400_000;
const RUNS: usize = 5;

/// The value of point `i` of series `s` (the DuckDB script computes the same).
fn value(s: i64, i: i64) -> f64 {
    ((s * 7 + i) % 1000) as f64 / 10.0
}

fn rfc3339(ms: i64) -> String {
    plantd_model::Timestamp::from_millis(ms).to_rfc3339()
}

/// A time literal's text: RFC 3339 for plantd, `YYYY-MM-DD HH:MM:SS.mmm` (its TIMESTAMP column
/// holds UTC) for DuckDB.
fn literal(ms: i64, duck: bool) -> String {
    let t = rfc3339(ms);
    if duck {
        t.trim_end_matches('Z').replace('T', " ")
    } else {
        t
    }
}

/// The three queries, for plantd and for DuckDB (over a table `t` of the raw points).
fn queries(t0: i64) -> [(&'static str, String, String); 3] {
    let a = |table: &str, duck: bool| {
        format!(
            "SELECT date_trunc('hour', timestamp) AS h, avg(value) AS v FROM {table} WHERE asset_id = 'A7' AND tag_name = 'T3' \
             AND timestamp >= TIMESTAMP '{}' AND timestamp < TIMESTAMP '{}' GROUP BY h ORDER BY h",
            literal(t0 + DAY, duck),
            literal(t0 + 2 * DAY, duck)
        )
    };
    let b = |table: &str| {
        format!("SELECT count(*) AS n, avg(value) AS v FROM {table} WHERE value > 99.5")
    };
    [
        (
            "(a) hourly average of one tag over a day",
            a("telemetry", false),
            a("t", true),
        ),
        ("(b) full scan, filter on value", b("telemetry"), b("t")),
        (
            "(c) GROUP BY asset over a week",
            format!(
                "SELECT asset_id, sum(sum) / sum(count) AS v, max(max) AS hi, sum(count) AS n FROM telemetry_1h \
                 WHERE bucket >= TIMESTAMP '{}' AND bucket < TIMESTAMP '{}' GROUP BY asset_id ORDER BY asset_id",
                literal(t0, false),
                literal(t0 + 7 * DAY, false)
            ),
            format!(
                "SELECT asset_id, avg(value) AS v, max(value) AS hi, count(*) AS n FROM t \
                 WHERE timestamp >= TIMESTAMP '{}' AND timestamp < TIMESTAMP '{}' GROUP BY asset_id ORDER BY asset_id",
                literal(t0, true),
                literal(t0 + 7 * DAY, true)
            ),
        ),
    ]
}

fn p50(mut ms: Vec<f64>) -> f64 {
    ms.sort_by(f64::total_cmp);
    ms[ms.len() / 2]
}

/// Ingests the points, oldest first, 10 minutes of every series a request.
async fn ingest(addr: &str, key: &str, t0: i64) -> Result<f64> {
    let mut sender = connect(addr).await?;
    let started = Instant::now();
    for first in (0..POINTS).step_by(10) {
        let mut body = String::from("{\"data\":[");
        for i in first..first + 10 {
            let ts = rfc3339(t0 + i * MINUTE);
            for s in 0..SERIES {
                if body.len() > 9 {
                    body.push(',');
                }
                let _ = write!(
                    body,
                    "{{\"asset_id\":\"A{}\",\"tag_name\":\"T{}\",\"value\":{},\"timestamp\":\"{ts}\"}}",
                    s / 10,
                    s % 10,
                    value(s, i)
                );
            }
        }
        body.push_str("]}");
        let probe = Probe {
            method: "POST",
            body: Some(("application/json", body.into())),
            ..Probe::get("/v1/telemetry", key)
        };
        let (status, bytes) = probe.call(&mut sender, addr).await?;
        if status != 200 {
            bail!(
                "ingest answered {status}: {}",
                String::from_utf8_lossy(&bytes)
            );
        }
    }
    Ok((SERIES * POINTS) as f64 / started.elapsed().as_secs_f64())
}

/// plantd's p50 of each query through execute, its first run (the scan cache cold), its
/// answer, and (a) through GET /v1/telemetry.
async fn plantd(o: &Options, url: Option<&str>, t0: i64) -> Result<(Vec<Timed>, f64)> {
    let (server, key) = start_server(o, url)?;
    let rate = ingest(&server.addr, &key, t0).await?;
    println!("ingested {} points at {rate:.0} points/s", SERIES * POINTS);
    // The sealer's passes (windows sealed, sparse days compacted, rollups packed) finish
    // before the queries: data at rest, as DuckDB's. Its passes, not the server's CPU, tell
    // (on PostgreSQL, a pass spends most of its time waiting on the database).
    let settled = Instant::now();
    if !wait_settled(&server, Duration::from_secs(1800)).await? {
        println!("the sealer had work left after 1,800 s: the queries run on unsettled storage");
    }
    wait_idle(server.child.id()).await?;
    println!(
        "storage settled and server idle {:.0} s after the last ingest",
        settled.elapsed().as_secs_f64()
    );
    // A mark for a profiler attached to the server (the idle wait before it takes minutes).
    println!("queries start (server pid {})", server.child.id());
    if let Ok(f) = std::env::var("PLANTD_BENCH_PAUSE_FILE") {
        let db = url.unwrap_or("SQLite, in the server's data directory");
        println!("waiting for {f} to exist (database: {db})");
        while !std::path::Path::new(&f).exists() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let mut sender = connect(&server.addr).await?;
    let mut out = Vec::new();
    for (_, sql, _) in queries(t0) {
        let mut ms = Vec::new();
        let mut answer = Value::Null;
        for _ in 0..RUNS {
            let t = Instant::now();
            answer = post_json(
                &mut sender,
                &server.addr,
                "/v1/bi/query/execute",
                &key,
                &json!({"sql": sql}),
                200,
            )
            .await?;
            ms.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        out.push((p50(ms.clone()), ms[0], answer["data"]["rows"].clone()));
    }
    let path = format!(
        "/v1/telemetry?asset_id=A7&tag_name=T3&aggregation=avg&interval=1h&start={}&end={}&per_page=100",
        rfc3339(t0 + DAY),
        rfc3339(t0 + 2 * DAY)
    );
    let mut ms = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        let (status, _) = Probe::get(&path, &key)
            .call(&mut sender, &server.addr)
            .await?;
        if status != 200 {
            bail!("GET /v1/telemetry answered {status}");
        }
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    Ok((out, p50(ms)))
}

/// A query's p50 and first run (ms), and its answer's rows.
type Timed = (f64, f64, Value);

const DUCKDB: &str = r#"
import duckdb, json, sys, time
t0, series, points, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
queries = json.loads(sys.argv[5])
con = duckdb.connect(":memory:")
con.execute("PRAGMA threads=2")
# No progress bar: past 2 s (the load, on a slow machine) DuckDB draws one on stdout,
# before the JSON.
con.execute("PRAGMA disable_progress_bar")
started = time.perf_counter()
con.execute(f"""CREATE TABLE t AS SELECT TIMESTAMP '{t0}' + to_minutes(i) AS timestamp,
  'A' || (s // 10) AS asset_id, 'T' || (s % 10) AS tag_name, ((s * 7 + i) % 1000) / 10.0 AS value
  FROM range({series}) r1(s), range({points}) r2(i)""")
out = {"duckdb": duckdb.__version__, "load_s": time.perf_counter() - started, "queries": []}
for q in queries:
    ms = []
    for _ in range(runs):
        t = time.perf_counter()
        rows = con.execute(q).fetchall()
        ms.append((time.perf_counter() - t) * 1000)
    ms.sort()
    out["queries"].append({"p50_ms": ms[len(ms) // 2], "rows": [[v if isinstance(v, (int, float, str)) or v is None else str(v) for v in r] for r in rows][:3]})
print(json.dumps(out))
"#;

fn duckdb(t0: i64) -> Result<Value> {
    let qs: Vec<String> = queries(t0).into_iter().map(|q| q.2).collect();
    let out = Command::new("python3")
        .arg("-c")
        .arg(DUCKDB)
        .arg(literal(t0, true))
        .args([SERIES.to_string(), POINTS.to_string(), RUNS.to_string()])
        .arg(serde_json::to_string(&qs)?)
        .output()?;
    if !out.status.success() {
        bail!(
            "python3 duckdb failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

pub(crate) async fn run(o: &Options) -> Result<()> {
    let now = plantd_model::Timestamp::now().millis();
    // Within the 7 days of raw retention, ending before now: the hour 167 hours ago.
    let t0 = now.div_euclid(3_600_000) * 3_600_000 - 167 * 3_600_000;
    println!(
        "bi: {} raw points ({SERIES} series x {POINTS} one-minute points from {}); p50 of {RUNS} runs; {} cores",
        SERIES * POINTS,
        rfc3339(t0),
        crate::harness::cores()
    );
    let mut rows = Vec::new();
    for (backend, url) in backends(o) {
        let r = plantd(o, url.as_deref(), t0).await;
        drop_database(url.as_deref(), o.postgres_url.as_deref());
        rows.push((backend, r?));
    }
    let reference = duckdb(t0);
    if let Err(e) = &reference {
        println!("DuckDB skipped: {e}");
    }
    let reference = reference.unwrap_or(Value::Null);
    println!();
    println!(
        "| query | DuckDB {} (in memory) | {} |",
        reference["duckdb"].as_str().unwrap_or("?"),
        rows.iter()
            .map(|(b, _)| format!("plantd {b} (execute) | ratio"))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    println!("|---|---|{}", "---|---|".repeat(rows.len()));
    for (i, (name, _, _)) in queries(t0).iter().enumerate() {
        let peer = reference["queries"][i]["p50_ms"]
            .as_f64()
            .unwrap_or(f64::NAN);
        let mut line = format!("| {name} | {peer:.1} ms |");
        for (_, (qs, _)) in &rows {
            let _ = write!(line, " {:.1} ms | {:.2}x |", qs[i].0, qs[i].0 / peer);
        }
        println!("{line}");
    }
    for (backend, (qs, telemetry_ms)) in &rows {
        println!(
            "{backend}: first runs (the scan cache cold): (a) {:.1} ms, (b) {:.1} ms, (c) {:.1} ms",
            qs[0].1, qs[1].1, qs[2].1
        );
        println!(
            "{backend}: (a) through GET /v1/telemetry?aggregation=avg&interval=1h: {telemetry_ms:.1} ms; answers: (b) {} / DuckDB {}; (c) first row {} / DuckDB {}",
            qs[1].2[0],
            reference["queries"][1]["rows"][0],
            qs[2].2[0],
            reference["queries"][2]["rows"][0]
        );
    }
    Ok(())
}
