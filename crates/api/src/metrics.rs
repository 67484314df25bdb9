//! `GET /metrics`: the server's own metrics in Prometheus' text format (the application's,
//! plus what only HTTP knows: requests by route and status, their latency, live-stream
//! clients). Open to clients on this host (a Prometheus beside the server); from elsewhere it
//! takes `Authorization: Bearer <metrics_token>` of the configuration, and without a configured
//! token it is refused.

use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::SocketAddr;
use std::time::Instant;

use crate::error::ApiError;
use crate::state::AppState;

/// The route label of requests no route matched (404, 405): one label, not one per path.
const UNMATCHED: &str = "unmatched";

/// Counts a request and times it, by route template, method and status.
pub(crate) async fn count_request(req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().as_str().to_string();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or(UNMATCHED.to_string(), |p| p.as_str().to_string());
    let response = next.run(req).await;
    record(route, method, response.status().as_u16(), started);
    response
}

/// Records one request.
pub(crate) fn record(route: String, method: String, status: u16, started: Instant) {
    metrics::counter!("plantd_http_requests_total", "route" => route.clone(), "method" => method.clone(), "status" => status.to_string())
        .increment(1);
    metrics::histogram!("plantd_http_request_duration_seconds", "route" => route, "method" => method)
        .record(started.elapsed().as_secs_f64());
}

/// Records a request no route matched.
pub(crate) fn record_unmatched(req: &Request, status: u16, started: Instant) {
    record(
        UNMATCHED.to_string(),
        req.method().as_str().to_string(),
        status,
        started,
    );
}

/// Whether a client may read the metrics: one on this host always; another with the
/// configured token only.
fn may_scrape(local: bool, token: Option<&str>, given: Option<&str>) -> bool {
    local
        || match (token, given) {
            (Some(token), Some(given)) => {
                plantd_app::access::same_secret(token.as_bytes(), given.as_bytes())
            }
            _ => false,
        }
}

/// The metrics, for a client on this host or one with the metrics token.
pub(crate) async fn scrape(State(state): State<AppState>, req: Request) -> Response {
    let local = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .is_some_and(|c| c.0.ip().is_loopback());
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if !may_scrape(local, state.app.config().metrics_token.as_deref(), given) {
        {
            return ApiError::Authorization(
                "metrics are open to this host only; from elsewhere send 'Authorization: Bearer <metrics_token>' of the server's configuration".into(),
            )
            .into_response();
        }
    }
    metrics::gauge!("plantd_stream_clients").set(state.stream_slots.total() as f64);
    match state.app.metrics_text().await {
        Ok(text) => {
            let mut r = text.into_response();
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            r
        }
        Err(e) => ApiError::from(e).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::may_scrape;

    #[test]
    fn only_this_host_or_the_token_reads_the_metrics() {
        assert!(may_scrape(true, None, None));
        assert!(may_scrape(true, Some("t0ken"), None));
        assert!(!may_scrape(false, None, None));
        assert!(!may_scrape(false, None, Some("anything")));
        assert!(!may_scrape(false, Some("t0ken"), None));
        assert!(!may_scrape(false, Some("t0ken"), Some("t0ke")));
        assert!(may_scrape(false, Some("t0ken"), Some("t0ken")));
    }
}
