//! Audit logs (SPEC 4.13): list with filters, one record, summary and export (CSV or JSON).

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use plantd_app::audit::{AuditFilter, AuditSummary};
use plantd_model::Scope::Admin;
use plantd_model::Timestamp;
use plantd_model::audit::{AuditEvent, AuditRecord, Severity};
use serde::Deserialize;

use crate::envelope::{Data, List, csv_cell, list, ok, paged_query};
use crate::error::{ApiError, ApiResult};
use crate::extract::{Auth, ById, ValidJson, ValidQuery, query_time};
use crate::routing::{Policy, Route, route};
use crate::state::AppState;

pub(crate) fn routes() -> Vec<Route> {
    vec![
        route!(list_logs, Policy::scope(Admin, AuditEvent::AuditList)),
        route!(get_log, Policy::scope(Admin, AuditEvent::AuditRead)),
        route!(summary, Policy::scope(Admin, AuditEvent::AuditSummary)),
        route!(export, Policy::scope(Admin, AuditEvent::AuditExport)),
    ]
}

paged_query! {
pub struct AuditQuery {
    /// Records at or after this time.
    pub start_time: Option<String>,
    /// Records at or before this time.
    pub end_time: Option<String>,
    /// Comma-separated: data_sources, api_keys, organization, members, users, audit, system.
    pub categories: Option<String>,
    /// Comma-separated event types such as `data_source.create,api_key.revoke`.
    pub event_types: Option<String>,
    /// Comma-separated: info, warning, critical.
    pub severities: Option<String>,
    pub user_id: Option<String>,
    pub resource_type: Option<String>,
    /// Case-insensitive text searched in event type, category, resource, actor, user, path,
    /// error code, client address, user agent and outcome.
    pub search: Option<String>,
}
}

fn csv_list(text: &Option<String>) -> Vec<String> {
    text.as_deref()
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

fn range(
    start: Option<Timestamp>,
    end: Option<Timestamp>,
    errors: &mut Vec<plantd_model::FieldError>,
) {
    if let (Some(s), Some(e)) = (start, end)
        && s > e
    {
        errors.push(plantd_model::FieldError::new(
            "end_time",
            "must not be before start_time",
        ));
    }
}

impl AuditQuery {
    fn filter(&self) -> Result<AuditFilter, ApiError> {
        let mut errors = Vec::new();
        let start = query_time(&mut errors, "start_time", &self.start_time);
        let end = query_time(&mut errors, "end_time", &self.end_time);
        range(start, end, &mut errors);
        let mut severities = Vec::new();
        for s in csv_list(&self.severities) {
            match Severity::parse(&s) {
                Some(sev) => severities.push(sev),
                None => errors.push(plantd_model::FieldError::new(
                    "severities",
                    format!("unknown severity '{s}'; expected info, warning or critical"),
                )),
            }
        }
        if !errors.is_empty() {
            return Err(ApiError::Validation(errors));
        }
        let non_empty = |o: &Option<String>| {
            o.as_deref()
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        Ok(AuditFilter {
            start,
            end,
            categories: csv_list(&self.categories),
            event_types: csv_list(&self.event_types),
            severities,
            user_id: non_empty(&self.user_id),
            resource_type: non_empty(&self.resource_type),
            search: non_empty(&self.search),
        })
    }
}

/// Audit records of the organization, newest first.
#[utoipa::path(get, path = "/audit/logs", tag = "audit", params(AuditQuery),
    responses((status = 200, body = List<AuditRecord>)))]
async fn list_logs(
    State(state): State<AppState>,
    caller: Auth,
    ValidQuery(q): ValidQuery<AuditQuery>,
) -> ApiResult<Response> {
    let filter = q.filter()?;
    let page = q.page()?;
    let paged = state.app.audit_logs(&caller.org_id, &filter, page).await?;
    Ok(list(page, paged, |r| r))
}

#[utoipa::path(get, path = "/audit/logs/{id}", tag = "audit", params(("id" = String, Path)),
    responses((status = 200, body = Data<AuditRecord>)))]
async fn get_log(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    let record = state.app.audit_log(r.org(), &r.id).await?;
    Ok(ok(record))
}

