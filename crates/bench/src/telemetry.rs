//! `plantd-bench telemetry`: HTTP ingest (batches of 1,000 and 5,000) beside a straightforward
//! baseline on the same engine (plain row inserts), an hourly average over many points of one
//! series, and `latest` under load. Request bodies are built before the clock starts. The peers
//! (InfluxDB, VictoriaMetrics) run in `plantd-bench peers`.

use anyhow::{Result, bail};
use http_body_util::Full;
use hyper::body::Bytes;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::harness::{Options, Server, backends, connect, drop_database, pct, start_server};

const DAY: i64 = 86_400_000;
/// Keys per ingest connection (the endpoint limit is per key): 48,000 requests a minute, for
/// the rows of one minute together (at 1,000 points a batch the first row alone sends ~9,000).
const KEYS_PER_CONNECTION: usize = 48;

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

pub(crate) fn rfc3339(ms: i64) -> String {
    plantd_model::Timestamp::from_millis(ms).to_rfc3339()
}

pub(crate) fn body(asset: &str, first_ts: i64, step: i64, n: usize) -> Bytes {
    let mut s = String::with_capacity(n * 100);
    s.push_str("{\"data\":[");
    for i in 0..n {
        if i > 0 {
            s.push(',');
        }
        let ts = first_ts + i as i64 * step;
        s.push_str(&format!(
            "{{\"asset_id\":\"{asset}\",\"tag_name\":\"V\",\"value\":{},\"timestamp\":\"{}\"}}",
            (i % 1000) as f64 / 10.0,
            rfc3339(ts)
        ));
    }
    s.push_str("]}");
    Bytes::from(s)
}

pub(crate) fn create_keys(o: &Options, server: &Server, n: usize) -> Result<Vec<String>> {
    (0..n)
        .map(|i| {
            let out = Command::new(&o.plantd_path)
                .args([
                    "keys",
                    "create",
                    "--name",
                    &format!("bench-{i}"),
                    "--scopes",
                    "admin",
                ])
                .args(&server.storage)
                .output()?;
            if !out.status.success() {
                bail!("keys create: {}", String::from_utf8_lossy(&out.stderr));
            }
            Ok(String::from_utf8(out.stdout)?.trim().to_string())
        })
        .collect()
}

pub(crate) async fn post(
    sender: &mut hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    addr: &str,
    key: &str,
    body: Bytes,
) -> Result<u16> {
    Ok(post_answer(sender, addr, key, body).await?.0)
}

/// Posts an ingest batch; the answer's status and headers.
pub(crate) async fn post_answer(
    sender: &mut hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    addr: &str,
    key: &str,
    body: Bytes,
) -> Result<(u16, hyper::HeaderMap)> {
    use http_body_util::BodyExt;
    let req = hyper::Request::builder()
        .method("POST")
        .uri("/v1/telemetry")
        .header("host", addr)
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", "application/json")
        .body(Full::new(body))?;
    sender.ready().await?;
    let resp = sender.send_request(req).await?;
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    resp.into_body().collect().await?;
    Ok((status, headers))
}

struct Figure {
    per_second: f64,
    p50_ms: f64,
    p99_ms: f64,
}

/// Each connection posts its prebuilt bodies in turn for `duration`, cycling through its keys.
async fn ingest_load(
    addr: &str,
    keys: &[Vec<String>],
    bodies: Vec<Vec<Bytes>>,
    batch: usize,
    duration: Duration,
) -> Result<Figure> {
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = Vec::new();
    for (mine_keys, mine) in keys.iter().cloned().zip(bodies) {
        let addr = addr.to_string();
        tasks.push(tokio::spawn(async move {
            let mut sender = connect(&addr).await?;
            let mut lat = Vec::new();
            let mut i = 0;
            while Instant::now() < deadline {
                let t = Instant::now();
                let key = &mine_keys[i % mine_keys.len()];
                let status = post(&mut sender, &addr, key, mine[i % mine.len()].clone()).await?;
                if status != 200 {
                    bail!("ingest answered {status}");
                }
                lat.push(t.elapsed().as_micros() as u32);
                i += 1;
            }
            Ok::<_, anyhow::Error>(lat)
        }));
    }
    let (all, secs) = gather(tasks, started).await?;
    Ok(Figure::of_batches(&all, batch, secs))
}

