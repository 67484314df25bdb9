//! Health, status, the OpenAPI document and its offline documentation page.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use plantd_model::Timestamp;
use serde::Serialize;

use crate::envelope::{Data, ok};
use crate::error::ApiResult;
use crate::state::{AppState, WorkerState};

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

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
pub async fn health(State(state): State<AppState>) -> Response {
    let healthy = state.store.ping().await.is_ok();
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

#[derive(Serialize, utoipa::ToSchema)]
pub struct ServiceStatus {
    /// `operational` when every component is up, else `degraded`.
    pub status: &'static str,
    pub version: &'static str,
    pub started_at: Timestamp,
    pub uptime_seconds: i64,
    pub components: Components,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct Components {
    pub database: DatabaseStatus,
    pub workers: Vec<WorkerState>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct DatabaseStatus {
    /// `up` or `down`.
    pub status: &'static str,
    /// `sqlite` or `postgresql`.
    pub backend: &'static str,
    pub latency_ms: Option<f64>,
    pub error: Option<String>,
}

/// State of the service's components: database and background workers.
#[utoipa::path(get, path = "/status", tag = "system", security(("api_key" = [])),
    responses((status = 200, body = Data<ServiceStatus>), (status = 401, body = crate::error::ErrorBody)))]
pub async fn status(State(state): State<AppState>) -> ApiResult<Response> {
    let ping = state.store.ping().await;
    let database = DatabaseStatus {
        status: if ping.is_ok() { "up" } else { "down" },
        backend: state.store.backend().as_str(),
        latency_ms: ping
            .as_ref()
            .ok()
            .map(|d| (d.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0),
        error: ping.err().map(|e| e.to_string()),
    };
    let workers = state.workers.all();
    let all_up = database.status == "up" && workers.iter().all(|w| w.status == "running");
    let now = Timestamp::now();
    Ok(ok(ServiceStatus {
        status: if all_up { "operational" } else { "degraded" },
        version: VERSION,
        started_at: state.started_at,
        uptime_seconds: (now.millis() - state.started_at.millis()) / 1000,
        components: Components { database, workers },
    }))
}

/// The OpenAPI 3.1 document of this API, generated from the code.
#[utoipa::path(get, path = "/openapi.json", tag = "system",
    responses((status = 200, description = "OpenAPI 3.1 document", content_type = "application/json")))]
pub async fn openapi_json() -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        crate::openapi::document_json().to_string(),
    )
        .into_response()
}

/// A human-readable page over the OpenAPI document that needs no internet access.
#[utoipa::path(get, path = "/docs", tag = "system",
    responses((status = 200, description = "HTML documentation", content_type = "text/html")))]
pub async fn docs() -> Html<&'static str> {
    Html(include_str!("../../docs.html"))
}
