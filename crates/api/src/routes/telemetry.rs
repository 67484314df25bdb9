//! Telemetry (SPEC 2.3, 4.2, 8.3, 8.5): ingest, raw and aggregated queries, latest values, and
//! downsampled series for charts.

use axum::Extension;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use plantd_app::access::AuditTrail;
use plantd_app::telemetry::{
    AggregatedRow, Batch, IngestBody, RawChunk, RawRow, Reading, Series, SeriesRequest,
    TelemetryFilter,
};
use plantd_model::FieldError;
use plantd_model::Scope::{ReadTelemetry, WriteTelemetry};
use plantd_model::Timestamp;
use plantd_model::audit::AuditEvent;
use plantd_model::dashboard::MAX_TAGS_PER_WIDGET;
use plantd_model::telemetry::{Aggregation, Interval, check_name};
use serde::{Deserialize, Serialize};
use std::io::Write;

use crate::envelope::{Data, List, csv_cell, list, ok, paged_query};
use crate::error::{ApiError, ApiResult};
use crate::extract::{Auth, JsonBytes, ValidQuery, query_time};
use crate::routing::{Policy, Route, route};
use crate::state::AppState;

pub(crate) fn routes() -> Vec<Route> {
    vec![
        route!(
            ingest,
            Policy::scope(WriteTelemetry, AuditEvent::TelemetryIngest).limit(1000, 60)
        )
        .body_limit(MAX_INGEST_BODY),
        route!(
            query,
            Policy::scope(ReadTelemetry, AuditEvent::TelemetryQuery).limit(100, 60)
        ),
        route!(
            latest,
            Policy::scope(ReadTelemetry, AuditEvent::TelemetryLatest)
        ),
        route!(
            series,
            Policy::scope(ReadTelemetry, AuditEvent::TelemetrySeries).limit(600, 60)
        ),
        route!(
            export,
            Policy::scope(ReadTelemetry, AuditEvent::TelemetryExport).limit(60, 60)
        ),
    ]
}

/// The largest ingest body (10,000 points with long names fit).
pub const MAX_INGEST_BODY: usize = 16 * 1024 * 1024;

#[derive(Serialize, utoipa::ToSchema)]
pub struct IngestResult {
    /// Points stored (durably) by this request.
    pub accepted: usize,
}

/// Store a batch of points, all or none. A point with the same asset, tag and timestamp as a
/// stored one replaces it.
#[utoipa::path(post, path = "/telemetry", tag = "telemetry", request_body = IngestBody,
    responses((status = 200, body = Data<IngestResult>)))]
async fn ingest(
    State(state): State<AppState>,
    caller: Auth,
    trail: Option<Extension<AuditTrail>>,
    JsonBytes(bytes): JsonBytes,
) -> ApiResult<Response> {
    let trail = trail.map(|Extension(t)| t);
    let stored = state
        .app
        .ingest(
            &caller,
            Batch::Body(&bytes, Default::default()),
            trail.as_ref(),
        )
        .await?;
    let mut response = ok(IngestResult {
        accepted: stored.accepted,
    });
    // Where the time went (standard Server-Timing, shown by browsers' developer tools).
    if let Ok(v) = axum::http::HeaderValue::from_str(&format!(
        "write;dur={:.3}, alerts;dur={:.3}",
        stored.write.as_secs_f64() * 1000.0,
        stored.alerts.as_secs_f64() * 1000.0
    )) {
        response.headers_mut().insert("server-timing", v);
    }
    Ok(response)
}

paged_query! {
pub struct TelemetryQuery {
    pub data_source_id: Option<String>,
    pub asset_id: Option<String>,
    pub tag_name: Option<String>,
    /// Inclusive start (RFC 3339); default: one hour before `end`.
    pub start: Option<String>,
    /// Exclusive end (RFC 3339); default: now.
    pub end: Option<String>,
    /// avg, min, max, sum or count. Without `interval`: one row per series for the whole range.
    #[param(inline)]
    pub aggregation: Option<Aggregation>,
    /// 1m, 5m, 1h or 1d buckets aligned to UTC. Without `aggregation`: avg.
    #[param(inline)]
    pub interval: Option<Interval>,
}
}

