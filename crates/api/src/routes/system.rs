//! Health, status, the OpenAPI document and its offline documentation page.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use plantd_app::system::{ServiceStatus, VERSION};
use plantd_model::Timestamp;
use plantd_model::audit::AuditEvent;
use serde::Serialize;

use crate::envelope::{Data, ok};
use crate::routing::{Policy, Route, route};
use crate::state::AppState;

pub(crate) fn routes() -> Vec<Route> {
    vec![
        route!(health, Policy::public(AuditEvent::HealthRead)),
        route!(status, Policy::any_key(AuditEvent::StatusRead)),
        route!(openapi_json, Policy::public(AuditEvent::OpenapiRead)),
        route!(docs, Policy::public(AuditEvent::DocsRead)),
    ]
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct Health {
    /// `healthy`, or `unhealthy` (with status 503) when the database does not answer.
    pub status: &'static str,
    pub version: &'static str,
    pub timestamp: Timestamp,
}

/// Liveness and version; no authentication.
#[utoipa::path(get, path = "/health", tag = "system",
    responses((status = 200, body = Data<Health>), (status = 503, body = Data<Health>)))]
async fn health(State(state): State<AppState>) -> Response {
    let healthy = state.app.healthy().await;
    let body = Health {
        status: if healthy { "healthy" } else { "unhealthy" },
        version: VERSION,
        timestamp: Timestamp::now(),
    };
    let mut r = ok(body);
    if !healthy {
        *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    }
    r
}

/// State of the service's components: database and background workers.
#[utoipa::path(get, path = "/status", tag = "system",
    responses((status = 200, body = Data<ServiceStatus>)))]
async fn status(State(state): State<AppState>) -> Response {
    ok(state.app.status().await)
}

/// The OpenAPI 3.1 document of this API, generated from the code.
#[utoipa::path(get, path = "/openapi.json", tag = "system",
    responses((status = 200, description = "OpenAPI 3.1 document", content_type = "application/json")))]
async fn openapi_json(State(state): State<AppState>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        state.openapi.to_string(),
    )
        .into_response()
}

/// A human-readable page over the OpenAPI document that needs no internet access.
#[utoipa::path(get, path = "/docs", tag = "system",
    responses((status = 200, description = "HTML documentation", content_type = "text/html")))]
async fn docs() -> Response {
    crate::pages::html_page(
        axum::http::StatusCode::OK,
        include_str!("../../docs.html").to_string(),
        crate::pages::CONSOLE_CSP,
        "same-origin",
    )
}
