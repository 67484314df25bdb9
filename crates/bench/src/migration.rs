//! `plantd-bench migration`: an organization's move to another region (issue 33) with
//! `--points` raw points (default 10,000,000: 100 series). us-east and eu-west run as two release
//! servers, each with its own SQLite database, with the machine's NATS JetStream between them
//! (`PLANTD_BENCH_NATS_URL`, default `nats://127.0.0.1:4222`). The points are ingested in us-east,
//! then `PUT /api/v1/organizations/current/region` moves the organization; the figure is points/s
//! from the request to the migration's completion as the region view reports it (the copy
//! published, written and counted at the target, compared, switched; the window's 5 s minimum
//! included). The peer: PostgreSQL moving the same rows from one database to another
//! (`COPY ... TO STDOUT | COPY ... FROM STDIN` through psql), the bare copy of the same volume,
//! nothing checked.

use anyhow::{Result, bail};
use hyper::body::Bytes;
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::harness::{
    Options, Probe, connect, create_postgres_db, free_port, spawn_server, start_server_with,
};
use crate::telemetry::{now_ms, rfc3339};

const SERIES: u64 = 100;
/// Points per request: 100 of every series (10,000, the most a request takes).
const PER_SERIES_BATCH: u64 = 100;
/// Clients ingesting, each with a key of its own (an endpoint's limit is per key).
const CLIENTS: u64 = 4;

async fn call(
    addr: &str,
    method: &'static str,
    path: &str,
    key: &str,
    body: Option<Value>,
) -> Result<(u16, Value)> {
    let mut sender = connect(addr).await?;
    let probe = Probe {
        method,
        body: body.map(|b| ("application/json", Bytes::from(b.to_string()))),
        ..Probe::get(path, key)
    };
    let (status, bytes) = probe.call(&mut sender, addr).await?;
    Ok((
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    ))
}

/// Ingests `points` (100 series, one point a second each, oldest first) with four clients.
async fn ingest(addr: &str, keys: &[String], points: u64) -> Result<f64> {
    let per_series = points / SERIES;
    let t0 = now_ms() - (per_series as i64 + 60) * 1000;
    let started = Instant::now();
    let mut clients = Vec::new();
    for c in 0..CLIENTS {
        let (addr, key) = (addr.to_string(), keys[c as usize % keys.len()].clone());
        clients.push(tokio::spawn(async move {
            let mut sender = connect(&addr).await?;
            let mut first = c * PER_SERIES_BATCH;
            while first < per_series {
                let mut body = String::from("{\"data\":[");
                for i in first..(first + PER_SERIES_BATCH).min(per_series) {
                    let ts = rfc3339(t0 + i as i64 * 1000);
                    for s in 0..SERIES {
                        if body.len() > 9 {
                            body.push(',');
                        }
                        let _ = write!(
                            body,
                            "{{\"asset_id\":\"A{}\",\"tag_name\":\"T{}\",\"value\":{},\"timestamp\":\"{ts}\"}}",
                            s / 10,
                            s % 10,
                            (i % 1000) as f64 / 10.0 + s as f64
                        );
                    }
                }
                body.push_str("]}");
                let probe = Probe {
                    method: "POST",
                    body: Some(("application/json", body.into())),
                    ..Probe::get("/v1/telemetry", &key)
                };
                let (status, bytes) = probe.call(&mut sender, &addr).await?;
                if status != 200 {
                    bail!("ingest answered {status}: {}", String::from_utf8_lossy(&bytes));
                }
                first += CLIENTS * PER_SERIES_BATCH;
            }
            Ok::<(), anyhow::Error>(())
        }));
    }
    for c in clients {
        c.await??;
    }
    Ok((per_series * SERIES) as f64 / started.elapsed().as_secs_f64())
}

