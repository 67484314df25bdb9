//! Shared state of the API: the store, the configuration and the in-memory parts of the request
//! pipeline (key cache, rate limiter, usage counters, worker status).

use plantd_model::api_key::ApiKey;
use plantd_model::tier::LimitPolicy;
use plantd_model::{Scope, Tier, Timestamp};
use plantd_store::Store;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::rate_limit::RateLimiter;

/// Settings of the API that come from plantd's configuration.
#[derive(Clone, Debug)]
pub struct ApiConfig {
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
    /// Where OPC UA connectors keep their key pair and the servers' certificates.
    pub connectors_pki_dir: std::path::PathBuf,
    /// The SMTP relay for alert emails (`[smtp]`); without it email notifications fail with a
    /// message saying so.
    pub smtp: Option<plantd_alerts::channels::SmtpConfig>,
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            limits: LimitPolicy::default(),
            anonymous_per_minute: 300,
            key_cache_ttl: Duration::from_secs(10),
            usage_flush_interval: Duration::from_secs(5),
            retention: plantd_tsdb::Retention::default(),
            retention_interval: Duration::from_secs(3600),
            connectors_pki_dir: std::env::temp_dir().join("plantd-pki-connectors"),
            smtp: None,
        }
    }
}

/// Who is calling: the authenticated key, its organization and tier.
#[derive(Clone, Debug)]
pub struct Caller {
    pub key_id: String,
    pub org_id: String,
    pub user_id: Option<String>,
    pub scopes: Vec<Scope>,
    pub tier: Tier,
}

#[derive(Clone)]
pub struct AppState(pub Arc<Inner>);

pub struct Inner {
    pub store: Store,
    pub tsdb: plantd_tsdb::Tsdb,
    pub config: ApiConfig,
    pub limiter: RateLimiter,
    pub keys: KeyCache,
    pub usage: UsageCounter,
    pub workers: WorkerBoard,
    pub rendered_data_sources: crate::routes::data_sources::RenderedDataSources,
    pub events: crate::events::EventBus,
    pub alerts: crate::alert_engine::AlertEngine,
    pub connections: Arc<crate::routes::stream::Connections>,
    pub started_at: Timestamp,
}

impl std::ops::Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl AppState {
    pub fn new(store: Store, config: ApiConfig) -> Self {
        Self(Arc::new(Inner {
            tsdb: plantd_tsdb::Tsdb::new(store.clone(), config.retention),
            store,
            config,
            limiter: RateLimiter::new(),
            keys: KeyCache::default(),
            usage: UsageCounter::default(),
            workers: WorkerBoard::default(),
            rendered_data_sources: Default::default(),
            events: Default::default(),
            alerts: Default::default(),
            connections: Default::default(),
            started_at: Timestamp::now(),
        }))
    }
}

/// Keys looked up by the hash of their secret, with their organization's tier.
#[derive(Default)]
pub struct KeyCache {
    entries: Mutex<HashMap<String, (ApiKey, Tier, Instant)>>,
}

impl KeyCache {
    pub fn get(&self, hash: &str, ttl: Duration) -> Option<(ApiKey, Tier)> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries
            .get(hash)
            .filter(|(_, _, at)| at.elapsed() < ttl)
            .map(|(k, t, _)| (k.clone(), *t))
    }
    pub fn put(&self, hash: String, key: ApiKey, tier: Tier) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() > 100_000 {
            entries.clear();
        }
        entries.insert(hash, (key, tier, Instant::now()));
    }
    /// Forgets a key (after revocation or rotation) so the old secret stops working at once.
    pub fn forget_key(&self, key_id: &str) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.retain(|_, (k, _, _)| k.id != key_id);
    }
}

/// Request counts per key, UTC day and endpoint, not yet written to the database.
#[derive(Default)]
pub struct UsageCounter {
    pending: Mutex<Pending>,
}

#[derive(Default)]
struct Pending {
    counts: HashMap<(String, String, String, String), u64>,
    last_used: HashMap<String, Timestamp>,
}

impl UsageCounter {
    pub fn record(&self, key_id: &str, org_id: &str, endpoint: &str, now: Timestamp) {
        let mut p = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        *p.counts
            .entry((
                key_id.to_string(),
                org_id.to_string(),
                now.day(),
                endpoint.to_string(),
            ))
            .or_insert(0) += 1;
        p.last_used.insert(key_id.to_string(), now);
    }

    /// Writes pending counts; on failure they are kept for the next attempt.
    pub async fn flush(&self, store: &Store) -> Result<(), plantd_store::StoreError> {
        let taken = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|p| p.into_inner()));
        if taken.counts.is_empty() && taken.last_used.is_empty() {
            return Ok(());
        }
        let rows: Vec<_> = taken
            .counts
            .iter()
            .map(|((k, o, d, e), n)| (k.clone(), o.clone(), d.clone(), e.clone(), *n))
            .collect();
        let used: Vec<_> = taken
            .last_used
            .iter()
            .map(|(k, t)| (k.clone(), *t))
            .collect();
        if let Err(e) = store.record_key_usage(&rows, &used).await {
            let mut p = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            for (k, n) in taken.counts {
                *p.counts.entry(k).or_insert(0) += n;
            }
            for (k, t) in taken.last_used {
                let slot = p.last_used.entry(k).or_insert(t);
                *slot = (*slot).max(t);
            }
            return Err(e);
        }
        Ok(())
    }
}

/// Last run and last error of each background worker, for `GET /v1/status`.
#[derive(Default)]
pub struct WorkerBoard {
    workers: Mutex<HashMap<&'static str, WorkerState>>,
}

#[derive(Clone, Debug, serde::Serialize, utoipa::ToSchema)]
pub struct WorkerState {
    pub name: String,
    /// `running` or `failing`.
    pub status: String,
    pub last_run: Option<Timestamp>,
    pub last_error: Option<String>,
}

impl WorkerBoard {
    pub fn report(&self, name: &'static str, result: Result<(), String>) {
        let mut w = self.workers.lock().unwrap_or_else(|p| p.into_inner());
        let (status, last_error) = match result {
            Ok(()) => ("running", None),
            Err(e) => ("failing", Some(e)),
        };
        w.insert(
            name,
            WorkerState {
                name: name.to_string(),
                status: status.into(),
                last_run: Some(Timestamp::now()),
                last_error,
            },
        );
    }
    pub fn register(&self, name: &'static str) {
        let mut w = self.workers.lock().unwrap_or_else(|p| p.into_inner());
        w.entry(name).or_insert(WorkerState {
            name: name.into(),
            status: "running".into(),
            last_run: None,
            last_error: None,
        });
    }
    pub fn all(&self) -> Vec<WorkerState> {
        let w = self.workers.lock().unwrap_or_else(|p| p.into_inner());
        let mut all: Vec<_> = w.values().cloned().collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }
}
