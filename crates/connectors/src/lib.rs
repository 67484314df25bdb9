//! Protocol connectors of plantd: an OPC UA client with subscriptions, a Modbus TCP poller and
//! an MQTT subscriber. Each turns what it reads into telemetry points in a [`Sink`]; whoever
//! runs the connector (the server's supervisor) stores them and records the connection state.
//! No storage or API here (DESIGN: protocol crates never depend on them).
//!
//! A connector is [`run`] until told to stop: it opens a session, reports `connected`, streams
//! points, and when the session fails reports `disconnected` with the reason and tries again
//! after a delay that doubles from [`BACKOFF_FIRST`] to [`BACKOFF_MAX`].

pub mod modbus;
pub mod mqtt;
pub mod net;
pub mod opcua;

use plantd_model::Timestamp;
use plantd_model::data_source::{DataSourceType, ModbusConfig, MqttConfig, OpcuaConfig};
use plantd_model::telemetry::Point;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, watch};

/// First delay before reconnecting after a failed session.
pub const BACKOFF_FIRST: Duration = Duration::from_secs(1);
/// The delay doubles up to this.
pub const BACKOFF_MAX: Duration = Duration::from_secs(60);
/// A session that stayed connected this long starts the next delay again from the first.
pub const BACKOFF_RESET_AFTER: Duration = Duration::from_secs(10);
/// Points held for the supervisor at most; beyond, the oldest are dropped (and counted).
pub const MAX_BUFFERED_POINTS: usize = 1_000_000;

/// A data source's protocol settings, parsed from its validated `config`.
#[derive(Clone, Debug)]
pub enum Protocol {
    /// The config, and where the client keeps its key pair and the servers' certificates.
    Opcua(OpcuaConfig, PathBuf),
    Modbus(ModbusConfig),
    Mqtt(MqttConfig),
}

impl Protocol {
    /// `pki_dir`: where OPC UA clients keep their key pair and the servers' certificates.
    pub fn from_config(
        t: DataSourceType,
        config: &serde_json::Value,
        pki_dir: &Path,
    ) -> Result<Self, String> {
        let parsed = match t {
            DataSourceType::Opcua => serde_json::from_value(config.clone())
                .map(|c| Protocol::Opcua(c, pki_dir.to_path_buf())),
            DataSourceType::Modbus => serde_json::from_value(config.clone()).map(Protocol::Modbus),
            DataSourceType::Mqtt => serde_json::from_value(config.clone()).map(Protocol::Mqtt),
        };
        parsed.map_err(|e| format!("the stored config cannot be used: {e}"))
    }
}

/// What a connector reports about its connection.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConnectionState {
    /// True only while the protocol session is up.
    pub connected: bool,
    /// Tags the connector reads.
    pub tag_count: usize,
    /// Why it is not connected, or the latest problem while connected (unreadable tags,
    /// payloads that could not be mapped, dropped points).
    pub error: Option<String>,
}

/// Where a connector puts its points and its state. Cheap to clone.
#[derive(Clone)]
pub struct Sink {
    inner: Arc<SinkInner>,
}

struct SinkInner {
    source_id: String,
    points: Mutex<Vec<Point>>,
    ready: Notify,
    dropped: AtomicU64,
    state: watch::Sender<ConnectionState>,
}

impl Sink {
    /// A sink for the data source `source_id` (set on every point).
    pub fn new(source_id: &str) -> Self {
        Self {
            inner: Arc::new(SinkInner {
                source_id: source_id.to_string(),
                points: Mutex::new(Vec::new()),
                ready: Notify::new(),
                dropped: AtomicU64::new(0),
                state: watch::channel(ConnectionState {
                    connected: false,
                    tag_count: 0,
                    error: Some("connecting".into()),
                })
                .0,
            }),
        }
    }

    pub fn source_id(&self) -> &str {
        &self.inner.source_id
    }

    /// A point read now-ish from `asset/tag`.
    pub fn point(
        &self,
        asset_id: &str,
        tag_name: &str,
        value: f64,
        timestamp: Timestamp,
        quality: plantd_model::telemetry::Quality,
    ) -> Point {
        Point {
            asset_id: asset_id.to_string(),
            tag_name: tag_name.to_string(),
            value,
            timestamp,
            quality,
            data_source_id: Some(self.inner.source_id.clone()),
        }
    }

    /// Hands points to the supervisor (never blocks; see [`MAX_BUFFERED_POINTS`]).
    pub fn push(&self, points: impl IntoIterator<Item = Point>) {
        let mut buf = self.inner.points.lock().unwrap_or_else(|p| p.into_inner());
        let before = buf.len();
        buf.extend(points);
        if buf.len() > MAX_BUFFERED_POINTS {
            let excess = buf.len() - MAX_BUFFERED_POINTS;
            buf.drain(..excess);
            self.inner
                .dropped
                .fetch_add(excess as u64, Ordering::Relaxed);
        }
        if buf.len() > before {
            drop(buf);
            self.inner.ready.notify_one();
        }
    }