/// `[start, end)` from the query's RFC 3339 texts: `end` defaults to now, `start` to one hour
/// before `end`; faults are added to `errors`.
fn time_range(
    errors: &mut Vec<FieldError>,
    start: &Option<String>,
    end: &Option<String>,
) -> (Timestamp, Timestamp) {
    let end = query_time(errors, "end", end).unwrap_or_else(Timestamp::now);
    let start = query_time(errors, "start", start)
        .unwrap_or_else(|| Timestamp::from_millis(end.millis() - 3_600_000));
    if start >= end {
        errors.push(FieldError::new("end", "must be after start"));
    }
    (start, end)
}

/// The tag names of a comma-separated list (blanks dropped).
fn tag_list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

/// The required asset and the listed tags of a series or export query, each checked as names,
/// with 1 to `max` tags when a maximum is given; faults are added to `errors`.
fn asset_and_tags(
    errors: &mut Vec<FieldError>,
    asset_id: Option<String>,
    tags: Option<&str>,
    max: Option<usize>,
) -> (String, Vec<String>) {
    let asset_id = asset_id.unwrap_or_default();
    if let Err(m) = check_name(&asset_id) {
        errors.push(FieldError::new("asset_id", m));
    }
    let tags = tag_list(tags.unwrap_or_default());
    if let Some(max) = max
        && (tags.is_empty() || tags.len() > max)
    {
        errors.push(FieldError::new(
            "tags",
            format!("must name 1 to {max} tags, comma-separated"),
        ));
    }
    for t in &tags {
        if let Err(m) = check_name(t) {
            errors.push(FieldError::new("tags", format!("{t}: {m}")));
        }
    }
    (asset_id, tags)
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum TelemetryRow {
    Raw(RawRow),
    Aggregated(AggregatedRow),
}

/// Points (raw, with quality) or aggregates (per series and bucket, with the count of points),
/// ordered by time, then asset and tag.
#[utoipa::path(get, path = "/telemetry", tag = "telemetry", params(TelemetryQuery),
    responses((status = 200, body = List<TelemetryRow>)))]
async fn query(
    State(state): State<AppState>,
    caller: Auth,
    ValidQuery(q): ValidQuery<TelemetryQuery>,
) -> ApiResult<Response> {
    let page = q.page()?;
    let mut errors = Vec::new();
    let (start, end) = time_range(&mut errors, &q.start, &q.end);
    for (field, v) in [("asset_id", &q.asset_id), ("tag_name", &q.tag_name)] {
        if let Some(v) = v
            && let Err(m) = check_name(v)
        {
            errors.push(FieldError::new(field, m));
        }
    }
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let filter = TelemetryFilter {
        data_source_id: q.data_source_id,
        asset_id: q.asset_id,
        tag_name: q.tag_name,
        start,
        end,
    };
    if q.aggregation.is_none() && q.interval.is_none() {
        let paged = state
            .app
            .telemetry_raw(&caller.org_id, &filter, page)
            .await?;
        return Ok(list(page, paged, TelemetryRow::Raw));
    }
    let agg = q.aggregation.unwrap_or(Aggregation::Avg);
    let paged = state
        .app
        .telemetry_aggregated(
            &caller.org_id,
            &filter,
            agg,
            q.interval.map(Interval::millis),
            page,
        )
        .await?;
    Ok(list(page, paged, TelemetryRow::Aggregated))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LatestQuery {
    /// Required.
    pub asset_id: Option<String>,
    /// Comma-separated tag names; all tags when absent.
    pub tags: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct LatestRow {
    pub asset_id: String,
    #[serde(flatten)]
    pub reading: Reading,
}

/// The latest value of each tag of an asset (of the listed tags when `tags` is given), by tag
/// name. An asset without data gives an empty list.
#[utoipa::path(get, path = "/telemetry/latest", tag = "telemetry", params(LatestQuery),
    responses((status = 200, body = Data<Vec<LatestRow>>)))]
