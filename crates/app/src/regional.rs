//! What the application keeps of regions between requests (issue 33): the JetStream context of
//! the replication worker once connected, the peers' MQTT addresses learnt from their health
//! probes, the organizations' primary regions looked up by the request pipeline, the HTTP
//! client of the probes, the newest version this node published, and the channel of the keys
//! to announce to the region's other nodes.

use async_nats::jetstream;
use plantd_model::Timestamp;
use plantd_model::region::RegionId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use crate::key_cache::TrustCache;

/// See the module's comment.
pub(crate) struct Regional {
    jetstream: RwLock<Option<jetstream::Context>>,
    peer_mqtt: Mutex<HashMap<RegionId, Option<String>>>,
    org_regions: TrustCache<RegionId>,
    http: std::sync::OnceLock<reqwest::Client>,
    /// The newest version this node published (versions increase strictly).
    last_version: Mutex<i64>,
    /// Where cache invalidations go to be announced to the region's other nodes (with NATS).
    node_out: Mutex<Option<tokio::sync::mpsc::UnboundedSender<Forget>>>,
    /// Region migrations: the read-only windows open on this node (organization to migration),
    /// the migrations whose window this node closed (never opened again by a stale read), the
    /// connectors running per organization, and the migration worker's wake-up.
    windows: Mutex<Windows>,
    connectors: Arc<Mutex<HashMap<String, usize>>>,
    migration_wake: tokio::sync::Notify,
}

/// What a node's caches keep that a change on another node of the region makes stale.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Forget {
    /// API keys revoked, changed or replicated.
    Keys { key_ids: Vec<String> },
    /// An organization changed (tier, primary region): its keys and where it is served.
    Organization { org_id: String },
    /// A license changed (suspended, revoked, renewed, transferred): it and its activations.
    License { license_id: String },
}

#[derive(Default)]
struct Windows {
    open: HashMap<String, String>,
    closed: std::collections::HashSet<String>,
}

/// A running connector of an organization, counted until dropped.
pub(crate) struct ConnectorRunning {
    org_id: String,
    counts: Arc<Mutex<HashMap<String, usize>>>,
}

impl Drop for ConnectorRunning {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = counts.get_mut(&self.org_id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.remove(&self.org_id);
            }
        }
    }
}

impl Default for Regional {
    fn default() -> Self {
        Self {
            jetstream: RwLock::new(None),
            peer_mqtt: Mutex::new(HashMap::new()),
            org_regions: TrustCache::default(),
            http: std::sync::OnceLock::new(),
            last_version: Mutex::new(0),
            node_out: Mutex::new(None),
            windows: Mutex::default(),
            connectors: Arc::default(),
            migration_wake: tokio::sync::Notify::new(),
        }
    }
}

impl Regional {
    pub(crate) fn migration_wake(&self) -> &tokio::sync::Notify {
        &self.migration_wake
    }

    pub(crate) fn open_window(&self, org_id: &str, migration_id: &str) {
        let mut w = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        if !w.closed.contains(migration_id) {
            w.open.insert(org_id.to_string(), migration_id.to_string());
        }
    }

    pub(crate) fn close_window(&self, org_id: &str, migration_id: &str) {
        let mut w = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        w.closed.insert(migration_id.to_string());
        if w.open.get(org_id).is_some_and(|m| m == migration_id) {
            w.open.remove(org_id);
        }
    }

    pub(crate) fn window(&self, org_id: &str) -> Option<String> {
        let w = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        w.open.get(org_id).cloned()
    }

    /// The windows open in the region, as the database says; returns the organizations whose
    /// window closed since.
    pub(crate) fn set_windows(&self, running: Vec<(String, String)>) -> Vec<String> {
        let mut w = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        let w = &mut *w;
        let open: HashMap<String, String> = running
            .into_iter()
            .filter(|(_, m)| !w.closed.contains(m))
            .collect();
        let closed = w
            .open
            .keys()
            .filter(|org| !open.contains_key(*org))
            .cloned()
            .collect();
        w.open = open;
        closed
    }

    pub(crate) fn connector_started(&self, org_id: &str) -> ConnectorRunning {
        let mut counts = self.connectors.lock().unwrap_or_else(|p| p.into_inner());
        *counts.entry(org_id.to_string()).or_default() += 1;
        ConnectorRunning {
            org_id: org_id.to_string(),
            counts: self.connectors.clone(),
        }
    }

    pub(crate) fn connectors_running(&self, org_id: &str) -> usize {
        let counts = self.connectors.lock().unwrap_or_else(|p| p.into_inner());
        counts.get(org_id).copied().unwrap_or(0)
    }

    pub(crate) fn set_node_out(&self, out: tokio::sync::mpsc::UnboundedSender<Forget>) {
        *self.node_out.lock().unwrap_or_else(|p| p.into_inner()) = Some(out);
    }

    /// Tells the region's other nodes to forget what they keep of something changed here
    /// (nothing without NATS).
    pub(crate) fn announce_forgotten(&self, what: Forget) {
        if let Some(out) = self
            .node_out
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            let _ = out.send(what);
        }
    }

    pub(crate) fn set_jetstream(&self, js: jetstream::Context) {
        *self.jetstream.write().unwrap_or_else(|p| p.into_inner()) = Some(js);
    }

    /// The client of the peers' health probes and of an edge agent's calls to its cloud (built
    /// at first use, with the TLS provider; no redirects followed).
    pub(crate) fn http(&self) -> &reqwest::Client {
        self.http.get_or_init(|| {
            plantd_alerts::tls::install_provider();
            reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(3))
                .redirect(reqwest::redirect::Policy::none())
                .user_agent(concat!("plantd/", env!("CARGO_PKG_VERSION")))
                .build()
                .unwrap_or_default()
        })
    }

    pub(crate) fn org_regions(&self) -> &TrustCache<RegionId> {
        &self.org_regions
    }

    pub(crate) fn learn_peer_mqtt(&self, region: RegionId, mqtt: Option<String>) {
        let mut map = self.peer_mqtt.lock().unwrap_or_else(|p| p.into_inner());
        map.insert(region, mqtt);
    }

    pub(crate) fn peer_mqtt(&self, region: RegionId) -> Option<String> {
        let map = self.peer_mqtt.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&region).cloned().flatten()
    }

    pub(crate) fn context(&self) -> Option<jetstream::Context> {
        self.jetstream
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub(crate) fn next_version(&self) -> i64 {
        let mut last = self.last_version.lock().unwrap_or_else(|p| p.into_inner());
        *last = (*last + 1).max(Timestamp::now().millis());
        *last
    }
}
