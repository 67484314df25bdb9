//! Telemetry (SPEC 2.3, 4.2, 8.3): the one way points enter storage, for the ingest endpoint
//! and the connectors alike (tier quotas, the durable write, alert evaluation, the live stream),
//! and the queries.

use plantd_model::data_source::{DataSource, DataSourceStatus, DataSourceType};
use plantd_model::page::{Page, Paged};
use plantd_model::telemetry::{
    Aggregation, MAX_DETAILS, Point, PointDefaults, Quality, check_point, parse_batch,
    validate_points,
};
use plantd_model::{FieldError, Tier, Timestamp};
use plantd_store::NewAuditRecord;
pub use plantd_tsdb::{AggregatedRow, LatestValue, RawRow, TelemetryFilter};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::access::AuditTrail;
use crate::app::App;
use crate::caller::Caller;
use crate::error::{AppError, AppResult};
use crate::events::Event;
use crate::rate_limit::{Bucket, Decision, point_windows};

/// A batch of points as a door received it.
pub enum Batch<'a> {
    /// A JSON body `{"data": [...], "data_source_id"?}` (`POST /v1/telemetry`; a device's
    /// telemetry message, whose points default to the device's asset and to the device as
    /// their source).
    Body(&'a [u8], PointDefaults<'a>),
    /// Points already read (a connector's batch), each checked by [`check_point`].
    Points(Vec<Point>),
}

/// The body of `POST /v1/telemetry`.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct IngestBody {
    /// 1 to 10,000 points.
    #[schema(value_type = Vec<IngestPoint>)]
    pub data: Vec<serde_json::Value>,
    /// Links every point's asset to this data source (a point's own `data_source_id` wins).
    pub data_source_id: Option<String>,
}

/// One point as sent (documentation of the `data` items).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub struct IngestPoint {
    /// 1..128 characters, no control characters or commas.
    asset_id: String,
    tag_name: String,
    /// A finite number.
    value: f64,
    timestamp: Timestamp,
    /// An existing data source of the caller's organization.
    data_source_id: Option<String>,
    /// `good` (the default), `uncertain` or `bad`.
    quality: Option<plantd_model::telemetry::Quality>,
}

/// What [`App::ingest`] did and how long it took.
#[derive(Clone, Copy, Debug)]
pub struct Stored {
    pub accepted: usize,
    /// The durable write (queueing for the group commit included).
    pub write: Duration,
    /// From the write to the batch's alert changes stored and published.
    pub alerts: Duration,
}

/// Bucket widths of downsampled series (ms): the smallest one at least as wide as the range
/// divided by the chart's width is used, so buckets align with the rollups where they can.
const SERIES_BUCKETS_MS: [i64; 20] = [
    1_000,
    2_000,
    5_000,
    10_000,
    15_000,
    30_000,
    60_000,
    120_000,
    300_000,
    600_000,
    900_000,
    1_800_000,
    3_600_000,
    7_200_000,
    10_800_000,
    21_600_000,
    43_200_000,
    86_400_000,
    172_800_000,
    604_800_000,
];

/// What a chart asks for: tags of one asset over `[start, end)`, drawn `width` pixels wide.
#[derive(Clone, Debug)]
pub struct SeriesRequest {
    pub data_source_id: Option<String>,
    pub asset_id: String,
    pub tags: Vec<String>,
    pub start: Timestamp,
    pub end: Timestamp,
    pub width: u32,
}

/// One tag's series as a chart draws it: raw points when at most two per pixel fit, else per
/// bucket the minimum, maximum and average (`downsampled`). Times in Unix milliseconds.
/// A piece of a raw export: up to 10,000 points of one series, by time.
#[derive(Clone, Debug)]
pub struct RawChunk {
    pub asset_id: String,
    pub tag_name: String,
    /// (Unix milliseconds, value, quality).
    pub points: Vec<(i64, f64, Quality)>,
}

#[derive(Clone, Debug, serde::Serialize, utoipa::ToSchema)]
pub struct Series {
    pub tag_name: String,
    pub downsampled: bool,
    /// The bucket width when downsampled.
    pub bucket_ms: Option<i64>,
    /// Raw points in the range.
    pub points: u64,
    /// Point times, or bucket starts.
    pub t: Vec<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<Vec<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min: Option<Vec<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<Vec<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub avg: Option<Vec<f64>>,
}