/// plantd: seconds from the request to the completed migration.
async fn plantd(o: &Options, nats: &str) -> Result<(f64, Value)> {
    let deployment = format!("mig{}", std::process::id());
    let (east_port, west_port) = (free_port()?, free_port()?);
    let (east_listen, west_listen) = (
        format!("127.0.0.1:{east_port}"),
        format!("127.0.0.1:{west_port}"),
    );
    let (east_peer, west_peer) = (
        format!("us-east=http://{east_listen}"),
        format!("eu-west=http://{west_listen}"),
    );
    let (east, key) = start_server_with(
        o,
        None,
        &[
            "--listen",
            &east_listen,
            "--region",
            "us-east",
            "--peer",
            &west_peer,
            "--nats-url",
            nats,
            "--deployment",
            &deployment,
        ],
    )?;
    let west = spawn_server(
        o,
        None,
        &[
            "--listen",
            &west_listen,
            "--region",
            "eu-west",
            "--peer",
            &east_peer,
            "--nats-url",
            nats,
            "--deployment",
            &deployment,
        ],
    )?;
    // Strict residency: no secondary copy of the organization runs beside the migration.
    let (status, body) = call(
        &east.addr,
        "PUT",
        "/v1/organizations/current",
        &key,
        Some(json!({"data_residency_enabled": true})),
    )
    .await?;
    if status != 200 {
        bail!("PUT organization answered {status}: {body}");
    }
    let keys = crate::telemetry::create_keys(o, &east, CLIENTS as usize)?;
    let rate = ingest(&east.addr, &keys, o.points).await?;
    println!(
        "ingested {} points in us-east at {rate:.0} points/s",
        o.points
    );
    let started = Instant::now();
    loop {
        let (status, _) = call(&west.addr, "GET", "/v1/organizations/current", &key, None).await?;
        if status == 200 {
            break;
        }
        if started.elapsed() > Duration::from_secs(30) {
            bail!("eu-west did not receive the organization within 30 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let started = Instant::now();
    let (status, body) = call(
        &east.addr,
        "PUT",
        "/api/v1/organizations/current/region",
        &key,
        Some(json!({"region": "eu-west"})),
    )
    .await?;
    if status != 200 {
        bail!("PUT region answered {status}: {body}");
    }
    let view = loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let (_, view) = call(
            &east.addr,
            "GET",
            "/api/v1/organizations/current/region",
            &key,
            None,
        )
        .await?;
        match view["data"]["migration"]["status"].as_str() {
            Some("completed") => break view,
            Some("failed") => bail!("the migration failed: {view}"),
            _ => {}
        }
    };
    let seconds = started.elapsed().as_secs_f64();
    let counted = call(
        &west.addr,
        "GET",
        &format!(
            "/v1/telemetry?asset_id=A0&tag_name=T0&start={}&end={}&per_page=1",
            rfc3339(0).replace('+', "%2B"),
            rfc3339(now_ms() + 60_000).replace('+', "%2B")
        ),
        &key,
        None,
    )
    .await?;
    drop(west);
    drop(east);
    Ok((
        seconds,
        json!({"migration": view["data"]["migration"], "series_A0_T0_in_eu_west": counted.1["meta"]["total"]}),
    ))
}

/// PostgreSQL: seconds to copy the same rows from one database to another through psql.
fn postgres(url: &str, points: u64) -> Result<f64> {
    let a = create_postgres_db(url)?;
    let b = {
        let name = format!("plantd_bench_{}_b", std::process::id());
        let base = url.rsplit_once('/').map_or(url, |(b, _)| b);
        let _ = Command::new("psql")
            .args([url, "-qc", &format!("DROP DATABASE IF EXISTS {name}")])
            .status();
        if !Command::new("psql")
            .args([url, "-qc", &format!("CREATE DATABASE {name}")])
            .status()?
            .success()
        {
            bail!("cannot create {name}");
        }
        format!("{base}/{name}")
    };
    let table = "CREATE TABLE points (ts BIGINT, asset_id TEXT, tag_name TEXT, value DOUBLE PRECISION, quality SMALLINT)";
    for db in [&a, &b] {
        if !Command::new("psql")
            .args([db.as_str(), "-qc", table])
            .status()?
            .success()
        {
            bail!("cannot create the table in {db}");
        }
    }
    let fill = format!(
        "INSERT INTO points SELECT 1767225600000 + (g / {SERIES}) * 1000, 'A' || ((g % {SERIES}) / 10), 'T' || (g % 10), (g % 1000) / 10.0, 0 FROM generate_series(0, {}) g",
        points - 1
    );
    if !Command::new("psql")
        .args([a.as_str(), "-qc", &fill])
        .status()?
        .success()
    {
        bail!("cannot fill {a}");
    }
    let started = Instant::now();
    let pipe =
        format!("psql '{a}' -qc 'COPY points TO STDOUT' | psql '{b}' -qc 'COPY points FROM STDIN'");
    if !Command::new("sh").args(["-c", &pipe]).status()?.success() {
        bail!("the copy failed");
    }
    let seconds = started.elapsed().as_secs_f64();
    let out = Command::new("psql")
        .args([b.as_str(), "-Atqc", "SELECT COUNT(*) FROM points"])
        .output()?;
    let n: u64 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    for db in [&a, &b] {
        crate::harness::drop_database(Some(db), Some(url));
    }
    if n != points {
        bail!("PostgreSQL copied {n} rows of {points}");
    }
    Ok(seconds)
}

pub(crate) async fn run(o: &Options) -> Result<()> {
    let nats =
        std::env::var("PLANTD_BENCH_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    let (seconds, facts) = plantd(o, &nats).await?;
    let peer = match &o.postgres_url {
        Some(url) => Some(postgres(url, o.points)?),
        None => None,
    };
    println!(
        "{:<44} {:>12} {:>9} {:>12} {:>7}",
        "system", "points", "seconds", "points/s", "ratio"
    );
    let ours = o.points as f64 / seconds;
    println!(
        "{:<44} {:>12} {:>9.1} {:>12.0} {:>7}",
        "plantd migration us-east -> eu-west (SQLite)", o.points, seconds, ours, "1.00"
    );
    if let Some(p) = peer {
        let theirs = o.points as f64 / p;
        println!(
            "{:<44} {:>12} {:>9.1} {:>12.0} {:>7.2}",
            "PostgreSQL 15 COPY db -> db (psql pipe)",
            o.points,
            p,
            theirs,
            theirs / ours
        );
    }
    println!("{facts}");
    Ok(())
}
