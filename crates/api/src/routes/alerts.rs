//! Alert rules and alerts (SPEC 2.5, 2.6, 4.4).

use axum::extract::{Path, State};
use axum::response::Response;
use plantd_model::alert::{Alert, AlertRule, AlertStatus, CHANNELS, Condition, Operator, Severity};
use plantd_model::page::{PageQuery, Paged};
use plantd_model::telemetry::check_name;
use plantd_model::validation::Validator;
use plantd_model::{FieldError, Timestamp};
use plantd_store::{AlertFilter, RuleFields};
use serde::{Deserialize, Serialize};

use crate::alert_engine::publish;
use crate::envelope::{Data, List, created, list, no_content, ok};
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{ValidJson, ValidQuery};
use crate::routes::{page_in_memory, page_of};
use crate::state::{AppState, Caller};

/// The longest `duration_seconds` (7 days).
pub const MAX_DURATION_SECONDS: i64 = 7 * 86_400;

#[derive(Serialize, utoipa::ToSchema)]
pub struct AlertRuleView {
    pub id: String,
    pub name: String,
    pub severity: Severity,
    pub data_source_id: String,
    /// Only this asset of the data source; null: every asset.
    pub asset_id: Option<String>,
    pub condition: Condition,
    pub notifications: Vec<String>,
    pub enabled: bool,
    pub auto_resolve: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl From<AlertRule> for AlertRuleView {
    fn from(r: AlertRule) -> Self {
        Self {
            id: r.id,
            name: r.name,
            severity: r.severity,
            data_source_id: r.data_source_id,
            asset_id: r.asset_id,
            condition: r.condition,
            notifications: r.notifications,
            enabled: r.enabled,
            auto_resolve: r.auto_resolve,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConditionBody {
    pub tag_name: String,
    /// gt, gte, lt, lte, eq, neq
    pub operator: Operator,
    pub value: f64,
    /// 0 (fire on the first matching point) to 604,800.
    pub duration_seconds: i64,
    /// Default: the larger of 60 and `duration_seconds`.
    pub max_gap_seconds: Option<i64>,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateAlertRule {
    pub name: String,
    pub severity: Severity,
    pub data_source_id: String,
    pub asset_id: Option<String>,
    pub condition: ConditionBody,
    /// email, slack, webhook (default none).
    pub notifications: Option<Vec<String>>,
    /// Default true.
    pub enabled: Option<bool>,
    /// Default true.
    pub auto_resolve: Option<bool>,
}

/// Partial update: absent fields keep their value; a given `condition` replaces the condition.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateAlertRule {
    pub name: Option<String>,
    pub severity: Option<Severity>,
    pub data_source_id: Option<String>,
    /// null or absent keeps it; "" applies the rule to every asset again.
    pub asset_id: Option<String>,
    pub condition: Option<ConditionBody>,
    pub notifications: Option<Vec<String>>,
    pub enabled: Option<bool>,
    pub auto_resolve: Option<bool>,
}

fn condition(v: &mut Validator, c: &ConditionBody) -> Condition {
    if let Err(e) = check_name(&c.tag_name) {
        v.add("condition.tag_name", e);
    }
    if !c.value.is_finite() {
        v.add("condition.value", "must be a finite number");
    }
    if !(0..=MAX_DURATION_SECONDS).contains(&c.duration_seconds) {
        v.add(
            "condition.duration_seconds",
            format!("must be between 0 and {MAX_DURATION_SECONDS}"),
        );
    }
    let max_gap = c.max_gap_seconds.unwrap_or(c.duration_seconds.max(60));
    if !(1..=MAX_DURATION_SECONDS).contains(&max_gap) {
        v.add(
            "condition.max_gap_seconds",
            format!("must be between 1 and {MAX_DURATION_SECONDS}"),
        );
    }
    Condition {
        tag_name: c.tag_name.clone(),
        operator: c.operator,
        value: c.value,
        duration_seconds: c.duration_seconds,
        max_gap_seconds: max_gap,
    }
}

fn notifications(v: &mut Validator, list: &[String]) {
    for (i, n) in list.iter().enumerate() {
        if !CHANNELS.contains(&n.as_str()) {
            v.add(
                format!("notifications[{i}]"),
                format!("must be one of {}", CHANNELS.join(", ")),
            );
        } else if list[..i].contains(n) {
            v.add(format!("notifications[{i}]"), "is listed twice");
        }
    }
}

async fn check_source(state: &AppState, org_id: &str, id: &str) -> ApiResult<()> {
    match state.store.data_source(org_id, id).await {
        Ok(_) => Ok(()),
        Err(plantd_store::StoreError::NotFound) => {
            Err(ApiError::Validation(vec![FieldError::new(
                "data_source_id",
                "is not a data source of this organization",
            )]))
        }
        Err(e) => Err(e.into()),
    }
}

/// List alert rules, oldest first.
#[utoipa::path(get, path = "/alert-rules", tag = "alerts", security(("api_key" = [])), params(PageQuery),
    responses((status = 200, body = List<AlertRuleView>), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn list_rules(
    State(state): State<AppState>,
    caller: Caller,
    ValidQuery(q): ValidQuery<PageQuery>,
) -> ApiResult<Response> {
    let page = page_of(q)?;
    let all = state.store.alert_rules(&caller.org_id).await?;
    Ok(list(page, page_in_memory(page, all), AlertRuleView::from))
}

/// Create a rule; it applies to points of the data source (optionally one asset) whose tag is
/// `condition.tag_name`.
#[utoipa::path(post, path = "/alert-rules", tag = "alerts", security(("api_key" = [])), request_body = CreateAlertRule,
    responses((status = 201, body = Data<AlertRuleView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn create_rule(
    State(state): State<AppState>,
    caller: Caller,
    ValidJson(body): ValidJson<CreateAlertRule>,
) -> ApiResult<Response> {
    let mut v = Validator::new();
    v.text("name", &body.name, 200);
    if let Some(a) = &body.asset_id
        && let Err(e) = check_name(a)
    {
        v.add("asset_id", e);
    }
    let condition = condition(&mut v, &body.condition);
    let channels = body.notifications.unwrap_or_default();
    notifications(&mut v, &channels);
    v.finish().map_err(ApiError::Validation)?;
    check_source(&state, &caller.org_id, &body.data_source_id).await?;
    let rule = state
        .store
        .create_alert_rule(
            &caller.org_id,
            RuleFields {
                name: body.name.trim().to_string(),
                severity: body.severity,
                data_source_id: body.data_source_id,
                asset_id: body.asset_id,
                condition,
                notifications: channels,
                enabled: body.enabled.unwrap_or(true),
                auto_resolve: body.auto_resolve.unwrap_or(true),
            },
        )
        .await?;
    state.alerts.rule_changed(&caller.org_id, &rule.id);
    Ok(created(&rule.id.clone(), AlertRuleView::from(rule)))
}

#[utoipa::path(get, path = "/alert-rules/{id}", tag = "alerts", security(("api_key" = [])), params(("id" = String, Path)),
    responses((status = 200, body = Data<AlertRuleView>), (status = 404, body = ErrorBody)))]
pub async fn get_rule(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let rule = state
        .store
        .alert_rule(&caller.org_id, &id)
        .await
        .map_err(ApiError::missing("alert rule"))?;
    Ok(ok(AlertRuleView::from(rule)))
}

/// Update a rule; its timing starts afresh (open alerts stay open).
#[utoipa::path(put, path = "/alert-rules/{id}", tag = "alerts", security(("api_key" = [])), params(("id" = String, Path)), request_body = UpdateAlertRule,
    responses((status = 200, body = Data<AlertRuleView>), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn update_rule(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ValidJson(body): ValidJson<UpdateAlertRule>,
) -> ApiResult<Response> {
    let current = state
        .store
        .alert_rule(&caller.org_id, &id)
        .await
        .map_err(ApiError::missing("alert rule"))?;
    let mut v = Validator::new();
    if let Some(name) = &body.name {
        v.text("name", name, 200);
    }
    if let Some(a) = body.asset_id.as_deref().filter(|a| !a.is_empty())
        && let Err(e) = check_name(a)
    {
        v.add("asset_id", e);
    }
    let cond = body.condition.as_ref().map(|c| condition(&mut v, c));
    if let Some(n) = &body.notifications {
        notifications(&mut v, n);
    }
    v.finish().map_err(ApiError::Validation)?;
    if let Some(ds) = &body.data_source_id {
        check_source(&state, &caller.org_id, ds).await?;
    }
    let fields = RuleFields {
        name: body.name.map_or(current.name, |n| n.trim().to_string()),
        severity: body.severity.unwrap_or(current.severity),
        data_source_id: body.data_source_id.unwrap_or(current.data_source_id),
        asset_id: match body.asset_id {
            None => current.asset_id,
            Some(a) if a.is_empty() => None,
            Some(a) => Some(a),
        },
        condition: cond.unwrap_or(current.condition),
        notifications: body.notifications.unwrap_or(current.notifications),
        enabled: body.enabled.unwrap_or(current.enabled),
        auto_resolve: body.auto_resolve.unwrap_or(current.auto_resolve),
    };
    set_rule(&state, &caller, &id, fields).await
}

async fn set_rule(
    state: &AppState,
    caller: &Caller,
    id: &str,
    fields: RuleFields,
) -> ApiResult<Response> {
    let rule = state
        .store
        .update_alert_rule(&caller.org_id, id, fields)
        .await
        .map_err(ApiError::missing("alert rule"))?;
    state.alerts.rule_changed(&caller.org_id, id);
    Ok(ok(AlertRuleView::from(rule)))
}

/// Delete a rule; its open alerts are resolved (`resolved_by`: `rule_deleted`).
#[utoipa::path(delete, path = "/alert-rules/{id}", tag = "alerts", security(("api_key" = [])), params(("id" = String, Path)),
    responses((status = 204, description = "Deleted"), (status = 404, body = ErrorBody)))]
pub async fn delete_rule(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let resolved = state
        .store
        .delete_alert_rule(&caller.org_id, &id)
        .await
        .map_err(ApiError::missing("alert rule"))?;
    state.alerts.rule_changed(&caller.org_id, &id);
    for a in resolved {
        publish(&state, "alert.resolved", a);
    }
    Ok(no_content())
}

async fn switch_rule(state: AppState, caller: Caller, id: String, on: bool) -> ApiResult<Response> {
    let current = state
        .store
        .alert_rule(&caller.org_id, &id)
        .await
        .map_err(ApiError::missing("alert rule"))?;
    let fields = RuleFields {
        name: current.name,
        severity: current.severity,
        data_source_id: current.data_source_id,
        asset_id: current.asset_id,
        condition: current.condition,
        notifications: current.notifications,
        enabled: on,
        auto_resolve: current.auto_resolve,
    };
    set_rule(&state, &caller, &id, fields).await
}

/// Enable a rule (idempotent).
#[utoipa::path(post, path = "/alert-rules/{id}/enable", tag = "alerts", security(("api_key" = [])), params(("id" = String, Path)),
    responses((status = 200, body = Data<AlertRuleView>), (status = 404, body = ErrorBody)))]
pub async fn enable_rule(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    switch_rule(state, caller, id, true).await
}

/// Disable a rule (idempotent): it stops firing; open alerts stay open.
#[utoipa::path(post, path = "/alert-rules/{id}/disable", tag = "alerts", security(("api_key" = [])), params(("id" = String, Path)),
    responses((status = 200, body = Data<AlertRuleView>), (status = 404, body = ErrorBody)))]
