//! `plantd-bench alerts`: alert latency. One probe connection posts a point that meets a rule
//! (duration 0), then one that clears it (auto-resolve), in turn; for each it measures the time
//! from sending the request to its acknowledgement (the alert is evaluated and stored before
//! the answer) and to the alert event arriving on a WebSocket subscription. Meanwhile two
//! connections post batches of 1,000 other points at about 100,000 points/s. SQLite and
//! PostgreSQL, release server in its own process; load, probe and server share the machine's cores.

use anyhow::{Context, Result, bail};
use futures_util::{SinkExt, StreamExt};
use hyper::body::Bytes;
use plantd_model::event::EventType;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

use crate::harness::{Options, connect, create_postgres_db, pct, post_json, request, start_server};
use crate::telemetry::{body, create_keys, now_ms, post, post_answer, rfc3339};

const BATCH: usize = 1000;
/// Batches per second per load connection (2 connections: about 100,000 points/s).
const BATCHES_PER_SECOND: u64 = 50;

/// Measures on SQLite, then on PostgreSQL when a server is given and reachable.
pub async fn run(o: &Options) -> Result<()> {
    measure(o, "SQLite", None).await?;
    if let Some(url) = &o.postgres_url {
        match create_postgres_db(url) {
            Ok(db) => measure(o, "PostgreSQL", Some(&db)).await?,
            Err(e) => eprintln!("PostgreSQL skipped: {e}"),
        }
    }
    Ok(())
}

