//! `plantd-bench connectors`: points per second one `plantd serve` node stores from a data
//! source connector, with the node's CPU use: an OPC UA source subscribed to 10,000 variables of
//! the simulator (changing once per second, 5 and 10 times per second), and a Modbus TCP source
//! polling 2,400 registers of the simulator. Server, simulator and this process are separate
//! processes on the same cores; points are counted in the database (`telemetry_raw` rows whose
//! timestamps fall in the measured window).

use anyhow::{Context, Result, bail};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

use crate::harness::{Options, Server, backends, connect, drop_database, start_server};
use crate::sim::{SimProcess, config, cpu_seconds, rss_mib};

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

async fn call(
    sender: &mut Sender,
    addr: &str,
    method: &str,
    path: &str,
    key: &str,
    body: Option<Value>,
) -> Result<(u16, Value)> {
    let req = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr)
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(
            body.map(|b| b.to_string()).unwrap_or_default(),
        )))?;
    sender.ready().await?;
    let resp = sender.send_request(req).await?;
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await?.to_bytes();
    Ok((
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    ))
}

struct Row {
    source: String,
    offered: f64,
    stored: f64,
    server_cpu: f64,
    sim_cpu: f64,
    server_rss: f64,
    tags: i64,
    /// MQTT only: points per second the broker delivered to a plain subscriber.
    peer: f64,
}

