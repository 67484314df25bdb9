//! `plantd-bench edge-forward`: store and forward after an hour offline (issue 34). An edge
//! agent (`plantd edge`, SQLite) enrolls with a cloud (`plantd serve --mqtt-listen`), the cloud
//! stops, the agent takes an hour of 1,000 tags at 1 Hz (3,600 batches of 1,000 points, kept in
//! its outbox), the cloud starts again and the agent forwards the hour over MQTT (QoS 1, its
//! batches packed into messages of up to 5,000 points, each acknowledged after the cloud's
//! durable write), its backfill rate unbounded: the time until its outbox is empty, the cloud's
//! count of the points and of the messages it took.
//!
//! Beside it, Mosquitto's bridge doing the same store and forward: a Mosquitto on the edge
//! bridges `plantd/#` to a second one (the cloud) that is down while the same 3,600 messages
//! (the same payloads) are published to the first with QoS 1; the cloud's broker starts and a
//! subscriber there counts them. Mosquitto keeps the queue in memory and the receiving broker
//! writes nothing: the figure is a transport's, not a store's.

use anyhow::{Context, Result, bail};
use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS};
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::edge::{ASSETS, BACKFILL_SECS, TAGS, scan, send_hour};
use crate::harness::{
    Options, Probe, connect, free_port, post_json, spawn_command_with, start_mosquitto,
    start_server_with, stop_child,
};
use crate::telemetry::{create_keys, gauge, now_ms, rfc3339};

/// The agent's `GET /v1/edge/config` answer.
async fn edge_config(addr: &str, key: &str) -> Result<Value> {
    let mut http = connect(addr).await?;
    let (status, body) = Probe::get("/v1/edge/config", key)
        .call(&mut http, addr)
        .await?;
    if status != 200 {
        bail!("GET /v1/edge/config answered {status}");
    }
    Ok(serde_json::from_slice(&body)?)
}

