//! plantd's configuration, loaded in layers: defaults, then the TOML file (`--config`), then
//! `PLANTD_*` environment variables and command-line flags (clap merges those two, flags first).

use anyhow::{Context, bail};
use plantd_model::tier::LimitPolicy;
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const DEFAULT_LISTEN: &str = "127.0.0.1:8000";
pub const DEFAULT_DATA_DIR: &str = "./plantd-data";

/// The TOML file; every key optional, unknown keys refused.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub listen: Option<String>,
    pub data_dir: Option<PathBuf>,
    pub database_url: Option<String>,
    pub limits: Option<LimitPolicy>,
    /// Requests per minute per client address without valid credentials.
    pub anonymous_requests_per_minute: Option<u64>,
    /// Calls per minute of one license key (activate, validate, deactivate).
    pub license_key_requests_per_minute: Option<u64>,
    /// Password checks (Argon2id, ~19 MiB each) at once [default: the machine's cores].
    pub password_checks_at_once: Option<usize>,
    /// The bearer token of `GET /metrics` for clients not on this host (also
    /// `PLANTD_METRICS_TOKEN`, which wins); without it only loopback clients may scrape.
    pub metrics_token: Option<String>,
    pub telemetry: Option<TelemetryConfig>,
    /// The SMTP relay of alert, invitation and password-reset emails.
    pub smtp: Option<plantd_alerts::channels::SmtpConfig>,
    /// The origin clients reach the server at (`https://plant.example.com`): the issuer and
    /// audience of access tokens, and the base of emailed links. Default: `http://<listen>`.
    pub public_url: Option<String>,
    /// The MQTT device channel.
    pub mqtt: Option<MqttFileConfig>,
    /// Seconds without a heartbeat or message after which a device is offline (default 180).
    pub device_offline_after_secs: Option<u64>,
    /// Where OTA package files are kept (default `<data_dir>/ota`; also `PLANTD_OTA_DIR`,
    /// which wins). Nodes sharing one database must share this directory.
    pub ota_dir: Option<PathBuf>,
    /// BI: embedded dashboards and reports.
    pub bi: Option<BiFileConfig>,
    /// Region migrations.
    pub regions: Option<RegionsFileConfig>,
    /// The edge agent (`plantd edge`).
    pub edge: Option<EdgeFileConfig>,
}

/// `[edge]`: the edge agent's mode and the retention of what is not telemetry (telemetry's is
/// `[telemetry.retention]`, whose defaults are SPEC 8.6's edge defaults).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EdgeFileConfig {
    /// production, development or demo (`--mode` and `DEPLOYMENT_MODE` win).
    pub mode: Option<String>,
    pub retention: Option<EdgeRetentionFile>,
    /// Seconds between heartbeats to the cloud (default 30).
    pub heartbeat_interval_secs: Option<u64>,
    /// Points per second sent of what was kept while the cloud was away (default 10,000).
    pub backfill_points_per_second: Option<u64>,
    /// SPEC 4.14's `region_detection` block.
    pub region_detection: Option<RegionDetectionFile>,
    /// SPEC 4.14's `regions` block.
    pub regions: Option<EdgeRegionsFile>,
    /// Seconds a new version has, after a self-update, to connect to the cloud and read its
    /// sources before the version before is put back (default 300).
    pub update_health_check_secs: Option<u64>,
}

/// `[edge.region_detection]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegionDetectionFile {
    pub enabled: Option<bool>,
    pub fallback_region: Option<String>,
    pub prefer_low_latency: Option<bool>,
}

/// `[edge.regions]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EdgeRegionsFile {
    pub primary: Option<String>,
    pub failover: Option<Vec<String>>,
    pub health_check_interval_seconds: Option<u64>,
    pub failover_threshold: Option<u32>,
}