/// The baseline writer: one plain INSERT per point, one transaction per batch, same engine and
/// durability settings, no HTTP, no rollups.
async fn baseline_inserts(
    url: &str,
    writers: usize,
    batch: usize,
    duration: Duration,
) -> Result<Figure> {
    sqlx::any::install_default_drivers();
    // SQLite has one writer at a time: the baseline queues its writers in one connection rather
    // than in SQLite's busy handler (which timed out under load).
    let connections = if url.starts_with("sqlite:") {
        1
    } else {
        writers as u32
    };
    let pool = sqlx::any::AnyPoolOptions::new()
        .max_connections(connections)
        .after_connect(|conn, _| {
            Box::pin(async move {
                if conn.backend_name() == "SQLite" {
                    sqlx::raw_sql("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA busy_timeout=10000;")
                        .execute(conn)
                        .await?;
                }
                Ok(())
            })
        })
        .connect(url)
        .await?;
    sqlx::raw_sql("DROP TABLE IF EXISTS baseline_points; CREATE TABLE baseline_points (asset_id TEXT, tag_name TEXT, ts BIGINT, value DOUBLE PRECISION)")
        .execute(&pool)
        .await?;
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = Vec::new();
    for w in 0..writers {
        let pool = pool.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut n = 0_i64;
            while Instant::now() < deadline {
                let t = Instant::now();
                let mut tx = pool.begin().await?;
                for i in 0..batch {
                    sqlx::query("INSERT INTO baseline_points (asset_id, tag_name, ts, value) VALUES ($1, $2, $3, $4)")
                        .bind(format!("W{w}"))
                        .bind("V")
                        .bind(n)
                        .bind(i as f64)
                        .execute(&mut *tx)
                        .await?;
                    n += 1;
                }
                tx.commit().await?;
                lat.push(t.elapsed().as_micros() as u32);
            }
            Ok::<_, anyhow::Error>(lat)
        }));
    }
    let (all, secs) = gather(tasks, started).await?;
    sqlx::raw_sql("DROP TABLE baseline_points")
        .execute(&pool)
        .await?;
    Ok(Figure::of_batches(&all, batch, secs))
}

/// Every task's latencies, sorted, and the seconds since `started` once all are done.
async fn gather(
    tasks: Vec<tokio::task::JoinHandle<Result<Vec<u32>>>>,
    started: Instant,
) -> Result<(Vec<u32>, f64)> {
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await??);
    }
    let secs = started.elapsed().as_secs_f64();
    all.sort_unstable();
    Ok((all, secs))
}

impl Figure {
    /// Points per second and latency percentiles of `batches` batches of `batch` points (sorted
    /// latencies) written in `secs`.
    fn of_batches(latencies: &[u32], batch: usize, secs: f64) -> Self {
        Figure {
            per_second: (latencies.len() * batch) as f64 / secs,
            p50_ms: pct(latencies, 0.5),
            p99_ms: pct(latencies, 0.99),
        }
    }
}

async fn get_latencies(
    addr: &str,
    key: &str,
    path: &str,
    connections: usize,
    duration: Duration,
) -> Result<Figure> {
    let r = crate::harness::load(addr, key, path, connections, duration).await?;
    if r.errors > 0 {
        bail!("{} errors on GET {path}", r.errors);
    }
    Ok(Figure {
        per_second: r.requests as f64 / r.seconds,
        p50_ms: pct(&r.latencies_us, 0.5),
        p99_ms: pct(&r.latencies_us, 0.99),
    })
}

fn row(backend: &str, work: &str, system: &str, f: &Figure, unit: &str, ratio: Option<f64>) {
    let ratio = ratio.map_or(String::new(), |r| format!("{r:.1}x"));
    println!(
        "{backend:<11} {work:<34} {system:<30} {:>12.0} {unit:<9} {:>9.2} {:>9.2} {ratio:>7}",
        f.per_second, f.p50_ms, f.p99_ms
    );
}