pub async fn disable_rule(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    switch_rule(state, caller, id, false).await
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
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
    #[serde(default, deserialize_with = "plantd_model::page::opt_i64")]
    pub page: Option<i64>,
    #[serde(default, deserialize_with = "plantd_model::page::opt_i64")]
    pub per_page: Option<i64>,
}

/// Alerts, newest first.
#[utoipa::path(get, path = "/alerts", tag = "alerts", security(("api_key" = [])), params(AlertQuery),
    responses((status = 200, body = List<Alert>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn list_alerts(
    State(state): State<AppState>,
    caller: Caller,
    ValidQuery(q): ValidQuery<AlertQuery>,
) -> ApiResult<Response> {
    let page = page_of(PageQuery {
        page: q.page,
        per_page: q.per_page,
    })?;
    let mut errors = Vec::new();
    let mut time = |field: &str, text: &Option<String>| {
        text.as_deref().and_then(|t| match Timestamp::parse(t) {
            Ok(ts) => Some(ts),
            Err(e) => {
                errors.push(FieldError::new(field, e));
                None
            }
        })
    };
    let filter = AlertFilter {
        status: q.status,
        severity: q.severity,
        start: time("start", &q.start),
        end: time("end", &q.end),
    };
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let (items, total) = state
        .store
        .alerts(&caller.org_id, &filter, page.limit(), page.offset())
        .await?;
    Ok(list(page, Paged { items, total }, |a| a))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AcknowledgeBody {
    /// At most 2,000 characters.
    pub note: Option<String>,
}

/// Acknowledge an active alert (else 409).
#[utoipa::path(post, path = "/alerts/{id}/acknowledge", tag = "alerts", security(("api_key" = [])), params(("id" = String, Path)), request_body = AcknowledgeBody,
    responses((status = 200, body = Data<Alert>), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn acknowledge(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ValidJson(body): ValidJson<AcknowledgeBody>,
) -> ApiResult<Response> {
    if let Some(n) = &body.note {
        let mut v = Validator::new();
        v.check(
            n.chars().count() <= 2000,
            "note",
            "must be at most 2000 characters",
        );
        v.finish().map_err(ApiError::Validation)?;
    }
    change(
        &state,
        &caller,
        &id,
        AlertStatus::Acknowledged,
        body.note.as_deref(),
    )
    .await
}

/// Resolve an active or acknowledged alert (else 409).
#[utoipa::path(post, path = "/alerts/{id}/resolve", tag = "alerts", security(("api_key" = [])), params(("id" = String, Path)),
    responses((status = 200, body = Data<Alert>), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn resolve(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    change(&state, &caller, &id, AlertStatus::Resolved, None).await
}

async fn change(
    state: &AppState,
    caller: &Caller,
    id: &str,
    to: AlertStatus,
    note: Option<&str>,
) -> ApiResult<Response> {
    let by = caller
        .user_id
        .clone()
        .unwrap_or_else(|| caller.key_id.clone());
    let changed = state
        .store
        .transition_alert(&caller.org_id, id, to, &by, note)
        .await
        .map_err(ApiError::missing("alert"))?;
    let Some(alert) = changed else {
        let current = state
            .store
            .alert(&caller.org_id, id)
            .await
            .map_err(ApiError::missing("alert"))?;
        let allowed = match to {
            AlertStatus::Acknowledged => "only an active alert can be acknowledged",
            _ => "only an active or acknowledged alert can be resolved",
        };
        return Err(ApiError::Conflict(format!(
            "the alert is {}; {allowed}",
            current.status.as_str()
        )));
    };
    let event = match to {
        AlertStatus::Acknowledged => "alert.acknowledged",
        _ => {
            state.alerts.alert_closed(&alert);
            "alert.resolved"
        }
    };
    publish(state, event, alert.clone());
    Ok(ok(alert))
}
