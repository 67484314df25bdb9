//! `plantd-bench fleet`: the MQTT device channel at fleet scale beside Mosquitto in the same run.
//! N devices (default 5,000) are registered, connect (MQTT 3.1.1, one rumqttc client each) and
//! each publishes one point per second (QoS 1) and a heartbeat every 10 s, while commands go to
//! random devices, which answer at once. Figures: points acknowledged per second (a plantd
//! PUBACK means stored and durable), command round trip (created over HTTP until the device's
//! answer is acknowledged, stored) p50/p99, and the server's memory per connection. Mosquitto
//! 2 carries the same message load as the reference (its PUBACK means received; a command is
//! one client's publish until the device's answer reaches it).

use anyhow::{Context, Result, bail};
use rumqttc::{AsyncClient, Event, MqttOptions, Outgoing, Packet, QoS};
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::harness::{
    Options, backends, connect, drop_database, free_port, pct, post_json, start_server_with,
    stop_child,
};
use crate::sim::rss_mib;

/// What one device connection sends and measures.
#[derive(Clone)]
struct Shared {
    acked: Arc<AtomicU64>,
    /// plantd: device id → when its command was created (recorded before the request, as
    /// the answer may come back before the HTTP response does).
    sent_at: Arc<Mutex<HashMap<String, Instant>>>,
    /// Round trips, microseconds.
    rtt_us: Arc<Mutex<Vec<u32>>>,
    /// Publish to PUBACK of points and heartbeats, microseconds.
    ack_us: Arc<Mutex<Vec<u32>>>,
    /// plantd: the command's creation (the HTTP request alone), microseconds.
    create_us: Arc<Mutex<Vec<u32>>>,
    connected: Arc<AtomicU64>,
}

impl Shared {
    fn new() -> Self {
        Self {
            acked: Arc::default(),
            sent_at: Arc::default(),
            rtt_us: Arc::default(),
            create_us: Arc::default(),
            ack_us: Arc::default(),
            connected: Arc::default(),
        }
    }
}

enum Sent {
    /// A point or heartbeat, with when it was published.
    Point(Instant),
    /// A command's answer (one outstanding per device).
    Answer,
}