pub async fn run(o: &Options) -> Result<()> {
    let backends = backends(o);
    // Four writers, each with one batch in flight: with more, throughput stays and each ack
    // waits longer (latency = points in flight / throughput).
    let connections = o.connections.unwrap_or(4).clamp(1, 16);
    println!(
        "plantd telemetry benchmark: {connections} client connections, {} s per row; load generator and server share this machine's {} cores",
        o.duration.as_secs(),
        crate::harness::cores()
    );
    println!(
        "plantd acknowledges a batch once it is durable (SQLite WAL synchronous=FULL; PostgreSQL commit); so does the baseline"
    );
    println!(
        "plantd ingest stores raw points and their 1m/1h/1d rollups; the baseline inserts plain rows, one statement per point, no HTTP, no rollups\n"
    );
    println!(
        "{:<11} {:<34} {:<30} {:>12} {:<9} {:>9} {:>9} {:>7}",
        "backend", "work", "system", "rate", "unit", "p50 ms", "p99 ms", "plantd/baseline"
    );
    for (name, url) in &backends {
        let (server, _) = start_server(o, url.as_deref())?;
        let keys = create_keys(o, &server, connections)?;
        // POST /v1/telemetry allows 1,000 requests per minute per key (SPEC 8.5): each ingest
        // connection cycles through its keys.
        let ingest_keys: Vec<Vec<String>> =
            create_keys(o, &server, connections * KEYS_PER_CONNECTION)?
                .chunks(KEYS_PER_CONNECTION)
                .map(<[String]>::to_vec)
                .collect();
        let base = now_ms() - 6 * DAY;
        let batches: &[usize] = if o.series_only { &[] } else { &[1000, 5000] };
        for &batch in batches {
            // One writer, then `connections` writers, each with one batch in flight: more writers
            // add throughput and each ack waits behind the others' points (latency = points in
            // flight / throughput).
            let mut levels = vec![1, connections];
            levels.dedup();
            let mut figures = Vec::new();
            for writers in levels {
                // Fresh points for the whole run (appends, like sensors): up to 1,000,000
                // points/s in total; a connection that runs out starts over, replacing its
                // earlier points (which the output then says, as it is other work).
                let bodies_per_connection = (1_000_000 * o.duration.as_secs() as usize / writers)
                    .div_ceil(batch)
                    .max(20);
                let bodies: Vec<Vec<Bytes>> = (0..writers)
                    .map(|c| {
                        (0..bodies_per_connection)
                            .map(|j| {
                                body(
                                    &format!("ingest-{batch}-{writers}-{c}"),
                                    base + (j * batch) as i64 * 10,
                                    10,
                                    batch,
                                )
                            })
                            .collect()
                    })
                    .collect();
                let plantd = ingest_load(
                    &server.addr,
                    &ingest_keys[..writers],
                    bodies,
                    batch,
                    o.duration,
                )
                .await?;
                if plantd.per_second * o.duration.as_secs_f64()
                    > (bodies_per_connection * writers * batch) as f64
                {
                    println!(
                        "{name:<11} (the fresh bodies ran out: later batches replaced earlier points)"
                    );
                }
                figures.push((writers, plantd));
            }
            let plain_url = match url {
                Some(u) => u.clone(),
                None => format!(
                    "sqlite://{}?mode=rwc",
                    server.dir.join("baseline.db").display()
                ),
            };
            let plain = baseline_inserts(&plain_url, connections, batch, o.duration).await?;
            let work = format!("ingest, batches of {batch}");
            for (writers, plantd) in &figures {
                let system = format!(
                    "plantd HTTP, {writers} writer{}",
                    if *writers == 1 { "" } else { "s" }
                );
                row(
                    name,
                    &work,
                    &system,
                    plantd,
                    "points/s",
                    Some(plantd.per_second / plain.per_second),
                );
            }
            row(
                name,
                &work,
                &format!("baseline: row INSERTs, {connections} writers"),
                &plain,
                "points/s",
                None,
            );
        }

        series_rows(o, name, &server, &ingest_keys).await?;
        if o.ingest_only {
            drop(server);
            drop_database(url.as_deref(), o.postgres_url.as_deref());
            continue;
        }
        // One series with many points over less than the raw retention.
        let step = ((6 * DAY) / o.points as i64).max(1);
        let start = now_ms() - 6 * DAY - 3_600_000;
        let per_batch = 5000_u64;
        let batches = o.points.div_ceil(per_batch);
        let loaded = Instant::now();
        let mut tasks = Vec::new();
        let total = o.points;
        let stride = keys.len() as u64;
        for (c, key) in keys.iter().enumerate() {
            let (addr, key) = (server.addr.clone(), key.clone());
            tasks.push(tokio::spawn(async move {
                let mut sender = connect(&addr).await?;
                let mut b = c as u64;
                while b < batches {
                    let first = start + (b * per_batch) as i64 * step;
                    let n = per_batch.min(total - b * per_batch) as usize;
                    if post(&mut sender, &addr, &key, body("agg", first, step, n)).await? != 200 {
                        bail!("loading failed");
                    }
                    b += stride;
                }
                Ok::<_, anyhow::Error>(())
            }));
        }
        for t in tasks {
            t.await??;
        }
        let load_secs = loaded.elapsed().as_secs_f64();
        let end = start + o.points as i64 * step + 1;
        let query = format!(
            "/v1/telemetry?asset_id=agg&tag_name=V&aggregation=avg&interval=1h&start={}&end={}&per_page=100",
            rfc3339(start),
            rfc3339(end)
        );
        let mut lat = Vec::new();
        let mut sender = connect(&server.addr).await?;
        for _ in 0..20 {
            let t = Instant::now();
            let s =
                crate::harness::request(&mut sender, "GET", &server.addr, &query, &keys[0], None)
                    .await?;
            if s != 200 {
                bail!("aggregation query answered {s}");
            }
            lat.push(t.elapsed().as_micros() as u32);
        }
        lat.sort_unstable();
        let agg = Figure {
            per_second: 1000.0 / pct(&lat, 0.5),
            p50_ms: pct(&lat, 0.5),
            p99_ms: pct(&lat, 0.99),
        };
        let work = format!("avg 1h over {}M points", o.points as f64 / 1e6);
        row(
            name,
            &work,
            "plantd HTTP (rollups)",
            &agg,
            "queries/s",
            None,
        );
        println!(
            "{name:<11} (loading {} points over HTTP took {load_secs:.0} s: {:.0} points/s)",
            o.points,
            o.points as f64 / load_secs
        );

        let latest = get_latencies(
            &server.addr,
            &keys[0],
            "/v1/telemetry/latest?asset_id=agg",
            connections,
            o.duration,
        )
        .await?;
        row(
            name,
            "latest of one asset, under load",
            "plantd HTTP (memory)",
            &latest,
            "req/s",
            None,
        );
        let (rate, share) = fan_out(&server.addr, &keys[0], 1000, 200).await?;
        println!(
            "{name:<11} {:<34} {:<30} {rate:>12.0} {:<9} (delivered {:.1}% of 200 batches x 1,000 subscribers)",
            "WebSocket fan-out, 1,000 subscribers",
            "plantd /v1/ws",
            "msgs/s",
            share * 100.0
        );
        drop(server);
        drop_database(url.as_deref(), o.postgres_url.as_deref());
    }
    println!(
        "\ntargets (issue 3): ingest >= 500,000 points/s SQLite (stretch 1,000,000), >= 150,000 PostgreSQL, ack p99 < 50 ms;"
    );
    println!("avg 1h over 10M points p50 < 50 ms; latest p99 < 2 ms at load");
    println!(
        "targets (issue 27): at plant scale the ingest rate falls by at most half from 10 to 100,000 series"
    );
    Ok(())
}

