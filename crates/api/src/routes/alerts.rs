//! Alert rules and alerts (SPEC 2.5, 2.6, 4.4).

use axum::extract::State;
use axum::response::Response;
use plantd_app::alerts::AlertFilter;
use plantd_app::alerts::{Acknowledgement, AlertRuleUpdate, NewAlert, NewAlertRule};
use plantd_model::Scope::{ReadAlerts, WriteAlerts};
use plantd_model::alert::{Alert, AlertRule, AlertStatus, Severity};
use plantd_model::audit::AuditEvent;
use plantd_model::page::PageQuery;

use crate::envelope::{
    Data, List, created, list, no_content, ok, page_in_memory, page_of_query, paged_query,
};
use crate::error::{ApiError, ApiResult};
use crate::extract::{Auth, ById, ValidJson, ValidQuery, query_time};
use crate::routing::{Policy, Route, route};
use crate::state::AppState;

pub(crate) fn routes() -> Vec<Route> {
    vec![
        route!(
            list_rules,
            Policy::scope(ReadAlerts, AuditEvent::AlertRuleList)
        ),
        route!(
            create_rule,
            Policy::scope(WriteAlerts, AuditEvent::AlertRuleCreate)
        ),
        route!(
            get_rule,
            Policy::scope(ReadAlerts, AuditEvent::AlertRuleRead)
        ),
        route!(
            update_rule,
            Policy::scope(WriteAlerts, AuditEvent::AlertRuleUpdate)
        ),
        route!(
            delete_rule,
            Policy::scope(WriteAlerts, AuditEvent::AlertRuleDelete)
        ),
        route!(
            enable_rule,
            Policy::scope(WriteAlerts, AuditEvent::AlertRuleEnable)
        ),
        route!(
            disable_rule,
            Policy::scope(WriteAlerts, AuditEvent::AlertRuleDisable)
        ),
        route!(
            list_alerts,
            Policy::scope(ReadAlerts, AuditEvent::AlertList)
        ),
        route!(
            create_alert,
            Policy::scope(WriteAlerts, AuditEvent::AlertCreate).limit(100, 60)
        ),
        route!(
            acknowledge,
            Policy::scope(WriteAlerts, AuditEvent::AlertAcknowledge)
        ),
        route!(
            resolve,
            Policy::scope(WriteAlerts, AuditEvent::AlertResolve)
        ),
    ]
}

/// List alert rules, oldest first.
#[utoipa::path(get, path = "/alert-rules", tag = "alerts", params(PageQuery),
    responses((status = 200, body = List<AlertRule>)))]
async fn list_rules(
    State(state): State<AppState>,
    caller: Auth,
    ValidQuery(q): ValidQuery<PageQuery>,
) -> ApiResult<Response> {
    let page = page_of_query(q)?;
    let all = state.app.alert_rules(&caller.org_id).await?;
    Ok(list(page, page_in_memory(page, all), |r| r))
}

/// Create a rule; it applies to points of the data source (optionally one asset) whose tag is
/// `condition.tag_name`.
#[utoipa::path(post, path = "/alert-rules", tag = "alerts", request_body = NewAlertRule,
    responses((status = 201, body = Data<AlertRule>)))]
async fn create_rule(
    State(state): State<AppState>,
    caller: Auth,
    ValidJson(body): ValidJson<NewAlertRule>,
) -> ApiResult<Response> {
    let rule = state.app.create_alert_rule(&caller.org_id, body).await?;
    Ok(created(&rule.id.clone(), rule))
}

#[utoipa::path(get, path = "/alert-rules/{id}", tag = "alerts", params(("id" = String, Path)),
    responses((status = 200, body = Data<AlertRule>)))]
async fn get_rule(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    let rule = state.app.alert_rule(r.org(), &r.id).await?;
    Ok(ok(rule))
}

/// Update a rule; its timing starts afresh (open alerts stay open).
#[utoipa::path(put, path = "/alert-rules/{id}", tag = "alerts", params(("id" = String, Path)), request_body = AlertRuleUpdate,
    responses((status = 200, body = Data<AlertRule>)))]
async fn update_rule(
    State(state): State<AppState>,
    r: ById,
    ValidJson(body): ValidJson<AlertRuleUpdate>,
) -> ApiResult<Response> {
    let rule = state.app.update_alert_rule(r.org(), &r.id, body).await?;
    Ok(ok(rule))
}

