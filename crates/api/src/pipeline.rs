//! The request pipeline of every `/v1` route (DESIGN 3): request id -> authentication -> rate
//! limit -> scope check -> handler -> usage count and audit record -> rate-limit headers.

use axum::extract::{ConnectInfo, FromRequestParts, MatchedPath, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use plantd_model::audit::Severity;
use plantd_model::scope::allows;
use plantd_model::{Timestamp, api_key::ApiKeyStatus};
use plantd_store::NewAuditRecord;
use std::net::SocketAddr;

use crate::error::{ApiError, ErrorCode};
use crate::policy::{self, Access, RoutePolicy};
use crate::rate_limit::{Bucket, Decision, WindowState, windows};
use crate::state::{AppState, Caller};

/// Path ids longer than this cannot exist (ids are 36-character UUIDs; the margin is generous).
const MAX_ID_LEN: usize = 200;

/// The id of a resource a handler created or changed, for the audit record.
#[derive(Clone, Debug)]
pub struct AuditResource(pub String);

/// The request id, echoed in `X-Request-Id` and kept in audit records.
#[derive(Clone, Debug)]
pub struct RequestId(pub String);

/// What the pipeline knows of a request for its audit record (a request extension, so that a
/// handler can commit the record together with its own write).
#[derive(Clone, Debug)]
pub struct RequestFacts {
    pub policy: &'static policy::RoutePolicy,
    pub method: String,
    pub route: String,
    pub client_ip: Option<String>,
    pub user_agent: Option<String>,
    pub request_id: String,
}

/// Marks a response whose audit record the handler already committed (with its data).
#[derive(Clone, Copy, Debug)]
pub struct AuditCommitted;

/// The audit record of a finished request.
pub fn audit_record(
    facts: &RequestFacts,
    caller: Option<&Caller>,
    status: axum::http::StatusCode,
    error_code: Option<String>,
    resource_id: Option<String>,
) -> NewAuditRecord {
    let severity = match status.as_u16() {
        401 | 403 => Severity::Critical,
        s if s >= 400 => Severity::Warning,
        _ if matches!(
            facts.policy.event_type,
            "api_key.revoke" | "api_key.rotate" | "member.remove" | "user.password_change"
        ) =>
        {
            Severity::Warning
        }
        _ => Severity::Info,
    };
    NewAuditRecord {
        org_id: caller.map(|c| c.org_id.clone()),
        actor_type: if caller.is_some() {
            "api_key"
        } else {
            "anonymous"
        }
        .into(),
        actor_id: caller.map(|c| c.key_id.clone()),
        user_id: caller.and_then(|c| c.user_id.clone()),
        category: facts.policy.category.into(),
        event_type: facts.policy.event_type.into(),
        severity,
        outcome: if status.is_success() {
            "success"
        } else {
            "failure"
        }
        .into(),
        resource_type: facts.policy.resource_type.into(),
        resource_id,
        method: facts.method.clone(),
        path: facts.route.clone(),
        status_code: status.as_u16(),
        error_code,
        client_ip: facts.client_ip.clone(),
        user_agent: facts.user_agent.clone(),
        request_id: facts.request_id.clone(),
    }
}

pub async fn pipeline(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_string())
        .unwrap_or_default();
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

    let Some(policy) = policy::lookup(&method, &route) else {
        // A route without a declared policy is a programming error: refuse rather than expose it.
        tracing::error!(%method, %route, "route has no policy");
        return ApiError::Internal(format!("route {method} {route} has no policy")).into_response();
    };
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
        policy,
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
        route: route.clone(),
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
            if policy::is_mutation(&method) {
                req.extensions_mut().insert(request.clone());
            }
            next.run(req).await
        }
    };

    if let Some(c) = &caller {
        state
            .usage
            .record(&c.key_id, &c.org_id, &format!("{method} {route}"), now);
    }
    if policy::is_mutation(&method) && response.extensions().get::<AuditCommitted>().is_none() {
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
        if let Err(e) = state.store.insert_audit(&record).await {
            tracing::error!(error = %e, request_id, "could not write the audit record");
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
async fn admit(
    state: &AppState,
    policy: &RoutePolicy,
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
    let mut buckets = vec![
        Bucket {
            name: format!("key:{}", caller.key_id),
            label: "API key",
            windows: windows(state.config.limits.key_requests(caller.tier)),
        },
        Bucket {
            name: format!("org:{}", caller.org_id),
            label: "organization",
            windows: windows(state.config.limits.org_requests(caller.tier)),
        },
    ];
    if let Some(l) = policy.endpoint_limit {
        buckets.push(Bucket {
            name: format!(
                "endpoint:{}:{} {}",
                caller.key_id, policy.method, policy.path
            ),
            label: "endpoint",
            windows: vec![crate::rate_limit::Window {
                limit: l.limit,
                window_secs: l.window_secs,
            }],
        });
    }
    let ws = match state.limiter.check(&buckets, secs) {
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
        let err = ApiError::Authorization(format!(
            "this API key lacks the '{required}' scope this operation needs"
        ));
        return (Some(caller), ws, Some(err));
    }
    (Some(caller), ws, None)
}

/// Counts a request without valid credentials against its client address's limit.
pub(crate) fn anonymous_admit(
    state: &AppState,
    client_ip: Option<&str>,
    secs: i64,
) -> (WindowState, Option<ApiError>) {
    let bucket = Bucket {
        name: format!("ip:{}", client_ip.unwrap_or("unknown")),
        label: "unauthenticated client",
        windows: vec![crate::rate_limit::Window {
            limit: state.config.anonymous_per_minute,
            window_secs: 60,
        }],
    };
    match state.limiter.check(&[bucket], secs) {
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

/// Finds the key of a `Bearer` token: from the cache, else from the store.
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
                        "the Authorization header must be 'Bearer <API_KEY>'".into(),
                    )
                })?
        }
        (None, Some(token)) => token,
        (None, None) => {
            return Err(ApiError::Authentication(
                "missing Authorization header; send 'Authorization: Bearer <API_KEY>'".into(),
            ));
        }
    };
    let hash = plantd_auth::hash_key(token);
    let (key, tier) = match state.keys.get(&hash, state.config.key_cache_ttl) {
        Some(hit) => hit,
        None => lookup_key(state, &hash).await?,
    };
    match key.status(now) {
        ApiKeyStatus::Active => Ok(Caller {
            key_id: key.id,
            org_id: key.org_id,
            user_id: key.user_id,
            scopes: key.scopes,
            tier,
        }),
        ApiKeyStatus::Revoked => Err(ApiError::Authentication(
            "this API key has been revoked".into(),
        )),
        ApiKeyStatus::Expired => Err(ApiError::Authentication("this API key has expired".into())),
    }
}

/// Reads a key and its organization's tier from the store and caches them.
async fn lookup_key(
    state: &AppState,
    hash: &str,
) -> Result<(plantd_model::api_key::ApiKey, plantd_model::Tier), ApiError> {
    let key = state
        .store
        .api_key_by_hash(hash)
        .await?
        .ok_or_else(|| ApiError::Authentication("unknown API key".into()))?;
    let tier = state.store.org(&key.org_id).await?.tier;
    state.keys.put(hash.to_string(), key.clone(), tier);
    Ok((key, tier))
}

pub(crate) fn set_rate_headers(headers: &mut HeaderMap, ws: WindowState) {
    let text = |v: Option<u64>| v.map_or_else(|| "unlimited".to_string(), |n| n.to_string());
    let pairs = [
        ("x-ratelimit-limit", text(ws.limit)),
        ("x-ratelimit-remaining", text(ws.remaining)),
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

/// Extracts the authenticated caller in handlers.
impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Caller>()
            .cloned()
            .ok_or_else(|| ApiError::Authentication("authentication required".into()))
    }
}
