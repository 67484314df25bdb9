//! The plantd cloud REST API: conventions (envelopes, errors, pagination), the request pipeline
//! (authentication, rate limits, scopes, audit), one module per feature, and the OpenAPI
//! document. [`serve`] runs it with its background workers until a shutdown signal.

pub mod alert_engine;
pub mod connectors;
pub mod deliveries;
pub mod envelope;
pub mod error;
pub mod events;
pub mod extract;
pub mod openapi;
pub mod operator;
pub mod pipeline;
pub mod policy;
pub mod rate_limit;
pub mod router;
pub mod routes;
pub mod state;
pub mod webhooks;

pub use state::{ApiConfig, AppState};

use plantd_model::Timestamp;
use plantd_store::Store;
use std::future::Future;
use std::net::SocketAddr;
use tokio::net::TcpListener;

/// Serves the API on `listener` until `shutdown` completes, then drains requests in flight and
/// writes pending usage counts.
pub async fn serve(
    listener: TcpListener,
    store: Store,
    config: ApiConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let state = AppState::new(store, config);
    if let Err(e) = state.alerts.load(&state.store).await {
        tracing::error!(error = %e, "cannot read open alerts; rules may fire again for them");
    }
    let app = router::build(state.clone());
    let (stop_workers, workers_stopped) = tokio::sync::watch::channel(false);
    let flusher = tokio::spawn(usage_flusher(state.clone(), workers_stopped.clone()));
    let retention = tokio::spawn(retention_worker(state.clone(), workers_stopped.clone()));
    let connectors = tokio::spawn(connectors::supervise(
        state.clone(),
        workers_stopped.clone(),
    ));
    let deliveries = tokio::spawn(deliveries::run(state.clone(), workers_stopped));
    let result = axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown)
    .await;
    let _ = stop_workers.send(true);
    let _ = flusher.await;
    let _ = retention.await;
    let _ = connectors.await;
    let _ = deliveries.await;
    if let Err(e) = state.usage.flush(&state.store).await {
        tracing::error!(error = %e, "could not write the last usage counts");
    }
    result
}

const USAGE_WORKER: &str = "usage_flusher";

/// Writes request counts to the database and forgets ended rate-limit windows.
async fn usage_flusher(state: AppState, mut stop: tokio::sync::watch::Receiver<bool>) {
    state.workers.register(USAGE_WORKER);
    let mut tick = tokio::time::interval(state.config.usage_flush_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        let result = state
            .usage
            .flush(&state.store)
            .await
            .map_err(|e| e.to_string());
        if let Err(e) = &result {
            tracing::warn!(error = %e, "usage flush failed; counts are kept for the next attempt");
        }
        state.workers.report(USAGE_WORKER, result);
        state.limiter.prune(Timestamp::now().unix_seconds());
    }
}

const RETENTION_WORKER: &str = "telemetry_retention";

/// Deletes telemetry past each level's retention, at start and then every interval.
async fn retention_worker(state: AppState, mut stop: tokio::sync::watch::Receiver<bool>) {
    state.workers.register(RETENTION_WORKER);
    let mut tick = tokio::time::interval(state.config.retention_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        let result = state.tsdb.enforce_retention(Timestamp::now()).await;
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
                tracing::warn!(error = %e, "telemetry retention failed; retrying at the next interval")
            }
        }
        state.workers.report(
            RETENTION_WORKER,
            result.map(|_| ()).map_err(|e| e.to_string()),
        );
    }
}
