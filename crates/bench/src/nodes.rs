//! `plantd-bench nodes`: the live stream across the nodes of one region (issue 33). Three
//! release servers share one PostgreSQL database and the machine's NATS server
//! (`PLANTD_BENCH_NATS_URL`, default `nats://127.0.0.1:4222`); 100 WebSocket clients are spread
//! over them, each subscribed to one asset, while one writer ingests 10-point batches at the
//! first node: the points every client received per second, in all, and the share delivered
//! (each client should see every batch, whichever node it is on). The peer, in the same run:
//! the machine's Mosquitto delivering the same batches (the same JSON) to 100 MQTT
//! subscribers of one topic (QoS 0).

use anyhow::{Result, bail};
use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::harness::{Options, create_postgres_db, drop_database, spawn_server, start_server_with};
use crate::telemetry::{body, fan_out_over, now_ms};

const CLIENTS: usize = 100;
const BATCHES: usize = 500;
const POINTS: usize = 10;

/// Points received per second by all clients, and the share of the batches each received.
async fn plantd(addrs: &[String], key: &str) -> Result<(f64, f64)> {
    let (messages, share) = fan_out_over(addrs, key, CLIENTS, BATCHES).await?;
    Ok((messages * POINTS as f64, share))
}

/// The same batches through Mosquitto to as many subscribers.
async fn mosquitto(url: &str) -> Result<(f64, f64)> {
    let broker = plantd_model::data_source::parse_url(url).map_err(anyhow::Error::msg)?;
    let topic = format!("bench/fan/{}", std::process::id());
    let received = Arc::new(AtomicU64::new(0));
    let mut readers = Vec::new();
    for i in 0..CLIENTS {
        let mut o = MqttOptions::new(
            format!("fan-{}-{i}", std::process::id()),
            broker.host.clone(),
            broker.port.unwrap_or(1883),
        );
        o.set_max_packet_size(1 << 20, 1 << 20);
        let (client, mut events) = AsyncClient::new(o, 1024);
        client.subscribe(&topic, QoS::AtMostOnce).await?;
        // Until the subscription is acknowledged.
        loop {
            if let Event::Incoming(Packet::SubAck(_)) = events.poll().await? {
                break;
            }
        }
        let received = received.clone();
        readers.push(tokio::spawn(async move {
            let _client = client;
            let mut n = 0;
            while n < BATCHES {
                match tokio::time::timeout(Duration::from_secs(20), events.poll()).await {
                    Ok(Ok(Event::Incoming(Packet::Publish(_)))) => {
                        n += 1;
                        received.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(Ok(_)) => {}
                    _ => break,
                }
            }
        }));
    }
    let (publisher, mut events) = AsyncClient::new(
        MqttOptions::new(
            format!("fan-pub-{}", std::process::id()),
            broker.host.clone(),
            broker.port.unwrap_or(1883),
        ),
        BATCHES + 16,
    );
    tokio::spawn(async move { while events.poll().await.is_ok() {} });
    let started = Instant::now();
    for b in 0..BATCHES {
        let first = now_ms() - 600_000 + (b * POINTS) as i64;
        publisher
            .publish(
                &topic,
                QoS::AtMostOnce,
                false,
                body("fan", first, 1, POINTS).to_vec(),
            )
            .await?;
    }
    for r in readers {
        let _ = r.await;
    }
    let secs = started.elapsed().as_secs_f64();
    let messages = received.load(Ordering::Relaxed) as f64;
    Ok((
        messages * POINTS as f64 / secs,
        messages / (CLIENTS * BATCHES) as f64,
    ))
}

pub(crate) async fn run(o: &Options) -> Result<()> {
    let nats =
        std::env::var("PLANTD_BENCH_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    let Some(base) = o.postgres_url.clone() else {
        bail!("the nodes of a region share a PostgreSQL database: give --postgres-url");
    };
    let db = create_postgres_db(&base)?;
    let deployment = format!("nodes{}", std::process::id());
    let flags = [
        "--nats-url",
        nats.as_str(),
        "--deployment",
        deployment.as_str(),
    ];
    let (a, key) = start_server_with(o, Some(&db), &flags)?;
    let b = spawn_server(o, Some(&db), &flags)?;
    let c = spawn_server(o, Some(&db), &flags)?;
    // The nodes hear each other once their NATS subscriptions are up.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let three = [a.addr.clone(), b.addr.clone(), c.addr.clone()];
    let (three_rate, three_share) = plantd(&three, &key).await?;
    let (one_rate, one_share) = plantd(&three[..1], &key).await?;
    drop((a, b, c));
    drop_database(Some(&db), Some(&base));
    let peer = match &o.mqtt_url {
        Some(url) => Some(mosquitto(url).await?),
        None => None,
    };
    println!("{CLIENTS} live clients, {BATCHES} batches of {POINTS} points written at one node");
    println!(
        "{:<52} {:>14} {:>10} {:>7}",
        "system", "points/s recv", "delivered", "ratio"
    );
    let line = |name: &str, rate: f64, share: f64| {
        println!(
            "{name:<52} {rate:>14.0} {:>9.1}% {:>7.2}",
            share * 100.0,
            rate / three_rate
        );
    };
    line(
        "plantd /v1/ws, clients over 3 nodes (PostgreSQL, NATS)",
        three_rate,
        three_share,
    );
    line(
        "plantd /v1/ws, clients on the writing node",
        one_rate,
        one_share,
    );
    if let Some((rate, share)) = peer {
        line(
            "Mosquitto 2.0, 100 subscribers of one topic (QoS 0)",
            rate,
            share,
        );
    }
    Ok(())
}