/// SPEC 4.14's edge regional settings: `PLANTD_REGION`, `PLANTD_API_URL` and
/// `PLANTD_MQTT_URL` (read by `env`), then `[edge.region_detection]` and `[edge.regions]`.
fn edge_regions(
    file: Option<&EdgeFileConfig>,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<(plantd_model::edge_regions::EdgeRegions, Option<String>)> {
    use plantd_model::region::RegionId;
    let region = |what: &str, s: &str| -> anyhow::Result<RegionId> {
        s.trim()
            .parse::<RegionId>()
            .map_err(|e| anyhow::anyhow!("{what}: {e}"))
    };
    let mut r = plantd_model::edge_regions::EdgeRegions::default();
    let set = |k: &str| {
        env(k)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    if let Some(v) = set("PLANTD_REGION") {
        r.region = Some(region("PLANTD_REGION", &v)?);
    }
    if let Some(v) = set("PLANTD_API_URL") {
        let root = plantd_model::edge_regions::api_root(&v);
        if !(root.starts_with("http://") || root.starts_with("https://")) {
            bail!("PLANTD_API_URL must be the cloud's http:// or https:// address");
        }
        r.api_url = Some(root);
    }
    let mqtt_url = set("PLANTD_MQTT_URL");
    if let Some(u) = &mqtt_url {
        plantd_app::edge_forward::mqtt_address(u)
            .map_err(|e| anyhow::anyhow!("PLANTD_MQTT_URL: {e}"))?;
    }
    if let Some(d) = file.and_then(|f| f.region_detection.as_ref()) {
        if let Some(e) = d.enabled {
            r.detection.enabled = e;
        }
        if let Some(f) = &d.fallback_region {
            r.detection.fallback_region = Some(region("edge.region_detection.fallback_region", f)?);
        }
        if let Some(p) = d.prefer_low_latency {
            r.detection.prefer_low_latency = p;
        }
    }
    if let Some(g) = file.and_then(|f| f.regions.as_ref()) {
        if let Some(p) = &g.primary {
            r.primary = Some(region("edge.regions.primary", p)?);
        }
        for f in g.failover.iter().flatten() {
            r.failover.push(region("edge.regions.failover", f)?);
        }
        if let Some(i) = g.health_check_interval_seconds {
            if !(1..=86_400).contains(&i) {
                bail!("edge.regions.health_check_interval_seconds must be from 1 to 86400");
            }
            r.health_check_interval = std::time::Duration::from_secs(i);
        }
        if let Some(t) = g.failover_threshold {
            if !(1..=100).contains(&t) {
                bail!("edge.regions.failover_threshold must be from 1 to 100");
            }
            r.failover_threshold = t;
        }
    }
    Ok((r, mqtt_url))
}

/// `[edge.retention]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EdgeRetentionFile {
    /// Days ML predictions (the models' score series) are kept (default 90).
    pub ml_predictions_days: Option<i64>,
    /// Days resolved alerts are kept (default 365).
    pub alert_history_days: Option<i64>,
}

/// The edge agent's settings: the mode from the flag (or `DEPLOYMENT_MODE`), else the file,
/// else production; an unknown mode is refused with the list.
pub fn edge_settings(
    flag: Option<String>,
    file: Option<&EdgeFileConfig>,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<plantd_app::EdgeSettings> {
    let (regions, mqtt_url) = edge_regions(file, env)?;
    let heartbeat = match file.and_then(|f| f.heartbeat_interval_secs) {
        Some(s) if !(1..=86_400).contains(&s) => {
            bail!("edge.heartbeat_interval_secs must be from 1 to 86400")
        }
        Some(s) => std::time::Duration::from_secs(s),
        None => plantd_app::EdgeSettings::default().heartbeat_interval,
    };
    let backfill = match file.and_then(|f| f.backfill_points_per_second) {
        Some(0) => bail!("edge.backfill_points_per_second must be at least 1"),
        Some(n) => n,
        None => plantd_app::EdgeSettings::default().backfill_points_per_second,
    };
    let defaults = plantd_app::EdgeSettings::default();
    let mode = match flag.or_else(|| file.and_then(|f| f.mode.clone())) {
        Some(m) => {
            plantd_model::provisioning::DeploymentMode::parse(&m).map_err(anyhow::Error::msg)?
        }
        None => defaults.mode,
    };
    let retention = file.and_then(|f| f.retention.as_ref());
    let days = |name: &str, value: Option<i64>, default: i64| -> anyhow::Result<i64> {
        match value {
            Some(d) if !(1..=36_500).contains(&d) => {
                bail!("edge.retention.{name} must be from 1 to 36500 days")
            }
            Some(d) => Ok(d),
            None => Ok(default),
        }
    };
    Ok(plantd_app::EdgeSettings {
        mode,
        ml_predictions_days: days(
            "ml_predictions_days",
            retention.and_then(|r| r.ml_predictions_days),
            defaults.ml_predictions_days,
        )?,
        alert_history_days: days(
            "alert_history_days",
            retention.and_then(|r| r.alert_history_days),
            defaults.alert_history_days,
        )?,
        mqtt_url,
        heartbeat_interval: heartbeat,
        backfill_points_per_second: backfill,
        regions,
        templates: crate::edge::templates(),
        // `plantd edge` sets it (it knows its binary and arguments).
        update: None,
        ..defaults
    })
}

/// `[regions]`: region migrations (issue 33).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegionsFileConfig {
    /// The read-only window of a migration stays open at least this long (default 5).
    pub min_window_secs: Option<u64>,
    /// A moved organization's copy in its old region is deleted this long after the switch
    /// (default 604,800: 7 days).
    pub delete_source_after_secs: Option<u64>,
    /// How often an organization's data is copied to its secondary region (default 900).
    pub standby_interval_secs: Option<u64>,
}

/// `[bi]`: embedded dashboards and reports.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BiFileConfig {
    /// How long a guest token lives, 10 to 86,400 seconds (default 300).
    pub guest_token_ttl_secs: Option<u64>,
}

