//! BI (SPEC 4.11): SQL over the organization's data, saved queries, the history, the BI
//! configuration and row-level-security rules (docs/api.md, "BI"). Execute, saved queries and
//! history take `read:telemetry`; the configuration, rules and reports take `admin`.

use axum::extract::State;
use axum::response::Response;
use plantd_app::bi::{
    BiConfigUpdate, ExecuteSql, NewRlsRule, NewSavedQuery, RlsRuleUpdate, RlsTest, RlsTestAnswer,
    SavedQueryUpdate, SqlAnswer,
};
use plantd_app::bi_reports::{NewReport, ReportUpdate};
use plantd_model::Scope::{Admin, ReadTelemetry};
use plantd_model::audit::AuditEvent;
use plantd_model::bi::{BiConfig, QueryRun, Report, ReportRun, RlsRule, SavedQuery};
use plantd_model::page::PageQuery;

use crate::envelope::{Data, List, created, list, no_content, ok, page_in_memory, page_of_query};
use crate::error::ApiResult;
use crate::extract::{Auth, ById, ValidJson, ValidQuery};
use crate::routing::{Policy, Route, route};
use crate::state::AppState;

pub(crate) fn routes() -> Vec<Route> {
    vec![
        route!(get_config, Policy::scope(Admin, AuditEvent::BiConfigRead)),
        route!(put_config, Policy::scope(Admin, AuditEvent::BiConfigUpdate)),
        route!(
            execute,
            Policy::scope(ReadTelemetry, AuditEvent::BiQueryExecute).limit(30, 60)
        ),
        route!(
            save_query,
            Policy::scope(ReadTelemetry, AuditEvent::BiSavedQueryCreate)
        ),
        route!(
            list_saved,
            Policy::scope(ReadTelemetry, AuditEvent::BiSavedQueryList)
        ),
        route!(
            get_saved,
            Policy::scope(ReadTelemetry, AuditEvent::BiSavedQueryRead)
        ),
        route!(
            update_saved,
            Policy::scope(ReadTelemetry, AuditEvent::BiSavedQueryUpdate)
        ),
        route!(
            delete_saved,
            Policy::scope(ReadTelemetry, AuditEvent::BiSavedQueryDelete)
        ),
        route!(
            history,
            Policy::scope(ReadTelemetry, AuditEvent::BiHistoryList)
        ),
        route!(list_rules, Policy::scope(Admin, AuditEvent::BiRlsRuleList)),
        route!(
            create_rule,
            Policy::scope(Admin, AuditEvent::BiRlsRuleCreate)
        ),
        route!(
            update_rule,
            Policy::scope(Admin, AuditEvent::BiRlsRuleUpdate)
        ),
        route!(
            delete_rule,
            Policy::scope(Admin, AuditEvent::BiRlsRuleDelete)
        ),
        route!(test_rules, Policy::scope(Admin, AuditEvent::BiRlsTest)),
        route!(list_reports, Policy::scope(Admin, AuditEvent::BiReportList)),
        route!(
            create_report,
            Policy::scope(Admin, AuditEvent::BiReportCreate)
        ),
        route!(get_report, Policy::scope(Admin, AuditEvent::BiReportRead)),
        route!(
            update_report,
            Policy::scope(Admin, AuditEvent::BiReportUpdate)
        ),
        route!(
            delete_report,
            Policy::scope(Admin, AuditEvent::BiReportDelete)
        ),
        route!(run_report, Policy::scope(Admin, AuditEvent::BiReportRun)),
        route!(report_runs, Policy::scope(Admin, AuditEvent::BiReportRuns)),
    ]
}

/// The organization's BI configuration (the SPEC's defaults until changed).
#[utoipa::path(get, path = "/bi/config", tag = "bi",
    responses((status = 200, body = Data<BiConfig>)))]
async fn get_config(State(state): State<AppState>, caller: Auth) -> ApiResult<Response> {
    Ok(ok(state.app.bi_config(&caller.org_id).await?))
}

/// Change the BI configuration; absent fields keep their value.
#[utoipa::path(put, path = "/bi/config", tag = "bi", request_body = BiConfigUpdate,
    responses((status = 200, body = Data<BiConfig>)))]
async fn put_config(
    State(state): State<AppState>,
    caller: Auth,
    ValidJson(body): ValidJson<BiConfigUpdate>,
) -> ApiResult<Response> {
    Ok(ok(state.app.update_bi_config(&caller.org_id, body).await?))
}