/// Counts by severity, outcome and category, and the most frequent event types, over the same
/// filters as the list (all time by default).
#[utoipa::path(get, path = "/audit/summary", tag = "audit", params(AuditQuery),
    responses((status = 200, body = Data<AuditSummary>)))]
async fn summary(
    State(state): State<AppState>,
    caller: Auth,
    ValidQuery(q): ValidQuery<AuditQuery>,
) -> ApiResult<Response> {
    let filter = q.filter()?;
    Ok(ok(state.app.audit_summary(&caller.org_id, &filter).await?))
}

#[derive(Clone, Copy, Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ExportFormat {
    #[default]
    Csv,
    Json,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExportRequest {
    pub start_time: Option<Timestamp>,
    pub end_time: Option<Timestamp>,
    /// csv (default) or json.
    pub format: Option<ExportFormat>,
    pub categories: Option<Vec<String>>,
    pub severities: Option<Vec<Severity>>,
}

/// The matching records as a file (oldest first, at most 100,000 rows): CSV with a header row,
/// or a JSON array.
#[utoipa::path(post, path = "/audit/export", tag = "audit", request_body = ExportRequest,
    responses((status = 200, description = "The export file: CSV with a header row, or a JSON array of records",
        content((String = "text/csv; charset=utf-8"), (Vec<AuditRecord> = "application/json")))))]
async fn export(
    State(state): State<AppState>,
    caller: Auth,
    ValidJson(body): ValidJson<ExportRequest>,
) -> ApiResult<Response> {
    let mut errors = Vec::new();
    range(body.start_time, body.end_time, &mut errors);
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let filter = AuditFilter {
        start: body.start_time,
        end: body.end_time,
        categories: body.categories.unwrap_or_default(),
        severities: body.severities.unwrap_or_default(),
        ..AuditFilter::default()
    };
    let records = state.app.audit_export(&caller.org_id, &filter).await?;
    let stamp = Timestamp::now().to_rfc3339().replace([':', '.'], "-");
    let (content_type, ext, body) = match body.format.unwrap_or_default() {
        ExportFormat::Json => (
            "application/json",
            "json",
            serde_json::to_vec_pretty(&records).map_err(ApiError::internal)?,
        ),
        ExportFormat::Csv => ("text/csv; charset=utf-8", "csv", to_csv(&records)?),
    };
    let disposition = format!("attachment; filename=\"audit-{stamp}.{ext}\"");
    Ok((
        [
            (header::CONTENT_TYPE, content_type.to_string()),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        body,
    )
        .into_response())
}

const CSV_COLUMNS: [&str; 18] = [
    "id",
    "timestamp",
    "actor_type",
    "actor_id",
    "user_id",
    "category",
    "event_type",
    "severity",
    "outcome",
    "resource_type",
    "resource_id",
    "method",
    "path",
    "status_code",
    "error_code",
    "client_ip",
    "user_agent",
    "request_id",
];

fn to_csv(records: &[AuditRecord]) -> ApiResult<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(CSV_COLUMNS).map_err(ApiError::internal)?;
    for r in records {
        let o = |v: &Option<String>| csv_cell(v.as_deref().unwrap_or_default());
        w.write_record([
            r.id.clone(),
            r.timestamp.to_rfc3339(),
            r.actor_type.clone(),
            o(&r.actor_id),
            o(&r.user_id),
            r.category.clone(),
            r.event_type.clone(),
            r.severity.as_str().to_string(),
            r.outcome.clone(),
            r.resource_type.clone(),
            o(&r.resource_id),
            r.method.clone(),
            r.path.clone(),
            r.status_code.to_string(),
            o(&r.error_code),
            o(&r.client_ip),
            o(&r.user_agent),
            r.request_id.clone(),
        ])
        .map_err(ApiError::internal)?;
    }
    w.into_inner()
        .map_err(|e| ApiError::internal(e.into_error()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn formula_cells_are_neutralised() {
        assert_eq!(super::csv_cell("=HYPERLINK(\"x\")"), "'=HYPERLINK(\"x\")");
        assert_eq!(super::csv_cell("curl/8.0"), "curl/8.0");
        assert_eq!(super::csv_cell(""), "");
    }
}
