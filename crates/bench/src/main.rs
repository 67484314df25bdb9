//! `plantd-bench api`: authenticated `GET /v1/data-sources` requests per second and latency
//! percentiles over loopback, with rate limiting (finite enterprise limits) and audit on, on
//! SQLite and on PostgreSQL, beside `GET /v1/health` (the HTTP stack without auth or database)
//! as a reference ceiling. The server runs as its own process (the release `plantd` binary next
//! to this one); the load generator is a lean HTTP/1.1 keep-alive client. Both share the
//! machine's cores: the table says so.

use anyhow::{Context, Result, bail};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod alerts;
mod connectors;
mod sim;
mod telemetry;

struct Options {
    suite: String,
    /// Points of the one series the aggregation benchmark reads.
    points: u64,
    duration: Duration,
    /// Client connections; `None`: each suite's default (api 16, telemetry 4).
    connections: Option<usize>,
    postgres_url: Option<String>,
    /// Skip SQLite (measure PostgreSQL only).
    no_sqlite: bool,
    /// Telemetry: only the ingest rows.
    ingest_only: bool,
    plantd: PathBuf,
    /// Connectors: the MQTT broker for the MQTT row (none: skipped).
    mqtt_url: Option<String>,
}

fn options() -> Result<Options> {
    let mut args = std::env::args().skip(1);
    let mut o = Options {
        suite: String::new(),
        points: 10_000_000,
        duration: Duration::from_secs(10),
        connections: None,
        postgres_url: std::env::var("PLANTD_BENCH_POSTGRES_URL")
            .ok()
            .or(Some("postgres://postgres@127.0.0.1:5432/test".into())),
        plantd: std::env::current_exe()?.with_file_name("plantd"),
        no_sqlite: false,
        ingest_only: false,
        mqtt_url: Some(
            std::env::var("PLANTD_BENCH_MQTT_URL").unwrap_or("mqtt://127.0.0.1:1883".into()),
        ),
    };
    let mut suite = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--duration" => {
                o.duration = Duration::from_secs(args.next().context("--duration N")?.parse()?)
            }
            "--connections" => {
                o.connections = Some(args.next().context("--connections N")?.parse()?)
            }
            "--postgres-url" => o.postgres_url = Some(args.next().context("--postgres-url URL")?),
            "--no-postgres" => o.postgres_url = None,
            "--mqtt-url" => o.mqtt_url = Some(args.next().context("--mqtt-url URL")?),
            "--no-mqtt" => o.mqtt_url = None,
            "--no-sqlite" => o.no_sqlite = true,
            "--ingest-only" => o.ingest_only = true,
            "--plantd" => o.plantd = args.next().context("--plantd PATH")?.into(),
            "api" | "telemetry" | "sim" | "connectors" | "alerts" => suite = Some(a),
            "--points" => o.points = args.next().context("--points N")?.parse()?,
            other => bail!(
                "unknown argument {other}; usage: plantd-bench api [--duration S] [--connections N] [--postgres-url URL | --no-postgres] [--no-sqlite] [--ingest-only] [--plantd PATH]"
            ),
        }
    }
    let Some(suite) = suite else {
        bail!(
            "usage: plantd-bench api|telemetry|sim|connectors|alerts [--duration S] [--connections N] [--points N] [--postgres-url URL | --no-postgres]"
        );
    };
    o.suite = suite;
    if !o.plantd.exists() {
        bail!(
            "{} not found: build it with `cargo build --release -p plantd`",
            o.plantd.display()
        );
    }
    Ok(o)
}

struct Server {
    child: Child,
    addr: String,
    dir: PathBuf,
    storage: Vec<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn start_server(o: &Options, database_url: Option<&str>) -> Result<(Server, String)> {
    let dir = std::env::temp_dir().join(format!(
        "plantd-bench-{}-{}",
        std::process::id(),
        Instant::now().elapsed().as_nanos()
    ));
    std::fs::create_dir_all(&dir)?;
    // Finite enterprise limits so the limiter counts every request (unlimited would skip it).
    let config = dir.join("bench.toml");
    std::fs::write(
        &config,
        "anonymous_requests_per_minute = 1000000000\n[limits.enterprise_requests]\nper_minute = 1000000000\nper_hour = 1000000000\nper_day = 1000000000\n",
    )?;
    let mut storage: Vec<String> = vec![
        "--data-dir".into(),
        dir.display().to_string(),
        "--config".into(),
        config.display().to_string(),
    ];
    if let Some(url) = database_url {
        storage.extend(["--database-url".into(), url.into()]);
    }
    let mut child = Command::new(&o.plantd)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(&storage)
        .env("PLANTD_LOG", "warn,sqlx::query=error,opcua_client=off")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let mut lines = BufReader::new(child.stdout.take().context("stdout")?).lines();
    let mut addr = String::new();
    for line in lines.by_ref() {
        let line = line?;
        if let Some(a) = line.split("listening on http://").nth(1) {
            addr = a.trim().to_string();
            break;
        }
    }
    std::thread::spawn(move || for _ in lines {});
    if addr.is_empty() {
        bail!("plantd serve did not start");
    }
    let out = Command::new(&o.plantd)
        .args(["keys", "create", "--name", "bench", "--scopes", "admin"])
        .args(&storage)
        .output()?;
    if !out.status.success() {
        bail!(
            "keys create failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let key = String::from_utf8(out.stdout)?.trim().to_string();
    Ok((
        Server {
            child,
            addr,
            dir,
            storage,
        },
        key,
    ))
}

async fn request(
    sender: &mut hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    method: &str,
    addr: &str,
    path: &str,
    key: &str,
    body: Option<&str>,
) -> Result<u16> {
    let mut b = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr)
        .header("authorization", format!("Bearer {key}"));
    if body.is_some() {
        b = b.header("content-type", "application/json");
    }
    let req = b.body(Full::new(Bytes::from(body.unwrap_or_default().to_string())))?;
    sender.ready().await?;
    let resp = sender.send_request(req).await?;
    let status = resp.status().as_u16();
    resp.into_body().collect().await?;
    Ok(status)
}

async fn connect(addr: &str) -> Result<hyper::client::conn::http1::SendRequest<Full<Bytes>>> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    Ok(sender)
}

struct Load {
    requests: u64,
    errors: u64,
    seconds: f64,
    latencies_us: Vec<u32>,
}

/// `connections` keep-alive connections send `GET path` back to back for `duration`.
async fn load(
    addr: &str,
    key: &str,
    path: &str,
    connections: usize,
    duration: Duration,
) -> Result<Load> {
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let (addr, key, path) = (addr.to_string(), key.to_string(), path.to_string());
        tasks.push(tokio::spawn(async move {
            let mut sender = connect(&addr).await?;
            let mut lat = Vec::with_capacity(100_000);
            let mut errors = 0u64;
            while Instant::now() < deadline {
                let t = Instant::now();
                match request(&mut sender, "GET", &addr, &path, &key, None).await {
                    Ok(200) => lat.push(t.elapsed().as_micros().min(u32::MAX as u128) as u32),
                    Ok(_) => errors += 1,
                    Err(_) => {
                        errors += 1;
                        sender = connect(&addr).await?;
                    }
                }
            }
            Ok::<_, anyhow::Error>((lat, errors))
        }));
    }
    let mut all = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (lat, e) = t.await??;
        all.extend(lat);
        errors += e;
    }
    let seconds = started.elapsed().as_secs_f64();
    all.sort_unstable();
    Ok(Load {
        requests: all.len() as u64,
        errors,
        seconds,
        latencies_us: all,
    })
}