async fn latest(
    State(state): State<AppState>,
    caller: Auth,
    ValidQuery(q): ValidQuery<LatestQuery>,
) -> ApiResult<Response> {
    let asset_id = q
        .asset_id
        .filter(|a| !a.trim().is_empty())
        .ok_or_else(|| ApiError::validation("asset_id", "is required"))?;
    check_name(&asset_id).map_err(|m| ApiError::validation("asset_id", m))?;
    let tags: Option<Vec<String>> = q.tags.as_deref().map(tag_list);
    let values = state
        .app
        .latest_values(&caller.org_id, &asset_id, tags.as_deref())
        .await?;
    let rows: Vec<LatestRow> = values
        .into_iter()
        .map(|reading| LatestRow {
            asset_id: asset_id.clone(),
            reading,
        })
        .collect();
    Ok(ok(rows))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SeriesQuery {
    pub data_source_id: Option<String>,
    /// Required.
    pub asset_id: Option<String>,
    /// Required: 1..8 comma-separated tag names.
    pub tags: Option<String>,
    /// Inclusive start (RFC 3339); default: one hour before `end`.
    pub start: Option<String>,
    /// Exclusive end (RFC 3339); default: now.
    pub end: Option<String>,
    /// The chart's width in pixels, 10..10,000 (default 1,000): at most two values per pixel
    /// are sent.
    #[param(minimum = 10, maximum = 10000)]
    #[serde(default, deserialize_with = "plantd_model::page::opt_i64")]
    pub width: Option<i64>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct SeriesView {
    pub start: Timestamp,
    pub end: Timestamp,
    pub width: u32,
    pub series: Vec<Series>,
}

/// Extension for charts: each tag's series over the range in one request, downsampled by the
/// server to at most two values (minimum and maximum, with the average) per pixel of `width`
/// when the raw points would not fit; raw points when they do.
#[utoipa::path(get, path = "/telemetry/series", tag = "telemetry", params(SeriesQuery),
    responses((status = 200, body = Data<SeriesView>)))]
async fn series(
    State(state): State<AppState>,
    caller: Auth,
    ValidQuery(q): ValidQuery<SeriesQuery>,
) -> ApiResult<Response> {
    let mut errors = Vec::new();
    let (start, end) = time_range(&mut errors, &q.start, &q.end);
    let (asset_id, tags) = asset_and_tags(
        &mut errors,
        q.asset_id,
        q.tags.as_deref(),
        Some(MAX_TAGS_PER_WIDGET),
    );
    let width = q.width.unwrap_or(1000);
    if !(10..=10_000).contains(&width) {
        errors.push(FieldError::new("width", "must be 10 to 10000"));
    }
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let request = SeriesRequest {
        data_source_id: q.data_source_id,
        asset_id,
        tags,
        start,
        end,
        width: width as u32,
    };
    let series = state.app.telemetry_series(&caller.org_id, &request).await?;
    Ok(ok(SeriesView {
        start,
        end,
        width: request.width,
        series,
    }))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ExportQuery {
    pub data_source_id: Option<String>,
    /// Required.
    pub asset_id: Option<String>,
    /// Comma-separated tag names; every tag of the asset when absent.
    pub tags: Option<String>,
    /// Inclusive start (RFC 3339); default: one hour before `end`.
    pub start: Option<String>,
    /// Exclusive end (RFC 3339); default: now.
    pub end: Option<String>,
    /// `csv` (default) or `ndjson`.
    pub format: Option<String>,
}

/// Extension: every raw point of an asset's tags in the range, in one streamed response (CSV
/// with a header row, or one JSON object per line), series by series (by tag), each by time.
/// Counted as one request; the server's memory does not grow with the range.
#[utoipa::path(get, path = "/telemetry/export", tag = "telemetry", params(ExportQuery),
    responses((status = 200, description = "The points: CSV (timestamp,asset_id,tag_name,value,quality) or NDJSON",
        content((String = "text/csv; charset=utf-8"), (RawRow = "application/x-ndjson")))))]