/// Delete a rule; its open alerts are resolved (`resolved_by`: `rule_deleted`).
#[utoipa::path(delete, path = "/alert-rules/{id}", tag = "alerts", params(("id" = String, Path)),
    responses((status = 204, description = "Deleted")))]
async fn delete_rule(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    state.app.delete_alert_rule(r.org(), &r.id).await?;
    Ok(no_content())
}

/// Enable a rule (idempotent).
#[utoipa::path(post, path = "/alert-rules/{id}/enable", tag = "alerts", params(("id" = String, Path)),
    responses((status = 200, body = Data<AlertRule>)))]
async fn enable_rule(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    let rule = state
        .app
        .set_alert_rule_enabled(r.org(), &r.id, true)
        .await?;
    Ok(ok(rule))
}

/// Disable a rule (idempotent): it stops firing; open alerts stay open.
#[utoipa::path(post, path = "/alert-rules/{id}/disable", tag = "alerts", params(("id" = String, Path)),
    responses((status = 200, body = Data<AlertRule>)))]
async fn disable_rule(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    let rule = state
        .app
        .set_alert_rule_enabled(r.org(), &r.id, false)
        .await?;
    Ok(ok(rule))
}

paged_query! {
pub struct AlertQuery {
    /// active, acknowledged or resolved
    #[param(inline)]
    pub status: Option<AlertStatus>,
    /// critical, warning or info
    #[param(inline)]
    pub severity: Option<Severity>,
    /// Triggered at or after (RFC 3339).
    pub start: Option<String>,
    /// Triggered before (RFC 3339).
    pub end: Option<String>,
}
}

/// Alerts, newest first.
#[utoipa::path(get, path = "/alerts", tag = "alerts", params(AlertQuery),
    responses((status = 200, body = List<Alert>)))]
async fn list_alerts(
    State(state): State<AppState>,
    caller: Auth,
    ValidQuery(q): ValidQuery<AlertQuery>,
) -> ApiResult<Response> {
    let page = q.page()?;
    let mut errors = Vec::new();
    let filter = AlertFilter {
        status: q.status,
        severity: q.severity,
        start: query_time(&mut errors, "start", &q.start),
        end: query_time(&mut errors, "end", &q.end),
    };
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let paged = state.app.alerts(&caller.org_id, &filter, page).await?;
    Ok(list(page, paged, |a| a))
}

/// Create an alert from outside the rule engine (a script, an edge device, another system); it
/// follows the same lifecycle, events, webhooks and notifications as a rule's alerts. With a
/// `dedup_key` that an open alert holds, that alert is answered (200) and nothing is created.
#[utoipa::path(post, path = "/alerts", tag = "alerts", request_body = NewAlert,
    responses((status = 201, body = Data<Alert>, description = "Created"),
        (status = 200, body = Data<Alert>, description = "An open alert holds the dedup_key")))]
async fn create_alert(
    State(state): State<AppState>,
    caller: Auth,
    ValidJson(body): ValidJson<NewAlert>,
) -> ApiResult<Response> {
    let (alert, new) = state.app.create_alert(&caller.org_id, body).await?;
    Ok(if new {
        created(&alert.id.clone(), alert)
    } else {
        ok(alert)
    })
}

/// Acknowledge an active alert (else 409).
#[utoipa::path(post, path = "/alerts/{id}/acknowledge", tag = "alerts", params(("id" = String, Path)), request_body = Acknowledgement,
    responses((status = 200, body = Data<Alert>), (status = 409, description = "The alert is not active")))]
async fn acknowledge(
    State(state): State<AppState>,
    r: ById,
    ValidJson(body): ValidJson<Acknowledgement>,
) -> ApiResult<Response> {
    Ok(ok(state
        .app
        .acknowledge_alert(&r.caller, &r.id, body)
        .await?))
}

/// Resolve an active or acknowledged alert (else 409).
#[utoipa::path(post, path = "/alerts/{id}/resolve", tag = "alerts", params(("id" = String, Path)),
    responses((status = 200, body = Data<Alert>), (status = 409, description = "The alert is resolved already")))]
async fn resolve(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    Ok(ok(state.app.resolve_alert(&r.caller, &r.id).await?))
}
