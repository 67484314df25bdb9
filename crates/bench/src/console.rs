//! `plantd-bench console`: what a dashboard costs. On each backend: 7 days of 1 Hz data for 8
//! tags, a dashboard of 8 line charts over those 7 days, and the server's time to answer all 8
//! widgets' series requests at once (issue 14's target: p50 under 100 ms). Then, when a python3
//! with selenium and Debian's chromium/chromedriver are there, a real browser
//! (`crates/bench/browser/console.py`): the bytes transferred by the first load of that
//! dashboard (target: under 300 KB), and on a dashboard of 8 live charts (an hour of 1 Hz points
//! each, then a point per tag per second) the browser's CPU time per second and the time from a
//! point's timestamp to the frame that drew it. Last, the overview at plant scale (issue 26):
//! 10,000 assets of 10 tags (100,000 tags), its first load in the browser (target: under
//! 300 KB) and, while every tag gets a point every 10 s (10,000 points/s), the browser's CPU for
//! its live updates (target: under 5% of a core).

use anyhow::{Context, Result, bail};
use http_body_util::Full;
use hyper::body::Bytes;
use serde_json::{Value, json};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::harness::{
    Options, Probe, backends, connect, drop_database, pct, post_json, start_server,
};
use crate::telemetry::{create_keys, now_ms, post, rfc3339};

const TAGS: usize = 8;
const BATCH: usize = 5_000;
const HISTORY_ASSET: &str = "Bench_Pump";
const LIVE_ASSET: &str = "Live_Pump";
/// The drawn width each chart asks for (a half-width chart on a laptop screen).
const WIDTH: u32 = 800;
const ROUNDS: usize = 30;
const BENCH_USER: (&str, &str) = ("viewer@example.com", "wall-screen-7-valve");
/// The overview's plant: assets of `PLANT_TAGS` tags each.
const PLANT_ASSETS: usize = 10_000;
const PLANT_TAGS: usize = 10;
/// Points per second over the whole plant while the overview is open (each tag every 10 s).
const PLANT_RATE: usize = 10_000;

/// Simulator-shaped values: a slow wave, a daily drift and a little noise, by tag and time.
fn value(tag: usize, ts: i64) -> f64 {
    let s = ts as f64 / 1000.0;
    let noise = ((ts / 1000).wrapping_mul(2_654_435_761) % 1000) as f64 / 5000.0;
    3.0 + tag as f64 + (s / 600.0).sin() + 0.5 * (s / 86_400.0).cos() + noise
}

fn batch(asset: &str, points: &[(usize, i64)]) -> Bytes {
    let mut s = String::with_capacity(points.len() * 110);
    s.push_str("{\"data\":[");
    for (i, (tag, ts)) in points.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&format!(
            "{{\"asset_id\":\"{asset}\",\"tag_name\":\"T{tag}\",\"value\":{},\"timestamp\":\"{}\"}}",
            value(*tag, *ts),
            rfc3339(*ts)
        ));
    }
    s.push_str("]}");
    Bytes::from(s)
}

