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

/// The suites.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Suite {
    /// Authenticated list requests (rate limits and audit on).
    Api,
    /// Access tokens against API keys, client-credentials grants.
    Identity,
    /// The web console in a real browser and its live updates.
    Console,
    /// Ingest, aggregates, latest values and the live stream.
    Telemetry,
    /// The simulation server's OPC UA subscription.
    Sim,
    /// Points a connector stores (OPC UA, Modbus, MQTT).
    Connectors,
    /// Ingest-to-alert latency under load.
    Alerts,
    /// License validations per second.
    Licenses,
    /// The MQTT device channel with thousands of devices, beside Mosquitto.
    Fleet,
    /// The edge agent with 1,000 tags at 1 Hz: memory and disk against the Hub Pro's budget.
    Edge,
    /// The edge agent forwarding an hour kept while its cloud was away, beside Mosquitto's
    /// bridge forwarding the same messages.
    EdgeForward,
    /// A firmware deployment to a fleet, and package downloads beside python3 -m http.server.
    Ota,
    /// An ML dataset's upload, validation and profile, beside pandas on the same file.
    MlDatasets,
    /// The isolation forest's fit and score beside scikit-learn's on the same data, then the
    /// live scorer's cost per ingested point.
    MlForest,
    /// The live scorer's cost per ingested point alone (the last part of `ml-forest`).
    MlLive,
    /// BI SQL over 10,000,000 raw points beside DuckDB on the same points.
    Bi,
    /// An organization's move between regions with `--points` raw points, beside PostgreSQL
    /// copying the same rows between two databases.
    Migration,
    /// The live stream across three nodes of one region (100 WebSocket clients), beside
    /// Mosquitto fanning out the same batches.
    Nodes,
    /// Replication lag between two regions through NATS JetStream under 1,000 changes/s.
    Regions,
}

/// Benchmarks of plantd that print tables, each running the release server as a separate
/// process beside its load generator (docs/benchmarks.md).
#[derive(clap::Parser, Debug)]
#[command(name = "plantd-bench", version)]
pub(crate) struct Options {
    /// Which benchmark to run.
    #[arg(value_enum)]
    pub(crate) suite: Suite,
    /// Points of the one series the aggregation benchmark reads.
    #[arg(long, default_value_t = 10_000_000)]
    pub(crate) points: u64,
    /// Seconds per row.
    #[arg(long = "duration", default_value = "10", value_parser = parse_secs)]
    pub(crate) duration: Duration,
    /// Client connections [default: each suite's own: api 16, telemetry 4].
    #[arg(long)]
    pub(crate) connections: Option<usize>,
    /// The PostgreSQL server for the PostgreSQL rows.
    #[arg(
        long = "postgres-url",
        env = "PLANTD_BENCH_POSTGRES_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/test",
        conflicts_with = "no_postgres"
    )]
    postgres: String,
    /// Skip the PostgreSQL rows.
    #[arg(long)]
    no_postgres: bool,
    /// Skip SQLite (measure PostgreSQL only).
    #[arg(long)]
    pub(crate) no_sqlite: bool,
    /// Telemetry: only the ingest rows.
    #[arg(long)]
    pub(crate) ingest_only: bool,
    /// Telemetry: the series counts of the plant-scale ingest rows (one point per series per
    /// scan, 5,000-point batches), comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [10_usize, 1_000, 10_000, 100_000])]
    pub(crate) series: Vec<usize>,
    /// Telemetry: only the plant-scale rows (`--series`), without the batch-size rows.
    #[arg(long)]
    pub(crate) series_only: bool,
    /// The plantd binary to measure [default: the one beside plantd-bench].
    #[arg(long)]
    plantd: Option<PathBuf>,
    /// Connectors: the MQTT broker of the MQTT row.
    #[arg(
        long = "mqtt-url",
        env = "PLANTD_BENCH_MQTT_URL",
        default_value = "mqtt://127.0.0.1:1883",
        conflicts_with = "no_mqtt"
    )]
    mqtt: String,
    /// Connectors: skip the MQTT row.
    #[arg(long)]
    no_mqtt: bool,
    /// Fleet and OTA: devices connected at once.
    #[arg(long, default_value_t = 5_000)]
    pub(crate) devices: usize,
    /// OTA: the package's size in MiB.
    #[arg(long, default_value_t = 50)]
    pub(crate) package_mib: u64,
    /// OTA: downloads at once in the throughput rows.
    #[arg(long, default_value_t = 100)]
    pub(crate) concurrent_downloads: usize,
    /// ML datasets: data rows of the CSV file (10 columns).
    #[arg(long, default_value_t = 1_000_000)]
    pub(crate) rows: u64,
    #[arg(skip)]
    pub(crate) postgres_url: Option<String>,
    #[arg(skip)]
    pub(crate) mqtt_url: Option<String>,
    #[arg(skip)]
    pub(crate) plantd_path: PathBuf,
}

