//! The background workers: [`App::start`] runs the usage flusher, telemetry retention, the
//! connector supervisor, the delivery worker and the report scheduler until [`Workers::stop`]; each reports its last
//! run and last error on the worker board (`GET /v1/status`).

use plantd_model::Timestamp;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::app::App;

/// The running background workers.
pub struct Workers {
    app: App,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl App {
    /// Upgrades telemetry storage in place if the database needs it (progress in the log), reads
    /// what the workers need at start (open alerts) and starts them.
    pub async fn start(&self) -> Workers {
        // The process's metrics recorder, before anything is counted.
        crate::metrics::recorder();
        if let Err(e) = self.tsdb().upgrade().await {
            tracing::error!(error = %plantd_model::error_chain(&e), "cannot upgrade telemetry storage; telemetry requests will try again");
        }
        if let Err(e) = self.alert_engine().load(self.store()).await {
            tracing::error!(error = %plantd_model::error_chain(&e), "cannot read open alerts; rules may fire again for them");
        }
        // An enrolled edge agent keeps what it stores for its cloud from the first point on.
        if self.config().edge.is_some() {
            match self.store().any_uplink().await {
                Ok(enrolled) => self.forward_from_now(enrolled),
                Err(e) => {
                    tracing::error!(error = %plantd_model::error_chain(&e), "cannot read the agent's enrollment; points stored now are not forwarded to the cloud")
                }
            }
        }
        let (stop, stopped) = watch::channel(false);
        let tasks = vec![
            tokio::spawn(usage_flusher(self.clone(), stopped.clone())),
            tokio::spawn(retention_worker(self.clone(), stopped.clone())),
            tokio::spawn(crate::connectors::supervise(self.clone(), stopped.clone())),
            tokio::spawn(crate::device_channel::run(self.clone(), stopped.clone())),
            tokio::spawn(crate::ota::run(self.clone(), stopped.clone())),
            tokio::spawn(crate::ml_training::run(self.clone(), stopped.clone())),
            tokio::spawn(crate::ml_models::run_scorer(self.clone(), stopped.clone())),
            tokio::spawn(crate::bi_reports::run(self.clone(), stopped.clone())),
            tokio::spawn(crate::replication::run(self.clone(), stopped.clone())),
            tokio::spawn(crate::node_events::run(self.clone(), stopped.clone())),
            tokio::spawn(crate::region_migration::run(self.clone(), stopped.clone())),
            tokio::spawn(crate::usb_watch::run(self.clone(), stopped.clone())),
            tokio::spawn(crate::deliveries::run(self.clone(), stopped)),
        ];
        Workers {
            app: self.clone(),
            stop,
            tasks,
        }
    }
}

impl Workers {
    /// Stops every worker, waits for their last writes, writes pending usage counts and seals the
    /// telemetry windows that are due.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
        if let Err(e) = self.app.usage().flush(self.app.store()).await {
            tracing::error!(error = %plantd_model::error_chain(&e), "could not write the last usage counts");
        }
        // The telemetry log flushed and what the sealer would merge next merged now: a stopped
        // node leaves its points in blocks and closed windows compressed.
        if let Err(e) = self.app.tsdb().seal().await {
            tracing::error!(error = %plantd_model::error_chain(&e), "could not seal telemetry blocks at stop");
        }
    }
}

const USAGE_WORKER: &str = "usage_flusher";

/// Writes request counts to the database and forgets ended rate-limit windows.
async fn usage_flusher(app: App, mut stop: watch::Receiver<bool>) {
    app.workers().register(USAGE_WORKER);
    let mut tick = tokio::time::interval(app.config().usage_flush_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        let result = app.usage().flush(app.store()).await;
        if let Err(e) = &result {
            tracing::warn!(error = %plantd_model::error_chain(e), "usage flush failed; counts are kept for the next attempt");
        }
        app.workers().report(
            USAGE_WORKER,
            result.map_err(|e| plantd_model::error_chain(&e)),
        );
        app.limiter().prune(Timestamp::now().unix_seconds());
    }
}

const RETENTION_WORKER: &str = "telemetry_retention";

/// Deletes telemetry past each level's retention, ended sessions and expired tokens, and the
/// chunks of dataset uploads a crash cut off, at start and then every interval.
async fn retention_worker(app: App, mut stop: watch::Receiver<bool>) {
    app.workers().register(RETENTION_WORKER);
    let mut tick = tokio::time::interval(app.config().retention_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        if let Err(e) = app.delete_expired_identity().await {
            tracing::warn!(error = %plantd_model::error_chain(&e), "could not drop ended sessions and expired tokens; retrying at the next interval");
        }
        // Chunks of dataset uploads that a crash cut off (no upload runs for six hours).
        let cut_off = Timestamp::from_millis(Timestamp::now().millis() - 6 * 3_600_000);
        if let Err(e) = app.store().discard_stale_uploads(cut_off).await {
            tracing::warn!(error = %plantd_model::error_chain(&e), "could not remove the chunks of broken dataset uploads; retrying at the next interval");
        }
        // An edge agent keeps resolved alerts for its alert history's days (SPEC 8.6).
        if let Some(edge) = &app.config().edge {
            let before = Timestamp::from_millis(
                Timestamp::now().millis() - edge.alert_history_days * 86_400_000,
            );
            match app.store().delete_alert_history(before).await {
                Ok(n) if n > 0 => tracing::info!(alerts = n, "alert history retention applied"),
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %plantd_model::error_chain(&e), "could not apply the alert history retention; retrying at the next interval")
                }
            }
        }
        let result = app.tsdb().enforce_retention(Timestamp::now()).await;
        if let Ok(r) = &result
            && r.outbox_points_deleted > 0
        {
            tracing::warn!(
                batches = r.outbox_records_deleted,
                points = r.outbox_points_deleted,
                "points the edge agent could not forward to its cloud within the raw retention were dropped unsent"
            );
        }
        match &result {
            Ok(r) if r.raw_deleted + r.rollups_deleted > 0 => {
                tracing::info!(
                    raw = r.raw_deleted,
                    rollups = r.rollups_deleted,
                    "telemetry retention applied"
                )
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %plantd_model::error_chain(e), "telemetry retention failed; retrying at the next interval")
            }
        }
        app.workers().report(
            RETENTION_WORKER,
            result
                .map(|_| ())
                .map_err(|e| plantd_model::error_chain(&e)),
        );
    }
}