/// Stores 1 Hz points of `TAGS` tags of `asset` over `[start, end)`, from 4 connections.
async fn fill(addr: &str, keys: &[String], asset: &str, start: i64, end: i64) -> Result<u64> {
    let seconds = (end - start) / 1000;
    let per_conn = (seconds + 3) / 4;
    let mut tasks = Vec::new();
    for c in 0..4 {
        let (addr, keys, asset) = (addr.to_string(), keys.to_vec(), asset.to_string());
        tasks.push(tokio::spawn(async move {
            let mut sender = connect(&addr).await?;
            let lo = start + c * per_conn * 1000;
            let hi = (lo + per_conn * 1000).min(end);
            let mut points = Vec::with_capacity(BATCH);
            let mut n = 0u64;
            let mut k = c as usize;
            let mut ts = lo;
            while ts < hi {
                for tag in 0..TAGS {
                    points.push((tag, ts));
                }
                ts += 1000;
                if points.len() >= BATCH || ts >= hi {
                    let key = &keys[k % keys.len()];
                    k += 4;
                    let status = post(&mut sender, &addr, key, batch(&asset, &points)).await?;
                    if status != 200 {
                        bail!("ingest answered {status}");
                    }
                    n += points.len() as u64;
                    points.clear();
                }
            }
            Ok::<_, anyhow::Error>(n)
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await??;
    }
    Ok(total)
}

fn line_charts(asset: &str, range: &str) -> Value {
    let widgets: Vec<Value> = (0..TAGS)
        .map(|i| {
            json!({"id": format!("c{i}"), "type": "line_chart", "title": format!("T{i}"),
                "x": (i % 2) * 6, "y": (i / 2) * 4, "w": 6, "h": 4,
                "query": {"asset_id": asset, "tags": [format!("T{i}")], "range": range},
                "options": {"decimals": 2}})
        })
        .collect();
    json!({"columns": 12, "widgets": widgets})
}

/// 8 series requests at once (one connection each, as a browser's), `ROUNDS` times: the wall
/// time of each round, sorted (µs), and the bytes of one round's answers.
async fn series_rounds(addr: &str, key: &str, start: i64, end: i64) -> Result<(Vec<u32>, usize)> {
    let mut senders = Vec::new();
    for _ in 0..TAGS {
        senders.push(connect(addr).await?);
    }
    let probes: Vec<Probe> = (0..TAGS)
        .map(|i| {
            Probe::get(
                &format!(
                    "/v1/telemetry/series?asset_id={HISTORY_ASSET}&tags=T{i}&start={}&end={}&width={WIDTH}",
                    rfc3339(start),
                    rfc3339(end)
                ),
                key,
            )
        })
        .collect();
    let mut times = Vec::new();
    let mut bytes = 0;
    for round in 0..ROUNDS + 3 {
        let t = Instant::now();
        let mut tasks = Vec::new();
        for (sender, probe) in senders.drain(..).zip(probes.iter().cloned()) {
            let addr = addr.to_string();
            tasks.push(tokio::spawn(async move {
                let mut sender = sender;
                let answer = probe.call(&mut sender, &addr).await;
                (sender, answer)
            }));
        }
        let mut round_bytes = 0;
        for task in tasks {
            let (sender, answer) = task.await?;
            let (status, body) = answer?;
            if status != 200 {
                bail!(
                    "series answered {status}: {}",
                    String::from_utf8_lossy(&body)
                );
            }
            round_bytes += body.len();
            senders.push(sender);
        }
        if round >= 3 {
            times.push(t.elapsed().as_micros().min(u32::MAX as u128) as u32);
        }
        bytes = round_bytes;
    }
    times.sort_unstable();
    Ok((times, bytes))
}

/// A point per tag of `LIVE_ASSET` per second, stamped with the time it is sent, until `stop`.
fn live_feed(
    addr: String,
    key: String,
    stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<Result<()>> {
    tokio::spawn(async move {
        let mut sender: hyper::client::conn::http1::SendRequest<Full<Bytes>> =
            connect(&addr).await?;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        while !*stop.borrow() {
            tick.tick().await;
            let now = now_ms();
            let points: Vec<(usize, i64)> = (0..TAGS).map(|t| (t, now)).collect();
            post(&mut sender, &addr, &key, batch(LIVE_ASSET, &points)).await?;
        }
        Ok(())
    })
}

fn selenium_python() -> Option<String> {
    let python = std::env::var("PLANTD_BENCH_PYTHON").unwrap_or("python3".into());
    let ok = Command::new(&python)
        .args(["-c", "import selenium"])
        .output()
        .is_ok_and(|o| o.status.success());
    let browsers = ["chromium", "chromedriver"].iter().all(|b| {
        Command::new("sh")
            .args(["-c", &format!("command -v {b}")])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    (ok && browsers).then_some(python)
}

pub(crate) async fn run(o: &Options) -> Result<()> {
    println!(
        "plantd console benchmark: 8 line charts, 1 Hz data; server, load generator and browser share this machine's {} cores\n",
        crate::harness::cores()
    );
    for (backend, url) in &backends(o) {
        let (server, key) = start_server(o, url.as_deref())?;
        let addr = server.addr.clone();
        let keys = create_keys(o, &server, 8)?;
        let end = now_ms() / 1000 * 1000;
        let start = end - 7 * 86_400_000 + 600_000;
        let t = Instant::now();
        let stored = fill(&addr, &keys, HISTORY_ASSET, start, end).await?;
        println!(
            "{backend}: stored {stored} points (7 days x 8 tags at 1 Hz) in {:.0} s",
            t.elapsed().as_secs_f64()
        );
        let mut sender = connect(&addr).await?;
        let week = post_json(
            &mut sender,
            &addr,
            "/v1/dashboards",
            &key,
            &json!({"name": "Week", "layout": line_charts(HISTORY_ASSET, "7d")}),
            201,
        )
        .await?;
        let (times, bytes) = series_rounds(&addr, &key, start, end).await?;
        println!(
            "{backend}: all 8 widget queries of the 7-day dashboard ({WIDTH} px each, {ROUNDS} rounds): p50 {:.1} ms, p99 {:.1} ms, {} KB of JSON   (target: p50 < 100 ms)",
            pct(&times, 0.5),
            pct(&times, 0.99),
            bytes / 1024
        );
        match selenium_python() {
            None => println!(
                "{backend}: browser rows skipped (needs python3 with selenium, chromium and chromedriver)"
            ),
            Some(python) => {
                browser_rows(o, &server, &keys, &week, backend, &python).await?;
                overview_rows(&server, &keys, backend, &python).await?;
            }
        }
        drop(server);
        drop_database(url.as_deref(), o.postgres_url.as_deref());
        println!();
    }
    println!(
        "targets (issue 14): first load < 300 KB; widget queries p50 < 100 ms; browser CPU beside uPlot's own figure (about 10% of a core for 3,600 points at 60 fps)"
    );
    println!(
        "targets (issue 26): the overview of 100,000 tags: first load < 300 KB; its live updates < 5% of a core (before: every tag in one page, 2.5 MB of HTML at 10,000 tags, all of them followed live)"
    );
    Ok(())
}

async fn browser_rows(
    o: &Options,
    server: &crate::harness::Server,
    keys: &[String],
    week: &Value,
    backend: &str,
    python: &str,
) -> Result<()> {
    let addr = &server.addr;
    let out = Command::new(&o.plantd_path)
        .args(["users", "create", "--email", BENCH_USER.0, "--password"])
        .arg(BENCH_USER.1)
        .args(["--role", "owner"])
        .args(&server.storage)
        .output()?;
    if !out.status.success() {
        bail!("users create: {}", String::from_utf8_lossy(&out.stderr));
    }
    let now = now_ms() / 1000 * 1000;
    fill(addr, keys, LIVE_ASSET, now - 3_600_000, now).await?;
    let mut sender = connect(addr).await?;
    let live = post_json(
        &mut sender,
        addr,
        "/v1/dashboards",
        &keys[0],
        &json!({"name": "Live", "layout": line_charts(LIVE_ASSET, "1h")}),
        201,
    )
    .await?;
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let feed = live_feed(addr.clone(), keys[1].clone(), stop);
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("browser/console.py");
    let result = tokio::process::Command::new(python)
        .arg(script)
        .arg(format!("http://{addr}"))
        .args([BENCH_USER.0, BENCH_USER.1])
        .arg(week["data"]["id"].as_str().context("dashboard id")?)
        .arg(live["data"]["id"].as_str().context("dashboard id")?)
        .output()
        .await?;
    let _ = stop_tx.send(true);
    feed.await??;
    if !result.status.success() {
        bail!(
            "the browser run failed: {}{}",
            String::from_utf8_lossy(&result.stdout),
            String::from_utf8_lossy(&result.stderr)
        );
    }
    let m: Value = serde_json::from_slice(&result.stdout).context("the browser run's figures")?;
    println!(
        "{backend}: first load of the 7-day dashboard: {:.0} KB transferred in {} requests ({:.0} KB of them the page, scripts and styles), drawn in {:.0} ms   (target: < 300 KB)",
        m["first_load_bytes"].as_f64().unwrap_or(0.0) / 1024.0,
        m["first_load_requests"],
        m["static_bytes"].as_f64().unwrap_or(0.0) / 1024.0,
        m["first_draw_ms"].as_f64().unwrap_or(0.0)
    );
    println!(
        "{backend}: 8 live charts (1 h at 1 Hz each, then 8 points/s): browser CPU {:.1}% of a core (script {:.1}%, layout and paint {:.1}%) over {:.0} s; {} frames drawn   (uPlot's own figure: about 10% for 3,600 points at 60 fps)",
        m["cpu_percent"].as_f64().unwrap_or(f64::NAN),
        m["script_percent"].as_f64().unwrap_or(f64::NAN),
        m["layout_paint_percent"].as_f64().unwrap_or(f64::NAN),
        m["cpu_window_s"].as_f64().unwrap_or(f64::NAN),
        m["frames"]
    );
    println!(
        "{backend}: ingest to drawn in the browser (point timestamp to the frame that drew it, {} points): p50 {:.0} ms, p99 {:.0} ms",
        m["latency_samples"],
        m["latency_p50_ms"].as_f64().unwrap_or(f64::NAN),
        m["latency_p99_ms"].as_f64().unwrap_or(f64::NAN)
    );
    Ok(())
}

/// One point for each tag of the plant: `Asset_NNNNN` / `T0`..`T9`, from `first` (a tag index
/// over the whole plant) on, at `ts`.
fn plant_batch(first: usize, n: usize, ts: i64) -> Bytes {
    let mut s = String::with_capacity(n * 100);
    s.push_str("{\"data\":[");
    let total = PLANT_ASSETS * PLANT_TAGS;
    for i in 0..n {
        let tag = (first + i) % total;
        if i > 0 {
            s.push(',');
        }
        s.push_str(&format!(
            "{{\"asset_id\":\"Asset_{:05}\",\"tag_name\":\"T{}\",\"value\":{},\"timestamp\":\"{}\"}}",
            tag / PLANT_TAGS,
            tag % PLANT_TAGS,
            value(tag % PLANT_TAGS, ts),
            rfc3339(ts)
        ));
    }
    s.push_str("]}");
    Bytes::from(s)
}

/// The overview of a 100,000-tag plant in the browser (`browser/overview.py`): its first load,
/// and its CPU while the whole plant sends `PLANT_RATE` points per second.
async fn overview_rows(
    server: &crate::harness::Server,
    keys: &[String],
    backend: &str,
    python: &str,
) -> Result<()> {
    let addr = &server.addr;
    let total = PLANT_ASSETS * PLANT_TAGS;
    let mut sender = connect(addr).await?;
    let t = Instant::now();
    for first in (0..total).step_by(BATCH) {
        let status = post(
            &mut sender,
            addr,
            &keys[0],
            plant_batch(first, BATCH, now_ms()),
        )
        .await?;
        if status != 200 {
            bail!("ingest answered {status}");
        }
    }
    println!(
        "{backend}: the plant: {PLANT_ASSETS} assets of {PLANT_TAGS} tags, one point each, stored in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let (feed_addr, feed_key) = (addr.clone(), keys[1].clone());
    let feed = tokio::spawn(async move {
        let mut sender = connect(&feed_addr).await?;
        let mut tick =
            tokio::time::interval(Duration::from_millis((1000 * BATCH / PLANT_RATE) as u64));
        let mut first = 0;
        let mut sent = 0u64;
        while !*stop.borrow() {
            tick.tick().await;
            let status = post(
                &mut sender,
                &feed_addr,
                &feed_key,
                plant_batch(first, BATCH, now_ms()),
            )
            .await?;
            if status != 200 {
                bail!("ingest answered {status}");
            }
            first = (first + BATCH) % total;
            sent += BATCH as u64;
        }
        Ok::<_, anyhow::Error>(sent)
    });
    let started = Instant::now();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("browser/overview.py");
    let result = tokio::process::Command::new(python)
        .arg(script)
        .arg(format!("http://{addr}"))
        .args([BENCH_USER.0, BENCH_USER.1])
        .output()
        .await?;
    let _ = stop_tx.send(true);
    let sent = feed.await??;
    let rate = sent as f64 / started.elapsed().as_secs_f64();
    if !result.status.success() {
        bail!(
            "the overview browser run failed: {}{}",
            String::from_utf8_lossy(&result.stdout),
            String::from_utf8_lossy(&result.stderr)
        );
    }
    let m: Value = serde_json::from_slice(&result.stdout).context("the overview run's figures")?;
    println!(
        "{backend}: overview of {total} tags, first load: {:.0} KB of HTML ({} rows; {:.0} KB transferred, compressed, with the scripts and styles the login page cached), answered in {:.0} ms (again: {:.0} ms), DOM complete in {:.0} ms   (target: < 300 KB)",
        m["html_bytes"].as_f64().unwrap_or(f64::NAN) / 1024.0,
        m["rows"],
        m["first_load_bytes"].as_f64().unwrap_or(f64::NAN) / 1024.0,
        m["response_ms"].as_f64().unwrap_or(f64::NAN),
        m["response_again_ms"].as_f64().unwrap_or(f64::NAN),
        m["dom_complete_ms"].as_f64().unwrap_or(f64::NAN)
    );
    println!(
        "{backend}: overview live while the plant sends {rate:.0} points/s: browser CPU {:.2}% of a core (script {:.2}%) over {:.0} s; {} of its rows updated   (target: < 5%)",
        m["cpu_percent"].as_f64().unwrap_or(f64::NAN),
        m["script_percent"].as_f64().unwrap_or(f64::NAN),
        m["cpu_window_s"].as_f64().unwrap_or(f64::NAN),
        m["rows_updated"]
    );
    Ok(())
}