/// Points stored with a timestamp in [from, to) (Unix ms), as the API counts them.
async fn count_points(
    sender: &mut Sender,
    server: &Server,
    key: &str,
    from: i64,
    to: i64,
) -> Result<i64> {
    let path = format!(
        "/v1/telemetry?start={}&end={}&per_page=1",
        plantd_model::Timestamp::from_millis(from).to_rfc3339(),
        plantd_model::Timestamp::from_millis(to).to_rfc3339()
    );
    let (status, body) = call(sender, &server.addr, "GET", &path, key, None).await?;
    if status != 200 {
        bail!("counting the stored points answered {status}: {body}");
    }
    body["meta"]["total"].as_i64().context("meta.total")
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Creates a data source and waits until it is connected: its path and tag count.
async fn create_connected(
    sender: &mut Sender,
    server: &Server,
    key: &str,
    source: Value,
    timeout_secs: u64,
) -> Result<(String, i64)> {
    let (status, created) = call(
        sender,
        &server.addr,
        "POST",
        "/v1/data-sources",
        key,
        Some(source),
    )
    .await?;
    if status != 201 {
        bail!("creating the data source failed ({status}): {created}");
    }
    let path = format!(
        "/v1/data-sources/{}",
        created["data"]["id"].as_str().context("id")?
    );
    let deadline = Instant::now() + Duration::from_secs(timeout_secs);
    loop {
        let (_, s) = call(sender, &server.addr, "GET", &path, key, None).await?;
        if s["data"]["status"] == "connected" {
            return Ok((path, s["data"]["tag_count"].as_i64().unwrap_or(0)));
        }
        if Instant::now() > deadline {
            bail!("the source did not connect: {}", s["data"]["last_error"]);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Creates the source, waits for it to connect, then counts what is stored for the duration.
async fn measure(
    o: &Options,
    server: &Server,
    key: &str,
    sim: &SimProcess,
    source: Value,
    offered: f64,
) -> Result<Row> {
    // Modbus offers what each poll reads; OPC UA what the simulator changed.
    let polled = source["type"] == "modbus";
    let mut sender = connect(&server.addr).await?;
    let (path, tags) = create_connected(&mut sender, server, key, source, 120).await?;
    // Warm up, then measure.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let server_pid = server.child.id();
    // Points are counted by their (source) timestamps over the window, a few seconds after it
    // ends: what the equipment produced in that time and the node stored. Writes come in bursts
    // (commits, checkpoints), so counting rows at two instants would measure the bursts.
    let mut control = connect(&sim.api_addr).await?;
    let mut sim_updates = async || -> Result<f64> {
        let (_, s) = call(&mut control, &sim.api_addr, "GET", "/api/status", "", None).await?;
        s["data"]["value_updates"].as_f64().context("value_updates")
    };
    let (from, c0, s0, u0, t0) = (
        now_ms(),
        cpu_seconds(server_pid)?,
        cpu_seconds(sim.pid())?,
        sim_updates().await?,
        Instant::now(),
    );
    tokio::time::sleep(o.duration).await;
    let (to, c1, s1, u1) = (
        now_ms(),
        cpu_seconds(server_pid)?,
        cpu_seconds(sim.pid())?,
        sim_updates().await?,
    );
    let cpu_secs = t0.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let stored = count_points(&mut sender, server, key, from, to).await?;
    let secs = (to - from) as f64 / 1000.0;
    let rss = rss_mib(server_pid)?;
    let (status, _) = call(&mut sender, &server.addr, "DELETE", &path, key, None).await?;
    if status != 204 {
        bail!("deleting the data source failed ({status})");
    }
    Ok(Row {
        source: String::new(),
        offered: if polled {
            offered
        } else {
            (u1 - u0) / cpu_secs
        },
        stored: stored as f64 / secs,
        server_cpu: (c1 - c0) / cpu_secs * 100.0,
        sim_cpu: (s1 - s0) / cpu_secs * 100.0,
        server_rss: rss,
        tags,
        peer: 0.0,
    })
}

/// Publishes 500 messages per second of 100 values each (1,000 assets in turn, so that no two
/// messages of one asset share a millisecond) to the broker for the duration, while the node's
/// MQTT source and a plain subscriber receive them.
async fn mqtt_row(o: &Options, server: &Server, key: &str, broker: &str) -> Result<Row> {
    use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS};
    let url = plantd_model::data_source::parse_url(broker).map_err(anyhow::Error::msg)?;
    let port = url.port.unwrap_or(1883);
    let topic = format!("plantd-bench/{}", std::process::id());
    let mut sender = connect(&server.addr).await?;
    let source = json!({"name": "broker", "type": "mqtt", "config": {
        "broker_url": broker, "topics": [format!("{topic}/#")], "qos": 1}});
    let (path, _) = create_connected(&mut sender, server, key, source, 30).await?;
    // The peer: a plain subscriber counting messages.
    let mut sub_opts = MqttOptions::new(
        format!("plantd-bench-sub-{}", std::process::id()),
        url.host.clone(),
        port,
    );
    sub_opts.set_max_packet_size(1 << 20, 1 << 20);
    let (sub, mut sub_events) = AsyncClient::new(sub_opts, 64);
    sub.subscribe(format!("{topic}/#"), QoS::AtLeastOnce)
        .await?;
    let received = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counter = received.clone();
    let subscriber = tokio::spawn(async move {
        while let Ok(e) = sub_events.poll().await {
            if let Event::Incoming(Packet::Publish(_)) = e {
                counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    });
    let mut pub_opts = MqttOptions::new(
        format!("plantd-bench-pub-{}", std::process::id()),
        url.host.clone(),
        port,
    );
    pub_opts.set_max_packet_size(1 << 20, 1 << 20);
    let (publisher, mut pub_events) = AsyncClient::new(pub_opts, 1024);
    let publisher_loop = tokio::spawn(async move { while pub_events.poll().await.is_ok() {} });
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Bodies prepared before the clock starts; only the timestamp is filled in.
    let values: String = (0..100)
        .map(|t| format!("\"t{t}\": {}.5", t))
        .collect::<Vec<_>>()
        .join(", ");
    let server_pid = server.child.id();
    let (from, c0, r0, t0) = (
        now_ms(),
        cpu_seconds(server_pid)?,
        received.load(std::sync::atomic::Ordering::Relaxed),
        Instant::now(),
    );
    let mut tick = tokio::time::interval(Duration::from_millis(2));
    let mut sent = 0u64;
    while t0.elapsed() < o.duration {
        tick.tick().await;
        let asset = sent % 1000;
        let body = format!(
            "{{\"asset_id\": \"M{asset:04}\", \"timestamp\": {}, \"values\": {{{values}}}}}",
            now_ms()
        );
        publisher
            .publish(
                format!("{topic}/M{asset:04}"),
                QoS::AtLeastOnce,
                false,
                body,
            )
            .await?;
        sent += 1;
    }
    let (to, c1) = (now_ms(), cpu_seconds(server_pid)?);
    let cpu_secs = t0.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let delivered = received.load(std::sync::atomic::Ordering::Relaxed) - r0;
    let stored = count_points(&mut sender, server, key, from, to).await?;
    let secs = (to - from) as f64 / 1000.0;
    let rss = rss_mib(server_pid)?;
    let _ = call(&mut sender, &server.addr, "DELETE", &path, key, None).await?;
    subscriber.abort();
    publisher_loop.abort();
    Ok(Row {
        source: String::new(),
        offered: sent as f64 * 100.0 / secs,
        stored: stored as f64 / secs,
        server_cpu: (c1 - c0) / cpu_secs * 100.0,
        sim_cpu: 0.0,
        server_rss: rss,
        tags: 100_000,
        peer: delivered as f64 * 100.0 / secs,
    })
}

fn print(backend: &str, r: &Result<Row>, label: &str) {
    match r {
        Ok(r) => println!(
            "{:<11} {:<44} {:>6} {:>12.0} {:>12.0} {:>12.0} {:>10.0} {:>8.0} MiB",
            backend, r.source, r.tags, r.offered, r.stored, r.server_cpu, r.sim_cpu, r.server_rss
        ),
        Err(e) => println!("{backend:<11} {label:<44} failed: {e:#}"),
    }
}

pub async fn run(o: &Options) -> Result<()> {
    sqlx::any::install_default_drivers();
    println!(
        "plantd connector benchmark: points/s one node stores from a connector (counted in the database), {} s per row; server, simulator and this process share this machine's {} cores\n",
        o.duration.as_secs(),
        crate::harness::cores()
    );
    println!(
        "{:<11} {:<44} {:>6} {:>12} {:>12} {:>12} {:>10} {:>12}",
        "backend",
        "source",
        "tags",
        "offered/s",
        "stored/s",
        "server CPU%",
        "sim CPU%",
        "server RSS"
    );
    let backends = backends(o);
    for (backend, url) in &backends {
        let (server, key) = start_server(o, url.as_deref())?;
        for update_ms in [1000u64, 200, 100] {
            let variables = 10_000;
            let label = format!("OPC UA, {variables} monitored items, {update_ms} ms");
            let result = async {
                let sim = SimProcess::start(o, "connectors", &config(variables, update_ms))?;
                let source = json!({"name": format!("sim {update_ms}"), "type": "opcua", "config": {
                    "endpoint": sim.opcua_url, "publishing_interval_ms": 100}});
                let offered = variables as f64 * 1000.0 / update_ms as f64;
                measure(o, &server, &key, &sim, source, offered).await
            }
            .await
            .map(|mut r| {
                r.source = label.clone();
                r
            });
            print(backend, &result, &label);
        }
        // Modbus: 600 vibration sensors = 2,400 float32 input registers (4 per asset at
        // 100 * i), one request per asset, polled every 200 ms.
        let assets = 600;
        let label = format!("Modbus TCP, {} registers, poll 200 ms", assets * 4);
        let result = async {
            let sim = SimProcess::start(o, "connectors-modbus", &config(assets * 4, 100))?;
            let (host, port) = sim.modbus_addr.rsplit_once(':').context("modbus address")?;
            let registers: Vec<Value> =
                (0..assets)
                    .flat_map(|i| {
                        ["X", "Y", "Z", "RMS"].into_iter().enumerate().map(move |(k, tag)| {
                        json!({"asset_id": format!("V{i:06}"), "tag_name": tag, "kind": "input",
                               "address": 100 * i + 2 * k, "data_type": "f32"})
                    })
                    })
                    .collect();
            let source = json!({"name": "modbus", "type": "modbus", "config": {
                "host": host, "port": port.parse::<u16>()?, "poll_interval_ms": 200,
                "registers": registers}});
            let offered = (assets * 4) as f64 * 5.0;
            measure(o, &server, &key, &sim, source, offered).await
        }
        .await
        .map(|mut r| {
            r.source = label.clone();
            r
        });
        print(backend, &result, &label);
        if let Some(broker) = &o.mqtt_url {
            let label = "MQTT, 500 messages/s x 100 values, QoS 1".to_string();
            let result = mqtt_row(o, &server, &key, broker).await.map(|mut r| {
                r.source = label.clone();
                r
            });
            print(backend, &result, &label);
            if let Ok(r) = &result {
                println!(
                    "{:<11} {:<44} {:>6} {:>12} {:>12.0} {:>12}   (peer: the broker's delivery to a plain subscriber, as points)",
                    "Mosquitto", "the same stream to a rumqttc subscriber", "", "", r.peer, ""
                );
            }
        }
        drop(server);
        drop_database(url.as_deref(), o.postgres_url.as_deref());
    }
    println!(
        "\ntarget (issue 5): 50,000 points/s from OPC UA subscriptions on 2 cores. offered/s: value changes the simulator made in the window (its control API's value_updates; OPC UA) or registers per poll times polls/s (Modbus); CPU % is of one core"
    );
    Ok(())
}