/// Run SQL (a query) over the organization's data under the caller's row-level-security
/// rules. 30 a minute per key; the organization's queries at once, time and rows are limited
/// by its BI configuration.
#[utoipa::path(post, path = "/bi/query/execute", tag = "bi", request_body = ExecuteSql,
    responses((status = 200, body = Data<SqlAnswer>),
        (status = 400, description = "The SQL is refused (syntax with its position, an unknown table or column, not a query) or was cancelled at the time limit"),
        (status = 403, description = "SQL Lab is turned off for the organization"),
        (status = 429, description = "The organization already runs max_concurrent_queries queries")))]
async fn execute(
    State(state): State<AppState>,
    caller: Auth,
    ValidJson(body): ValidJson<ExecuteSql>,
) -> ApiResult<Response> {
    Ok(ok(state.app.execute_sql(&caller, body).await?))
}

/// Save a query.
#[utoipa::path(post, path = "/bi/query/save", tag = "bi", request_body = NewSavedQuery,
    responses((status = 201, body = Data<SavedQuery>)))]
async fn save_query(
    State(state): State<AppState>,
    caller: Auth,
    ValidJson(body): ValidJson<NewSavedQuery>,
) -> ApiResult<Response> {
    let saved = state.app.save_query(&caller, body).await?;
    Ok(created(&saved.id.clone(), saved))
}

/// The organization's saved queries, by name.
#[utoipa::path(get, path = "/bi/query/saved", tag = "bi", params(PageQuery),
    responses((status = 200, body = List<SavedQuery>)))]
async fn list_saved(
    State(state): State<AppState>,
    caller: Auth,
    ValidQuery(q): ValidQuery<PageQuery>,
) -> ApiResult<Response> {
    let page = page_of_query(q)?;
    let paged = state.app.saved_queries(&caller.org_id, page).await?;
    Ok(list(page, paged, |s| s))
}

#[utoipa::path(get, path = "/bi/query/saved/{id}", tag = "bi", params(("id" = String, Path)),
    responses((status = 200, body = Data<SavedQuery>)))]
async fn get_saved(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    Ok(ok(state.app.saved_query(r.org(), &r.id).await?))
}

/// Change a saved query; absent fields keep their value.
#[utoipa::path(put, path = "/bi/query/saved/{id}", tag = "bi", params(("id" = String, Path)),
    request_body = SavedQueryUpdate, responses((status = 200, body = Data<SavedQuery>)))]
async fn update_saved(
    State(state): State<AppState>,
    r: ById,
    ValidJson(body): ValidJson<SavedQueryUpdate>,
) -> ApiResult<Response> {
    Ok(ok(state
        .app
        .update_saved_query(r.org(), &r.id, body)
        .await?))
}

#[utoipa::path(delete, path = "/bi/query/saved/{id}", tag = "bi", params(("id" = String, Path)),
    responses((status = 204, description = "Deleted")))]
async fn delete_saved(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    state.app.delete_saved_query(r.org(), &r.id).await?;
    Ok(no_content())
}

/// Every execution, newest first: an administrator sees the organization's, anyone else
/// their own.
#[utoipa::path(get, path = "/bi/query/history", tag = "bi", params(PageQuery),
    responses((status = 200, body = List<QueryRun>)))]
async fn history(
    State(state): State<AppState>,
    caller: Auth,
    ValidQuery(q): ValidQuery<PageQuery>,
) -> ApiResult<Response> {
    let page = page_of_query(q)?;
    let paged = state.app.query_history(&caller, page).await?;
    Ok(list(page, paged, |r| r))
}

/// The row-level-security rules, by name.
#[utoipa::path(get, path = "/bi/rls/rules", tag = "bi", params(PageQuery),
    responses((status = 200, body = List<RlsRule>)))]
async fn list_rules(
    State(state): State<AppState>,
    caller: Auth,
    ValidQuery(q): ValidQuery<PageQuery>,
) -> ApiResult<Response> {
    let page = page_of_query(q)?;
    let all = state.app.rls_rules(&caller.org_id).await?;
    Ok(list(page, page_in_memory(page, all), |r| r))
}

/// Create a rule; its clause is checked against the table's columns.
#[utoipa::path(post, path = "/bi/rls/rules", tag = "bi", request_body = NewRlsRule,
    responses((status = 201, body = Data<RlsRule>)))]
async fn create_rule(
    State(state): State<AppState>,
    caller: Auth,
    ValidJson(body): ValidJson<NewRlsRule>,
) -> ApiResult<Response> {
    let rule = state.app.create_rls_rule(&caller.org_id, body).await?;
    Ok(created(&rule.id.clone(), rule))
}

