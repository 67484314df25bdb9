//! Settings of the application that come from plantd's configuration (`plantd serve`).

use plantd_model::region::RegionId;
use plantd_model::tier::LimitPolicy;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct AppConfig {
    pub limits: LimitPolicy,
    /// Requests per minute per client address without valid credentials.
    pub anonymous_per_minute: u64,
    /// How long a looked-up key is trusted before it is read again (other nodes' revocations
    /// and operator tier changes take effect within this time; this node's revocations at once).
    pub key_cache_ttl: Duration,
    /// How often request counts are written to the database.
    pub usage_flush_interval: Duration,
    /// Telemetry retention per level.
    pub retention: plantd_tsdb::Retention,
    /// How often the retention job runs.
    pub retention_interval: Duration,
    /// Bytes of decoded telemetry columns kept for BI scans that read the same blocks again
    /// (`[telemetry] scan_cache_mb`; 0: off). `None`: 256 MiB on a server, 16 MiB on an edge
    /// agent.
    pub scan_cache_bytes: Option<usize>,
    /// Where OPC UA connectors keep their key pair and the servers' certificates.
    pub connectors_pki_dir: std::path::PathBuf,
    /// The SMTP relay for alert emails (`[smtp]`); without it email notifications fail with a
    /// message saying so.
    pub smtp: Option<plantd_alerts::channels::SmtpConfig>,
    /// The server's public origin (`https://plant.example.com`): the issuer and audience of
    /// access tokens and the base of links in emails; [`AppConfig::listening_on`] sets
    /// `http://<listen address>` when it is not configured.
    pub public_url: Option<String>,
    /// Failed logins allowed per account, and per client address, in 15 minutes.
    pub login_failures_per_account: u64,
    pub login_failures_per_client: u64,
    /// Calls per minute of one license key to activate, validate and deactivate (beside the
    /// client address's `anonymous_per_minute`).
    pub license_key_per_minute: u64,
    /// Argon2id computations (password checks and hashes) at once, each holding ~19 MiB;
    /// default: the machine's cores. More wait, at most 5 s, then are refused with 429.
    pub password_checks_at_once: usize,
    /// The bearer token `GET /metrics` takes from clients that are not on this host (loopback
    /// needs none); without one, only loopback clients may scrape.
    pub metrics_token: Option<String>,
    /// A device without a heartbeat or message for this long turns `offline` (default 180 s).
    pub device_offline_after: Duration,
    /// Where OTA package files live (content-addressed by SHA-256); nodes of one deployment
    /// share it (docs/api.md, "OTA").
    pub ota_dir: std::path::PathBuf,
    /// How long a BI guest token lives (`[bi] guest_token_ttl_secs`, default 300 s).
    pub guest_token_ttl: Duration,
    /// How often the report scheduler looks for due reports (default 20 s).
    pub report_poll_interval: Duration,
    /// The region this instance serves, its peers and the deployment's NATS server.
    pub regions: RegionSettings,
    /// Set on an edge agent (`plantd edge`): its mode and the retention of its alert history
    /// and ML predictions (SPEC 8.6; telemetry's is `retention`).
    pub edge: Option<EdgeSettings>,
}

/// What `plantd edge` adds (issue 34).
#[derive(Clone, Debug, PartialEq)]
pub struct EdgeSettings {
    pub mode: plantd_model::provisioning::DeploymentMode,
    /// Days the ML models' predictions (their score series, every level) are kept (default 90).
    pub ml_predictions_days: i64,
    /// Days a resolved alert, with its events and notifications, is kept (default 365).
    pub alert_history_days: i64,
    /// `PLANTD_MQTT_URL`: the cloud's MQTT address (`mqtt://host:port`); else the cloud says.
    pub mqtt_url: Option<String>,
    /// How often the agent sends the cloud its heartbeat (default 30 s).
    pub heartbeat_interval: std::time::Duration,
    /// Points per second the agent sends of what it kept while the cloud was away (default
    /// 10,000), beside the live points, which go at once.
    pub backfill_points_per_second: u64,
    /// SPEC 4.14's edge regional settings: where the agent forwards, and where it goes when
    /// its region fails.
    pub regions: plantd_model::edge_regions::EdgeRegions,
    /// The kinds of asset the setup wizard offers (the binary fills them from the simulator's
    /// catalog).
    pub templates: Vec<plantd_model::provisioning::AssetTemplate>,
    /// How the agent updates itself (`plantd edge`); none inside `plantd up`.
    pub update: Option<crate::update_files::SelfUpdateSettings>,
    /// Points the telemetry log's flush reads at once, and points it may hold before ingest
    /// waits for the flusher: smaller than a cloud's (12,000,000 and 24,000,000) so that a
    /// backlog taken at once (a backfill) keeps the agent in the Hub Pro's 256 MiB.
    pub flush_points: u64,
    pub max_log_backlog: u64,
}

