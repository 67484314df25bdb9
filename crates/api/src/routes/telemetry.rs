//! Telemetry (SPEC 2.3, 4.2, 8.3): ingest, raw and aggregated queries, latest values.

use axum::extract::State;
use axum::response::Response;
use plantd_model::page::PageQuery;
use plantd_model::telemetry::{
    Aggregation, Interval, Point, Quality, check_name, parse_batch, validate_points,
};
use plantd_model::{FieldError, Timestamp};
use plantd_tsdb::{AggregatedRow, RawRow, TelemetryFilter};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;

use crate::envelope::{Data, List, list, ok};
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{JsonBytes, ValidQuery, parse_json};
use crate::pipeline::{AuditCommitted, RequestFacts, audit_record};
use crate::rate_limit::{Bucket, Decision, Window};
use crate::routes::page_of;
use crate::state::{AppState, Caller};

/// The largest ingest body (10,000 points with long names fit).
pub const MAX_INGEST_BODY: usize = 16 * 1024 * 1024;

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct IngestBody {
    /// 1 to 10,000 points.
    #[schema(value_type = Vec<IngestPoint>)]
    pub data: Vec<Value>,
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
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct IngestResult {
    /// Points stored (durably) by this request.
    pub accepted: usize,
}

/// Store a batch of points, all or none. A point with the same asset, tag and timestamp as a
/// stored one replaces it.
#[utoipa::path(post, path = "/telemetry", tag = "telemetry", security(("api_key" = [])), request_body = IngestBody,
    responses((status = 200, body = Data<IngestResult>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub async fn ingest(
    State(state): State<AppState>,
    caller: Caller,
    facts: Option<axum::Extension<RequestFacts>>,
    JsonBytes(bytes): JsonBytes,
) -> ApiResult<Response> {
    let now = Timestamp::now();
    let oldest = state.tsdb.retention().oldest_accepted(now);
    // A valid body is read straight into points; anything off is read again the detailed way,
    // which names every bad field.
    let (points, batch_source) = match parse_batch(&bytes, now, oldest) {
        Some(batch) => batch,
        None => {
            let body: IngestBody = parse_json(&bytes)?;
            let points = validate_points(&body.data, body.data_source_id.as_deref(), now, oldest)
                .map_err(ApiError::Validation)?;
            (points, body.data_source_id)
        }
    };
    check_sources(&state, &caller, &points, batch_source.as_deref()).await?;
    // The request's audit record is committed with its points (one commit per request, not
    // two); should the write fail, the pipeline records the failure as usual.
    let audit = facts.as_ref().map(|axum::Extension(f)| {
        audit_record(f, Some(&caller), axum::http::StatusCode::OK, None, None)
    });
    let audited = audit.is_some();
    let stored = store_points(
        &state,
        &caller.org_id,
        caller.tier,
        Arc::new(points),
        audit,
        now,
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
    if audited {
        response.extensions_mut().insert(AuditCommitted);
    }
    Ok(response)
}

/// What [`store_points`] did and how long it took.
pub(crate) struct Stored {
    pub accepted: usize,
    /// The durable write (queueing for the group commit included).
    pub write: std::time::Duration,
    /// From the write to the batch's alert changes stored and published.
    pub alerts: std::time::Duration,
}

/// The one way points enter storage (the ingest endpoint and the connectors): the tier's
/// storage quota and ingestion limits, the durable write (with `audit` in the same commit), then
/// alert evaluation and the live stream.
pub(crate) async fn store_points(
    state: &AppState,
    org_id: &str,
    tier: plantd_model::Tier,
    points: Arc<Vec<Point>>,
    audit: Option<plantd_store::NewAuditRecord>,
    now: Timestamp,
) -> ApiResult<Stored> {
    if let Some(limit_gb) = state.config.limits.telemetry(tier).storage_gb {
        let used = state
            .tsdb
            .storage_bytes(org_id)
            .await
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        if plantd_tsdb::over_quota(used, points.len(), limit_gb) {
            return Err(ApiError::RateLimited {
                message: format!(
                    "storage quota of {limit_gb} GB for the {tier} tier reached ({:.3} GB used); retention frees space, or raise the tier",
                    used as f64 / 1e9
                ),
                retry_after: state.config.retention_interval.as_secs().max(1),
            });
        }
    }
    admit_points(state, org_id, tier, points.len() as u64, now)?;
    let started = std::time::Instant::now();
    let accepted = state
        .tsdb
        .ingest(org_id, points.clone(), audit)
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let write = started.elapsed();
    // Committed: evaluate alert rules, tell live subscribers.
    state.alerts.evaluate(state, org_id, &points).await;
    let alerts = started.elapsed() - write;
    state.events.publish(crate::events::Event::Telemetry {
        org_id: org_id.into(),
        points,
    });
    Ok(Stored {
        accepted,
        write,
        alerts,
    })
}

/// Every named data source must be one of the caller's organization: the batch's is named
/// `data_source_id`, a point's own (when it differs) `data[i].data_source_id`.
async fn check_sources(
    state: &AppState,
    caller: &Caller,
    points: &[Point],
    batch_source: Option<&str>,
) -> ApiResult<()> {
    if batch_source.is_none() && points.iter().all(|p| p.data_source_id.is_none()) {
        return Ok(());
    }
    let sources = state.store.org_data_sources(&caller.org_id).await?;
    let known = |id: &str| sources.iter().any(|d| d.id == id);
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
        } else if errors.len() < plantd_model::telemetry::MAX_DETAILS {
            errors.push(FieldError::new(
                format!("data[{i}].data_source_id"),
                "is not a data source of this organization",
            ));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::Validation(errors))
    }
}

/// The tier's ingestion limits (SPEC 8.3), counted in points per organization.
fn admit_points(
    state: &AppState,
    org_id: &str,
    tier: plantd_model::Tier,
    n: u64,
    now: Timestamp,
) -> ApiResult<()> {
    let limits = state.config.limits.telemetry(tier);
    let windows: Vec<Window> = [
        (limits.points_per_minute, 60),
        (limits.points_per_hour, 3_600),
    ]
    .into_iter()
    .filter_map(|(l, w)| {
        l.map(|limit| Window {
            limit,
            window_secs: w,
        })
    })
    .collect();
    let bucket = Bucket {
        name: format!("points:{org_id}"),
        label: "telemetry ingestion",
        windows,
    };
    match state.limiter.check_n(&[bucket], n, now.unix_seconds()) {
        Decision::Allowed(_) => Ok(()),
        Decision::Refused {
            retry_after, scope, ..
        } => Err(ApiError::RateLimited {
            message: format!(
                "rate limit exceeded: {scope} points; this batch has {n} points; retry in {retry_after} s"
            ),
            retry_after,
        }),
    }
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
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
    #[serde(default, deserialize_with = "plantd_model::page::opt_i64")]
    pub page: Option<i64>,
    #[serde(default, deserialize_with = "plantd_model::page::opt_i64")]
    pub per_page: Option<i64>,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum TelemetryRow {
    Raw(RawRow),
    Aggregated(AggregatedRow),
}

/// Points (raw, with quality) or aggregates (per series and bucket, with the count of points),
/// ordered by time, then asset and tag.
#[utoipa::path(get, path = "/telemetry", tag = "telemetry", security(("api_key" = [])), params(TelemetryQuery),
    responses((status = 200, body = List<TelemetryRow>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub async fn query(
    State(state): State<AppState>,
    caller: Caller,
    ValidQuery(q): ValidQuery<TelemetryQuery>,
) -> ApiResult<Response> {
    let page = page_of(PageQuery {
        page: q.page,
        per_page: q.per_page,
    })?;
    let mut errors = Vec::new();
    let mut time = |field: &str, text: &Option<String>| {
        text.as_deref()
            .filter(|t| !t.trim().is_empty())
            .and_then(|t| {
                Timestamp::parse(t)
                    .map_err(|m| errors.push(FieldError::new(field, m)))
                    .ok()
            })
    };
    let end = time("end", &q.end);
    let start = time("start", &q.start);
    for (field, v) in [("asset_id", &q.asset_id), ("tag_name", &q.tag_name)] {
        if let Some(v) = v
            && let Err(m) = check_name(v)
        {
            errors.push(FieldError::new(field, m));
        }
    }
    let end = end.unwrap_or_else(Timestamp::now);
    let start = start.unwrap_or_else(|| Timestamp::from_millis(end.millis() - 3_600_000));
    if start >= end {
        errors.push(FieldError::new("end", "must be after start"));
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
    let internal = |e: plantd_tsdb::TsdbError| ApiError::Internal(e.to_string());
    if q.aggregation.is_none() && q.interval.is_none() {
        let paged = state
            .tsdb
            .query_raw(&caller.org_id, &filter, page)
            .await
            .map_err(internal)?;
        return Ok(list(page, paged, TelemetryRow::Raw));
    }
    let agg = q.aggregation.unwrap_or(Aggregation::Avg);
    let paged = state
        .tsdb
        .query_aggregated(
            &caller.org_id,
            &filter,
            agg,
            q.interval.map(Interval::millis),
            page,
        )
        .await
        .map_err(internal)?;
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
    pub tag_name: String,
    pub value: f64,
    pub timestamp: Timestamp,
    pub quality: Quality,
}

/// The latest value of each tag of an asset (of the listed tags when `tags` is given), by tag
/// name. An asset without data gives an empty list.
#[utoipa::path(get, path = "/telemetry/latest", tag = "telemetry", security(("api_key" = [])), params(LatestQuery),
    responses((status = 200, body = Data<Vec<LatestRow>>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)))]
pub async fn latest(
    State(state): State<AppState>,
    caller: Caller,
    ValidQuery(q): ValidQuery<LatestQuery>,
) -> ApiResult<Response> {
    let asset_id = q
        .asset_id
        .filter(|a| !a.trim().is_empty())
        .ok_or_else(|| ApiError::validation("asset_id", "is required"))?;
    check_name(&asset_id).map_err(|m| ApiError::validation("asset_id", m))?;
    let tags: Option<Vec<String>> = q.tags.map(|t| {
        t.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    });
    let values = state
        .tsdb
        .latest(&caller.org_id, &asset_id, tags.as_deref())
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let rows: Vec<LatestRow> = values
        .into_iter()
        .map(|v| LatestRow {
            asset_id: asset_id.clone(),
            tag_name: v.tag_name,
            value: v.value,
            timestamp: v.timestamp,
            quality: v.quality,
        })
        .collect();
    Ok(ok(rows))
}