/// Change a rule; absent fields keep their value.
#[utoipa::path(put, path = "/bi/rls/rules/{id}", tag = "bi", params(("id" = String, Path)),
    request_body = RlsRuleUpdate, responses((status = 200, body = Data<RlsRule>)))]
async fn update_rule(
    State(state): State<AppState>,
    r: ById,
    ValidJson(body): ValidJson<RlsRuleUpdate>,
) -> ApiResult<Response> {
    Ok(ok(state.app.update_rls_rule(r.org(), &r.id, body).await?))
}

#[utoipa::path(delete, path = "/bi/rls/rules/{id}", tag = "bi", params(("id" = String, Path)),
    responses((status = 204, description = "Deleted")))]
async fn delete_rule(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    state.app.delete_rls_rule(r.org(), &r.id).await?;
    Ok(no_content())
}

/// Run SQL as one rule, a role or a user would see it (exactly one of `rule_id`, `role`,
/// `user_id`), with the conditions applied.
#[utoipa::path(post, path = "/bi/rls/test", tag = "bi", request_body = RlsTest,
    responses((status = 200, body = Data<RlsTestAnswer>)))]
async fn test_rules(
    State(state): State<AppState>,
    caller: Auth,
    ValidJson(body): ValidJson<RlsTest>,
) -> ApiResult<Response> {
    Ok(ok(state.app.test_rls(&caller.org_id, body).await?))
}

/// The organization's reports, by name.
#[utoipa::path(get, path = "/bi/reports", tag = "bi", params(PageQuery),
    responses((status = 200, body = List<Report>)))]
async fn list_reports(
    State(state): State<AppState>,
    caller: Auth,
    ValidQuery(q): ValidQuery<PageQuery>,
) -> ApiResult<Response> {
    let page = page_of_query(q)?;
    let all = state.app.reports(&caller.org_id).await?;
    Ok(list(page, page_in_memory(page, all), |r| r))
}

/// Schedule a dashboard to be mailed as PDF or CSV (five cron fields, UTC).
#[utoipa::path(post, path = "/bi/reports", tag = "bi", request_body = NewReport,
    responses((status = 201, body = Data<Report>)))]
async fn create_report(
    State(state): State<AppState>,
    caller: Auth,
    ValidJson(body): ValidJson<NewReport>,
) -> ApiResult<Response> {
    let report = state.app.create_report(&caller, body).await?;
    Ok(created(&report.id.clone(), report))
}

#[utoipa::path(get, path = "/bi/reports/{id}", tag = "bi", params(("id" = String, Path)),
    responses((status = 200, body = Data<Report>)))]
async fn get_report(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    Ok(ok(state.app.report(r.org(), &r.id).await?))
}

/// Change a report; absent fields keep their value (the next run follows the schedule).
#[utoipa::path(put, path = "/bi/reports/{id}", tag = "bi", params(("id" = String, Path)),
    request_body = ReportUpdate, responses((status = 200, body = Data<Report>)))]
async fn update_report(
    State(state): State<AppState>,
    r: ById,
    ValidJson(body): ValidJson<ReportUpdate>,
) -> ApiResult<Response> {
    Ok(ok(state.app.update_report(r.org(), &r.id, body).await?))
}

#[utoipa::path(delete, path = "/bi/reports/{id}", tag = "bi", params(("id" = String, Path)),
    responses((status = 204, description = "Deleted, with its runs")))]
async fn delete_report(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    state.app.delete_report(r.org(), &r.id).await?;
    Ok(no_content())
}

/// Run the report now: rendered and mailed before the answer, which is the finished run
/// (`status` success or error, with the reason).
#[utoipa::path(post, path = "/bi/reports/{id}/run", tag = "bi", params(("id" = String, Path)),
    responses((status = 200, body = Data<ReportRun>),
        (status = 429, description = "The organization already runs max_concurrent_queries queries")))]
async fn run_report(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    Ok(ok(state.app.run_report_now(r.org(), &r.id).await?))
}

/// The report's runs, newest first.
#[utoipa::path(get, path = "/bi/reports/{id}/runs", tag = "bi", params(("id" = String, Path), PageQuery),
    responses((status = 200, body = List<ReportRun>)))]
async fn report_runs(
    State(state): State<AppState>,
    r: ById,
    ValidQuery(q): ValidQuery<PageQuery>,
) -> ApiResult<Response> {
    let page = page_of_query(q)?;
    let paged = state.app.report_runs(r.org(), &r.id, page).await?;
    Ok(list(page, paged, |run| run))
}