/// One device: connects, publishes a point a second and a heartbeat every 10 s, answers
/// commands; counts PUBACKs of points and times answers' PUBACKs (plantd) or receipt (Mosquitto).
async fn device(port: u16, id: String, password: Option<String>, shared: Shared, stop: Instant) {
    let mut o = MqttOptions::new(&id, "127.0.0.1", port);
    o.set_keep_alive(Duration::from_secs(60));
    o.set_inflight(10);
    if let Some(p) = &password {
        o.set_credentials(&id, p);
    }
    let (client, mut events) = AsyncClient::new(o, 16);
    let telemetry = format!("plantd/devices/{id}/telemetry");
    let heartbeat = format!("plantd/devices/{id}/heartbeat");
    let results = format!("plantd/devices/{id}/command-results");
    let mut pending: VecDeque<Sent> = VecDeque::new();
    let mut pkids: HashMap<u16, Sent> = HashMap::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut n: u64 = 0;
    let mut up = false;
    while Instant::now() < stop {
        tokio::select! {
            _ = tick.tick(), if up => {
                n += 1;
                let now = plantd_model::Timestamp::now().to_rfc3339();
                let body = json!({"data": [{"tag_name": "flow", "value": n as f64, "timestamp": now}]});
                if client.try_publish(&telemetry, QoS::AtLeastOnce, false, body.to_string()).is_ok() {
                    pending.push_back(Sent::Point(Instant::now()));
                }
                if n.is_multiple_of(10) && client.try_publish(&heartbeat, QoS::AtLeastOnce, false, r#"{"cpu_percent": 5}"#).is_ok() {
                    pending.push_back(Sent::Point(Instant::now()));
                }
            }
            e = events.poll() => match e {
                Ok(Event::Incoming(Packet::ConnAck(_))) => {
                    let _ = client.try_subscribe(format!("plantd/devices/{id}/commands"), QoS::AtLeastOnce);
                    if !up {
                        shared.connected.fetch_add(1, Ordering::Relaxed);
                    }
                    up = true;
                }
                Ok(Event::Incoming(Packet::Publish(p))) => {
                    let cmd: Value = serde_json::from_slice(&p.payload).unwrap_or(Value::Null);
                    let cid = cmd["id"].as_str().unwrap_or_default().to_string();
                    let answer = json!({"id": cid, "status": "succeeded", "result": {}});
                    if client.try_publish(&results, QoS::AtLeastOnce, false, answer.to_string()).is_ok() {
                        pending.push_back(Sent::Answer);
                    }
                }
                Ok(Event::Outgoing(Outgoing::Publish(pkid))) => {
                    if let Some(s) = pending.pop_front() {
                        pkids.insert(pkid, s);
                    }
                }
                Ok(Event::Incoming(Packet::PubAck(ack))) => match pkids.remove(&ack.pkid) {
                    Some(Sent::Point(at)) => {
                        shared.acked.fetch_add(1, Ordering::Relaxed);
                        shared.ack_us.lock().unwrap().push(at.elapsed().as_micros() as u32);
                    }
                    Some(Sent::Answer) => {
                        if let Some(t0) = shared.sent_at.lock().unwrap().remove(&id) {
                            shared.rtt_us.lock().unwrap().push(t0.elapsed().as_micros() as u32);
                        }
                    }
                    None => {}
                },
                Ok(_) => {}
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }
}

struct Row {
    system: &'static str,
    devices: u64,
    connected: u64,
    acked_per_s: f64,
    offered_per_s: f64,
    rtt: Vec<u32>,
    /// Publish to PUBACK of points, microseconds.
    ack: Vec<u32>,
    /// Commands sent in the measured time (each `rtt` entry is one answered).
    commands: u64,
    rss_per_conn_kib: f64,
}

fn print(rows: &[Row]) {
    println!(
        "| system | devices | connected | messages offered/s | acknowledged/s | PUBACK p50 | p99 | command round trip p50 | p99 | commands answered / sent | server memory per connection |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let system = match r.system {
            "SQLite" | "PostgreSQL" => format!("plantd on {} (stored durably)", r.system),
            other => other.to_string(),
        };
        println!(
            "| {} | {} | {} | {:.0} | {:.0} | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms | {} / {} | {:.1} KiB |",
            system,
            r.devices,
            r.connected,
            r.offered_per_s,
            r.acked_per_s,
            pct(&r.ack, 0.50),
            pct(&r.ack, 0.99),
            pct(&r.rtt, 0.50),
            pct(&r.rtt, 0.99),
            r.rtt.len(),
            r.commands,
            r.rss_per_conn_kib
        );
    }
}

/// Spawns the devices, waits until they are connected, measures for the duration; the caller's
/// `command` sends one command and records when.
async fn drive<F, Fut>(
    o: &Options,
    port: u16,
    creds: Vec<(String, Option<String>)>,
    pid: u32,
    mut command: F,
) -> Result<(Row, Shared)>
where
    F: FnMut(String, Shared) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let shared = Shared::new();
    let devices = creds.len() as u64;
    let rss0 = rss_mib(pid)?;
    let settle = Duration::from_secs(60);
    let stop = Instant::now() + settle + o.duration + Duration::from_secs(10);
    let ids: Vec<String> = creds.iter().map(|c| c.0.clone()).collect();
    for (id, pw) in creds {
        tokio::spawn(device(port, id, pw, shared.clone(), stop));
        tokio::task::yield_now().await;
    }
    let deadline = Instant::now() + settle;
    while shared.connected.load(Ordering::Relaxed) < devices && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let connected = shared.connected.load(Ordering::Relaxed);
    let rss1 = rss_mib(pid)?;
    let a0 = shared.acked.load(Ordering::Relaxed);
    shared.ack_us.lock().unwrap().clear();
    let t0 = Instant::now();
    let mut i = 0usize;
    while t0.elapsed() < o.duration {
        // Ten commands a second, to devices spread over the fleet.
        let id = ids[(i * 7919) % ids.len()].clone();
        i += 1;
        command(id, shared.clone()).await?;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let secs = t0.elapsed().as_secs_f64();
    let acked = shared.acked.load(Ordering::Relaxed) - a0;
    // Answers still on their way count (their round trip is as measured).
    tokio::time::sleep(Duration::from_secs(5)).await;
    let mut rtt = shared.rtt_us.lock().unwrap().clone();
    rtt.sort_unstable();
    let mut ack = shared.ack_us.lock().unwrap().clone();
    ack.sort_unstable();
    Ok((
        Row {
            system: "",
            devices,
            connected,
            acked_per_s: acked as f64 / secs,
            offered_per_s: connected as f64 * 1.1,
            rtt,
            ack,
            commands: i as u64,
            rss_per_conn_kib: (rss1 - rss0) * 1024.0 / connected.max(1) as f64,
        },
        shared,
    ))
}

pub(crate) async fn run(o: &Options) -> Result<()> {
    let n = o.devices;
    println!(
        "fleet: {n} devices, a point a second each and a heartbeat every 10 s, 10 commands/s; {} s measured",
        o.duration.as_secs()
    );
    let mut rows = Vec::new();

    // plantd with its embedded broker (durable acknowledgements), on each backend.
    for (backend, url) in backends(o) {
        rows.push(plantd_row(o, n, backend, url.as_deref()).await?);
        drop_database(url.as_deref(), o.postgres_url.as_deref());
    }

    // Mosquitto alone: the same devices and messages; a controller client sends the commands.
    let port = free_port()?;
    let dir = std::env::temp_dir().join(format!("plantd-bench-mosquitto-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(
        dir.join("m.conf"),
        format!("listener {port} 127.0.0.1\nallow_anonymous true\nmax_connections -1\n"),
    )?;
    let mut child = crate::harness::start_mosquitto(&dir.join("m.conf"))?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let creds: Vec<(String, Option<String>)> = (0..n).map(|i| (format!("dev{i}"), None)).collect();
    let controller = Controller::start(port).await?;
    let (mut row, _) = drive(o, port, creds, child.id(), |id, shared| {
        let controller = controller.clone();
        async move { controller.send(&id, &shared).await }
    })
    .await?;
    row.system = "Mosquitto 2 alone (acknowledged on receipt)";
    rows.push(row);
    stop_child(&mut child, &dir);
    print(&rows);
    if rows.iter().any(|r| r.connected < r.devices) {
        bail!("not every device connected");
    }
    Ok(())
}

/// plantd's row on one backend: registers the devices over HTTP, then drives them.
async fn plantd_row(
    o: &Options,
    n: usize,
    backend: &'static str,
    url: Option<&str>,
) -> Result<Row> {
    let port = free_port()?;
    let listen = format!("127.0.0.1:{port}");
    let (server, key) = start_server_with(o, url, &["--mqtt-listen", &listen])?;
    let mut http = connect(&server.addr).await?;
    let mut creds = Vec::with_capacity(n);
    let started = Instant::now();
    for i in 0..n {
        let d = post_json(
            &mut http,
            &server.addr,
            "/v1/fleet/devices",
            &key,
            &json!({"name": format!("bench {i}"), "serial_number": format!("B-{i}")}),
            201,
        )
        .await?;
        creds.push((
            d["data"]["id"].as_str().context("id")?.to_string(),
            Some(
                d["data"]["mqtt"]["password"]
                    .as_str()
                    .context("password")?
                    .to_string(),
            ),
        ));
    }
    println!(
        "{backend}: registered {n} devices in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let (addr, key2) = (server.addr.clone(), key.clone());
    let (mut row, shared) = drive(o, port, creds, server.child.id(), |id, shared| {
        let (addr, key) = (addr.clone(), key2.clone());
        async move {
            let mut http = connect(&addr).await?;
            let t0 = Instant::now();
            shared.sent_at.lock().unwrap().insert(id.clone(), t0);
            post_json(
                &mut http,
                &addr,
                &format!("/v1/fleet/devices/{id}/command"),
                &key,
                &json!({"command": "ping"}),
                201,
            )
            .await?;
            let took = t0.elapsed().as_micros() as u32;
            shared.create_us.lock().unwrap().push(took);
            Ok(())
        }
    })
    .await?;
    let mut create = shared.create_us.lock().unwrap().clone();
    create.sort_unstable();
    println!(
        "{backend}: creating a command (POST /v1/fleet/devices/{{id}}/command) p50 {:.1} ms, p99 {:.1} ms",
        pct(&create, 0.50),
        pct(&create, 0.99)
    );
    row.system = backend;
    drop(server);
    Ok(row)
}

/// The Mosquitto row's stand-in for plantd: publishes commands, takes the answers.
#[derive(Clone)]
struct Controller {
    client: AsyncClient,
    sent: Arc<Mutex<HashMap<String, Instant>>>,
}

impl Controller {
    async fn start(port: u16) -> Result<Self> {
        let mut o = MqttOptions::new("bench-controller", "127.0.0.1", port);
        o.set_keep_alive(Duration::from_secs(60));
        let (client, mut events) = AsyncClient::new(o, 1024);
        client
            .subscribe("plantd/devices/+/command-results", QoS::AtLeastOnce)
            .await?;
        let sent: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
        tokio::spawn(async move {
            loop {
                match events.poll().await {
                    Ok(Event::Incoming(Packet::Publish(p))) => {
                        let v: Value = serde_json::from_slice(&p.payload).unwrap_or(Value::Null);
                        let id = v["id"].as_str().unwrap_or_default();
                        RESULTS
                            .lock()
                            .unwrap()
                            .push((id.to_string(), Instant::now()));
                    }
                    Ok(_) => {}
                    Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            }
        });
        Ok(Self { client, sent })
    }

    async fn send(&self, device: &str, shared: &Shared) -> Result<()> {
        let cid = plantd_model::new_id();
        let body = json!({"id": cid, "command": "ping", "params": {}});
        self.sent
            .lock()
            .unwrap()
            .insert(cid.clone(), Instant::now());
        self.client
            .publish(
                format!("plantd/devices/{device}/commands"),
                QoS::AtLeastOnce,
                false,
                body.to_string(),
            )
            .await?;
        // Answers that arrived: their round trips.
        let done: Vec<(String, Instant)> = RESULTS.lock().unwrap().drain(..).collect();
        let mut sent = self.sent.lock().unwrap();
        for (id, at) in done {
            if let Some(t0) = sent.remove(&id) {
                shared
                    .rtt_us
                    .lock()
                    .unwrap()
                    .push(at.duration_since(t0).as_micros() as u32);
            }
        }
        Ok(())
    }
}

/// Answers the controller received, with when.
static RESULTS: Mutex<Vec<(String, Instant)>> = Mutex::new(Vec::new());