fn parse_secs(s: &str) -> std::result::Result<Duration, String> {
    s.parse::<u64>()
        .map(Duration::from_secs)
        .map_err(|_| format!("'{s}' is not a whole number of seconds"))
}

pub(crate) fn options() -> Result<Options> {
    let mut o = <Options as clap::Parser>::parse();
    o.postgres_url = (!o.no_postgres).then(|| o.postgres.clone());
    o.mqtt_url = (!o.no_mqtt).then(|| o.mqtt.clone());
    o.plantd_path = match &o.plantd {
        Some(p) => p.clone(),
        None => std::env::current_exe()?.with_file_name("plantd"),
    };
    if !o.plantd_path.exists() {
        bail!(
            "{} not found: build it with `cargo build --release -p plantd`",
            o.plantd_path.display()
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
        stop_child(&mut self.child, &self.dir);
    }
}

pub(crate) fn start_server(o: &Options, database_url: Option<&str>) -> Result<(Server, String)> {
    start_server_with(o, database_url, &[])
}

/// [`start_server`] with more `plantd serve` flags.
pub(crate) fn start_server_with(
    o: &Options,
    database_url: Option<&str>,
    extra: &[&str],
) -> Result<(Server, String)> {
    let server = spawn_server(o, database_url, extra)?;
    let out = Command::new(&o.plantd_path)
        .args(["keys", "create", "--name", "bench", "--scopes", "admin"])
        .args(&server.storage)
        .output()?;
    if !out.status.success() {
        bail!(
            "keys create failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let key = String::from_utf8(out.stdout)?.trim().to_string();
    Ok((server, key))
}

/// Starts `plantd serve` with `extra` flags on a fresh data directory and waits until it
/// listens; no key is made (a region that receives its organization from another).
pub(crate) fn spawn_server(
    o: &Options,
    database_url: Option<&str>,
    extra: &[&str],
) -> Result<Server> {
    spawn_command(o, "serve", database_url, extra)
}

/// [`spawn_server`] with another server command (`edge`: the edge agent).
pub(crate) fn spawn_command(
    o: &Options,
    command: &str,
    database_url: Option<&str>,
    extra: &[&str],
) -> Result<Server> {
    spawn_command_with(o, command, database_url, extra, "")
}

/// [`spawn_command`] with more lines for its configuration file (`[edge]` settings).
pub(crate) fn spawn_command_with(
    o: &Options,
    command: &str,
    database_url: Option<&str>,
    extra: &[&str],
    more_config: &str,
) -> Result<Server> {
    // Each server of the run its own directory (a benchmark may run several at once).
    static SERVERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "plantd-bench-{}-{}",
        std::process::id(),
        SERVERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir)?;
    // Finite enterprise limits so the limiter counts every request (unlimited would skip it).
    let config = dir.join("bench.toml");
    std::fs::write(
        &config,
        format!(
            "anonymous_requests_per_minute = 1000000000\nlicense_key_requests_per_minute = 1000000000\n{more_config}\n[limits.enterprise_requests]\nper_minute = 1000000000\nper_hour = 1000000000\nper_day = 1000000000\n"
        ),
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
    // A free port unless the suite names the address (regions that must know each other's).
    let listen: &[&str] = if extra.contains(&"--listen") {
        &[]
    } else {
        &["--listen", "127.0.0.1:0"]
    };
    let mut child = Command::new(&o.plantd_path)
        .arg(command)
        .args(listen)
        .args(extra)
        .args(&storage)
        // PLANTD_BENCH_LOG: the server's log filter, to see what it does during a run.
        .env(
            "PLANTD_LOG",
            std::env::var("PLANTD_BENCH_LOG")
                .unwrap_or_else(|_| "warn,sqlx::query=error,opcua_client=off".into()),
        )
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
        bail!("plantd {command} did not start");
    }
    Ok(Server {
        child,
        addr,
        dir,
        storage,
    })
}

/// One request with a bearer credential and an optional JSON body; answers its status.
pub(crate) async fn request(
    sender: &mut hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    method: &'static str,
    addr: &str,
    path: &str,
    key: &str,
    body: Option<&str>,
) -> Result<u16> {
    let probe = Probe {
        method,
        body: body.map(|b| ("application/json", Bytes::from(b.to_string()))),
        ..Probe::get(path, key)
    };
    probe.send(sender, addr).await
}

/// `POST path` with a JSON body and a bearer credential; answers the JSON the server returned,
/// or an error naming the status when it is not `expect`.
pub(crate) async fn post_json(
    sender: &mut hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    addr: &str,
    path: &str,
    key: &str,
    body: &serde_json::Value,
    expect: u16,
) -> Result<serde_json::Value> {
    let probe = Probe {
        method: "POST",
        body: Some(("application/json", Bytes::from(body.to_string()))),
        ..Probe::get(path, key)
    };
    let (status, bytes) = probe.call(sender, addr).await?;
    if status != expect {
        bail!(
            "POST {path} answered {status}: {}",
            String::from_utf8_lossy(&bytes)
        );
    }
    Ok(serde_json::from_slice(&bytes)?)
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

#[derive(Default)]
pub(crate) struct Load {
    pub(crate) requests: u64,
    pub(crate) errors: u64,
    pub(crate) seconds: f64,
    /// Sorted.
    pub(crate) latencies_us: Vec<u32>,
}

impl Load {
    /// One row of a request table (see [`request_table`]), the request column `width` wide.
    pub(crate) fn print_row(&self, backend: &str, label: &str, width: usize) {
        println!(
            "{:<11} {:<width$} {:>9} {:>9.0} {:>8.2} {:>8.2} {:>6}",
            backend,
            label,
            self.requests,
            self.per_second(),
            pct(&self.latencies_us, 0.50),
            pct(&self.latencies_us, 0.99),
            self.errors
        );
    }

    pub(crate) fn per_second(&self) -> f64 {
        self.requests as f64 / self.seconds
    }

    /// Adds another run of the same load (its requests, time and latencies).
    pub(crate) fn add(&mut self, other: Load) {
        self.requests += other.requests;
        self.errors += other.errors;
        self.seconds += other.seconds;
        self.latencies_us.extend(other.latencies_us);
        self.latencies_us.sort_unstable();
    }
}

/// One request a load sends again and again: method, path, the whole `Authorization` value (none
/// when empty), an
/// optional form or JSON body, and the status that counts as a success.
#[derive(Clone)]
pub(crate) struct Probe {
    pub(crate) method: &'static str,
    pub(crate) path: String,
    pub(crate) authorization: String,
    pub(crate) body: Option<(&'static str, Bytes)>,
    pub(crate) expect: u16,
}

impl Probe {
    /// `GET path` with a bearer credential (an API key or an access token).
    pub(crate) fn get(path: &str, bearer: &str) -> Self {
        Probe {
            method: "GET",
            path: path.into(),
            authorization: format!("Bearer {bearer}"),
            body: None,
            expect: 200,
        }
    }

    async fn send(
        &self,
        sender: &mut hyper::client::conn::http1::SendRequest<Full<Bytes>>,
        addr: &str,
    ) -> Result<u16> {
        Ok(self.call(sender, addr).await?.0)
    }

    /// Sends the request once; answers the status and the body.
    pub(crate) async fn call(
        &self,
        sender: &mut hyper::client::conn::http1::SendRequest<Full<Bytes>>,
        addr: &str,
    ) -> Result<(u16, Bytes)> {
        let mut b = hyper::Request::builder()
            .method(self.method)
            .uri(&self.path)
            .header("host", addr);
        if !self.authorization.is_empty() {
            b = b.header("authorization", &self.authorization);
        }
        let body = match &self.body {
            Some((content_type, body)) => {
                b = b.header("content-type", *content_type);
                body.clone()
            }
            None => Bytes::new(),
        };
        sender.ready().await?;
        let resp = sender.send_request(b.body(Full::new(body))?).await?;
        let status = resp.status().as_u16();
        Ok((status, resp.into_body().collect().await?.to_bytes()))
    }
}

/// `connections` keep-alive connections send `GET path` back to back for `duration`.
pub(crate) async fn load(
    addr: &str,
    key: &str,
    path: &str,
    connections: usize,
    duration: Duration,
) -> Result<Load> {
    load_probe(addr, &Probe::get(path, key), connections, duration).await
}

/// `connections` keep-alive connections send `probe` back to back for `duration`; answers with
/// another status than `probe.expect` count as errors.
pub(crate) async fn load_probe(
    addr: &str,
    probe: &Probe,
    connections: usize,
    duration: Duration,
) -> Result<Load> {
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let (addr, probe) = (addr.to_string(), probe.clone());
        tasks.push(tokio::spawn(async move {
            let mut sender = connect(&addr).await?;
            let mut lat = Vec::with_capacity(100_000);
            let mut errors = 0u64;
            while Instant::now() < deadline {
                let t = Instant::now();
                match probe.send(&mut sender, &addr).await {
                    Ok(s) if s == probe.expect => {
                        lat.push(t.elapsed().as_micros().min(u32::MAX as u128) as u32)
                    }
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

/// Cores of this machine (the load generator shares them with the server).
pub(crate) fn cores() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get())
}

/// The heading of a request benchmark: what runs with how many connections, what is on, and the
/// column header of its rows (the request column `width` wide).
pub(crate) fn request_table(what: &str, connections: usize, o: &Options, note: &str, width: usize) {
    println!(
        "plantd {what} benchmark: {connections} connections, {} s per row, load generator and server share this machine's {} cores",
        o.duration.as_secs(),
        cores()
    );
    println!("{note}\n");
    println!(
        "{:<11} {:<width$} {:>9} {:>9} {:>8} {:>8} {:>6}",
        "backend", "request", "requests", "req/s", "p50 ms", "p99 ms", "errors"
    );
}

/// Stops a child process of a benchmark (SIGTERM, then waits) and removes its directory.
pub(crate) fn stop_child(child: &mut std::process::Child, dir: &std::path::Path) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .stderr(Stdio::null())
        .status();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(dir);
}

/// A loopback port free now (for a server the benchmark starts).
/// Mosquitto (`PLANTD_BENCH_MOSQUITTO`, else Debian's) with the configuration file `conf`, quiet.
pub(crate) fn start_mosquitto(conf: &std::path::Path) -> Result<std::process::Child> {
    let mosquitto =
        std::env::var("PLANTD_BENCH_MOSQUITTO").unwrap_or_else(|_| "/usr/sbin/mosquitto".into());
    std::process::Command::new(&mosquitto)
        .arg("-c")
        .arg(conf)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .with_context(|| format!("start {mosquitto}"))
}

pub(crate) fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

pub(crate) fn pct(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    f64::from(sorted[i]) / 1000.0
}

/// The backends a suite measures: SQLite (unless `--no-sqlite`), then a fresh PostgreSQL
/// database when a server is given and reachable (its URL beside the name).
pub(crate) fn backends(o: &Options) -> Vec<(&'static str, Option<String>)> {
    let mut backends = Vec::new();
    if !o.no_sqlite {
        backends.push(("SQLite", None));
    }
    if let Some(url) = &o.postgres_url {
        match create_postgres_db(url) {
            Ok(db) => backends.push(("PostgreSQL", Some(db))),
            Err(e) => eprintln!("PostgreSQL skipped: {e}"),
        }
    }
    backends
}

/// Drops a benchmark's PostgreSQL database (nothing for SQLite, whose directory the server
/// removes).
pub(crate) fn drop_database(url: Option<&str>, base_url: Option<&str>) {
    if let (Some(db), Some(base_url)) = (url, base_url) {
        let db_name = db.rsplit('/').next().unwrap_or_default();
        let _ = Command::new("psql")
            .args([
                base_url,
                "-qc",
                &format!("DROP DATABASE IF EXISTS {db_name} WITH (FORCE)"),
            ])
            .status();
    }
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

#[cfg(test)]
mod tests {
    /// The command line is well formed (`--help` and every flag parse).
    #[test]
    fn the_command_line_is_well_formed() {
        <super::Options as clap::CommandFactory>::command().debug_assert();
    }
}
