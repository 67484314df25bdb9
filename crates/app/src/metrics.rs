//! The server's own metrics in Prometheus' text format (`GET /metrics`): requests and their
//! latency by route and status, ingest points and batches, queues (the group commit, the alert
//! outbox, webhook and notification deliveries), connectors by state and their reconnects, the
//! flusher's and the sealer's backlogs, the database pool and live-stream clients. They are recorded through the
//! `metrics` facade into one Prometheus recorder per process (the facade's recorder is the
//! process's, as its logger is); gauges whose truth is in the database are read when scraped.

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use plantd_model::data_source::DataSourceStatus;
use std::sync::OnceLock;

use crate::app::App;
use crate::error::{AppError, AppResult};

/// Latency buckets of every `*_seconds` histogram (0.5 ms to 10 s).
const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

static RECORDER: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Every metric: name, kind and what it counts (its `# HELP`).
const METRICS: [(&str, Kind, &str); 27] = [
    (
        "plantd_http_requests_total",
        Kind::Counter,
        "HTTP requests by route template, method and status",
    ),
    (
        "plantd_http_request_duration_seconds",
        Kind::Histogram,
        "HTTP request latency by route template and method",
    ),
    (
        "plantd_ingest_points_total",
        Kind::Counter,
        "Telemetry points stored, by door (api, connector, mqtt, model: live anomaly scores)",
    ),
    (
        "plantd_ingest_batches_total",
        Kind::Counter,
        "Telemetry batches stored, by door (api, connector, mqtt, model: live anomaly scores)",
    ),
    (
        "plantd_ml_scoring_duration_seconds",
        Kind::Histogram,
        "Time the live scorer spent computing the anomaly scores of one committed batch",
    ),
    (
        "plantd_ingest_queue_batches",
        Kind::Gauge,
        "Batches waiting for the group-commit writer",
    ),
    (
        "plantd_telemetry_log_points",
        Kind::Gauge,
        "Acknowledged points in the telemetry log, not yet written into blocks by the flusher",
    ),
    (
        "plantd_telemetry_unsealed_blocks",
        Kind::Gauge,
        "Head blocks not yet sealed into their window's compressed block",
    ),
    (
        "plantd_telemetry_sealer_passes_total",
        Kind::Counter,
        "Passes of the background sealer completed",
    ),
    (
        "plantd_telemetry_sealer_rewrites_total",
        Kind::Counter,
        "What the sealer's passes rewrote: windows sealed, spans of rollups packed, days compacted",
    ),
    (
        "plantd_telemetry_scan_cache_bytes",
        Kind::Gauge,
        "Bytes of decoded telemetry columns kept for BI scans",
    ),
    (
        "plantd_telemetry_scan_cache_hits_total",
        Kind::Counter,
        "Columns of compressed blocks BI scans took from memory instead of decoding",
    ),
    (
        "plantd_telemetry_scan_cache_misses_total",
        Kind::Counter,
        "Columns of compressed blocks BI scans decoded (the cache on)",
    ),
    (
        "plantd_alert_outbox_events",
        Kind::Gauge,
        "Alert changes in the outbox, not yet handed to webhooks and notifications",
    ),
    (
        "plantd_deliveries_pending",
        Kind::Gauge,
        "Webhook deliveries and notifications still to be sent, by kind",
    ),
    (
        "plantd_db_pool_connections",
        Kind::Gauge,
        "Connections of the database read pool, by state (idle, in_use)",
    ),
    (
        "plantd_connectors",
        Kind::Gauge,
        "Data source connectors by state (connected, disconnected, disabled)",
    ),
    (
        "plantd_connector_connects_total",
        Kind::Counter,
        "Connector sessions established (a reconnect counts again)",
    ),
    (
        "plantd_stream_clients",
        Kind::Gauge,
        "Open live-stream (WebSocket) connections",
    ),
    (
        "plantd_audit_records_total",
        Kind::Counter,
        "Audit records written by doors, by outcome",
    ),
    (
        "plantd_mqtt_messages_total",
        Kind::Counter,
        "Device messages handled on the MQTT device channel, by topic (telemetry, heartbeat, command_result)",
    ),
    (
        "plantd_mqtt_messages_dropped_total",
        Kind::Counter,
        "Device messages dropped (malformed or refused), by topic",
    ),
    (
        "plantd_mqtt_messages_retried_total",
        Kind::Counter,
        "Device messages handed again after a server fault (not acknowledged meanwhile), by topic",
    ),
    (
        "plantd_mqtt_messages_superseded_total",
        Kind::Counter,
        "Device messages not taken after a server fault and left to the device, its connection superseded, by topic",
    ),
    (
        "plantd_mqtt_logins_refused_total",
        Kind::Counter,
        "MQTT logins refused, by reason (anonymous, client_id, credentials)",
    ),
    (
        "plantd_mqtt_refused_total",
        Kind::Counter,
        "MQTT publishes and subscriptions refused for topics that are not the device's own",
    ),
    (
        "plantd_password_checks_refused_total",
        Kind::Counter,
        "Password checks refused because too many were under way",
    ),
];

