//! The axum router: every route, its OpenAPI entry, the pipeline and the fallbacks.

use axum::Router;
use axum::extract::{ConnectInfo, DefaultBodyLimit, Request, State};
use axum::middleware::from_fn_with_state;
use axum::response::{IntoResponse, Response};
use std::net::SocketAddr;
use utoipa::openapi::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::ApiError;
use crate::pipeline::{anonymous_admit, pipeline, set_rate_headers};
use crate::routes::{
    alerts, api_keys, audit, data_sources, notifications, orgs, stream, system, telemetry, users,
    webhooks,
};
use crate::state::AppState;

/// The largest request body accepted (1 MiB); larger bodies are a `validation_error`.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

fn v1_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(system::health))
        .routes(routes!(system::status))
        .routes(routes!(system::openapi_json))
        .routes(routes!(system::docs))
        .routes(routes!(
            data_sources::list_data_sources,
            data_sources::create_data_source
        ))
        .routes(routes!(
            data_sources::get_data_source,
            data_sources::update_data_source,
            data_sources::delete_data_source
        ))
        .routes(routes!(data_sources::test_data_source))
        .routes(routes!(alerts::list_rules, alerts::create_rule))
        .routes(routes!(
            alerts::get_rule,
            alerts::update_rule,
            alerts::delete_rule
        ))
        .routes(routes!(alerts::enable_rule))
        .routes(routes!(alerts::disable_rule))
        .routes(routes!(alerts::list_alerts))
        .routes(routes!(alerts::acknowledge))
        .routes(routes!(alerts::resolve))
        .routes(routes!(webhooks::list_webhooks, webhooks::create_webhook))
        .routes(routes!(
            webhooks::get_webhook,
            webhooks::update_webhook,
            webhooks::delete_webhook
        ))
        .routes(routes!(webhooks::list_deliveries))
        .routes(routes!(
            notifications::get_settings,
            notifications::update_settings
        ))
        .routes(routes!(notifications::list_notifications))
        .merge(
            OpenApiRouter::new()
                .routes(routes!(telemetry::ingest, telemetry::query))
                .layer(DefaultBodyLimit::max(telemetry::MAX_INGEST_BODY)),
        )
        .routes(routes!(telemetry::latest))
        .routes(routes!(stream::ws))
        .routes(routes!(api_keys::list_api_keys, api_keys::create_api_key))
        .routes(routes!(api_keys::revoke_api_key))
        .routes(routes!(api_keys::rotate_api_key))
        .routes(routes!(api_keys::api_key_usage))
        .routes(routes!(orgs::get_org, orgs::update_org))
        .routes(routes!(orgs::list_members))
        .routes(routes!(orgs::invite_member))
        .routes(routes!(orgs::remove_member))
        .routes(routes!(orgs::usage))
        .routes(routes!(users::get_me, users::update_me))
        .routes(routes!(users::change_password))
        .routes(routes!(audit::list_logs))
        .routes(routes!(audit::get_log))
        .routes(routes!(audit::summary))
        .routes(routes!(audit::export))
}

fn split() -> (Router<AppState>, OpenApi) {
    OpenApiRouter::with_openapi(crate::openapi::base())
        .nest("/v1", v1_routes())
        .split_for_parts()
}

/// The OpenAPI document alone (for `GET /v1/openapi.json` and tests).
pub fn build_openapi() -> serde_json::Value {
    crate::openapi::finish(split().1)
}

/// The whole HTTP application.
pub fn build(state: AppState) -> Router {
    let (router, doc) = split();
    crate::openapi::finish(doc);
    router
        .route_layer(from_fn_with_state(state.clone(), pipeline))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(
            |_: Box<dyn std::any::Any + Send>| {
                ApiError::Internal("a request handler panicked".into()).into_response()
            },
        ))
        .with_state(state)
}

async fn not_found(State(state): State<AppState>, req: Request) -> Response {
    let path = req.uri().path().to_string();
    with_anonymous_limit(
        &state,
        &req,
        ApiError::NotFound(format!("no route for {path}")),
    )
}

async fn method_not_allowed(State(state): State<AppState>, req: Request) -> Response {
    with_anonymous_limit(&state, &req, ApiError::MethodNotAllowed)
}

/// Answers an unrouted request, counted against the client's unauthenticated limit so it too
/// carries the rate-limit headers.
fn with_anonymous_limit(state: &AppState, req: &Request, err: ApiError) -> Response {
    let ip = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip().to_string());
    let (ws, refusal) = anonymous_admit(
        state,
        ip.as_deref(),
        plantd_model::Timestamp::now().unix_seconds(),
    );
    let mut r = refusal.unwrap_or(err).into_response();
    set_rate_headers(r.headers_mut(), ws);
    r
}
