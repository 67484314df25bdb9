//! `plantd-bench sim`: value changes per second that `plantd sim start` delivers to one OPC UA
//! subscription watching every variable, for 1,000 / 10,000 / 100,000 variables, with the
//! server's CPU use and memory. The server runs as its own process (release build); the client
//! (async-opcua) runs in this process on the same cores.

use anyhow::{Context, Result, bail};
use opcua::client::{ClientBuilder, DataChangeCallback, IdentityToken, MonitoredItem};
use opcua::crypto::SecurityPolicy;
use opcua::types::{
    DataValue, MessageSecurityMode, MonitoredItemCreateRequest, MonitoringMode,
    MonitoringParameters, NodeId, ReadValueId, TimestampsToReturn,
};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::harness::Options;

/// Clock ticks per second of /proc/<pid>/stat times.
const TICKS: f64 = 100.0;

pub(crate) fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let after = stat.rsplit_once(')').context("stat")?.1;
    let f: Vec<&str> = after.split_whitespace().collect();
    let utime: f64 = f.get(11).context("utime")?.parse()?;
    let stime: f64 = f.get(12).context("stime")?.parse()?;
    Ok((utime + stime) / TICKS)
}

/// Waits until the server used under 2.5% of a core for two seconds in a row (at most 300 s:
/// the sealer's passes after millions of points, windows sealed, days compacted, take minutes).
pub(crate) async fn wait_idle(pid: u32) -> anyhow::Result<()> {
    let mut quiet = 0;
    for _ in 0..300 {
        let before = cpu_seconds(pid)?;
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        quiet = if cpu_seconds(pid)? - before < 0.025 {
            quiet + 1
        } else {
            0
        };
        if quiet == 2 {
            break;
        }
    }
    Ok(())
}

pub(crate) fn rss_mib(pid: u32) -> Result<f64> {
    status_mib(pid, "VmRSS")
}

/// A memory figure of `/proc/<pid>/status` (`VmRSS`, `VmHWM`: the peak resident set), MiB.
pub(crate) fn status_mib(pid: u32, field: &str) -> Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .context(field.to_string())?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()?;
    Ok(kb / 1024.0)
}

/// A configuration of vibration sensors (X, Y, Z, RMS: four variables that all change at every
/// update), `variables` in all, each updating every `update_ms`.
pub(crate) fn config(variables: usize, update_ms: u64) -> String {
    let mut s = String::from("max_subscriptions: 10\nassets:\n");
    for i in 0..variables.div_ceil(4) {
        s.push_str(&format!(
            "  - id: V{i:06}\n    type: vibration_sensor\n    update_rate_ms: {update_ms}\n"
        ));
    }
    s
}

/// `plantd sim start` as its own process, on free ports.
pub(crate) struct SimProcess {
    pub child: std::process::Child,
    pub opcua_url: String,
    /// `host:port`
    pub modbus_addr: String,
    /// `host:port` of the control API.
    pub api_addr: String,
    pub dir: std::path::PathBuf,
}