/// `[mqtt]`: the device channel's addresses (flags and `PLANTD_MQTT_*` win).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MqttFileConfig {
    /// Use this external broker (`mqtt://host:port`) for the device channel instead of, or
    /// besides, the embedded one; it authenticates the devices (docs/api.md).
    pub broker_url: Option<String>,
    pub broker_username: Option<String>,
    /// Also `PLANTD_MQTT_BROKER_PASSWORD`, which wins.
    pub broker_password: Option<String>,
    pub listen: Option<String>,
    pub tls_listen: Option<String>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
}

/// The MQTT flags of `serve` and `up`.
#[derive(Debug, Default, Clone, clap::Args)]
pub struct MqttArgs {
    /// Serve the MQTT device channel on this address (e.g. 0.0.0.0:1883).
    #[arg(long, env = "PLANTD_MQTT_LISTEN")]
    pub mqtt_listen: Option<String>,
    /// Serve MQTT over TLS on this address (e.g. 0.0.0.0:8883) with --mqtt-tls-cert and --mqtt-tls-key.
    #[arg(long, env = "PLANTD_MQTT_TLS_LISTEN")]
    pub mqtt_tls_listen: Option<String>,
    /// The TLS certificate chain (PEM) of the MQTT channel.
    #[arg(long, env = "PLANTD_MQTT_TLS_CERT")]
    pub mqtt_tls_cert: Option<PathBuf>,
    /// The TLS private key (PEM) of the MQTT channel.
    #[arg(long, env = "PLANTD_MQTT_TLS_KEY")]
    pub mqtt_tls_key: Option<PathBuf>,
    /// Serve devices through this external broker (mqtt://host:port), which authenticates them.
    #[arg(long, env = "PLANTD_MQTT_BROKER")]
    pub mqtt_broker: Option<String>,
}

/// The regional flags of `serve` (issue 33): the region served, the other regions' instances,
/// the deployment's NATS server and its name.
#[derive(Debug, Default, Clone, clap::Args)]
pub struct RegionArgs {
    /// The region this instance serves: us-east (default), us-west, eu-west, eu-central,
    /// ap-southeast or ap-northeast.
    #[arg(long, env = "PLANTD_REGION")]
    pub region: Option<String>,
    /// Another region's instance, as REGION=URL (its root, e.g. eu-west=https://eu.plant.example);
    /// repeat for each region.
    #[arg(long = "peer", value_name = "REGION=URL")]
    pub peers: Vec<String>,
    /// The deployment's NATS server with JetStream (nats://host:4222): replication between
    /// regions.
    #[arg(long, env = "PLANTD_NATS_URL")]
    pub nats_url: Option<String>,
    /// The deployment's name: its NATS streams and consumers carry it, so several deployments
    /// share a NATS server without reading each other's [default: plantd].
    #[arg(long, env = "PLANTD_DEPLOYMENT")]
    pub deployment: Option<String>,
}

