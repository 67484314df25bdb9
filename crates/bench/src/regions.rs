//! `plantd-bench regions`: replication lag between two regions (issue 33). us-east and eu-west
//! run as two release servers, each with its own SQLite database, replicating through the
//! machine's NATS JetStream (`PLANTD_BENCH_NATS_URL`, default `nats://127.0.0.1:4222`). Eight
//! clients rename the organization in us-east at 1,000 changes/s in all, each new name carrying
//! the time it was sent; a reader in eu-west reads the organization as fast as it answers, and
//! each name it sees gives one lag (sent in us-east → readable in eu-west: the commit, the
//! outbox, the publication, the consumer, the apply). The last writer wins, so a change
//! overtaken before eu-west applied it is never seen: lags are those of the changes seen.

use anyhow::{Context, Result, bail};
use hyper::body::Bytes;
use serde_json::json;
use std::time::{Duration, Instant};

use crate::harness::{Options, Probe, connect, spawn_server, start_server_with};

/// Changes per second in us-east, in all.
const RATE: u64 = 1_000;
/// Clients making them.
const WRITERS: u64 = 8;

fn now_ms() -> i64 {
    plantd_model::Timestamp::now().millis()
}

fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

pub(crate) async fn run(o: &Options) -> Result<()> {
    let nats =
        std::env::var("PLANTD_BENCH_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    let deployment = format!("bench{}", std::process::id());
    let (east, key) = start_server_with(
        o,
        None,
        &[
            "--region",
            "us-east",
            "--nats-url",
            &nats,
            "--deployment",
            &deployment,
        ],
    )?;
    let peer = format!("us-east=http://{}", east.addr);
    let west = spawn_server(
        o,
        None,
        &[
            "--region",
            "eu-west",
            "--peer",
            &peer,
            "--nats-url",
            &nats,
            "--deployment",
            &deployment,
        ],
    )?;
    let org = Probe::get("/v1/organizations/current", &key);
    let mut reader = connect(&west.addr).await?;
    let started = Instant::now();
    loop {
        let (status, _) = org.call(&mut reader, &west.addr).await?;
        if status == 200 {
            break;
        }
        if started.elapsed() > Duration::from_secs(30) {
            bail!("eu-west did not receive the organization within 30 s ({status})");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!(
        "regions: us-east and eu-west (SQLite each), NATS {nats}; organization, owner and key in eu-west after {} ms",
        started.elapsed().as_millis()
    );

    let duration = o.duration;
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let (addr, key) = (east.addr.clone(), key.clone());
        writers.push(tokio::spawn(async move {
            let mut sender = connect(&addr).await?;
            let every = Duration::from_micros(1_000_000 * WRITERS / RATE);
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            let begun = Instant::now();
            let mut sent = 0_u64;
            while begun.elapsed() < duration {
                tick.tick().await;
                let body = json!({"name": format!("bench {w}-{sent} {}", now_ms())}).to_string();
                let put = Probe {
                    method: "PUT",
                    body: Some(("application/json", Bytes::from(body))),
                    ..Probe::get("/v1/organizations/current", &key)
                };
                let (status, _) = put.call(&mut sender, &addr).await?;
                if status != 200 {
                    bail!("PUT /v1/organizations/current answered {status}");
                }
                sent += 1;
            }
            Ok::<u64, anyhow::Error>(sent)
        }));
    }
    let mut lags = Vec::new();
    let mut last = String::new();
    let end = Instant::now() + duration + Duration::from_secs(5);
    while Instant::now() < end {
        let (status, body) = org.call(&mut reader, &west.addr).await?;
        if status != 200 {
            continue;
        }
        let seen = now_ms();
        let answer: serde_json::Value = serde_json::from_slice(&body)?;
        let name = answer["data"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if name != last {
            if let Some(sent) = name.rsplit(' ').next().and_then(|t| t.parse::<i64>().ok()) {
                lags.push(seen - sent);
            }
            last = name;
        }
    }
    let mut sent = 0;
    for w in writers {
        sent += w.await.context("writer")??;
    }
    lags.sort_unstable();
    let mut east_sender = connect(&east.addr).await?;
    let (_, body) = Probe::get("/api/v1/regions/replication", &key)
        .call(&mut east_sender, &east.addr)
        .await?;
    println!(
        "{:<10} {:>12} {:>10} {:>9} {:>9} {:>9}",
        "changes/s", "changes", "seen", "p50 ms", "p99 ms", "max ms"
    );
    println!(
        "{:<10} {:>12} {:>10} {:>9} {:>9} {:>9}",
        (sent as f64 / duration.as_secs_f64()).round(),
        sent,
        lags.len(),
        percentile(&lags, 0.5),
        percentile(&lags, 0.99),
        lags.last().copied().unwrap_or(0)
    );
    println!(
        "replication seen from us-east afterwards: {}",
        String::from_utf8_lossy(&body)
    );
    drop(west);
    drop(east);
    Ok(())
}
