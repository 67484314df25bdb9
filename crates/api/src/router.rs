//! The axum router, built from the route declarations: each route with its pipeline layer
//! (its own policy) and body limit, the OAuth endpoints and pages at the root, the OpenAPI
//! document, the 404/405 fallbacks, the default body limit, gzip for clients that accept it
//! and the panic catcher.

use axum::Router;
use axum::extract::{ConnectInfo, DefaultBodyLimit, Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::from_fn_with_state;
use axum::response::{IntoResponse, Response};
use plantd_app::App;
use std::net::SocketAddr;
use std::sync::Arc;
use tower_http::compression::Predicate as _;

use crate::error::ApiError;
use crate::pipeline::{Door, anonymous_admit, pipeline, set_rate_headers};
use crate::state::AppState;

/// The largest request body accepted (1 MiB) where a route sets no other; larger bodies are a
/// `validation_error`.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// The whole HTTP application of `app`.
pub fn build(app: App) -> Router {
    let hsts = app.issuer().starts_with("https://");
    let routes = crate::routes::all();
    let openapi: Arc<str> = crate::openapi::document(&routes).to_string().into();
    let state = AppState::new(app, openapi);
    let mut router = Router::new();
    for r in routes {
        let mut handler = r.handler;
        if let Some(limit) = r.body_limit {
            handler = handler.layer(DefaultBodyLimit::max(limit));
        }
        let route: Arc<str> = r.path.as_str().into();
        let door = Door {
            policy: r.policy,
            query_token: r.query_token,
            route,
            anywhere: r.anywhere,
        };
        let handler = handler.layer(from_fn_with_state((state.clone(), door), pipeline));
        router = router.route(&r.path, handler);
    }
    router
        .merge(crate::oauth_server::router(state.clone()))
        .merge(crate::console::router(state.clone()))
        .route("/metrics", axum::routing::get(crate::metrics::scrape))
        .route_layer(axum::middleware::from_fn(crate::metrics::count_request))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        // gzip for clients that ask (browsers do): pages, scripts and series shrink about 3x.
        // Never binary files (OTA packages): a range must be bytes of the file, and gzip would
        // drop Accept-Ranges.
        .layer(
            tower_http::compression::CompressionLayer::new().compress_when(
                tower_http::compression::predicate::DefaultPredicate::new().and(
                    tower_http::compression::predicate::NotForContentType::const_new(
                        "application/octet-stream",
                    ),
                ),
            ),
        )
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(
            |_: Box<dyn std::any::Any + Send>| {
                ApiError::internal("a request handler panicked").into_response()
            },
        ))
        .layer(axum::middleware::map_response_with_state(
            hsts,
            common_headers,
        ))
        .with_state(state)
}

/// Headers of every response: no content sniffing; and, when the server is reached over
/// https (its public URL), Strict-Transport-Security for a year.
async fn common_headers(State(hsts): State<bool>, mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if hsts {
        headers.insert(
            header::STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static("max-age=31536000"),
        );
    }
    response
}

async fn not_found(State(state): State<AppState>, req: Request) -> Response {
    let started = std::time::Instant::now();
    let path = req.uri().path().to_string();
    let r = with_anonymous_limit(
        &state,
        &req,
        ApiError::NotFound(format!("no route for {path}")),
    );
    crate::metrics::record_unmatched(&req, r.status().as_u16(), started);
    r
}

async fn method_not_allowed(State(state): State<AppState>, req: Request) -> Response {
    let started = std::time::Instant::now();
    let r = with_anonymous_limit(&state, &req, ApiError::MethodNotAllowed);
    crate::metrics::record_unmatched(&req, r.status().as_u16(), started);
    r
}

/// Answers an unrouted request, counted against the client's unauthenticated limit so it too
/// carries the rate-limit headers.
fn with_anonymous_limit(state: &AppState, req: &Request, err: ApiError) -> Response {
    let ip = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip().to_string());
    let (ws, refusal) = anonymous_admit(state, ip.as_deref(), plantd_model::Timestamp::now());
    let mut r = refusal.unwrap_or(err).into_response();
    set_rate_headers(r.headers_mut(), ws);
    r
}

/// Every declared route: method, path and policy (for tests and tools).
pub fn route_list() -> Vec<(axum::http::Method, String, crate::routing::Policy)> {
    crate::routes::all()
        .into_iter()
        .map(|r| (r.method, r.path, r.policy))
        .collect()
}