impl Default for EdgeSettings {
    fn default() -> Self {
        Self {
            mode: plantd_model::provisioning::DeploymentMode::Production,
            ml_predictions_days: 90,
            alert_history_days: 365,
            mqtt_url: None,
            heartbeat_interval: std::time::Duration::from_secs(30),
            backfill_points_per_second: 10_000,
            regions: Default::default(),
            templates: Vec::new(),
            update: None,
            flush_points: 500_000,
            max_log_backlog: 2_000_000,
        }
    }
}

impl AppConfig {
    /// The configuration of a server listening on `addr`: without a configured public origin,
    /// clients reach it at `http://<addr>` (loopback for an unspecified address).
    pub fn listening_on(mut self, addr: std::net::SocketAddr) -> Self {
        if self.public_url.is_none() {
            self.public_url = Some(Self::local_root(addr));
        }
        self
    }

    /// The root address of a server listening on `addr` as this machine reaches it
    /// (`http://<addr>`, loopback for an unspecified address).
    pub fn local_root(mut addr: std::net::SocketAddr) -> String {
        if addr.ip().is_unspecified() {
            addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        format!("http://{addr}")
    }
}

impl Default for AppConfig {
    fn default() -> Self {
        Self {
            limits: LimitPolicy::default(),
            anonymous_per_minute: 300,
            key_cache_ttl: Duration::from_secs(10),
            usage_flush_interval: Duration::from_secs(5),
            retention: plantd_tsdb::Retention::default(),
            retention_interval: Duration::from_secs(3600),
            scan_cache_bytes: None,
            connectors_pki_dir: std::env::temp_dir().join("plantd-pki-connectors"),
            smtp: None,
            public_url: None,
            login_failures_per_account: 10,
            login_failures_per_client: 50,
            license_key_per_minute: 600,
            password_checks_at_once: std::thread::available_parallelism().map_or(2, |n| n.get()),
            metrics_token: None,
            device_offline_after: Duration::from_secs(180),
            ota_dir: std::env::temp_dir().join("plantd-ota"),
            guest_token_ttl: Duration::from_secs(300),
            report_poll_interval: Duration::from_secs(20),
            regions: RegionSettings::default(),
            edge: None,
        }
    }
}

/// The regional settings of an instance (`plantd serve --region --peer --nats-url
/// --deployment`).
#[derive(Clone, Debug)]
pub struct RegionSettings {
    /// The region this instance serves (default `us-east`).
    pub region: RegionId,
    /// The other regions' instances: region and root address (`http://host:port`).
    pub peers: Vec<(RegionId, String)>,
    /// The deployment's NATS server (JetStream): replication between regions.
    pub nats_url: Option<String>,
    /// The deployment's name: its streams and consumers carry it, so another deployment's on
    /// the same NATS server are never read.
    pub deployment: String,
    /// The MQTT device channel's address as devices reach it (`mqtt://host:1883`), when on.
    pub mqtt_url: Option<String>,
    /// A region migration's read-only window stays open at least this long (`[regions]
    /// min_window_secs`, default 5), so clients see it.
    pub min_window: std::time::Duration,
    /// A completed migration's copy in the source region is deleted this long after the switch
    /// (`[regions] delete_source_after_secs`, default 7 days).
    pub delete_source_after: std::time::Duration,
    /// How often an organization's resident data is copied to its secondary region
    /// (`[regions] standby_interval_secs`, default 900: within the RPO of Enterprise Premium).
    pub standby_every: std::time::Duration,
}

impl Default for RegionSettings {
    fn default() -> Self {
        Self {
            region: RegionId::UsEast,
            peers: Vec::new(),
            nats_url: None,
            deployment: "plantd".into(),
            mqtt_url: None,
            min_window: std::time::Duration::from_secs(5),
            delete_source_after: std::time::Duration::from_secs(7 * 24 * 3600),
            standby_every: std::time::Duration::from_secs(900),
        }
    }
}

impl RegionSettings {
    /// The regions this deployment serves: this instance's and its peers', in the SPEC's order.
    pub fn served(&self) -> Vec<RegionId> {
        RegionId::ALL
            .into_iter()
            .filter(|r| *r == self.region || self.peers.iter().any(|(p, _)| p == r))
            .collect()
    }

    /// The one region whose instance creates the deployment's first organization and owner:
    /// the first served region in the SPEC's order (us-east when it is served). The others
    /// receive them through replication.
    pub fn bootstrap_region(&self) -> RegionId {
        self.served().first().copied().unwrap_or(self.region)
    }

    /// Whether this instance is part of a deployment of several regions.
    pub fn is_deployment(&self) -> bool {
        !self.peers.is_empty() || self.nats_url.is_some()
    }

    pub(crate) fn peer_root(&self, region: RegionId) -> Option<&str> {
        self.peers
            .iter()
            .find(|(r, _)| *r == region)
            .map(|(_, u)| u.as_str())
    }
}
