//! The request pipeline of every `/v1` route (DESIGN 3), applied to each route with its own
//! policy: request id -> authentication -> rate limit -> scope check -> handler -> usage count
//! and audit record -> rate-limit headers.

use axum::extract::{ConnectInfo, FromRequestParts, Request, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use plantd_app::rate_limit::{Bucket, Decision, Window, WindowState, request_windows};
use plantd_app::{Caller, Credential};
use plantd_model::Timestamp;
use plantd_model::scope::allows;
use std::net::SocketAddr;
use std::sync::Arc;

use crate::audit_record::{AuditCommitted, AuditResource, RequestFacts, audit_record};
use crate::csrf;
use crate::error::{ApiError, ErrorCode};
use crate::routing::{Access, Policy};
use crate::state::AppState;

/// Path ids longer than this cannot exist (ids are 36-character UUIDs; the margin is generous).
const MAX_ID_LEN: usize = 200;

/// The request id, echoed in `X-Request-Id` and kept in audit records.
#[derive(Clone, Debug)]
pub struct RequestId(pub String);

/// Whether a method changes state (and is therefore audited).
fn is_mutation(method: &axum::http::Method) -> bool {
    use axum::http::Method;
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Runs a request of the route `route` (its template, e.g. `/v1/data-sources/{id}`) through
/// the pipeline with the route's `policy`.
pub async fn pipeline(
    State((state, policy, route)): State<(AppState, Policy, Arc<str>)>,
    mut req: Request,
    next: Next,
) -> Response {
    let method = req.method().clone();
    let request_id = request_id(req.headers());
    let client_ip = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip().to_string());
    let user_agent = req
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.chars().take(500).collect());
    let path_id = path_id(&mut req).await;
    req.extensions_mut().insert(RequestId(request_id.clone()));
    let now = Timestamp::now();
    let endpoint = format!("{method} {route}");

    // Only routes that allow it take the key from the query string (browser WebSockets).
    let query_token: Option<String> = policy
        .query_token
        .then(|| {
            form_urlencoded::parse(req.uri().query().unwrap_or_default().as_bytes())
                .find(|(k, _)| k == "access_token")
                .map(|(_, v)| v.into_owned())
        })
        .flatten();

    let (caller, rate_state, mut refusal) = admit(
        &state,
        &policy,
        &method,
        &endpoint,
        req.headers(),
        query_token.as_deref(),
        client_ip.as_deref(),
        now,
    )
    .await;
    if refusal.is_none()
        && path_id
            .as_deref()
            .is_some_and(|id| id.contains('\0') || id.len() > MAX_ID_LEN)
    {
        // No stored id looks like this (and PostgreSQL refuses NUL in text): plainly not found.
        refusal = Some(ApiError::NotFound("resource not found".into()));
    }
    let request = RequestFacts {
        policy,
        method: method.to_string(),
        route: route.to_string(),
        client_ip,
        user_agent,
        request_id: request_id.clone(),
    };
    let mut response = match refusal {
        Some(err) => err.into_response(),
        None => {
            if let Some(c) = &caller {
                req.extensions_mut().insert(c.clone());
            }
            if is_mutation(&method) {
                req.extensions_mut().insert(request.clone());
            }
            next.run(req).await
        }
    };

    if let Some(c) = &caller {
        state
            .app
            .usage()
            .record(&c.counter_id(), &c.org_id, &endpoint, now);
    }
    if is_mutation(&method) && response.extensions().get::<AuditCommitted>().is_none() {
        let resource_id = response
            .extensions()
            .get::<AuditResource>()
            .map(|r| r.0.clone())
            // What the client typed, made storable: the record must not be lost to a NUL.
            .or_else(|| {
                path_id.map(|id| {
                    id.replace('\0', "\u{FFFD}")
                        .chars()
                        .take(MAX_ID_LEN)
                        .collect()
                })
            });
        let error_code = response
            .extensions()
            .get::<ErrorCode>()
            .map(|c| c.0.to_string());
        let record = audit_record(
            &request,
            caller.as_ref(),
            response.status(),
            error_code,
            resource_id,
        );
        if let Err(e) = state.app.record_audit(&record).await {
            tracing::error!(error = %plantd_model::error_chain(&e), request_id, "could not write the audit record");
        }
    }

    let headers = response.headers_mut();
    set_rate_headers(headers, rate_state);
    if let Ok(v) = HeaderValue::from_str(&request_id) {
        headers.insert("x-request-id", v);
    }
    response
}