#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// The process's recorder, installed by the first `App` with every metric described (a process
/// that installed another recorder before has no Prometheus text to show).
pub(crate) fn recorder() -> Option<&'static PrometheusHandle> {
    RECORDER
        .get_or_init(|| {
            let handle = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &BUCKETS)
                .ok()?
                .install_recorder()
                .ok()?;
            for (name, kind, help) in METRICS {
                match kind {
                    Kind::Counter => metrics::describe_counter!(name, help),
                    Kind::Gauge => metrics::describe_gauge!(name, help),
                    Kind::Histogram => metrics::describe_histogram!(name, help),
                }
            }
            Some(handle)
        })
        .as_ref()
}

impl App {
    /// Every metric in Prometheus' text format, the gauges read from the database now.
    pub async fn metrics_text(&self) -> AppResult<String> {
        let handle = recorder().ok_or_else(|| {
            AppError::internal(
                "no metrics to show",
                "another metrics recorder was installed in this process",
            )
        })?;
        let store = self.store();
        metrics::gauge!("plantd_ingest_queue_batches").set(self.tsdb().queued_batches() as f64);
        metrics::gauge!("plantd_telemetry_log_points").set(self.tsdb().log_backlog() as f64);
        metrics::gauge!("plantd_telemetry_unsealed_blocks")
            .set(self.tsdb().unsealed_blocks().await? as f64);
        let (passes, rewrites) = self.tsdb().sealer_progress();
        metrics::counter!("plantd_telemetry_sealer_passes_total").absolute(passes);
        metrics::counter!("plantd_telemetry_sealer_rewrites_total").absolute(rewrites);
        let cache = self.tsdb().scan_cache_stats();
        metrics::gauge!("plantd_telemetry_scan_cache_bytes").set(cache.bytes as f64);
        metrics::counter!("plantd_telemetry_scan_cache_hits_total").absolute(cache.hits);
        metrics::counter!("plantd_telemetry_scan_cache_misses_total").absolute(cache.misses);
        metrics::gauge!("plantd_alert_outbox_events").set(store.outbox_depth().await? as f64);
        let (webhooks, notifications) = store.pending_deliveries().await?;
        metrics::gauge!("plantd_deliveries_pending", "kind" => "webhook").set(webhooks as f64);
        metrics::gauge!("plantd_deliveries_pending", "kind" => "notification")
            .set(notifications as f64);
        let (size, idle) = store.pool_use();
        metrics::gauge!("plantd_db_pool_connections", "state" => "idle").set(idle as f64);
        metrics::gauge!("plantd_db_pool_connections", "state" => "in_use")
            .set((size as usize).saturating_sub(idle) as f64);
        let sources = store.all_data_sources().await?;
        for (state, count) in [
            (
                "connected",
                sources
                    .iter()
                    .filter(|d| d.enabled && d.status == DataSourceStatus::Connected)
                    .count(),
            ),
            (
                "disconnected",
                sources
                    .iter()
                    .filter(|d| d.enabled && d.status != DataSourceStatus::Connected)
                    .count(),
            ),
            ("disabled", sources.iter().filter(|d| !d.enabled).count()),
        ] {
            metrics::gauge!("plantd_connectors", "state" => state).set(count as f64);
        }
        handle.run_upkeep();
        Ok(handle.render())
    }
}