fn pct(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    f64::from(sorted[i]) / 1000.0
}

fn create_postgres_db(url: &str) -> Result<String> {
    let name = format!("plantd_bench_{}", std::process::id());
    let _ = Command::new("psql")
        .args([url, "-qc", &format!("DROP DATABASE IF EXISTS {name}")])
        .status();
    let ok = Command::new("psql")
        .args([url, "-qc", &format!("CREATE DATABASE {name}")])
        .status()?
        .success();
    if !ok {
        bail!("could not create the benchmark database on {url}");
    }
    let base = url.rsplit_once('/').map_or(url, |(b, _)| b);
    Ok(format!("{base}/{name}"))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() -> Result<()> {
    let o = options()?;
    if o.suite == "telemetry" {
        return telemetry::run(&o).await;
    }
    if o.suite == "sim" {
        return sim::run(&o).await;
    }
    if o.suite == "connectors" {
        return connectors::run(&o).await;
    }
    if o.suite == "alerts" {
        return alerts::run(&o).await;
    }
    let mut backends: Vec<(&str, Option<String>)> = vec![("SQLite", None)];
    if let Some(url) = &o.postgres_url {
        match create_postgres_db(url) {
            Ok(db) => backends.push(("PostgreSQL", Some(db))),
            Err(e) => eprintln!("PostgreSQL skipped: {e}"),
        }
    }
    println!(
        "plantd API benchmark: {} connections, {} s per row, load generator and server share this machine's {} cores",
        o.connections.unwrap_or(16),
        o.duration.as_secs(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "rate limiting on (finite enterprise limits), audit on; 20 data sources in the organization\n"
    );
    println!(
        "{:<11} {:<38} {:>10} {:>10} {:>9} {:>9} {:>7}",
        "backend", "request", "requests", "req/s", "p50 ms", "p99 ms", "errors"
    );
    for (name, url) in &backends {
        let (server, key) = start_server(&o, url.as_deref())?;
        let mut sender = connect(&server.addr).await?;
        for i in 0..20 {
            let body = format!(
                r#"{{"name": "PLC {i}", "type": "modbus", "enabled": false, "config": {{"host": "10.0.0.{i}"}}}}"#
            );
            let s = request(
                &mut sender,
                "POST",
                &server.addr,
                "/v1/data-sources",
                &key,
                Some(&body),
            )
            .await?;
            if s != 201 {
                bail!("creating data sources failed with {s}");
            }
        }
        let _ = load(
            &server.addr,
            &key,
            "/v1/data-sources",
            o.connections.unwrap_or(16),
            Duration::from_secs(2),
        )
        .await?;
        for (label, path) in [
            (
                "GET /v1/data-sources (auth, limits, list)",
                "/v1/data-sources",
            ),
            ("GET /v1/health (reference)", "/v1/health"),
        ] {
            let r = load(
                &server.addr,
                &key,
                path,
                o.connections.unwrap_or(16),
                o.duration,
            )
            .await?;
            println!(
                "{:<11} {:<38} {:>10} {:>10.0} {:>9.2} {:>9.2} {:>7}",
                name,
                label,
                r.requests,
                r.requests as f64 / r.seconds,
                pct(&r.latencies_us, 0.50),
                pct(&r.latencies_us, 0.99),
                r.errors
            );
        }
        drop(server);
        if let (Some(url), Some(base)) = (url, &o.postgres_url) {
            let name = url.rsplit('/').next().unwrap_or_default();
            let _ = Command::new("psql")
                .args([
                    base.as_str(),
                    "-qc",
                    &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
                ])
                .status();
        }
    }
    println!(
        "\ntarget (issue 2): >= 20,000 req/s and p99 < 5 ms for GET /v1/data-sources on 2 cores"
    );
    Ok(())
}