/// Waits (at most `secs`) until `done` holds of the agent's forwarding status.
async fn wait_forwarding(
    addr: &str,
    key: &str,
    secs: u64,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Result<Value> {
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        let c = edge_config(addr, key).await?;
        if done(&c["data"]["forwarding"]) {
            return Ok(c["data"]["forwarding"].clone());
        }
        if Instant::now() > until {
            bail!("{what}: not within {secs} s ({})", c["data"]["forwarding"]);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `plantd serve` with the same data directory and addresses as before.
fn restart_cloud(
    o: &Options,
    cloud: &crate::harness::Server,
    listen: &[&str],
) -> Result<std::process::Child> {
    Ok(Command::new(&o.plantd_path)
        .arg("serve")
        .args(listen)
        .args(&cloud.storage)
        .env("PLANTD_LOG", "warn,sqlx::query=error")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()?)
}

/// Points the cloud holds in `[from, to)` ms, asset by asset.
async fn cloud_points(addr: &str, key: &str, from: i64, to: i64) -> Result<u64> {
    let mut http = connect(addr).await?;
    let mut total = 0;
    for a in 0..ASSETS {
        let path = format!(
            "/v1/telemetry?asset_id=Asset_{a:02}&start={}&end={}&per_page=1",
            rfc3339(from).replace('+', "%2B"),
            rfc3339(to).replace('+', "%2B")
        );
        let (status, body) = Probe::get(&path, key).call(&mut http, addr).await?;
        if status != 200 {
            bail!("GET {path} answered {status}");
        }
        let v: Value = serde_json::from_slice(&body)?;
        total += v["meta"]["total"].as_u64().context("meta.total")?;
    }
    Ok(total)
}

/// plantd's row: seconds, points the cloud holds, messages it took, seconds the agent took to
/// keep the hour.
async fn plantd_row(o: &Options) -> Result<(f64, u64, u64, f64)> {
    let (cloud_port, mqtt_port) = (free_port()?, free_port()?);
    let listen_at = format!("127.0.0.1:{cloud_port}");
    let mqtt_at = format!("127.0.0.1:{mqtt_port}");
    let listen = ["--listen", &listen_at, "--mqtt-listen", &mqtt_at];
    let (mut cloud, cloud_key) = start_server_with(o, None, &listen)?;
    let mut http = connect(&cloud.addr).await?;
    let token = post_json(
        &mut http,
        &cloud.addr,
        "/v1/fleet/enrollment/token",
        &cloud_key,
        &serde_json::json!({"max_uses": 1}),
        201,
    )
    .await?["data"]["token"]
        .as_str()
        .context("token")?
        .to_string();
    let cloud_url = format!("http://{}", cloud.addr);
    let agent = spawn_command_with(
        o,
        "edge",
        None,
        &[
            "--mode",
            "production",
            "--enroll",
            &token,
            "--cloud",
            &cloud_url,
        ],
        "[edge]\nbackfill_points_per_second = 1000000000\n",
    )?;
    let keys = create_keys(o, &agent, 8)?;
    wait_forwarding(&agent.addr, &keys[0], 60, "the agent connected", |f| {
        f["connected"] == true
    })
    .await?;

    // The cloud goes away; the agent keeps an hour.
    let _ = Command::new("kill")
        .args(["-TERM", &cloud.child.id().to_string()])
        .status();
    cloud.child.wait()?;
    wait_forwarding(&agent.addr, &keys[0], 90, "the agent noticed", |f| {
        f["connected"] == false
    })
    .await?;
    let start = now_ms() - (BACKFILL_SECS + 120) * 1000;
    let kept_in = send_hour(&agent.addr, &keys, start).await?;
    let kept = wait_forwarding(&agent.addr, &keys[0], 60, "the hour kept", |f| {
        f["pending_points"].as_u64() == Some(BACKFILL_SECS as u64 * TAGS as u64)
    })
    .await?;
    println!(
        "plantd: the agent kept an hour of {TAGS} tags in {kept_in:.1} s ({} points, {} batches waiting)",
        kept["pending_points"], kept["pending_batches"]
    );

    // The cloud returns: the time until the agent's outbox is empty.
    let back = Instant::now();
    cloud.child = restart_cloud(o, &cloud, &listen)?;
    wait_forwarding(&agent.addr, &keys[0], 3_600, "the backlog forwarded", |f| {
        f["pending_points"] == 0
    })
    .await?;
    let secs = back.elapsed().as_secs_f64();
    let arrived =
        cloud_points(&cloud.addr, &cloud_key, start, start + BACKFILL_SECS * 1000).await?;
    // The telemetry messages the cloud took since it started again.
    let messages = gauge(&cloud, "plantd_mqtt_messages_total{topic=\"telemetry\"}").await? as u64;
    drop(agent);
    stop_child(&mut cloud.child, &cloud.dir);
    Ok((secs, arrived, messages, kept_in))
}

/// Mosquitto's bridge forwarding the same messages: its messages/s and seconds.
async fn mosquitto_row() -> Result<(f64, u64)> {
    let (edge_port, cloud_port) = (free_port()?, free_port()?);
    let dir = std::env::temp_dir().join(format!("plantd-bench-bridge-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(
        dir.join("edge.conf"),
        format!(
            "listener {edge_port} 127.0.0.1\nallow_anonymous true\nmax_queued_messages 0\nmax_queued_bytes 0\n\
             connection cloud\naddress 127.0.0.1:{cloud_port}\ntopic plantd/# out 1\ncleansession false\n\
             local_cleansession false\nrestart_timeout 1 2\n"
        ),
    )?;
    std::fs::write(
        dir.join("cloud.conf"),
        format!("listener {cloud_port} 127.0.0.1\nallow_anonymous true\nmax_queued_messages 0\n"),
    )?;
    let start_broker = |conf: &str| start_mosquitto(&dir.join(conf));
    let mut edge = start_broker("edge.conf")?;
    tokio::time::sleep(Duration::from_millis(500)).await;

    // The same messages, published to the edge's broker while the cloud's is down.
    let mut opts = MqttOptions::new("bench-edge-publisher", "127.0.0.1", edge_port);
    opts.set_max_packet_size(4 << 20, 4 << 20);
    opts.set_keep_alive(Duration::from_secs(60));
    let (client, mut events) = AsyncClient::new(opts, 64);
    let start = now_ms() - (BACKFILL_SECS + 120) * 1000;
    let messages = BACKFILL_SECS as u64;
    let publisher = tokio::spawn(async move {
        for k in 0..BACKFILL_SECS {
            client
                .publish(
                    "plantd/devices/bench/telemetry",
                    QoS::AtLeastOnce,
                    false,
                    scan(start + k * 1000, k).to_vec(),
                )
                .await?;
        }
        Ok::<_, anyhow::Error>(())
    });
    let mut acked = 0;
    while acked < messages {
        if let Event::Incoming(Packet::PubAck(_)) = events.poll().await? {
            acked += 1;
        }
    }
    publisher.await??;

    // The cloud's broker starts; a subscriber there counts what the bridge forwards.
    let back = Instant::now();
    let mut cloud = start_broker("cloud.conf")?;
    let mut sub = MqttOptions::new("bench-cloud-subscriber", "127.0.0.1", cloud_port);
    sub.set_max_packet_size(4 << 20, 4 << 20);
    let (client, mut sub_events) = AsyncClient::new(sub, 64);
    let mut received = 0u64;
    let mut subscribed = false;
    let until = Instant::now() + Duration::from_secs(600);
    while received < messages {
        if Instant::now() > until {
            bail!("the bridge forwarded {received} of {messages} messages in 600 s");
        }
        match tokio::time::timeout(Duration::from_secs(5), sub_events.poll()).await {
            Ok(Ok(Event::Incoming(Packet::ConnAck(_)))) if !subscribed => {
                client.subscribe("plantd/#", QoS::AtLeastOnce).await?;
                subscribed = true;
            }
            Ok(Ok(Event::Incoming(Packet::Publish(_)))) => received += 1,
            // The broker is starting: try again.
            Ok(Err(_)) => tokio::time::sleep(Duration::from_millis(20)).await,
            _ => {}
        }
    }
    let secs = back.elapsed().as_secs_f64();
    stop_child(&mut cloud, &dir);
    let _ = edge.kill();
    let _ = edge.wait();
    Ok((secs, received))
}

pub(crate) async fn run(o: &Options) -> Result<()> {
    let points = BACKFILL_SECS as u64 * TAGS as u64;
    println!(
        "store and forward: an hour of {TAGS} tags at 1 Hz ({points} points in {BACKFILL_SECS} messages of {TAGS}) kept while the cloud is away, then forwarded; {}",
        o.plantd_path.display()
    );
    let (plantd_secs, arrived, plantd_messages, _) = plantd_row(o).await?;
    if arrived != points {
        bail!("the cloud holds {arrived} of the {points} points");
    }
    let (bridge_secs, received) = mosquitto_row().await?;
    println!();
    println!(
        "{:<62} {:>10} {:>12} {:>10}",
        "forwarding the hour once the cloud is back", "seconds", "points/s", "messages"
    );
    println!(
        "{:<62} {:>10.1} {:>12.0} {:>10}",
        "plantd edge -> plantd cloud (MQTT QoS 1, stored durably)",
        plantd_secs,
        points as f64 / plantd_secs,
        plantd_messages
    );
    println!(
        "{:<62} {:>10.1} {:>12.0} {:>10}",
        "Mosquitto bridge -> Mosquitto (QoS 1, in memory, not stored)",
        bridge_secs,
        received as f64 * TAGS as f64 / bridge_secs,
        received
    );
    println!(
        "(both from the moment the cloud starts again: its start and the reconnection included; the cloud's count of plantd's points: {arrived})"
    );
    Ok(())
}
