//! Webhook subscriptions (SPEC 6: "webhooks exist"): CRUD and the delivery log.

use axum::extract::{Path, State};
use axum::response::Response;
use plantd_model::Timestamp;
use plantd_model::page::{PageQuery, Paged};
use plantd_model::validation::Validator;
use plantd_store::{Delivery, Webhook};
use serde::{Deserialize, Serialize};

use crate::envelope::{Data, List, created, list, no_content, ok};
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{ValidJson, ValidQuery};
use crate::routes::{check_post_url, page_in_memory, page_of};
use crate::state::{AppState, Caller};

/// Events a webhook may subscribe to.
pub const EVENTS: [&str; 3] = ["alert.triggered", "alert.acknowledged", "alert.resolved"];

#[derive(Serialize, utoipa::ToSchema)]
pub struct WebhookView {
    pub id: String,
    pub url: String,
    pub events: Vec<String>,
    /// Only in the answer to the create call (write-only afterwards).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl WebhookView {
    fn of(h: Webhook, with_secret: bool) -> Self {
        Self {
            id: h.id,
            url: h.url,
            events: h.events,
            secret: with_secret.then_some(h.secret),
            created_at: h.created_at,
            updated_at: h.updated_at,
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct DeliveryView {
    pub id: String,
    pub event: String,
    /// pending, delivered or failed
    pub status: String,
    pub attempts: i64,
    pub last_status_code: Option<i64>,
    pub last_error: Option<String>,
    /// When the next attempt is due (pending deliveries).
    pub next_attempt_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub delivered_at: Option<Timestamp>,
    /// The body that is (or was) posted.
    #[schema(value_type = Object)]
    pub payload: serde_json::Value,
}

impl From<Delivery> for DeliveryView {
    fn from(d: Delivery) -> Self {
        Self {
            next_attempt_at: (d.status == "pending").then_some(d.next_attempt_at),
            payload: serde_json::from_str(&d.payload).unwrap_or(serde_json::Value::Null),
            id: d.id,
            event: d.event,
            status: d.status,
            attempts: d.attempts,
            last_status_code: d.last_status_code,
            last_error: d.last_error,
            created_at: d.created_at,
            delivered_at: d.delivered_at,
        }
    }
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateWebhook {
    /// http:// or https:// URL that receives a POST per event.
    pub url: String,
    /// alert.triggered, alert.acknowledged, alert.resolved
    pub events: Vec<String>,
    /// 16..200 characters; generated when absent. Returned once.
    pub secret: Option<String>,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateWebhook {
    pub url: Option<String>,
    pub events: Option<Vec<String>>,
    pub secret: Option<String>,
}

fn check(v: &mut Validator, url: Option<&str>, events: Option<&[String]>, secret: Option<&str>) {
    if let Some(url) = url {
        check_post_url(v, "url", url);
    }
    if let Some(events) = events {
        if events.is_empty() {
            v.add(
                "events",
                format!("must list at least one of {}", EVENTS.join(", ")),
            );
        }
        for (i, e) in events.iter().enumerate() {
            if !EVENTS.contains(&e.as_str()) {
                v.add(
                    format!("events[{i}]"),
                    format!("must be one of {}", EVENTS.join(", ")),
                );
            } else if events[..i].contains(e) {
                v.add(format!("events[{i}]"), "is listed twice");
            }
        }
    }
    if let Some(s) = secret
        && !(16..=200).contains(&s.chars().count())
    {
        v.add("secret", "must be 16 to 200 characters");
    }
}

fn new_secret() -> String {
    format!(
        "whsec_{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

#[utoipa::path(get, path = "/webhooks", tag = "webhooks", security(("api_key" = [])), params(PageQuery),
    responses((status = 200, body = List<WebhookView>), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn list_webhooks(
    State(state): State<AppState>,
    caller: Caller,
    ValidQuery(q): ValidQuery<PageQuery>,
) -> ApiResult<Response> {
    let page = page_of(q)?;
    let all = state.store.webhooks(&caller.org_id).await?;
    Ok(list(page, page_in_memory(page, all), |h| {
        WebhookView::of(h, false)
    }))
}

/// Subscribe a URL to events; the answer carries the signing secret, once.
#[utoipa::path(post, path = "/webhooks", tag = "webhooks", security(("api_key" = [])), request_body = CreateWebhook,
    responses((status = 201, body = Data<WebhookView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn create_webhook(
    State(state): State<AppState>,
    caller: Caller,
    ValidJson(body): ValidJson<CreateWebhook>,
) -> ApiResult<Response> {
    let mut v = Validator::new();
    check(
        &mut v,
        Some(&body.url),
        Some(&body.events),
        body.secret.as_deref(),
    );
    v.finish().map_err(ApiError::Validation)?;
    let secret = body.secret.unwrap_or_else(new_secret);
    let hook = state
        .store
        .create_webhook(&caller.org_id, &body.url, &body.events, &secret)
        .await?;
    Ok(created(&hook.id.clone(), WebhookView::of(hook, true)))
}

#[utoipa::path(get, path = "/webhooks/{id}", tag = "webhooks", security(("api_key" = [])), params(("id" = String, Path)),
    responses((status = 200, body = Data<WebhookView>), (status = 404, body = ErrorBody)))]
pub async fn get_webhook(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let hook = state
        .store
        .webhook(&caller.org_id, &id)
        .await
        .map_err(ApiError::missing("webhook"))?;
    Ok(ok(WebhookView::of(hook, false)))
}

/// Partial update; a new `secret` signs deliveries from then on.
#[utoipa::path(put, path = "/webhooks/{id}", tag = "webhooks", security(("api_key" = [])), params(("id" = String, Path)), request_body = UpdateWebhook,
    responses((status = 200, body = Data<WebhookView>), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn update_webhook(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ValidJson(body): ValidJson<UpdateWebhook>,
) -> ApiResult<Response> {
    let current = state
        .store
        .webhook(&caller.org_id, &id)
        .await
        .map_err(ApiError::missing("webhook"))?;
    let mut v = Validator::new();
    check(
        &mut v,
        body.url.as_deref(),
        body.events.as_deref(),
        body.secret.as_deref(),
    );
    v.finish().map_err(ApiError::Validation)?;
    let hook = state
        .store
        .update_webhook(
            &caller.org_id,
            &id,
            body.url.as_deref().unwrap_or(&current.url),
            body.events.as_deref().unwrap_or(&current.events),
            body.secret.as_deref().unwrap_or(&current.secret),
        )
        .await
        .map_err(ApiError::missing("webhook"))?;
    Ok(ok(WebhookView::of(hook, false)))
}

/// Delete a webhook and its delivery log; pending deliveries are dropped.
#[utoipa::path(delete, path = "/webhooks/{id}", tag = "webhooks", security(("api_key" = [])), params(("id" = String, Path)),
    responses((status = 204, description = "Deleted"), (status = 404, body = ErrorBody)))]
pub async fn delete_webhook(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    state
        .store
        .delete_webhook(&caller.org_id, &id)
        .await
        .map_err(ApiError::missing("webhook"))?;
    Ok(no_content())
}

/// A webhook's deliveries, newest first: status, attempts, last answer, payload.
#[utoipa::path(get, path = "/webhooks/{id}/deliveries", tag = "webhooks", security(("api_key" = [])), params(("id" = String, Path), PageQuery),
    responses((status = 200, body = List<DeliveryView>), (status = 404, body = ErrorBody)))]
pub async fn list_deliveries(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ValidQuery(q): ValidQuery<PageQuery>,
) -> ApiResult<Response> {
    let page = page_of(q)?;
    state
        .store
        .webhook(&caller.org_id, &id)
        .await
        .map_err(ApiError::missing("webhook"))?;
    let (items, total) = state
        .store
        .deliveries(&caller.org_id, &id, page.limit(), page.offset())
        .await?;
    Ok(list(page, Paged { items, total }, DeliveryView::from))
}