async fn export(
    State(state): State<AppState>,
    caller: Auth,
    ValidQuery(q): ValidQuery<ExportQuery>,
) -> ApiResult<Response> {
    let mut errors = Vec::new();
    let (start, end) = time_range(&mut errors, &q.start, &q.end);
    let (asset_id, tags) = asset_and_tags(&mut errors, q.asset_id, q.tags.as_deref(), None);
    let ndjson = match q.format.as_deref() {
        None | Some("csv") => false,
        Some("ndjson") => true,
        Some(_) => {
            errors.push(FieldError::new("format", "must be csv or ndjson"));
            false
        }
    };
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let filter = TelemetryFilter {
        data_source_id: q.data_source_id,
        asset_id: Some(asset_id),
        tag_name: None,
        start,
        end,
    };
    let chunks = state.app.export_raw(&caller.org_id, filter, tags);
    let header =
        (!ndjson).then(|| Bytes::from_static(b"timestamp,asset_id,tag_name,value,quality\n"));
    let stream =
        futures_util::stream::unfold((chunks, header), move |(mut chunks, header)| async move {
            if let Some(h) = header {
                return Some((Ok(h), (chunks, None)));
            }
            match chunks.recv().await? {
                Ok(chunk) => Some((Ok(render_rows(&chunk, ndjson)), (chunks, None))),
                Err(e) => {
                    tracing::warn!(error = %e, "a telemetry export stopped");
                    Some((Err(std::io::Error::other(e.to_string())), (chunks, None)))
                }
            }
        })
        // Fused: a compressing body may poll again after the end.
        .fuse();
    let (content_type, file) = if ndjson {
        ("application/x-ndjson", "telemetry.ndjson")
    } else {
        ("text/csv; charset=utf-8", "telemetry.csv")
    };
    Ok((
        [
            (header::CONTENT_TYPE, content_type.to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{file}\""),
            ),
        ],
        axum::body::Body::from_stream(stream),
    )
        .into_response())
}

/// A chunk of points as CSV rows or NDJSON lines.
fn render_rows(chunk: &RawChunk, ndjson: bool) -> Bytes {
    let mut out = Vec::with_capacity(chunk.points.len() * 80);
    if ndjson {
        for &(ts, value, quality) in &chunk.points {
            let row = RawRow {
                timestamp: Timestamp::from_millis(ts),
                asset_id: chunk.asset_id.clone(),
                tag_name: chunk.tag_name.clone(),
                value,
                quality,
            };
            if serde_json::to_writer(&mut out, &row).is_ok() {
                out.push(b'\n');
            }
        }
        return Bytes::from(out);
    }
    // The asset and tag fields, quoted where CSV needs it, once per chunk; timestamps, values
    // and qualities never need quoting.
    let mut names = Vec::new();
    {
        let mut w = csv::Writer::from_writer(&mut names);
        let _ = w.write_record([csv_cell(&chunk.asset_id), csv_cell(&chunk.tag_name)]);
        let _ = w.flush();
    }
    let names = names.strip_suffix(b"\n").unwrap_or(&names);
    for &(ts, value, quality) in &chunk.points {
        let t = Timestamp::from_millis(ts);
        match t.rfc3339_bytes() {
            Some(bytes) => out.extend_from_slice(&bytes),
            None => out.extend_from_slice(t.to_rfc3339().as_bytes()),
        }
        out.push(b',');
        out.extend_from_slice(names);
        out.push(b',');
        let _ = write!(out, "{value}");
        out.push(b',');
        out.extend_from_slice(quality.as_str().as_bytes());
        out.push(b'\n');
    }
    Bytes::from(out)
}
