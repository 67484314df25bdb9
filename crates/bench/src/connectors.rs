//! `plantd-bench connectors`: points per second one `plantd serve` node stores from a data
//! source connector, with the node's CPU use: an OPC UA source subscribed to 10,000 variables of
//! the simulator (changing once per second, 5 and 10 times per second), and a Modbus TCP source
//! polling 2,400 registers of the simulator. Server, simulator and this process are separate
//! processes on the same cores; points are counted in the database (`telemetry_raw` rows).

use anyhow::{Context, Result, bail};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

use super::sim::{SimProcess, config, cpu_seconds, rss_mib};
use super::{Options, Server, connect, create_postgres_db, start_server};

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
}

async fn count_points(db: &sqlx::AnyPool) -> Result<i64> {
    let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM telemetry_raw")
        .fetch_one(db)
        .await?;
    Ok(n)
}

/// Creates the source, waits for it to connect, then counts what is stored for the duration.
async fn measure(
    o: &Options,
    server: &Server,
    key: &str,
    db: &sqlx::AnyPool,
    sim: &SimProcess,
    source: Value,
    offered: f64,
) -> Result<Row> {
    let mut sender = connect(&server.addr).await?;
    let (status, created) = call(
        &mut sender,
        &server.addr,
        "POST",
        "/v1/data-sources",
        key,
        Some(source.clone()),
    )
    .await?;
    if status != 201 {
        bail!("creating the data source failed ({status}): {created}");
    }
    let id = created["data"]["id"].as_str().context("id")?.to_string();
    let path = format!("/v1/data-sources/{id}");
    let deadline = Instant::now() + Duration::from_secs(120);
    let tags = loop {
        let (_, s) = call(&mut sender, &server.addr, "GET", &path, key, None).await?;
        if s["data"]["status"] == "connected" {
            break s["data"]["tag_count"].as_i64().unwrap_or(0);
        }
        if Instant::now() > deadline {
            bail!("the source did not connect: {}", s["data"]["last_error"]);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    // Warm up, then measure.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let server_pid = server.child.id();
    let (n0, c0, s0, t0) = (
        count_points(db).await?,
        cpu_seconds(server_pid)?,
        cpu_seconds(sim.pid())?,
        Instant::now(),
    );
    tokio::time::sleep(o.duration).await;
    let secs = t0.elapsed().as_secs_f64();
    let (n1, c1, s1) = (
        count_points(db).await?,
        cpu_seconds(server_pid)?,
        cpu_seconds(sim.pid())?,
    );
    let rss = rss_mib(server_pid)?;
    let (status, _) = call(&mut sender, &server.addr, "DELETE", &path, key, None).await?;
    if status != 204 {
        bail!("deleting the data source failed ({status})");
    }
    Ok(Row {
        source: String::new(),
        offered,
        stored: (n1 - n0) as f64 / secs,
        server_cpu: (c1 - c0) / secs * 100.0,
        sim_cpu: (s1 - s0) / secs * 100.0,
        server_rss: rss,
        tags,
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
        std::thread::available_parallelism().map_or(0, |n| n.get())
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
    let mut backends: Vec<(&str, Option<String>)> = Vec::new();
    if !o.no_sqlite {
        backends.push(("SQLite", None));
    }
    if let Some(url) = &o.postgres_url {
        match create_postgres_db(url) {
            Ok(db) => backends.push(("PostgreSQL", Some(db))),
            Err(e) => eprintln!("PostgreSQL skipped: {e}"),
        }
    }
    for (backend, url) in &backends {
        let (server, key) = start_server(o, url.as_deref())?;
        let db_url = match url {
            Some(u) => u.clone(),
            None => format!("sqlite://{}", server.dir.join("plantd.db").display()),
        };
        let db = sqlx::any::AnyPoolOptions::new()
            .max_connections(1)
            .connect(&db_url)
            .await?;
        for update_ms in [1000u64, 200, 100] {
            let variables = 10_000;
            let label = format!("OPC UA, {variables} monitored items, {update_ms} ms");
            let result = async {
                let sim = SimProcess::start(o, "connectors", &config(variables, update_ms))?;
                let source = json!({"name": format!("sim {update_ms}"), "type": "opcua", "config": {
                    "endpoint": sim.opcua_url, "publishing_interval_ms": 100,
                    "sampling_interval_ms": update_ms}});
                let offered = variables as f64 * 1000.0 / update_ms as f64;
                measure(o, &server, &key, &db, &sim, source, offered).await
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
            measure(o, &server, &key, &db, &sim, source, offered).await
        }
        .await
        .map(|mut r| {
            r.source = label.clone();
            r
        });
        print(backend, &result, &label);
        db.close().await;
        drop(server);
    }
    println!(
        "\ntarget (issue 5): 50,000 points/s from OPC UA subscriptions on 2 cores. offered/s: value changes the simulator makes (OPC UA) or register values per poll times polls/s (Modbus); CPU % is of one core"
    );
    Ok(())
}