impl RegionArgs {
    /// The regional settings, checked: a known region, peers of other known regions with an
    /// http(s) root each (no region twice), a nats:// URL, a deployment name of letters,
    /// digits, `-` and `_`.
    pub fn resolve(self) -> anyhow::Result<plantd_app::regions::RegionSettings> {
        use plantd_model::region::RegionId;
        let defaults = plantd_app::regions::RegionSettings::default();
        let region: RegionId = match self.region.as_deref().map(str::trim) {
            None | Some("") => defaults.region,
            Some(r) => r.parse().map_err(|e| anyhow::anyhow!("--region: {e}"))?,
        };
        let mut peers: Vec<(RegionId, String)> = Vec::new();
        for p in self.peers {
            let Some((id, url)) = p.split_once('=') else {
                bail!("--peer '{p}' must be REGION=URL, e.g. eu-west=http://10.0.0.2:8000");
            };
            let id: RegionId = id
                .trim()
                .parse()
                .map_err(|e| anyhow::anyhow!("--peer '{p}': {e}"))?;
            if id == region {
                bail!("--peer '{p}': {id} is this instance's own region");
            }
            if peers.iter().any(|(r, _)| *r == id) {
                bail!("--peer '{p}': {id} is named twice");
            }
            let url = url.trim().trim_end_matches('/').to_string();
            let parsed = plantd_model::data_source::parse_url(&url)
                .map_err(|e| anyhow::anyhow!("--peer '{p}': {e}"))?;
            if parsed.scheme != "http" && parsed.scheme != "https" {
                bail!("--peer '{p}': the URL must be http:// or https://");
            }
            peers.push((id, url));
        }
        let nats_url = match self.nats_url.map(|u| u.trim().to_string()) {
            Some(u) if u.is_empty() => None,
            Some(u) => {
                let parsed = plantd_model::data_source::parse_url(&u)
                    .map_err(|e| anyhow::anyhow!("--nats-url {e}"))?;
                if parsed.scheme != "nats" && parsed.scheme != "tls" {
                    bail!("--nats-url '{u}' must be nats://host:port");
                }
                Some(u)
            }
            None => None,
        };
        let deployment = match self.deployment.map(|d| d.trim().to_string()) {
            Some(d) if !d.is_empty() => {
                if d.len() > 64
                    || !d
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                {
                    bail!("--deployment '{d}' must be up to 64 letters, digits, '-' or '_'");
                }
                d
            }
            _ => defaults.deployment,
        };
        Ok(plantd_app::regions::RegionSettings {
            region,
            peers,
            nats_url,
            deployment,
            mqtt_url: None,
            ..defaults
        })
    }
}

/// The external broker of the device channel, if one is configured.
pub fn external_broker(
    flag: Option<String>,
    file: Option<&MqttFileConfig>,
) -> anyhow::Result<Option<plantd_mqtt::ExternalBroker>> {
    let Some(url) = flag.or_else(|| file.and_then(|f| f.broker_url.clone())) else {
        return Ok(None);
    };
    let parsed = plantd_model::data_source::parse_url(&url)
        .map_err(|e| anyhow::anyhow!("--mqtt-broker {e}"))?;
    if parsed.scheme != "mqtt" && parsed.scheme != "tcp" {
        bail!("--mqtt-broker '{url}': only mqtt:// is supported for the external broker");
    }
    Ok(Some(plantd_mqtt::ExternalBroker {
        host: parsed.host,
        port: parsed.port.unwrap_or(1883),
        username: file.and_then(|f| f.broker_username.clone()),
        password: std::env::var("PLANTD_MQTT_BROKER_PASSWORD")
            .ok()
            .filter(|p| !p.is_empty())
            .or_else(|| file.and_then(|f| f.broker_password.clone())),
        client_id: "plantd-device-channel".into(),
    }))
}