/// How long a value that came through the API (no source confirms it) stays fresh without a
/// new point.
pub const API_STALE_AFTER_MS: i64 = 5 * 60_000;
/// The longest silence of a polled source before its values are stale, whatever its interval.
const POLL_STALE_AFTER_MS: i64 = 30_000;

/// A latest value with whether its source still confirms it (docs/api.md, "Latest values").
#[derive(Clone, Debug, serde::Serialize, utoipa::ToSchema)]
pub struct Reading {
    pub tag_name: String,
    pub value: f64,
    /// When the value was measured (the point's time).
    pub timestamp: Timestamp,
    pub quality: Quality,
    /// The last time the value's source confirmed it: now while an OPC UA subscription is
    /// alive (a server sends only changes, and its keep-alives confirm the rest); the point's
    /// time for polled sources, MQTT topics and points sent through the API.
    pub confirmed_at: Timestamp,
    /// The source stopped confirming the value: it is disconnected or disabled, the quality is
    /// not good, polls or messages stopped (Modbus: 3 poll intervals, at most 30 s unless the
    /// interval is longer; MQTT: the source's `stale_after_seconds`, default 30), or (API)
    /// no point came for 5 minutes.
    pub stale: bool,
}

impl Reading {
    /// The value `v` as its `source` confirms it at `now`.
    pub(crate) fn of(v: LatestValue, source: Option<&DataSource>, now: Timestamp) -> Self {
        let age = now.millis() - v.timestamp.millis();
        let good = v.quality == Quality::Good;
        let (confirmed_at, fresh) = match source {
            None => (v.timestamp, age <= API_STALE_AFTER_MS),
            Some(d) if !d.enabled || d.status != DataSourceStatus::Connected => {
                (v.timestamp, false)
            }
            Some(d) => match d.source_type {
                // The subscription is alive while the source is connected: the keep-alive
                // fails, and the source turns disconnected, within 15 s of a silent server.
                DataSourceType::Opcua => (now, true),
                DataSourceType::Modbus => {
                    let interval = d
                        .config
                        .get("poll_interval_ms")
                        .and_then(serde_json::Value::as_i64)
                        .unwrap_or(1000);
                    // Three missed polls, between 5 and 30 s (longer only for polls slower
                    // than 30 s: one interval and a second).
                    let window = (3 * interval)
                        .clamp(5_000, POLL_STALE_AFTER_MS)
                        .max(interval + 1_000);
                    (v.timestamp, age <= window)
                }
                DataSourceType::Mqtt => {
                    let after = d
                        .config
                        .get("stale_after_seconds")
                        .and_then(serde_json::Value::as_i64)
                        .unwrap_or(30);
                    (v.timestamp, age <= after * 1000)
                }
            },
        };
        Reading {
            tag_name: v.tag_name,
            value: v.value,
            timestamp: v.timestamp,
            quality: v.quality,
            confirmed_at,
            stale: !(fresh && good),
        }
    }
}

/// The rate-limit bucket counting an organization's telemetry points.
pub(crate) fn points_bucket(org_id: &str) -> String {
    format!("points:{org_id}")
}

/// Distinct devices one batch may name as its points' sources (each looked up).
const MAX_SOURCES_A_BATCH: usize = 1_000;

impl App {
    /// The oldest timestamp a new point may carry (the raw retention).
    pub fn oldest_accepted(&self, now: Timestamp) -> Timestamp {
        self.tsdb().retention().oldest_accepted(now)
    }

