//! Webhook subscriptions (SPEC 6: "webhooks exist"): CRUD and the delivery log.

use axum::extract::State;
use axum::response::Response;
use plantd_app::webhooks::{Delivery, Webhook};
use plantd_app::webhooks::{NewWebhook, WebhookUpdate};
use plantd_model::Scope::Admin;
use plantd_model::Timestamp;
use plantd_model::audit::AuditEvent;
use plantd_model::event::EventType;
use plantd_model::page::PageQuery;
use serde::Serialize;

use crate::envelope::{Data, List, created, list, no_content, ok, page_in_memory, page_of_query};
use crate::error::ApiResult;
use crate::extract::{Auth, ById, ValidJson, ValidQuery};
use crate::routing::{Policy, Route, route};
use crate::state::AppState;

pub(crate) fn routes() -> Vec<Route> {
    vec![
        route!(list_webhooks, Policy::scope(Admin, AuditEvent::WebhookList)),
        route!(
            create_webhook,
            Policy::scope(Admin, AuditEvent::WebhookCreate)
        ),
        route!(get_webhook, Policy::scope(Admin, AuditEvent::WebhookRead)),
        route!(
            update_webhook,
            Policy::scope(Admin, AuditEvent::WebhookUpdate)
        ),
        route!(
            delete_webhook,
            Policy::scope(Admin, AuditEvent::WebhookDelete)
        ),
        route!(
            list_deliveries,
            Policy::scope(Admin, AuditEvent::WebhookDeliveries)
        ),
    ]
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct WebhookView {
    pub id: String,
    pub url: String,
    pub events: Vec<EventType>,
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
    pub event: EventType,
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

#[utoipa::path(get, path = "/webhooks", tag = "webhooks", params(PageQuery),
    responses((status = 200, body = List<WebhookView>)))]
async fn list_webhooks(
    State(state): State<AppState>,
    caller: Auth,
    ValidQuery(q): ValidQuery<PageQuery>,
) -> ApiResult<Response> {
    let page = page_of_query(q)?;
    let all = state.app.webhooks(&caller.org_id).await?;
    Ok(list(page, page_in_memory(page, all), |h| {
        WebhookView::of(h, false)
    }))
}

/// Subscribe a URL to events; the answer carries the signing secret, once.
#[utoipa::path(post, path = "/webhooks", tag = "webhooks", request_body = NewWebhook,
    responses((status = 201, body = Data<WebhookView>)))]
async fn create_webhook(
    State(state): State<AppState>,
    caller: Auth,
    ValidJson(body): ValidJson<NewWebhook>,
) -> ApiResult<Response> {
    let hook = state.app.create_webhook(&caller.org_id, body).await?;
    Ok(created(&hook.id.clone(), WebhookView::of(hook, true)))
}

#[utoipa::path(get, path = "/webhooks/{id}", tag = "webhooks", params(("id" = String, Path)),
    responses((status = 200, body = Data<WebhookView>)))]
async fn get_webhook(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    let hook = state.app.webhook(r.org(), &r.id).await?;
    Ok(ok(WebhookView::of(hook, false)))
}

/// Partial update; a new `secret` signs deliveries from then on.
#[utoipa::path(put, path = "/webhooks/{id}", tag = "webhooks", params(("id" = String, Path)), request_body = WebhookUpdate,
    responses((status = 200, body = Data<WebhookView>)))]
async fn update_webhook(
    State(state): State<AppState>,
    r: ById,
    ValidJson(body): ValidJson<WebhookUpdate>,
) -> ApiResult<Response> {
    let hook = state.app.update_webhook(r.org(), &r.id, body).await?;
    Ok(ok(WebhookView::of(hook, false)))
}

/// Delete a webhook and its delivery log; pending deliveries are dropped.
#[utoipa::path(delete, path = "/webhooks/{id}", tag = "webhooks", params(("id" = String, Path)),
    responses((status = 204, description = "Deleted")))]
async fn delete_webhook(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    state.app.delete_webhook(r.org(), &r.id).await?;
    Ok(no_content())
}

/// A webhook's deliveries, newest first: status, attempts, last answer, payload.
#[utoipa::path(get, path = "/webhooks/{id}/deliveries", tag = "webhooks", params(("id" = String, Path), PageQuery),
    responses((status = 200, body = List<DeliveryView>)))]
async fn list_deliveries(
    State(state): State<AppState>,
    r: ById,
    ValidQuery(q): ValidQuery<PageQuery>,
) -> ApiResult<Response> {
    let page = page_of_query(q)?;
    let paged = state.app.webhook_deliveries(r.org(), &r.id, page).await?;
    Ok(list(page, paged, DeliveryView::from))
}
