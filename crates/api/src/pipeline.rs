//! The request pipeline of every `/v1` route (DESIGN 3), applied to each route with its own
//! policy: request id -> admission by the application (authentication, rate limits, scope) ->
//! CSRF check -> handler -> usage count and audit record -> rate-limit headers. The pipeline
//! only maps HTTP to the application's facts ([`CallFacts`], [`Presented`]) and its decision
//! back to HTTP.

use axum::extract::{ConnectInfo, FromRequestParts, MatchedPath, Request, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use plantd_app::access::{Actor, AuditTrail, CallFacts, CallOutcome, Policy, Presented};
use plantd_app::rate_limit::WindowState;
use plantd_model::Timestamp;
use plantd_model::audit::AuditEvent;
use std::net::SocketAddr;
use std::sync::Arc;

use crate::audit_record::AuditResource;
use crate::csrf;
use crate::error::{ApiError, ErrorCode};
use crate::state::AppState;

/// Path ids longer than this cannot exist (ids are 36-character UUIDs; the margin is generous).
const MAX_ID_LEN: usize = 200;

/// The request id, echoed in `X-Request-Id` and kept in audit records.
#[derive(Clone, Debug)]
pub struct RequestId(pub String);

/// What the pipeline of one route knows of it: its policy, whether its key may come in the
/// query string, and its template (`/v1/data-sources/{id}`).
#[derive(Clone, Debug)]
pub struct Door {
    pub policy: Policy,
    pub query_token: bool,
    pub route: Arc<str>,
    /// Served by every region (`Route::anywhere`); otherwise only by the caller's
    /// organization's primary region.
    pub anywhere: bool,
}

/// Whether a method changes state (and is therefore audited).
pub(crate) fn is_mutation(method: &axum::http::Method) -> bool {
    use axum::http::Method;
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// What any door knows of a call, read from an HTTP request of the route `route`.
pub(crate) fn call_facts(req: &Request, route: &str) -> CallFacts {
    CallFacts {
        method: req.method().to_string(),
        operation: route.to_string(),
        client_ip: client_ip(req),
        user_agent: req
            .headers()
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.chars().take(500).collect()),
        request_id: request_id(req.headers()),
    }
}

/// The client's address, as the listener saw it.
pub(crate) fn client_ip(req: &Request) -> Option<String> {
    req.extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip().to_string())
}

/// Runs a request of one route through the pipeline: the application admits it (credential,
/// limits, scope), then the CSRF check of cookie mutations, the handler, the usage count and
/// the audit record of mutations (the application's [`AuditTrail`], which a use case may
/// commit with its own write).
pub async fn pipeline(
    State((state, door)): State<(AppState, Door)>,
    mut req: Request,
    next: Next,
) -> Response {
    let method = req.method().clone();
    let facts = call_facts(&req, &door.route);
    let path_id = path_id(&mut req).await;
    req.extensions_mut()
        .insert(RequestId(facts.request_id.clone()));
    let now = Timestamp::now();
    // Only routes that allow it take the key from the query string (browser WebSockets).
    let query_token = door.query_token.then(|| query_token(&req)).flatten();
    let presented = presented(req.headers(), query_token);
    let admission = state.app.admit(&door.policy, &facts, presented, now).await;
    let caller = admission.caller;
    let mut refusal = admission.refusal.map(ApiError::from);
    // A cookie travels with any page's request to this server: a mutation, or a WebSocket
    // (which the same-origin policy does not guard), must come from the server's own origin.
    if refusal.is_none()
        && caller.as_ref().is_some_and(|c| c.by_cookie())
        && (is_mutation(&method) || csrf::is_upgrade(req.headers()))
        && !csrf::same_origin(req.headers(), state.app.issuer())
    {
        refusal = Some(ApiError::Authorization(csrf::REFUSAL.into()));
    }
    if refusal.is_none()
        && path_id
            .as_deref()
            .is_some_and(|id| id.contains('\0') || id.len() > MAX_ID_LEN)
    {
        // No stored id looks like this (and PostgreSQL refuses NUL in text): plainly not found.
        refusal = Some(ApiError::NotFound("resource not found".into()));
    }
    if refusal.is_none()
        && !door.anywhere
        && let Some(c) = &caller
    {
        refusal = match state.app.resident_elsewhere(&c.org_id).await {
            Ok(None) => None,
            Ok(Some(root)) => Some(ApiError::WrongRegion {
                location: format!(
                    "{root}{}",
                    req.uri().path_and_query().map_or("", |p| p.as_str())
                ),
                message: format!(
                    "this organization's data is served by its primary region at {root}"
                ),
            }),
            Err(e) => Some(e.into()),
        };
    }
    // A region migration's read-only window: every write of the organization waits (signing in
    // and out excepted).
    if refusal.is_none()
        && is_mutation(&method)
        && !door.route.starts_with("/v1/auth/")
        && let Some(c) = &caller
        && let Some(e) = state.app.migrating(&c.org_id)
    {
        refusal = Some(e.into());
    }
    let trail = is_mutation(&method).then(|| AuditTrail::new(facts.clone(), door.policy.event));
    if let Some(t) = &trail {
        if let Some(c) = &caller {
            t.act_as(Actor::from(c));
        }
        if let Some(id) = &path_id {
            // What the client typed, made storable: the record must not be lost to a NUL.
            t.resource(
                id.replace('\0', "\u{FFFD}")
                    .chars()
                    .take(MAX_ID_LEN)
                    .collect::<String>(),
            );
        }
    }
    let mut response = match refusal {
        Some(err) => err.into_response(),
        None => {
            if let Some(c) = &caller {
                req.extensions_mut().insert(c.clone());
            }
            if let Some(t) = &trail {
                req.extensions_mut().insert(t.clone());
            }
            next.run(req).await
        }
    };

    if let Some(c) = &caller {
        state
            .app
            .usage()
            .record(&c.counter_id(), &c.org_id, &facts.endpoint(), now);
    }
    if let Some(t) = &trail {
        let outcome = outcome(t, &response);
        state.app.finish_audit(t, outcome).await;
    }
    let headers = response.headers_mut();
    set_rate_headers(headers, admission.window);
    if let Ok(v) = HeaderValue::from_str(&facts.request_id) {
        headers.insert("x-request-id", v);
    }
    response
}

