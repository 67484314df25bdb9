//! [`App`]: the application's shared state, handed to every use case and worker. Cheap to clone
//! (one `Arc`). What it holds, and why:
//! - the store and the telemetry store: every use case reads or writes through them;
//! - the configuration;
//! - the rate limiter: request windows of the API and point windows of telemetry intake count
//!   in one place, so that usage reads what limits enforce;
//! - the key cache, the signing keys, the usage counter and the worker board: authentication, request counts and
//!   worker status outlive any one request;
//! - the event bus and the alert engine: intake publishes and evaluates, the live stream and
//!   the delivery worker subscribe.

use plantd_model::api_key::ApiKey;
use plantd_model::license::{Activation, License};
use plantd_model::{Tier, Timestamp};
use plantd_store::Store;
use plantd_tsdb::Tsdb;
use std::sync::Arc;

use crate::alert_engine::AlertEngine;
use crate::config::AppConfig;
use crate::device_seen::SeenDevices;
use crate::events::EventBus;
use crate::key_cache::TrustCache;
use crate::key_ring::KeyRing;
use crate::password_work::PasswordWork;
use crate::query_slots::QuerySlots;
use crate::rate_limit::RateLimiter;
use crate::regional::Regional;
use crate::usage::RequestCounter;
use crate::worker_board::WorkerBoard;

#[derive(Clone)]
pub struct App {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    tsdb: Tsdb,
    config: AppConfig,
    limiter: RateLimiter,
    keys: TrustCache<(ApiKey, Tier)>,
    licenses: TrustCache<(License, String)>,
    activations: TrustCache<Activation>,
    key_ring: KeyRing,
    usage: RequestCounter,
    workers: WorkerBoard,
    events: EventBus,
    alerts: AlertEngine,
    /// Argon2id work, bounded (`password_checks_at_once`).
    passwords: PasswordWork,
    /// When devices were last heard from on this node, written by the fleet worker.
    seen_devices: SeenDevices,
    /// Wakes the OTA deployment engine.
    ota_wake: tokio::sync::Notify,
    /// Wakes the ML training worker.
    ml_wake: tokio::sync::Notify,
    /// Tells the live scorer that a model was deployed or undeployed.
    scorer_wake: tokio::sync::Notify,
    /// BI queries running on this node, per organization.
    query_slots: QuerySlots,
    /// What this node keeps of regions: the replication's NATS context, caches.
    regional: Regional,
    /// The USB auto-import watches of this node.
    usb: crate::usb_state::UsbWatches,
    uplink: crate::uplink_state::UplinkState,
    started_at: Timestamp,
}

/// The scans' cache of decoded columns on an edge agent unless configured (the Hub Pro has
/// 256 MiB in all).
const EDGE_SCAN_CACHE_BYTES: usize = 16 << 20;

impl App {
    pub fn new(store: Store, config: AppConfig) -> Self {
        let password_threads = config.password_checks_at_once;
        let tsdb = Tsdb::new(store.clone(), config.retention);
        if let Some(edge) = &config.edge {
            tsdb.set_log_limits(edge.flush_points, edge.max_log_backlog);
        }
        tsdb.set_scan_cache(config.scan_cache_bytes.unwrap_or(match config.edge {
            Some(_) => EDGE_SCAN_CACHE_BYTES,
            None => plantd_tsdb::SCAN_CACHE_BYTES,
        }));
        Self {
            inner: Arc::new(Inner {
                tsdb,
                store,
                config,
                limiter: RateLimiter::new(),
                keys: TrustCache::default(),
                licenses: TrustCache::default(),
                activations: TrustCache::default(),
                key_ring: KeyRing::default(),
                usage: RequestCounter::default(),
                workers: WorkerBoard::default(),
                events: EventBus::default(),
                alerts: AlertEngine::default(),
                passwords: PasswordWork::new(password_threads),
                seen_devices: SeenDevices::default(),
                ota_wake: tokio::sync::Notify::new(),
                ml_wake: tokio::sync::Notify::new(),
                scorer_wake: tokio::sync::Notify::new(),
                query_slots: QuerySlots::default(),
                regional: Regional::default(),
                usb: Default::default(),
                uplink: Default::default(),
                started_at: Timestamp::now(),
            }),
        }
    }

    pub fn config(&self) -> &AppConfig {
        &self.inner.config
    }

    /// The rate-limit counters (the API's request windows are counted here too).
    pub fn limiter(&self) -> &RateLimiter {
        &self.inner.limiter
    }

    /// Request counts per key and endpoint, written to the database by a worker.
    pub fn usage(&self) -> &RequestCounter {
        &self.inner.usage
    }

    /// Committed telemetry and alert changes of this node, as they happen.
    pub fn events(&self) -> &EventBus {
        &self.inner.events
    }

    pub fn started_at(&self) -> Timestamp {
        self.inner.started_at
    }

    /// Writes pending request counts so that a read of usage sees them; a failure is logged
    /// and the counts are kept for the next attempt.
    pub(crate) async fn flush_usage(&self) {
        if let Err(e) = self.usage().flush(self.store()).await {
            tracing::warn!(error = %plantd_model::error_chain(&e), "could not flush usage counts before reading them");
        }
    }

    pub(crate) fn store(&self) -> &Store {
        &self.inner.store
    }

    pub(crate) fn regional(&self) -> &Regional {
        &self.inner.regional
    }

    pub(crate) fn usb(&self) -> &crate::usb_state::UsbWatches {
        &self.inner.usb
    }

    pub(crate) fn uplink(&self) -> &crate::uplink_state::UplinkState {
        &self.inner.uplink
    }

    pub(crate) fn query_slots(&self) -> &QuerySlots {
        &self.inner.query_slots
    }

    pub(crate) fn tsdb(&self) -> &Tsdb {
        &self.inner.tsdb
    }

    /// API keys by the hash of their secret, with their organization's tier.
    pub(crate) fn keys(&self) -> &TrustCache<(ApiKey, Tier)> {
        &self.inner.keys
    }

    /// Licenses by id, with their organization's public key (hex).
    pub(crate) fn license_cache(&self) -> &TrustCache<(License, String)> {
        &self.inner.licenses
    }

    /// Activations by `license id/device id`.
    pub(crate) fn activation_cache(&self) -> &TrustCache<Activation> {
        &self.inner.activations
    }

    pub(crate) fn key_ring(&self) -> &KeyRing {
        &self.inner.key_ring
    }

    pub(crate) fn workers(&self) -> &WorkerBoard {
        &self.inner.workers
    }

    pub(crate) fn password_work(&self) -> &PasswordWork {
        &self.inner.passwords
    }

    pub(crate) fn alert_engine(&self) -> &AlertEngine {
        &self.inner.alerts
    }

    pub(crate) fn ota_wake(&self) -> &tokio::sync::Notify {
        &self.inner.ota_wake
    }

    pub(crate) fn ml_wake(&self) -> &tokio::sync::Notify {
        &self.inner.ml_wake
    }

    pub(crate) fn scorer_wake(&self) -> &tokio::sync::Notify {
        &self.inner.scorer_wake
    }

    pub(crate) fn seen_devices(&self) -> &SeenDevices {
        &self.inner.seen_devices
    }
}