impl SimProcess {
    pub(crate) fn start(o: &Options, name: &str, config_text: &str) -> Result<Self> {
        let dir = std::env::temp_dir().join(format!("plantd-bench-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let config_path = dir.join("sim.yaml");
        std::fs::write(&config_path, config_text)?;
        let mut child = Command::new(&o.plantd_path)
            .args([
                "sim",
                "start",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--api-port",
                "0",
                "--modbus-port",
                "0",
                "--seed",
                "1",
            ])
            .arg("--config")
            .arg(&config_path)
            .arg("--pki-dir")
            .arg(dir.join("pki"))
            .env("PLANTD_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let mut lines = BufReader::new(child.stdout.take().context("stdout")?).lines();
        let (mut opcua_url, mut modbus_addr, mut api_addr) =
            (String::new(), String::new(), String::new());
        let first_word = |rest: &str| {
            rest.split_whitespace()
                .next()
                .unwrap_or_default()
                .to_string()
        };
        for line in lines.by_ref() {
            let line = line?;
            if let Some(rest) = line.strip_prefix("OPC UA endpoint: ") {
                opcua_url = first_word(rest);
            }
            if let Some(rest) = line.strip_prefix("Modbus TCP: ") {
                modbus_addr = first_word(rest);
            }
            if let Some(rest) = line.strip_prefix("control API: http://") {
                api_addr = first_word(rest).trim_end_matches("/api/status").to_string();
            }
            if line.starts_with("certificates:") {
                break;
            }
        }
        std::thread::spawn(move || for _ in lines {});
        let sim = Self {
            child,
            opcua_url,
            modbus_addr,
            api_addr,
            dir,
        };
        if sim.opcua_url.is_empty() {
            bail!("plantd sim start did not print its endpoint");
        }
        Ok(sim)
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for SimProcess {
    fn drop(&mut self) {
        crate::harness::stop_child(&mut self.child, &self.dir);
    }
}

struct Row {
    variables: usize,
    changes_per_second: f64,
    cpu_percent: f64,
    rss_mib: f64,
    subscribe_seconds: f64,
}

async fn measure(o: &Options, variables: usize) -> Result<Row> {
    let sim = SimProcess::start(o, &format!("sim-{variables}"), &config(variables, 1000))?;
    let pid = sim.pid();
    let url = sim.opcua_url.clone();
    let dir = sim.dir.clone();
    let result = async {
        let mut client = ClientBuilder::new()
            .application_name("plantd-bench")
            .application_uri("urn:plantd:bench")
            .product_uri("urn:plantd:bench")
            .pki_dir(dir.join("client-pki"))
            .create_sample_keypair(false)
            .trust_server_certs(true)
            .session_retry_limit(0)
            .request_timeout(Duration::from_secs(60))
            // A publish response may carry many thousands of notifications (default limit 1,000).
            .max_array_length(1_000_000)
            .max_message_size(0)
            .max_chunk_count(0)
            .client()
            .map_err(|e| anyhow::anyhow!(e.join(", ")))?;
        let (session, event_loop) = client
            .connect_to_matching_endpoint(
                (
                    url.as_str(),
                    SecurityPolicy::None.to_str(),
                    MessageSecurityMode::None,
                ),
                IdentityToken::Anonymous,
            )
            .await?;
        event_loop.spawn();
        session.wait_for_connection().await;
        let received = Arc::new(AtomicU64::new(0));
        let counter = received.clone();
        let sub = session
            .create_subscription(
                Duration::from_millis(100),
                600,
                20,
                // At most this many notifications per publish response.
                20_000,
                0,
                true,
                DataChangeCallback::new(move |_: DataValue, _: &MonitoredItem| {
                    counter.fetch_add(1, Ordering::Relaxed);
                }),
            )
            .await?;
        let subscribing = Instant::now();
        let ids: Vec<NodeId> = (0..variables.div_ceil(4))
            .flat_map(|i| ["X", "Y", "Z", "RMS"].map(|v| NodeId::new(2, format!("V{i:06}.{v}"))))
            .take(variables)
            .collect();
        for chunk in ids.chunks(1000) {
            let items: Vec<MonitoredItemCreateRequest> = chunk
                .iter()
                .map(|id| MonitoredItemCreateRequest {
                    item_to_monitor: ReadValueId::from(id),
                    monitoring_mode: MonitoringMode::Reporting,
                    requested_parameters: MonitoringParameters {
                        sampling_interval: 0.0,
                        queue_size: 2,
                        discard_oldest: true,
                        ..Default::default()
                    },
                })
                .collect();
            let created = session
                .create_monitored_items(sub, TimestampsToReturn::Neither, items)
                .await?;
            if let Some(bad) = created.iter().find(|c| !c.result.status_code.is_good()) {
                bail!("monitored item refused: {}", bad.result.status_code);
            }
        }
        let subscribe_seconds = subscribing.elapsed().as_secs_f64();
        // Warm up, then measure.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let (n0, c0, t0) = (
            received.load(Ordering::Relaxed),
            cpu_seconds(pid)?,
            Instant::now(),
        );
        tokio::time::sleep(o.duration).await;
        let secs = t0.elapsed().as_secs_f64();
        let (n1, c1) = (received.load(Ordering::Relaxed), cpu_seconds(pid)?);
        let rss = rss_mib(pid)?;
        let _ = session.disconnect().await;
        Ok::<_, anyhow::Error>(Row {
            variables,
            changes_per_second: (n1 - n0) as f64 / secs,
            cpu_percent: (c1 - c0) / secs * 100.0,
            rss_mib: rss,
            subscribe_seconds,
        })
    }
    .await;
    drop(sim);
    result
}

pub async fn run(o: &Options) -> Result<()> {
    println!(
        "plantd simulation server benchmark: one OPC UA subscription watching every variable (vibration sensors, every variable changes once per second), {} s per row; client and server share this machine's {} cores\n",
        o.duration.as_secs(),
        crate::harness::cores()
    );
    println!(
        "{:>10} {:>16} {:>16} {:>14} {:>12} {:>14}",
        "variables", "generated/s", "delivered/s", "server CPU %", "server RSS", "subscribe s"
    );
    for variables in [1_000, 10_000, 100_000] {
        match measure(o, variables).await {
            Ok(r) => println!(
                "{:>10} {:>16} {:>16.0} {:>14.0} {:>9.0} MiB {:>14.1}",
                r.variables,
                r.variables,
                r.changes_per_second,
                r.cpu_percent,
                r.rss_mib,
                r.subscribe_seconds
            ),
            Err(e) => println!("{variables:>10} {variables:>16}   failed: {e}"),
        }
    }
    println!(
        "\ntarget (issue 4): 100,000 variables, at least 50,000 value changes/s to one subscription, server using at most one core (100 %)"
    );
    Ok(())
}