/// A batch of scans over `series` series (the plant's series `offset..offset + series`, asset
/// `P<plant>_NNNNNN` of 10 tags `T0`..`T9`): `batch` points from the scans' `first_point`-th point
/// on, one point per series per scan, scans `step` ms apart from `base`.
fn scan_body(
    (plant, series, offset): (usize, usize, usize),
    first_point: usize,
    batch: usize,
    (base, step): (i64, i64),
) -> Bytes {
    let mut s = String::with_capacity(batch * 100);
    s.push_str("{\"data\":[");
    for i in 0..batch {
        let n = first_point + i;
        let (scan, k) = (n / series, offset + n % series);
        if i > 0 {
            s.push(',');
        }
        s.push_str(&format!(
            "{{\"asset_id\":\"P{plant}_{:06}\",\"tag_name\":\"T{}\",\"value\":{},\"timestamp\":\"{}\"}}",
            k / 10,
            k % 10,
            ((k * 7 + scan) % 1000) as f64 / 10.0,
            rfc3339(base + scan as i64 * step)
        ));
    }
    s.push_str("]}");
    Bytes::from(s)
}

/// Ingest at plant scale: for each series count, the writers send scans (one point per series
/// per scan, time moving forward to about now, as connectors do) in 5,000-point batches for the
/// row's duration; each writer sends its own share of the series. Prints the rate, the points the
/// telemetry log still held at the end, and the server's peak memory.
async fn series_rows(
    o: &Options,
    name: &str,
    server: &Server,
    ingest_keys: &[Vec<String>],
) -> Result<()> {
    const BATCH: usize = 5_000;
    let writers = ingest_keys.len();
    let mut first_rate = None;
    // Where each plant's time stands (a series count given twice continues its plant).
    let mut ends: std::collections::HashMap<usize, i64> = Default::default();
    for &series in &o.series {
        // Enough fresh scans for 2,500,000 points/s over the row, per writer (a row that
        // runs out says so); each writer's series are its own asset range, so writers never
        // touch one series.
        let per_writer =
            (2_500_000 * o.duration.as_secs() as usize / writers).div_ceil(BATCH) * BATCH;
        // A live plant: scans 1 s apart that end about now (hour windows open, as a plant's
        // are), closer for few series so that the row stays within five days (the raw
        // retention).
        let scans = (per_writer / (series / writers).max(1)).max(1) as i64;
        let step = (5 * DAY / scans).clamp(1, 1000);
        let base = (now_ms() - scans * step - 60_000)
            .max(ends.get(&series).map_or(i64::MIN, |end| end + step));
        ends.insert(series, base + scans * step);
        let bodies: Vec<Vec<Bytes>> = (0..writers)
            .map(|c| {
                let (from, to) = (c * series / writers, (c + 1) * series / writers);
                let share = (to - from).max(1);
                (0..per_writer / BATCH)
                    .map(|j| scan_body((series, share, from), j * BATCH, BATCH, (base, step)))
                    .collect()
            })
            .collect();
        // Each row on a quiet server: what an earlier row left (its flush, the sealer's merges
        // of its windows) is not this row's cost.
        let pid = server.child.id();
        crate::sim::wait_idle(pid).await?;
        let cpu_before = crate::sim::cpu_seconds(pid)?;
        let plantd = ingest_load(&server.addr, ingest_keys, bodies, BATCH, o.duration).await?;
        if plantd.per_second * o.duration.as_secs_f64() > (per_writer * writers) as f64 {
            println!("{name:<11} (the fresh scans ran out: later batches replaced earlier points)");
        }
        let backlog = gauge(server, "plantd_telemetry_log_points")
            .await
            .unwrap_or(f64::NAN);
        // The acks' rate may run ahead of the flusher by the log's backlog (at most its
        // limit, then ingest waits): the rate sustained is over the row and the time the
        // flusher then takes to write what is left.
        let drained = std::time::Instant::now();
        while gauge(server, "plantd_telemetry_log_points")
            .await
            .unwrap_or(0.0)
            > 0.0
        {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        let drain = drained.elapsed().as_secs_f64();
        // All the server's work for the row's points: ingest, flush, and what the sealer
        // then does (until the server is idle again).
        crate::sim::wait_idle(pid).await?;
        let cpu_per_point = (crate::sim::cpu_seconds(pid)? - cpu_before) * 1e6
            / (plantd.per_second * o.duration.as_secs_f64());
        let sustained =
            plantd.per_second * o.duration.as_secs_f64() / (o.duration.as_secs_f64() + drain);
        let rss = peak_rss_mb(server);
        // Against the first row, rates sustained.
        let ratio = first_rate.map(|r: f64| sustained / r);
        first_rate.get_or_insert(sustained);
        row(
            name,
            &format!("ingest, {series} series, 1 pt/series/scan"),
            &format!("plantd HTTP, {writers} writers"),
            &plantd,
            "points/s",
            ratio,
        );
        println!(
            "{name:<11} (after the row: {backlog:.0} points waiting in the telemetry log, written in {drain:.1} s: {sustained:.0} points/s sustained; the server's CPU until idle {cpu_per_point:.1} us a point; peak RSS {rss} MB)"
        );
    }
    Ok(())
}

/// A figure of the server's `/metrics` (a gauge, or a counter since it started; loopback needs
/// no token).
pub(crate) async fn gauge(server: &Server, metric: &str) -> Result<f64> {
    value_in(&scrape(server).await?, metric)
}

/// A metric's value in a scrape of `/metrics`.
fn value_in(text: &str, metric: &str) -> Result<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(metric).and_then(|v| v.trim().parse().ok()))
        .ok_or_else(|| anyhow::anyhow!("no {metric} in /metrics"))
}