fn parse_addr(flag: &str, text: &str) -> anyhow::Result<SocketAddr> {
    text.parse()
        .map_err(|_| anyhow::anyhow!("{flag} '{text}' is not an address such as 0.0.0.0:1883"))
}

impl MqttArgs {
    /// The channel's settings from the flags over the file; `None` when it is off.
    pub fn resolve(
        self,
        file: Option<&MqttFileConfig>,
        default_listen: Option<&str>,
    ) -> anyhow::Result<Option<plantd_mqtt::MqttSettings>> {
        let empty = MqttFileConfig::default();
        let file = file.unwrap_or(&empty);
        let listen = self
            .mqtt_listen
            .or_else(|| file.listen.clone())
            .or_else(|| default_listen.map(String::from));
        let tls_listen = self.mqtt_tls_listen.or_else(|| file.tls_listen.clone());
        let cert = self.mqtt_tls_cert.or_else(|| file.tls_cert.clone());
        let key = self.mqtt_tls_key.or_else(|| file.tls_key.clone());
        let tls = match (tls_listen, cert, key) {
            (None, None, None) => None,
            (addr, Some(cert), Some(key)) => Some((
                parse_addr(
                    "--mqtt-tls-listen",
                    addr.as_deref().unwrap_or("0.0.0.0:8883"),
                )?,
                cert,
                key,
            )),
            _ => bail!("MQTT over TLS needs both --mqtt-tls-cert and --mqtt-tls-key"),
        };
        let Some(listen) = listen else {
            if tls.is_some() {
                bail!("MQTT over TLS needs the plain channel too: give --mqtt-listen");
            }
            return Ok(None);
        };
        Ok(Some(plantd_mqtt::MqttSettings {
            listen: parse_addr("--mqtt-listen", &listen)?,
            tls,
        }))
    }
}

/// `[telemetry]`: retention per level and how often it is enforced.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    pub retention: Option<plantd_tsdb::Retention>,
    pub retention_interval_secs: Option<u64>,
    /// MiB of decoded columns kept for BI scans (0: off).
    pub scan_cache_mb: Option<usize>,
}

impl FileConfig {
    pub fn load(path: Option<&Path>) -> anyhow::Result<Self> {
        let Some(path) = path else {
            return Ok(Self::default());
        };
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config file {}", path.display()))?;
        toml::from_str(&text).with_context(|| format!("invalid config file {}", path.display()))
    }
}

/// Where the data lives: shared by `serve` and the operator commands.
#[derive(Debug, Clone)]
pub struct StorageConfig {
    pub data_dir: PathBuf,
    pub database_url: String,
}

impl StorageConfig {
    pub fn resolve(
        file: &FileConfig,
        data_dir: Option<PathBuf>,
        database_url: Option<String>,
    ) -> anyhow::Result<Self> {
        let data_dir = data_dir
            .or_else(|| file.data_dir.clone())
            .unwrap_or_else(|| PathBuf::from(DEFAULT_DATA_DIR));
        let database_url = match database_url
            .or_else(|| file.database_url.clone())
            .filter(|u| !u.trim().is_empty())
        {
            Some(url) => {
                plantd_store::backend_of(&url)?;
                url
            }
            None => plantd_store::sqlite_url_for(&data_dir),
        };
        if plantd_store::backend_of(&database_url)? == plantd_store::Backend::Sqlite {
            std::fs::create_dir_all(&data_dir).with_context(|| {
                format!("cannot create the data directory {}", data_dir.display())
            })?;
        }
        Ok(Self {
            data_dir,
            database_url,
        })
    }
}

/// Everything `plantd serve` needs.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub listen: SocketAddr,
    /// The MQTT device channel, when on.
    pub mqtt: Option<plantd_mqtt::MqttSettings>,
    /// The external broker of the device channel, when configured.
    pub mqtt_external: Option<plantd_mqtt::ExternalBroker>,
    pub storage: StorageConfig,
    pub api: plantd_app::AppConfig,
}