/// How a call ended, read from its answer, for its audit record (with the resource its
/// handler named).
fn outcome(trail: &AuditTrail, response: &Response) -> CallOutcome {
    if let Some(AuditResource(id)) = response.extensions().get::<AuditResource>() {
        trail.resource(id.clone());
    }
    CallOutcome {
        status: response.status().as_u16(),
        error_code: response
            .extensions()
            .get::<ErrorCode>()
            .map(|c| c.0.to_string()),
    }
}

/// Audits every request of a route outside `/v1` (the authorization server's endpoints and
/// forms, the console's login and logout) as `event`, on the same trail as the pipeline's:
/// the handler (or its use case) names the actor once it knows it, and the record is written
/// with the answer.
pub(crate) async fn audited(
    State((state, event)): State<(AppState, AuditEvent)>,
    mut req: Request,
    next: Next,
) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| req.uri().path().to_string(), |p| p.as_str().to_string());
    let trail = AuditTrail::new(call_facts(&req, &route), event);
    req.extensions_mut().insert(trail.clone());
    let response = next.run(req).await;
    let outcome = outcome(&trail, &response);
    state.app.finish_audit(&trail, outcome).await;
    response
}

/// `route` with every request audited as `event` ([`audited`]).
pub(crate) fn audit_as(
    state: &AppState,
    event: AuditEvent,
    route: axum::routing::MethodRouter<AppState>,
) -> axum::routing::MethodRouter<AppState> {
    route.layer(axum::middleware::from_fn_with_state(
        (state.clone(), event),
        audited,
    ))
}

/// Counts a request without valid credentials against its client address's limit.
pub fn anonymous_admit(
    state: &AppState,
    client_ip: Option<&str>,
    now: Timestamp,
) -> (WindowState, Option<ApiError>) {
    let (ws, refusal) = state.app.admit_anonymous(client_ip, now);
    (ws, refusal.map(ApiError::from))
}

/// `?access_token=` of the request.
fn query_token(req: &Request) -> Option<String> {
    form_urlencoded::parse(req.uri().query().unwrap_or_default().as_bytes())
        .find(|(k, _)| k == "access_token")
        .map(|(_, v)| v.into_owned())
}

/// The token of an `Authorization: Bearer <token>` header's text, if it holds one.
pub(crate) fn bearer_token(text: &str) -> Option<&str> {
    text.strip_prefix("Bearer ")
        .or_else(|| text.strip_prefix("bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

/// The credential of a request: the `Authorization: Bearer` token (an API key, a session token
/// or an OAuth access token), else the query token where the route allows it, else the session
/// cookie.
fn presented(headers: &HeaderMap, query_token: Option<String>) -> Presented {
    match (headers.get(header::AUTHORIZATION), query_token) {
        (Some(value), _) => {
            let Ok(text) = value.to_str() else {
                return Presented::Unreadable("malformed Authorization header".into());
            };
            match bearer_token(text) {
                Some(token) => Presented::Bearer(token.to_string()),
                None => Presented::Unreadable(
                    "the Authorization header must be 'Bearer <API_KEY>' (or an access or session token)".into(),
                ),
            }
        }
        (None, Some(token)) => Presented::Bearer(token),
        (None, None) => match csrf::session_cookie(headers) {
            Some(token) => Presented::SessionCookie(token),
            None => Presented::None,
        },
    }
}

/// The rate-limit headers of SPEC 8.4, always integers.
pub fn set_rate_headers(headers: &mut HeaderMap, ws: WindowState) {
    let pairs = [
        ("x-ratelimit-limit", ws.limit.to_string()),
        ("x-ratelimit-remaining", ws.remaining.to_string()),
        ("x-ratelimit-reset", ws.reset.to_string()),
        ("x-ratelimit-window", ws.window_secs.to_string()),
    ];
    for (name, value) in pairs {
        if let Ok(v) = HeaderValue::from_str(&value) {
            headers.insert(name, v);
        }
    }
}

fn request_id(headers: &HeaderMap) -> String {
    headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| {
            !v.is_empty()
                && v.len() <= 128
                && v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        })
        .map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_string)
}

/// The `{id}` path parameter, if the route has one.
async fn path_id(req: &mut Request) -> Option<String> {
    let (mut parts, body) =
        std::mem::replace(req, Request::new(axum::body::Body::empty())).into_parts();
    let id = axum::extract::RawPathParams::from_request_parts(&mut parts, &())
        .await
        .ok()
        .and_then(|p| {
            p.iter()
                .find(|(k, _)| *k == "id")
                .map(|(_, v)| v.to_string())
        });
    *req = Request::from_parts(parts, body);
    id
}