async fn measure(o: &Options, backend: &str, database_url: Option<&str>) -> Result<()> {
    let (server, key) = start_server(o, database_url)?;
    let addr = server.addr.clone();
    let mut sender = connect(&addr).await?;
    let ds_body = json!({"name": "bench", "type": "modbus", "enabled": false, "config": {"host": "plc.invalid"}});
    let created = post_json(&mut sender, &addr, "/v1/data-sources", &key, &ds_body, 201).await?;
    let ds = created["data"]["id"]
        .as_str()
        .context("data source id")?
        .to_string();
    let rule = json!({"name": "bench", "severity": "critical", "data_source_id": ds,
        "condition": {"tag_name": "T", "operator": "gt", "value": 7.0, "duration_seconds": 0}})
    .to_string();
    let status = request(
        &mut sender,
        "POST",
        &addr,
        "/v1/alert-rules",
        &key,
        Some(&rule),
    )
    .await?;
    if status != 201 {
        bail!("creating the rule failed ({status})");
    }
    let (mut ws, _) =
        tokio_tungstenite::connect_async(format!("ws://{addr}/v1/ws?access_token={key}")).await?;
    ws.send(tokio_tungstenite::tungstenite::Message::Text(
        json!({"type": "subscribe", "asset_id": "Probe"})
            .to_string()
            .into(),
    ))
    .await?;
    let _ = ws.next().await;

    // Background load: other assets, prebuilt bodies with fresh timestamps.
    let start_ts = now_ms() - 3_600_000;
    let stop_at = Instant::now() + o.duration + Duration::from_secs(2);
    // The ingest endpoint allows 1,000 requests per minute per key: each load connection cycles
    // through 8 keys.
    let load_keys = create_keys(o, &server, 16)?;
    let mut load = Vec::new();
    for c in 0..2usize {
        let keys: Vec<String> = load_keys[c * 8..(c + 1) * 8].to_vec();
        let bodies: Vec<Bytes> = (0..(BATCHES_PER_SECOND * (o.duration.as_secs() + 3)))
            .map(|i| {
                body(
                    &format!("Load{c}_{}", i % 50),
                    start_ts + (i as i64) * 1000,
                    1,
                    BATCH,
                )
            })
            .collect();
        let addr = addr.clone();
        load.push(tokio::spawn(async move {
            let mut sender = connect(&addr).await?;
            let mut tick = tokio::time::interval(Duration::from_millis(1000 / BATCHES_PER_SECOND));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            let mut sent = 0u64;
            for (n, b) in bodies.into_iter().enumerate() {
                if Instant::now() >= stop_at {
                    break;
                }
                tick.tick().await;
                if post(&mut sender, &addr, &keys[n % keys.len()], b).await? != 200 {
                    bail!("background ingest refused");
                }
                sent += BATCH as u64;
            }
            Ok::<u64, anyhow::Error>(sent)
        }));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started = Instant::now();
    let (mut ack_us, mut stage_us, mut event_us) = (Vec::new(), Vec::new(), Vec::new());
    let mut i = 0i64;
    while started.elapsed() < o.duration {
        let value = if i % 2 == 0 { 9.0 } else { 1.0 };
        let probe = format!(
            r#"{{"data_source_id": "{ds}", "data": [{{"asset_id": "Probe", "tag_name": "T", "value": {value}, "timestamp": "{}"}}]}}"#,
            rfc3339(now_ms())
        );
        let t = Instant::now();
        let (status, headers) = post_answer(&mut sender, &addr, &key, Bytes::from(probe)).await?;
        if status != 200 {
            bail!("probe refused");
        }
        ack_us.push(t.elapsed().as_micros() as u32);
        // The server's own account: from the points' commit to the alert stored and published.
        let timing = headers
            .get("server-timing")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let alerts_ms: f64 = timing
            .split(", ")
            .find_map(|p| p.strip_prefix("alerts;dur="))
            .and_then(|d| d.parse().ok())
            .context("no alerts timing in the ingest answer's Server-Timing")?;
        stage_us.push((alerts_ms * 1000.0) as u32);
        let wanted = if i % 2 == 0 {
            EventType::AlertTriggered
        } else {
            EventType::AlertResolved
        }
        .as_str();
        loop {
            let msg = tokio::time::timeout(Duration::from_secs(5), ws.next())
                .await
                .context("no alert event within 5 s")?
                .context("stream ended")??;
            if let tokio_tungstenite::tungstenite::Message::Text(text) = msg {
                let v: Value = serde_json::from_str(text.as_str())?;
                if v["type"] == "alert" && v["event"] == wanted {
                    break;
                }
            }
        }
        event_us.push(t.elapsed().as_micros() as u32);
        i += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut background = 0u64;
    for l in load {
        background += l.await??;
    }
    let load_secs = started.elapsed().as_secs_f64() + 1.0;
    ack_us.sort_unstable();
    stage_us.sort_unstable();
    event_us.sort_unstable();
    println!(
        "plantd alert latency ({backend}, release server in its own process; load generator, probe and server share this machine's {} cores)\n",
        crate::harness::cores()
    );
    println!(
        "background ingest: {:.0} points/s (batches of {BATCH}, 2 connections)",
        background as f64 / load_secs
    );
    println!(
        "alert changes measured: {} (triggered and resolved in turn)\n",
        ack_us.len()
    );
    println!("{:<52} {:>9} {:>9}", "", "p50 ms", "p99 ms");
    println!(
        "{:<52} {:>9.2} {:>9.2}",
        "request sent -> ingest acknowledged (alert stored)",
        pct(&ack_us, 0.5),
        pct(&ack_us, 0.99)
    );
    println!(
        "{:<52} {:>9.2} {:>9.2}",
        "request sent -> alert event received on /v1/ws",
        pct(&event_us, 0.5),
        pct(&event_us, 0.99)
    );
    println!(
        "{:<52} {:>9.2} {:>9.2}",
        "ingest accepted -> alert stored and published (*)",
        pct(&stage_us, 0.5),
        pct(&stage_us, 0.99)
    );
    println!(
        "\n(*) the server's Server-Timing \"alerts\": from the batch's commit to its alert change stored"
    );
    println!("    and on the event bus; the rows above include the ingest write itself.");
    println!(
        "target (issue 6): alert latency from an accepted ingest request, p99 under 10 ms with 100,000 points/s of other traffic\n"
    );
    drop(server);
    Ok(())
}