    /// Takes every buffered point (oldest first).
    pub fn take_points(&self) -> Vec<Point> {
        std::mem::take(&mut *self.inner.points.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Waits until points are buffered.
    pub async fn points_ready(&self) {
        self.inner.ready.notified().await
    }

    /// Points dropped because the supervisor fell behind, since the last call.
    pub fn take_dropped(&self) -> u64 {
        self.inner.dropped.swap(0, Ordering::Relaxed)
    }

    pub fn state(&self) -> watch::Receiver<ConnectionState> {
        self.inner.state.subscribe()
    }

    pub fn connected(&self, tag_count: usize) {
        self.inner.state.send_if_modified(|s| {
            let new = ConnectionState {
                connected: true,
                tag_count,
                error: None,
            };
            std::mem::replace(s, new.clone()) != new
        });
    }

    pub fn disconnected(&self, error: String) {
        self.inner.state.send_if_modified(|s| {
            let changed = s.connected || s.error.as_deref() != Some(&error);
            s.connected = false;
            s.error = Some(error);
            changed
        });
    }

    /// A problem met while connected (or `None` once it is gone).
    pub fn problem(&self, error: Option<String>) {
        self.inner.state.send_if_modified(|s| {
            let changed = s.error != error;
            s.error = error;
            changed
        });
    }

    pub fn set_tag_count(&self, tag_count: usize) {
        self.inner.state.send_if_modified(|s| {
            let changed = s.tag_count != tag_count;
            s.tag_count = tag_count;
            changed
        });
    }

    fn is_connected(&self) -> bool {
        self.inner.state.borrow().connected
    }
}

/// Runs the connector of one data source until `stop` turns true (or its sender is dropped):
/// sessions one after another, with capped exponential backoff between failed ones.
pub async fn run(protocol: Protocol, sink: Sink, mut stop: watch::Receiver<bool>) {
    let mut delay = BACKOFF_FIRST;
    loop {
        if *stop.borrow() {
            return;
        }
        let started = Instant::now();
        let outcome = tokio::select! {
            r = session(&protocol, &sink) => r,
            _ = stopped(&mut stop) => return,
        };
        let was_up = sink.is_connected();
        let error = match outcome {
            Ok(()) => "the session ended".to_string(),
            Err(e) => e,
        };
        tracing::info!(source = sink.source_id(), %error, "connector disconnected");
        sink.disconnected(error);
        if was_up && started.elapsed() >= BACKOFF_RESET_AFTER {
            delay = BACKOFF_FIRST;
        }
        tokio::select! {
            _ = tokio::time::sleep(jitter(delay)) => {}
            _ = stopped(&mut stop) => return,
        }
        delay = (delay * 2).min(BACKOFF_MAX);
    }
}

async fn session(protocol: &Protocol, sink: &Sink) -> Result<(), String> {
    match protocol {
        Protocol::Opcua(c, pki) => opcua::session(c, pki, sink).await,
        Protocol::Modbus(c) => modbus::session(c, sink).await,
        Protocol::Mqtt(c) => mqtt::session(c, sink).await,
    }
}

async fn stopped(stop: &mut watch::Receiver<bool>) {
    while !*stop.borrow_and_update() {
        if stop.changed().await.is_err() {
            return;
        }
    }
}

/// Spreads reconnects of many sources over +-10 % of the delay.
fn jitter(delay: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let factor = 0.9 + f64::from(nanos % 1000) / 5000.0;
    delay.mul_f64(factor)
}

/// The outcome of a protocol-level connection test.
#[derive(Clone, Debug)]
pub struct Probe {
    pub success: bool,
    /// Time the check took, when it succeeded.
    pub latency: Option<Duration>,
    /// What happened, in words a user can act on.
    pub message: String,
    /// What was dialled (`host:port` or the URL).
    pub target: String,
}

/// How long a connection test may take in all.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Checks a source at the protocol level: OPC UA opens a session and reads the server status,
/// Modbus reads the first mapped register, MQTT connects and waits for CONNACK.
pub async fn probe(protocol: &Protocol) -> Probe {
    let started = Instant::now();
    let (target, outcome) = match protocol {
        Protocol::Opcua(c, pki) => (c.endpoint.clone(), opcua::probe(c, pki).await),
        Protocol::Modbus(c) => (
            net::host_port(&c.host, c.port),
            tokio::time::timeout(PROBE_TIMEOUT, modbus::probe(c))
                .await
                .unwrap_or_else(|_| Err(timed_out(&net::host_port(&c.host, c.port)))),
        ),
        Protocol::Mqtt(c) => (c.broker_url.clone(), mqtt::probe(c).await),
    };
    let latency = started.elapsed();
    match outcome {
        Ok(message) => Probe {
            success: true,
            latency: Some(latency),
            message,
            target,
        },
        Err(message) => Probe {
            success: false,
            latency: None,
            message,
            target,
        },
    }
}

pub(crate) fn timed_out(target: &str) -> String {
    format!(
        "no answer from {target} within {} s (timed out)",
        PROBE_TIMEOUT.as_secs()
    )
}