/// The server's `/metrics` (each scrape counts the head blocks in the database: scrape once
/// for several figures).
async fn scrape(server: &Server) -> Result<String> {
    let mut sender = connect(&server.addr).await?;
    let probe = crate::harness::Probe {
        authorization: String::new(),
        ..crate::harness::Probe::get("/metrics", "")
    };
    let (status, body) = probe.call(&mut sender, &server.addr).await?;
    if status != 200 {
        bail!("/metrics answered {status}");
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// Waits until the server's storage is settled: the flusher's log empty and two passes of the
/// sealer in a row that rewrote nothing (the first may have started before the last ingest), so
/// that every closed window is sealed, every closed span of rollups packed and every marked day
/// compacted. Returns false if that did not happen within `limit`.
pub(crate) async fn wait_settled(server: &Server, limit: std::time::Duration) -> Result<bool> {
    let deadline = std::time::Instant::now() + limit;
    let mut last: Option<(f64, f64)> = None;
    let mut quiet_passes = 0.0;
    while std::time::Instant::now() < deadline {
        let text = scrape(server).await?;
        let log = value_in(&text, "plantd_telemetry_log_points")?;
        let passes = value_in(&text, "plantd_telemetry_sealer_passes_total")?;
        let rewrites = value_in(&text, "plantd_telemetry_sealer_rewrites_total")?;
        if let Some((p, r)) = last {
            quiet_passes = if log > 0.0 || rewrites != r {
                0.0
            } else {
                quiet_passes + (passes - p)
            };
        }
        if quiet_passes >= 2.0 {
            return Ok(true);
        }
        last = Some((passes, rewrites));
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    Ok(false)
}

/// The server process's peak resident memory (VmHWM), in MB.
fn peak_rss_mb(server: &Server) -> String {
    std::fs::read_to_string(format!("/proc/{}/status", server.child.id()))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
        })
        .map_or("?".into(), |kb| (kb / 1024).to_string())
}

/// Messages per second delivered to `subscribers` WebSocket clients, each subscribed to every
/// point of the organization, while one writer ingests `batches` batches of 10 points; and the
/// share of the messages due that arrived.
pub async fn fan_out(
    addr: &str,
    key: &str,
    subscribers: usize,
    batches: usize,
) -> Result<(f64, f64)> {
    fan_out_over(&[addr.to_string()], key, subscribers, batches).await
}

/// [`fan_out`] with the clients spread over the nodes `addrs` (the writer at the first).
pub async fn fan_out_over(
    addrs: &[String],
    key: &str,
    subscribers: usize,
    batches: usize,
) -> Result<(f64, f64)> {
    use futures_util::{SinkExt, StreamExt};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use tokio_tungstenite::tungstenite::{Message, client::IntoClientRequest};
    let received = Arc::new(AtomicU64::new(0));
    let mut readers = Vec::new();
    let addr = addrs[0].as_str();
    for i in 0..subscribers {
        let node = &addrs[i % addrs.len()];
        let mut req = format!("ws://{node}/v1/ws").into_client_request()?;
        req.headers_mut()
            .insert("authorization", format!("Bearer {key}").parse()?);
        let (mut ws, _) = tokio_tungstenite::connect_async(req).await?;
        ws.send(Message::Text(
            "{\"type\":\"subscribe\",\"asset_id\":\"fan\"}".into(),
        ))
        .await?;
        let _subscribed = ws.next().await;
        let received = received.clone();
        readers.push(tokio::spawn(async move {
            let mut n = 0;
            while n < batches {
                match ws.next().await {
                    Some(Ok(Message::Text(_))) => {
                        n += 1;
                        received.fetch_add(1, Ordering::Relaxed);
                    }
                    Some(Ok(_)) => {}
                    _ => break,
                }
            }
        }));
    }
    let mut sender = connect(addr).await?;
    let started = Instant::now();
    for b in 0..batches {
        let first = now_ms() - 60_000 + b as i64 * 100;
        if post(&mut sender, addr, key, body("fan", first, 1, 10)).await? != 200 {
            bail!("fan-out ingest failed");
        }
    }
    for r in readers {
        let _ = tokio::time::timeout(Duration::from_secs(60), r).await;
    }
    let secs = started.elapsed().as_secs_f64();
    let delivered = received.load(Ordering::Relaxed) as f64;
    Ok((delivered / secs, delivered / (subscribers * batches) as f64))
}
