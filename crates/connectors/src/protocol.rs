//! A source's protocol ([`Protocol`]): its typed configuration, the connector loop with
//! backoff ([`run`]) and the protocol-level test ([`probe`]).

use crate::net::PROBE_TIMEOUT;
use crate::sink::Sink;
use crate::{modbus, mqtt, net, opcua};
use plantd_model::data_source::{DataSourceType, ModbusConfig, MqttConfig, OpcuaConfig};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// First delay before reconnecting after a failed session.
pub const BACKOFF_FIRST: Duration = Duration::from_secs(1);
/// The delay doubles up to this.
pub const BACKOFF_MAX: Duration = Duration::from_secs(60);
/// A session that stayed connected this long starts the next delay again from the first.
pub const BACKOFF_RESET_AFTER: Duration = Duration::from_secs(10);

/// A stored config that does not parse into its protocol's settings (it was validated when
/// written, so this means the stored data or the validation is wrong).
#[derive(Debug, thiserror::Error)]
#[error("the stored config cannot be used: {0}")]
pub struct ConfigError(#[source] pub serde_json::Error);

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
    ) -> Result<Self, ConfigError> {
        let parsed = match t {
            DataSourceType::Opcua => serde_json::from_value(config.clone())
                .map(|c| Protocol::Opcua(c, pki_dir.to_path_buf())),
            DataSourceType::Modbus => serde_json::from_value(config.clone()).map(Protocol::Modbus),
            DataSourceType::Mqtt => serde_json::from_value(config.clone()).map(Protocol::Mqtt),
        };
        parsed.map_err(ConfigError)
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
                .unwrap_or_else(|_| Err(net::timed_out(&net::host_port(&c.host, c.port)))),
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