/// Authentication, rate limit and scope check. Returns the caller (when authenticated), the
/// window the headers describe, and the refusal if the request may not proceed.
#[allow(clippy::too_many_arguments)]
async fn admit(
    state: &AppState,
    policy: &Policy,
    method: &axum::http::Method,
    endpoint: &str,
    headers: &HeaderMap,
    query_token: Option<&str>,
    client_ip: Option<&str>,
    now: Timestamp,
) -> (Option<Caller>, WindowState, Option<ApiError>) {
    let secs = now.unix_seconds();
    let anonymous = |state: &AppState| anonymous_admit(state, client_ip, secs);
    if policy.access == Access::Public {
        let (ws, refusal) = anonymous(state);
        return (None, ws, refusal);
    }
    let caller = match authenticate(state, headers, query_token, now).await {
        Ok(c) => c,
        Err(err) => {
            let (ws, refusal) = anonymous(state);
            return (None, ws, Some(refusal.unwrap_or(err)));
        }
    };
    let counter = caller.counter_id();
    let mut buckets = vec![
        Bucket {
            name: format!("key:{counter}"),
            label: match caller.credential {
                Credential::ApiKey { .. } => "API key",
                Credential::AccessToken { .. } if caller.user_id.is_none() => "OAuth client",
                _ => "user",
            },
            windows: request_windows(state.app.config().limits.key_requests(caller.tier)),
        },
        Bucket {
            name: format!("org:{}", caller.org_id),
            label: "organization",
            windows: request_windows(state.app.config().limits.org_requests(caller.tier)),
        },
    ];
    if let Some(l) = policy.endpoint_limit {
        buckets.push(Bucket {
            name: format!("endpoint:{counter}:{endpoint}"),
            label: "endpoint",
            windows: vec![Window {
                limit: state.app.config().limits.endpoint(caller.tier, l.limit),
                window_secs: l.window_secs,
            }],
        });
    }
    let ws = match state.app.limiter().check(&buckets, secs) {
        Decision::Allowed(ws) => ws,
        Decision::Refused {
            state: ws,
            retry_after,
            scope,
        } => {
            return (Some(caller), ws, Some(rate_limited(&scope, retry_after)));
        }
    };
    if let Access::Scope(required) = policy.access
        && !allows(&caller.scopes, required)
    {
        let err = match caller.credential {
            Credential::AccessToken { .. } => ApiError::insufficient_scope(required.as_str()),
            Credential::Session { .. } => ApiError::Authorization(format!(
                "your role does not grant the '{required}' scope this operation needs"
            )),
            Credential::ApiKey { .. } => ApiError::Authorization(format!(
                "this API key lacks the '{required}' scope this operation needs"
            )),
        };
        return (Some(caller), ws, Some(err));
    }
    if caller.by_cookie() && is_mutation(method) && !csrf::same_origin(headers, state.app.issuer())
    {
        let err = ApiError::Authorization(csrf::REFUSAL.into());
        return (Some(caller), ws, Some(err));
    }
    (Some(caller), ws, None)
}

/// Counts a request without valid credentials against its client address's limit.
pub fn anonymous_admit(
    state: &AppState,
    client_ip: Option<&str>,
    secs: i64,
) -> (WindowState, Option<ApiError>) {
    let bucket = Bucket {
        name: format!("ip:{}", client_ip.unwrap_or("unknown")),
        label: "unauthenticated client",
        windows: vec![Window {
            limit: state.app.config().anonymous_per_minute,
            window_secs: 60,
        }],
    };
    match state.app.limiter().check(&[bucket], secs) {
        Decision::Allowed(s) => (s, None),
        Decision::Refused {
            state,
            retry_after,
            scope,
        } => (state, Some(rate_limited(&scope, retry_after))),
    }
}

fn rate_limited(scope: &str, retry_after: u64) -> ApiError {
    ApiError::RateLimited {
        message: format!("rate limit exceeded: {scope}; retry in {retry_after} s"),
        retry_after,
    }
}

/// The caller of the request's credentials: the `Authorization: Bearer` token (an API key, a
/// session token or an OAuth access token), else the query token where the route allows it,
/// else the session cookie.
async fn authenticate(
    state: &AppState,
    headers: &HeaderMap,
    query_token: Option<&str>,
    now: Timestamp,
) -> Result<Caller, ApiError> {
    let token = match (headers.get(header::AUTHORIZATION), query_token) {
        (Some(value), _) => {
            let text = value
                .to_str()
                .map_err(|_| ApiError::Authentication("malformed Authorization header".into()))?;
            text.strip_prefix("Bearer ")
                .or_else(|| text.strip_prefix("bearer "))
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .ok_or_else(|| {
                    ApiError::Authentication(
                        "the Authorization header must be 'Bearer <API_KEY>' (or an access or session token)".into(),
                    )
                })?
        }
        (None, Some(token)) => token,
        (None, None) => {
            return match csrf::session_cookie(headers) {
                Some(token) => Ok(state.app.session_caller(&token, true, now).await?),
                None => Err(ApiError::Authentication(
                    "missing Authorization header; send 'Authorization: Bearer <API_KEY>'".into(),
                )),
            };
        }
    };
    if plantd_auth::jwt::looks_like_jwt(token) {
        return Ok(state.app.access_token_caller(token).await?);
    }
    if token.starts_with(plantd_auth::SESSION_PREFIX) {
        return Ok(state.app.session_caller(token, false, now).await?);
    }
    Ok(state.app.authenticate(token, now).await?)
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
