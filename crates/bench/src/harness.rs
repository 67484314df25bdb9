//! What every suite shares: the command line, the server process (the release `plantd` next to
//! this binary, on a fresh data directory or PostgreSQL database), a lean HTTP/1.1 keep-alive
//! client, a closed-loop load generator and percentiles.

use anyhow::{Context, Result, bail};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) struct Options {
    pub(crate) suite: String,
    /// Points of the one series the aggregation benchmark reads.
    pub(crate) points: u64,
    pub(crate) duration: Duration,
    /// Client connections; `None`: each suite's default (api 16, telemetry 4).
    pub(crate) connections: Option<usize>,
    pub(crate) postgres_url: Option<String>,
    /// Skip SQLite (measure PostgreSQL only).
    pub(crate) no_sqlite: bool,
    /// Telemetry: only the ingest rows.
    pub(crate) ingest_only: bool,
    pub(crate) plantd: PathBuf,
    /// Connectors: the MQTT broker for the MQTT row (none: skipped).
    pub(crate) mqtt_url: Option<String>,
}

pub(crate) fn options() -> Result<Options> {
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

pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) addr: String,
    pub(crate) dir: PathBuf,
    pub(crate) storage: Vec<String>,
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

pub(crate) fn start_server(o: &Options, database_url: Option<&str>) -> Result<(Server, String)> {
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

pub(crate) async fn request(
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

pub(crate) async fn connect(
    addr: &str,
) -> Result<hyper::client::conn::http1::SendRequest<Full<Bytes>>> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    Ok(sender)
}

pub(crate) struct Load {
    pub(crate) requests: u64,
    pub(crate) errors: u64,
    pub(crate) seconds: f64,
    pub(crate) latencies_us: Vec<u32>,
}

/// `connections` keep-alive connections send `GET path` back to back for `duration`.
pub(crate) async fn load(
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

pub(crate) fn pct(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    f64::from(sorted[i]) / 1000.0
}

pub(crate) fn create_postgres_db(url: &str) -> Result<String> {
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