    /// Ingest, the one way points enter storage, for every door: `POST /v1/telemetry` sends
    /// the request body, the connectors (and devices) the points they read. The batch is checked
    /// whole (each bad field named, nothing stored from a refused batch), its data sources must
    /// be the caller's organization's, then the tier's storage quota and ingestion limits, the
    /// durable write, alert evaluation and the live stream. A call's audit record (`trail`) is
    /// committed with the points: one commit answers both. Connectors pass no trail: their
    /// batches are not audited one by one (docs/api.md, "Audit").
    pub async fn ingest(
        &self,
        caller: &Caller,
        batch: Batch<'_>,
        trail: Option<&AuditTrail>,
    ) -> AppResult<Stored> {
        let now = Timestamp::now();
        // During a region migration's read-only window only the platform's own connectors and
        // models write: their points are held for the target region (docs/api.md, "Regions").
        let window = self.migration_window(&caller.org_id);
        let internal = matches!(
            caller.credential,
            crate::caller::Credential::Connector { .. }
                | crate::caller::Credential::Model
                | crate::caller::Credential::Generator
        );
        if window.is_some() && !internal {
            return Err(crate::region_migration::migration_refusal());
        }
        // An organization that moved to another region stores nothing here any more (a device
        // still connected to this region's MQTT channel is told where to go; the API's doors
        // redirect before this).
        if window.is_none()
            && let Some(root) = self.resident_elsewhere(&caller.org_id).await?
        {
            return Err(AppError::Conflict(format!(
                "this organization's data is served by its primary region at {root}: send it there"
            )));
        }
        let oldest = self.oldest_accepted(now);
        let (points, batch_source) = match batch {
            // A valid body is read straight into points; anything off is read again the
            // detailed way, which names every bad field.
            Batch::Body(bytes, defaults) => match parse_batch(bytes, defaults, now, oldest) {
                Some(batch) => batch,
                None => {
                    let body: IngestBody = plantd_model::json::parse(bytes)?;
                    let source = body.data_source_id.as_deref().or(defaults.data_source_id);
                    let points =
                        validate_points(&body.data, source, defaults.asset_id, now, oldest)?;
                    (points, source.map(str::to_string))
                }
            },
            Batch::Points(points) => {
                let mut errors = Vec::new();
                for (i, p) in points.iter().enumerate() {
                    if let Err(e) = check_point(p, now, oldest)
                        && errors.len() < MAX_DETAILS
                    {
                        errors.push(FieldError::new(format!("data[{i}]"), e));
                    }
                }
                if !errors.is_empty() {
                    return Err(AppError::Invalid(errors));
                }
                (points, None)
            }
        };
        let own_device = match &caller.credential {
            crate::caller::Credential::Device { id } => Some(id.as_str()),
            _ => None,
        };
        self.check_sources(&caller.org_id, &points, batch_source.as_deref(), own_device)
            .await?;
        if let Some(migration) = window {
            return self
                .hold_and_evaluate(&migration, &caller.org_id, points)
                .await;
        }
        let audit = trail.map(AuditTrail::success_record);
        let stored = self
            .store_points(&caller.org_id, caller.tier, Arc::new(points), audit, now)
            .await?;
        if let Some(t) = trail {
            t.committed();
        }
        let door = match caller.credential {
            crate::caller::Credential::Connector { .. } => "connector",
            crate::caller::Credential::Device { .. } => "mqtt",
            crate::caller::Credential::Model => "model",
            crate::caller::Credential::Generator => "demo",
            _ => "api",
        };
        metrics::counter!("plantd_ingest_batches_total", "door" => door).increment(1);
        metrics::counter!("plantd_ingest_points_total", "door" => door)
            .increment(stored.accepted as u64);
        Ok(stored)
    }

    /// A connector's points during a region migration: held for the target region (durable in
    /// the migration stream), evaluated by the alert rules and shown live as always.
    async fn hold_and_evaluate(
        &self,
        migration: &str,
        org_id: &str,
        points: Vec<Point>,
    ) -> AppResult<Stored> {
        let started = Instant::now();
        let points = Arc::new(points);
        self.hold_points(migration, &points).await?;
        let accepted = points.len();
        Ok(self.after_write(org_id, points, accepted, started).await)
    }

    /// Once a batch is written (or held): alert rules evaluated, live subscribers told; the
    /// timings from `started`.
    async fn after_write(
        &self,
        org_id: &str,
        points: Arc<Vec<Point>>,
        accepted: usize,
        started: Instant,
    ) -> Stored {
        let write = started.elapsed();
        self.alert_engine()
            .evaluate(self.store(), self.events(), org_id, &points)
            .await;
        let alerts = started.elapsed() - write;
        self.events().publish(Event::Telemetry {
            org_id: org_id.into(),
            points,
        });
        Stored {
            accepted,
            write,
            alerts,
        }
    }

    /// The tier's storage quota and ingestion limits, the durable write (with `audit` in the
    /// same commit), then alert evaluation and the live stream.
    async fn store_points(
        &self,
        org_id: &str,
        tier: Tier,
        points: Arc<Vec<Point>>,
        audit: Option<NewAuditRecord>,
        now: Timestamp,
    ) -> AppResult<Stored> {
        if let Some(limit_gb) = self.config().limits.telemetry(tier).storage_gb {
            let used = self.tsdb().storage_bytes(org_id).await?;
            if plantd_tsdb::over_quota(used, points.len(), limit_gb) {
                return Err(AppError::LimitReached {
                    message: format!(
                        "storage quota of {limit_gb} GB for the {tier} tier reached ({:.3} GB used); retention frees space, or raise the tier",
                        used as f64 / 1e9
                    ),
                    retry_after: self.config().retention_interval.as_secs().max(1),
                });
            }
        }
        self.admit_points(org_id, tier, points.len() as u64, now)?;
        let started = Instant::now();
        let accepted = self.tsdb().ingest(org_id, points.clone(), audit).await?;
        // Committed: evaluate alert rules, tell live subscribers.
        Ok(self.after_write(org_id, points, accepted, started).await)
    }