impl ServeConfig {
    #[cfg(test)]
    pub fn resolve(
        file: FileConfig,
        listen: Option<String>,
        storage: StorageConfig,
    ) -> anyhow::Result<Self> {
        Self::resolve_with(file, listen, MqttArgs::default(), None, storage)
    }

    /// With the regional flags (`plantd serve`).
    pub fn with_regions(mut self, regions: RegionArgs) -> anyhow::Result<Self> {
        let mut settings = regions.resolve()?;
        settings.min_window = self.api.regions.min_window;
        settings.delete_source_after = self.api.regions.delete_source_after;
        settings.standby_every = self.api.regions.standby_every;
        if let Some(mqtt) = &self.mqtt
            && mqtt.listen.port() != 0
        {
            let host = match &self.api.public_url {
                Some(url) => plantd_model::data_source::parse_url(url)
                    .map(|u| u.host)
                    .unwrap_or_else(|_| mqtt.listen.ip().to_string()),
                None if mqtt.listen.ip().is_unspecified() => "127.0.0.1".to_string(),
                None => mqtt.listen.ip().to_string(),
            };
            settings.mqtt_url = Some(format!("mqtt://{host}:{}", mqtt.listen.port()));
        }
        self.api.regions = settings;
        Ok(self)
    }

    /// With the MQTT flags; `mqtt_default` turns the channel on where nothing says otherwise
    /// (`plantd up`).
    pub fn resolve_with(
        file: FileConfig,
        listen: Option<String>,
        mqtt: MqttArgs,
        mqtt_default: Option<&str>,
        storage: StorageConfig,
    ) -> anyhow::Result<Self> {
        let mqtt_external = external_broker(mqtt.mqtt_broker.clone(), file.mqtt.as_ref())?;
        let mqtt = mqtt.resolve(file.mqtt.as_ref(), mqtt_default)?;
        let device_offline_after = match file.device_offline_after_secs {
            Some(s) if s < 10 => bail!("device_offline_after_secs must be at least 10"),
            Some(s) => Some(Duration::from_secs(s)),
            None => None,
        };
        let guest_token_ttl = match file.bi.as_ref().and_then(|b| b.guest_token_ttl_secs) {
            Some(s) if !(10..=86_400).contains(&s) => {
                bail!("bi.guest_token_ttl_secs must be from 10 to 86400")
            }
            Some(s) => Some(Duration::from_secs(s)),
            None => None,
        };
        let mut regions = plantd_app::regions::RegionSettings::default();
        if let Some(r) = &file.regions {
            if let Some(s) = r.min_window_secs {
                if s > 3600 {
                    bail!("regions.min_window_secs must be at most 3600");
                }
                regions.min_window = Duration::from_secs(s);
            }
            if let Some(s) = r.delete_source_after_secs {
                regions.delete_source_after = Duration::from_secs(s);
            }
            if let Some(s) = r.standby_interval_secs {
                if s < 10 {
                    bail!("regions.standby_interval_secs must be at least 10");
                }
                regions.standby_every = Duration::from_secs(s);
            }
        }
        let listen_text = listen
            .or_else(|| file.listen.clone())
            .unwrap_or_else(|| DEFAULT_LISTEN.into());
        let listen = match listen_text.parse() {
            Ok(addr) => addr,
            Err(_) => bail!("--listen '{listen_text}' is not an address such as 127.0.0.1:8000"),
        };
        let defaults = plantd_app::AppConfig::default();
        let telemetry = file.telemetry.unwrap_or_default();
        let retention = telemetry.retention.unwrap_or_default();
        retention.check().map_err(anyhow::Error::msg)?;
        let retention_interval = match telemetry.retention_interval_secs {
            Some(0) => bail!("telemetry.retention_interval_secs must be at least 1"),
            Some(s) => Duration::from_secs(s),
            None => defaults.retention_interval,
        };
        let smtp = match file.smtp {
            Some(mut smtp) => {
                if let Ok(password) = std::env::var("PLANTD_SMTP_PASSWORD")
                    && !password.is_empty()
                {
                    smtp.password = Some(password);
                }
                smtp.check()
                    .map_err(|e| anyhow::anyhow!("[smtp] in the configuration: {e}"))?;
                Some(smtp)
            }
            None => None,
        };
        let api = plantd_app::AppConfig {
            limits: file.limits.unwrap_or_default(),
            anonymous_per_minute: file
                .anonymous_requests_per_minute
                .unwrap_or(defaults.anonymous_per_minute),
            license_key_per_minute: file
                .license_key_requests_per_minute
                .unwrap_or(defaults.license_key_per_minute),
            password_checks_at_once: file
                .password_checks_at_once
                .unwrap_or(defaults.password_checks_at_once),
            metrics_token: std::env::var("PLANTD_METRICS_TOKEN")
                .ok()
                .filter(|t| !t.is_empty())
                .or(file.metrics_token),
            key_cache_ttl: defaults.key_cache_ttl,
            usage_flush_interval: Duration::from_secs(5),
            retention,
            retention_interval,
            scan_cache_bytes: match telemetry.scan_cache_mb {
                Some(mb) if mb > 65_536 => bail!("telemetry.scan_cache_mb must be at most 65536"),
                mb => mb.map(|mb| mb << 20),
            },
            connectors_pki_dir: storage.data_dir.join("pki-connectors"),
            ota_dir: std::env::var_os("PLANTD_OTA_DIR")
                .filter(|d| !d.is_empty())
                .map(PathBuf::from)
                .or(file.ota_dir.clone())
                .unwrap_or_else(|| storage.data_dir.join("ota")),
            smtp,
            public_url: match std::env::var("PLANTD_PUBLIC_URL").ok().or(file.public_url) {
                Some(url) if !url.trim().is_empty() => {
                    let url = url.trim().trim_end_matches('/').to_string();
                    if !(url.starts_with("http://") || url.starts_with("https://"))
                        || url["https://".len().min(url.len())..].contains('/')
                    {
                        bail!(
                            "public_url '{url}' must be an origin such as https://plant.example.com (no path)"
                        );
                    }
                    Some(url)
                }
                _ => None,
            },
            device_offline_after: device_offline_after.unwrap_or(defaults.device_offline_after),
            guest_token_ttl: guest_token_ttl.unwrap_or(defaults.guest_token_ttl),
            regions,
            edge: None,
            ..defaults
        };
        Ok(Self {
            listen,
            mqtt,
            mqtt_external,
            storage,
            api,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_and_refusals() {
        let file: FileConfig = toml::from_str(
            "listen = \"127.0.0.1:9000\"\n[limits]\norg_aggregate_multiplier = 3\n[limits.enterprise_requests]\nper_minute = 500\n",
        )
        .unwrap();
        let dir = std::env::temp_dir().join(format!("plantd-cfg-{}", std::process::id()));
        let storage = StorageConfig::resolve(&file, Some(dir.clone()), None).unwrap();
        assert!(storage.database_url.starts_with("sqlite://"));
        let cfg = ServeConfig::resolve(file, None, storage.clone()).unwrap();
        assert_eq!(cfg.listen.port(), 9000);
        assert_eq!(cfg.api.limits.enterprise_requests.per_minute, Some(500));
        let flag = ServeConfig::resolve(
            FileConfig::default(),
            Some("127.0.0.1:7000".into()),
            storage.clone(),
        )
        .unwrap();
        assert_eq!(flag.listen.port(), 7000);
        assert!(toml::from_str::<FileConfig>("lisen = 1").is_err());
        let bad: FileConfig = toml::from_str("[telemetry.retention]\nraw_days = 40\n").unwrap();
        let e = ServeConfig::resolve(bad, None, storage.clone())
            .unwrap_err()
            .to_string();
        assert!(e.contains("raw_days < minute_days"), "{e}");
        let smtp: FileConfig =
            toml::from_str("[smtp]\nhost = \"smtp.example.com\"\nfrom = \"alerts\"\n").unwrap();
        let e = ServeConfig::resolve(smtp, None, storage.clone())
            .unwrap_err()
            .to_string();
        assert!(e.contains("[smtp]") && e.contains("smtp.from"), "{e}");
        let smtp: FileConfig = toml::from_str(
            "[smtp]\nhost = \"smtp.example.com\"\ntls = \"tls\"\nfrom = \"Plant <alerts@example.com>\"\n",
        )
        .unwrap();
        let cfg = ServeConfig::resolve(smtp, None, storage.clone()).unwrap();
        assert_eq!(
            cfg.api.smtp.unwrap().tls,
            plantd_alerts::channels::SmtpTls::Tls
        );
        let typo = StorageConfig::resolve(
            &FileConfig::default(),
            Some(dir.clone()),
            Some("postgress://x/y".into()),
        );
        assert!(typo.unwrap_err().to_string().contains("unsupported scheme"));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn the_example_file_is_valid() {
        let file: FileConfig =
            toml::from_str(include_str!("../../../config/plantd.example.toml")).unwrap();
        assert_eq!(file.listen.as_deref(), Some(DEFAULT_LISTEN));
        let limits = file.limits.unwrap();
        assert_eq!(limits.org_aggregate_multiplier, 5);
        assert_eq!(limits.enterprise_requests.per_minute, None);
    }

    #[test]
    fn edge_settings_take_the_flag_then_the_file() {
        use plantd_model::provisioning::DeploymentMode;
        let defaults = edge_settings(None, None, &|_| None).unwrap();
        assert_eq!(defaults.mode, DeploymentMode::Production);
        assert_eq!(
            (defaults.ml_predictions_days, defaults.alert_history_days),
            (90, 365)
        );
        let file: FileConfig =
            toml::from_str("[edge]\nmode = \"demo\"\n[edge.retention]\nalert_history_days = 30\n")
                .unwrap();
        let s = edge_settings(None, file.edge.as_ref(), &|_| None).unwrap();
        assert_eq!((s.mode, s.alert_history_days), (DeploymentMode::Demo, 30));
        let s = edge_settings(Some("Development".into()), file.edge.as_ref(), &|_| None).unwrap();
        assert_eq!(s.mode, DeploymentMode::Development);
        let e = edge_settings(Some("staging".into()), None, &|_| None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("production, development, demo"), "{e}");
        let bad: FileConfig =
            toml::from_str("[edge.retention]\nml_predictions_days = 0\n").unwrap();
        assert!(edge_settings(None, bad.edge.as_ref(), &|_| None).is_err());
        // SPEC 4.14's edge regional settings: the environment, then the file.
        let file: FileConfig = toml::from_str(
            "[edge.regions]\nprimary = \"eu-west\"\nfailover = [\"eu-central\"]\nhealth_check_interval_seconds = 5\n\
             [edge.region_detection]\nfallback_region = \"us-east\"\nprefer_low_latency = true\n",
        )
        .unwrap();
        let env = |k: &str| match k {
            "PLANTD_REGION" => Some("us-west".to_string()),
            "PLANTD_MQTT_URL" => Some("mqtt://cloud:1884".to_string()),
            "PLANTD_API_URL" => Some("https://cloud.example/v1".to_string()),
            _ => None,
        };
        let s = edge_settings(None, file.edge.as_ref(), &env).unwrap();
        use plantd_model::region::RegionId;
        assert_eq!(s.regions.region, Some(RegionId::UsWest));
        assert_eq!(s.regions.primary, Some(RegionId::EuWest));
        assert_eq!(s.regions.failover, [RegionId::EuCentral]);
        assert_eq!(s.regions.health_check_interval.as_secs(), 5);
        assert_eq!(s.regions.failover_threshold, 3);
        assert_eq!(s.regions.api_url.as_deref(), Some("https://cloud.example"));
        assert!(s.regions.detection.prefer_low_latency);
        assert_eq!(s.mqtt_url.as_deref(), Some("mqtt://cloud:1884"));
        let bad_env = |k: &str| (k == "PLANTD_REGION").then(|| "mars".to_string());
        let e = edge_settings(None, None, &bad_env).unwrap_err().to_string();
        assert!(e.contains("PLANTD_REGION") && e.contains("us-east"), "{e}");
        let tls = |k: &str| (k == "PLANTD_MQTT_URL").then(|| "mqtts://cloud:8883".to_string());
        assert!(edge_settings(None, None, &tls).is_err());
    }
}