    /// Every named data source must be one of the organization's (or the device that sends
    /// the batch): the batch's is named `data_source_id`, a point's own (when it differs)
    /// `data[i].data_source_id`.
    async fn check_sources(
        &self,
        org_id: &str,
        points: &[Point],
        batch_source: Option<&str>,
        own_device: Option<&str>,
    ) -> AppResult<()> {
        let own = |id: Option<&str>| id.is_none() || id == own_device;
        if own(batch_source) && points.iter().all(|p| own(p.data_source_id.as_deref())) {
            return Ok(());
        }
        let sources = self.store().org_data_sources(org_id).await?;
        // A fleet device is a source too: its points carry its id (a model's scores of them,
        // or its history sent again through the API).
        let mut others: Vec<String> = Vec::new();
        for id in batch_source
            .into_iter()
            .chain(points.iter().filter_map(|p| p.data_source_id.as_deref()))
        {
            if others.len() >= MAX_SOURCES_A_BATCH {
                break;
            }
            if Some(id) != own_device
                && !sources.iter().any(|d| d.id == id)
                && !others.iter().any(|o| o == id)
            {
                others.push(id.to_string());
            }
        }
        let devices = self.store().org_device_ids(org_id, &others).await?;
        let known = |id: &str| {
            Some(id) == own_device
                || sources.iter().any(|d| d.id == id)
                || devices.iter().any(|d| d == id)
        };
        let mut errors = Vec::new();
        if let Some(ds) = batch_source
            && !known(ds)
        {
            errors.push(FieldError::new(
                "data_source_id",
                "is not a data source of this organization",
            ));
        }
        let mut checked: Option<&str> = batch_source;
        for (i, p) in points.iter().enumerate() {
            let Some(ds) = p.data_source_id.as_deref() else {
                continue;
            };
            if Some(ds) == batch_source || Some(ds) == checked {
                continue;
            }
            if known(ds) {
                checked = Some(ds);
            } else if errors.len() < MAX_DETAILS {
                errors.push(FieldError::new(
                    format!("data[{i}].data_source_id"),
                    "is not a data source of this organization",
                ));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(AppError::Invalid(errors))
        }
    }

    /// The tier's ingestion limits (SPEC 8.3), counted in points per organization.
    fn admit_points(&self, org_id: &str, tier: Tier, n: u64, now: Timestamp) -> AppResult<()> {
        let bucket = Bucket {
            name: points_bucket(org_id),
            label: "telemetry ingestion",
            windows: point_windows(self.config().limits.telemetry(tier)),
        };
        match self.limiter().check_n(&[bucket], n, now.unix_seconds()) {
            Decision::Allowed(_) => Ok(()),
            Decision::Refused {
                retry_after, scope, ..
            } => Err(AppError::LimitReached {
                message: format!(
                    "rate limit exceeded: {scope} points; this batch has {n} points; retry in {retry_after} s"
                ),
                retry_after,
            }),
        }
    }

    /// Raw points of the caller's organization, with quality.
    pub async fn telemetry_raw(
        &self,
        org_id: &str,
        filter: &TelemetryFilter,
        page: Page,
    ) -> AppResult<Paged<RawRow>> {
        Ok(self.tsdb().query_raw(org_id, filter, page).await?)
    }

    /// Aggregates per series and bucket (`interval_ms`), or over the whole range.
    pub async fn telemetry_aggregated(
        &self,
        org_id: &str,
        filter: &TelemetryFilter,
        aggregation: Aggregation,
        interval_ms: Option<i64>,
        page: Page,
    ) -> AppResult<Paged<AggregatedRow>> {
        let rows = self
            .tsdb()
            .query_aggregated(org_id, filter, aggregation, interval_ms, page)
            .await?;
        // Means are computed without overflow; only a sum can leave the range of a double,
        // and JSON has no number for it.
        if let Some(r) = rows.items.iter().find(|r| !r.value.is_finite()) {
            return Err(AppError::invalid(
                "aggregation",
                format!(
                    "the sum of {}/{} exceeds the range of a double (about ±1.8e308); ask for avg, min or max",
                    r.asset_id, r.tag_name
                ),
            ));
        }
        Ok(rows)
    }

    /// Each tag's series over the range, never more than two values per pixel of `width`: raw
    /// points when they fit, else min, max and average per bucket (exact, from the rollups
    /// where the bucket width allows).
    pub async fn telemetry_series(
        &self,
        org_id: &str,
        r: &SeriesRequest,
    ) -> AppResult<Vec<Series>> {
        let span = r.end.millis() - r.start.millis();
        let width = i64::from(r.width.max(1));
        let mut out = Vec::with_capacity(r.tags.len());
        for tag in &r.tags {
            let filter = TelemetryFilter {
                data_source_id: r.data_source_id.clone(),
                asset_id: Some(r.asset_id.clone()),
                tag_name: Some(tag.clone()),
                start: r.start,
                end: r.end,
            };
            let points: i64 = self
                .tsdb()
                .query_buckets(org_id, &filter, None)
                .await?
                .iter()
                .map(|b| b.stats.count)
                .sum();
            if points <= 2 * width {
                // The points were counted: read them by the series' key, without a count.
                let mut raw = Vec::new();
                if points > 0 {
                    for (id, _, _) in self.tsdb().series_of(org_id, &filter, &[]).await? {
                        raw.extend(
                            self.tsdb()
                                .raw_of_series(id, r.start.millis() - 1, r.end.millis(), points)
                                .await?,
                        );
                    }
                }
                out.push(Series {
                    tag_name: tag.clone(),
                    downsampled: false,
                    bucket_ms: None,
                    points: points as u64,
                    t: raw.iter().map(|p| p.0).collect(),
                    value: Some(raw.iter().map(|p| p.1).collect()),
                    min: None,
                    max: None,
                    avg: None,
                });
                continue;
            }
            let wanted = (span + width - 1) / width;
            let bucket = SERIES_BUCKETS_MS
                .iter()
                .copied()
                .find(|b| *b >= wanted)
                .unwrap_or(SERIES_BUCKETS_MS[SERIES_BUCKETS_MS.len() - 1]);
            let buckets = self
                .tsdb()
                .query_buckets(org_id, &filter, Some(bucket))
                .await?;
            out.push(Series {
                tag_name: tag.clone(),
                downsampled: true,
                bucket_ms: Some(bucket),
                points: points as u64,
                t: buckets.iter().map(|b| b.start.millis()).collect(),
                value: None,
                min: Some(buckets.iter().map(|b| b.stats.min).collect()),
                max: Some(buckets.iter().map(|b| b.stats.max).collect()),
                avg: Some(
                    buckets
                        .iter()
                        .map(|b| b.stats.value(Aggregation::Avg))
                        .collect(),
                ),
            });
        }
        Ok(out)
    }

    /// Every raw point of the filter's series (only `tags` when not empty) in its range, series
    /// by series (by asset and tag), each by time, in chunks of at most 10,000 points of one
    /// series. A task reads ahead at most two chunks, so memory stays flat whatever the range;
    /// it stops when the receiver is dropped. A failure ends the stream with its error.
    pub fn export_raw(
        &self,
        org_id: &str,
        filter: TelemetryFilter,
        tags: Vec<String>,
    ) -> tokio::sync::mpsc::Receiver<AppResult<RawChunk>> {
        const CHUNK: i64 = 10_000;
        let (tx, rx) = tokio::sync::mpsc::channel(2);
        let (app, org_id) = (self.clone(), org_id.to_string());
        tokio::spawn(async move {
            let series = match app.tsdb().series_of(&org_id, &filter, &tags).await {
                Ok(s) => s,
                Err(e) => {
                    let _ = tx.send(Err(e.into())).await;
                    return;
                }
            };
            for (id, asset_id, tag_name) in series {
                let mut after = filter.start.millis() - 1;
                loop {
                    let points = match app
                        .tsdb()
                        .raw_of_series(id, after, filter.end.millis(), CHUNK)
                        .await
                    {
                        Ok(p) => p,
                        Err(e) => {
                            let _ = tx.send(Err(e.into())).await;
                            return;
                        }
                    };
                    let Some(last) = points.last() else { break };
                    after = last.0;
                    let full = points.len() as i64 == CHUNK;
                    let chunk = RawChunk {
                        asset_id: asset_id.clone(),
                        tag_name: tag_name.clone(),
                        points,
                    };
                    if tx.send(Ok(chunk)).await.is_err() {
                        return;
                    }
                    if !full {
                        break;
                    }
                }
            }
        });
        rx
    }

    /// The organization's assets with their tag names, by name.
    pub async fn assets(&self, org_id: &str) -> AppResult<Vec<(String, Vec<String>)>> {
        Ok(self.tsdb().assets(org_id).await?)
    }

    /// The latest value of each tag of an asset (of `tags` when given).
    pub async fn latest_values(
        &self,
        org_id: &str,
        asset_id: &str,
        tags: Option<&[String]>,
    ) -> AppResult<Vec<Reading>> {
        let values = self.tsdb().latest(org_id, asset_id, tags).await?;
        if values.is_empty() {
            return Ok(Vec::new());
        }
        let linked = self.tsdb().tag_sources(org_id, asset_id).await?;
        let sources = self.store().org_data_sources(org_id).await?;
        let now = Timestamp::now();
        Ok(values
            .into_iter()
            .map(|v| {
                let source = linked
                    .get(&v.tag_name)
                    .and_then(Option::as_deref)
                    .and_then(|id| sources.iter().find(|d| d.id == id));
                Reading::of(v, source, now)
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn source(
        kind: DataSourceType,
        status: DataSourceStatus,
        config: serde_json::Value,
    ) -> DataSource {
        DataSource {
            id: "ds".into(),
            org_id: "org".into(),
            name: "plc".into(),
            source_type: kind,
            endpoint: "x".into(),
            status,
            tag_count: 1,
            enabled: true,
            last_error: None,
            config,
            created_at: Timestamp::from_millis(0),
            updated_at: Timestamp::from_millis(0),
        }
    }

    /// Whether a value measured at 0 is stale `after_ms` later, as `source` confirms it.
    fn stale(source: Option<&DataSource>, quality: Quality, after_ms: i64) -> bool {
        let v = LatestValue {
            tag_name: "Motor_Speed".into(),
            value: 2950.0,
            timestamp: Timestamp::from_millis(1_000_000),
            quality,
        };
        Reading::of(v, source, Timestamp::from_millis(1_000_000 + after_ms)).stale
    }

    /// The age of a value says nothing while its source confirms it: a constant OPC UA value
    /// stays fresh for as long as the subscription lives (10 minutes and a day here), and turns
    /// stale as soon as the source is disconnected or the quality is not good. Polled and
    /// published values turn stale after their window.
    #[test]
    fn a_value_is_stale_when_its_source_stops_confirming_it() {
        let opcua = source(
            DataSourceType::Opcua,
            DataSourceStatus::Connected,
            json!({}),
        );
        for after in [0, 10 * 60_000, 86_400_000] {
            assert!(!stale(Some(&opcua), Quality::Good, after), "{after} ms");
        }
        assert!(stale(Some(&opcua), Quality::Uncertain, 0));
        let lost = source(
            DataSourceType::Opcua,
            DataSourceStatus::Disconnected,
            json!({}),
        );
        assert!(stale(Some(&lost), Quality::Good, 0));
        let mut off = opcua.clone();
        off.enabled = false;
        assert!(stale(Some(&off), Quality::Good, 0));

        // Modbus: three missed polls, at least 5 s and at most 30 s unless polls are slower.
        let fast = source(
            DataSourceType::Modbus,
            DataSourceStatus::Connected,
            json!({"poll_interval_ms": 1000}),
        );
        assert!(!stale(Some(&fast), Quality::Good, 5_000));
        assert!(stale(Some(&fast), Quality::Good, 5_001));
        let slow = source(
            DataSourceType::Modbus,
            DataSourceStatus::Connected,
            json!({"poll_interval_ms": 60_000}),
        );
        assert!(!stale(Some(&slow), Quality::Good, 61_000));
        assert!(stale(Some(&slow), Quality::Good, 61_001));

        // MQTT: the source's stale_after_seconds, default 30.
        let mqtt = source(DataSourceType::Mqtt, DataSourceStatus::Connected, json!({}));
        assert!(!stale(Some(&mqtt), Quality::Good, 30_000));
        assert!(stale(Some(&mqtt), Quality::Good, 30_001));

        // Points sent through the API: fresh for 5 minutes.
        assert!(!stale(None, Quality::Good, API_STALE_AFTER_MS));
        assert!(stale(None, Quality::Good, API_STALE_AFTER_MS + 1));
    }
}
