//! The OAuth 2.0 authorization server's endpoints at the server's root, beside `/v1` (SPEC 5.2:
//! `{auth_url}` is the root): `/oauth/authorize` (login and consent pages), `/oauth/token`,
//! `/oauth/revoke`, `/oauth/introspect`, `/.well-known/jwks.json`,
//! `/.well-known/oauth-authorization-server`; and the pages behind the links of invitation
//! and password-reset emails. Every request counts against the client address's
//! unauthenticated limit. Errors of the token endpoints use SPEC 7's second shape.

use axum::Extension;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{RawQuery, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use plantd_app::access::{Actor, AuditTrail};
use plantd_app::accounts::{AcceptInvitation, ResetConfirm, ResetRequest};
use plantd_app::oauth::TokenResponse;
use plantd_app::oauth::{
    Authorization, AuthorizeQuery, AuthorizeRefusal, OAuthError, TokenQuery, TokenRequest,
};
use plantd_app::sessions::Login;
use plantd_app::{App, AppError, Caller};
use plantd_model::Timestamp;
use plantd_model::audit::AuditEvent;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::csrf;
use crate::error::{ApiError, ErrorBody, OAuthErrorBody};
use crate::pages::{error_page, escape, field, hidden, notice, page};
use crate::pipeline::{anonymous_admit, audit_as, client_ip, set_rate_headers};
use crate::state::AppState;

/// The root routes; every `POST` is audited ([`audit_as`]) as what it does.
pub fn router(state: AppState) -> Router<AppState> {
    let audited = |event, route| audit_as(&state, event, route);
    Router::new()
        .route("/.well-known/jwks.json", get(jwks))
        .route("/.well-known/oauth-authorization-server", get(metadata))
        .route(
            "/oauth/authorize",
            get(authorize_page).merge(audited(AuditEvent::OAuthAuthorize, post(authorize_form))),
        )
        .route("/oauth/token", audited(AuditEvent::OAuthToken, post(token)))
        .route(
            "/oauth/revoke",
            audited(AuditEvent::OAuthRevoke, post(revoke)),
        )
        .route(
            "/oauth/introspect",
            audited(AuditEvent::OAuthIntrospect, post(introspect)),
        )
        .route(
            "/invitations/accept",
            get(invitation_page)
                .merge(audited(AuditEvent::InvitationAccept, post(invitation_form))),
        )
        .route(
            "/password-reset",
            get(reset_page).merge(audited(AuditEvent::PasswordResetRequest, post(reset_form))),
        )
        .layer(from_fn_with_state(state.clone(), limit))
}

/// The root operations of the OpenAPI document (the authorization server's endpoints; the
/// pages behind emailed links are for people, not clients).
#[derive(utoipa::OpenApi)]
#[openapi(paths(
    jwks,
    metadata,
    authorize_page,
    authorize_form,
    token,
    revoke,
    introspect
))]
pub struct RootApi;

/// The authorization server's operations at the root, as the OpenAPI document lists them:
/// method and path (for tests and tools).
pub fn root_operations() -> Vec<(axum::http::Method, String)> {
    let doc = <RootApi as utoipa::OpenApi>::openapi();
    let mut ops = Vec::new();
    for (path, item) in doc.paths.paths {
        for (method, on) in [
            (axum::http::Method::GET, item.get.is_some()),
            (axum::http::Method::POST, item.post.is_some()),
        ] {
            if on {
                ops.push((method, path.clone()));
            }
        }
    }
    ops
}

/// Counts the request against its address's unauthenticated limit.
pub(crate) async fn limit(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let ip = client_ip(&req);
    let (ws, refusal) = anonymous_admit(&state, ip.as_deref(), Timestamp::now());
    let mut response = match refusal {
        Some(err) => err.into_response(),
        None => next.run(req).await,
    };
    set_rate_headers(response.headers_mut(), ws);
    response
}

/// The public keys access tokens are signed with (RFC 7517), for resource servers that verify
/// tokens themselves.
#[utoipa::path(get, path = "/.well-known/jwks.json", tag = "oauth", security(()),
    responses((status = 200, description = "The JSON Web Key Set", content_type = "application/json", body = Object),
        (status = 429, description = "Too many requests from this address", body = ErrorBody),
        (status = 500, description = "The server failed", body = ErrorBody)))]
async fn jwks(State(state): State<AppState>) -> Response {
    match state.app.jwks().await {
        Ok(keys) => (
            [(header::CACHE_CONTROL, "public, max-age=60")],
            axum::Json(keys),
        )
            .into_response(),
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// The authorization server's metadata (RFC 8414).
#[utoipa::path(get, path = "/.well-known/oauth-authorization-server", tag = "oauth", security(()),
    responses((status = 200, description = "The metadata document", content_type = "application/json", body = Object),
        (status = 429, description = "Too many requests from this address", body = ErrorBody),
        (status = 500, description = "The server failed", body = ErrorBody)))]
async fn metadata(State(state): State<AppState>) -> Response {
    axum::Json(state.app.authorization_server_metadata()).into_response()
}

/// Parses a form body; a body that is not a form is `invalid_request`.
fn form<T: DeserializeOwned>(headers: &HeaderMap, body: &[u8]) -> Result<T, ApiError> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if !ct.starts_with("application/x-www-form-urlencoded") {
        return Err(oauth(OAuthError::invalid_request(
            "the body must be application/x-www-form-urlencoded",
        )));
    }
    serde_urlencoded::from_bytes(body).map_err(|e| {
        oauth(OAuthError::invalid_request(format!(
            "malformed form parameters (each may appear once): {e}"
        )))
    })
}

fn oauth(e: OAuthError) -> ApiError {
    ApiError::from(AppError::OAuth(e))
}

/// `Authorization: Basic` client credentials (RFC 6749 2.3.1: each part form-urlencoded).
fn basic_credentials(headers: &HeaderMap) -> Result<Option<(String, String)>, ApiError> {
    use base64::Engine;
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    let bad = || {
        oauth(OAuthError::invalid_client(
            "malformed Basic credentials",
            true,
        ))
    };
    let text = value.to_str().map_err(|_| bad())?;
    let Some(encoded) = text
        .strip_prefix("Basic ")
        .or_else(|| text.strip_prefix("basic "))
    else {
        return Err(oauth(OAuthError::invalid_client(
            "client authentication must be HTTP Basic or client_secret_post",
            true,
        )));
    };
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .map_err(|_| bad())?;
    let decoded = String::from_utf8(decoded).map_err(|_| bad())?;
    let (id, secret) = decoded.split_once(':').ok_or_else(bad)?;
    let unescape = |s: &str| -> String {
        form_urlencoded::parse(format!("v={s}").as_bytes())
            .next()
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default()
    };
    Ok(Some((unescape(id), unescape(secret))))
}

/// A form body of the token, revocation or introspection endpoint with the client's HTTP
/// Basic credentials, if any; refused in the OAuth shape.
struct ClientForm<T>(T, Option<(String, String)>);

impl<S: Send + Sync, T: DeserializeOwned> axum::extract::FromRequest<S> for ClientForm<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let headers = req.headers().clone();
        let body = Bytes::from_request(req, state)
            .await
            .map_err(|e| oauth(OAuthError::invalid_request(e.body_text())))?;
        Ok(ClientForm(
            form(&headers, &body)?,
            basic_credentials(&headers)?,
        ))
    }
}

/// The JSON answer, or the refusal, never cached.
fn no_store_json<T: serde::Serialize>(answer: Result<T, AppError>) -> Response {
    let mut response = match answer {
        Ok(body) => axum::Json(body).into_response(),
        Err(e) => ApiError::from(e).into_response(),
    };
    let h = response.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    response
}

/// How the token, revocation and introspection endpoints refuse (SPEC 7's OAuth shape; the
/// address's limit and internal failures in the envelope).
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)]
enum ClientRefusals {
    /// `invalid_request` (the token endpoint also `invalid_grant`, `unauthorized_client`,
    /// `unsupported_grant_type`, `invalid_scope`)
    #[response(status = 400)]
    Invalid(OAuthErrorBody),
    /// `invalid_client`: unknown client or wrong secret
    #[response(status = 401)]
    Client(OAuthErrorBody),
    /// Too many requests from this address
    #[response(status = 429)]
    Limited(ErrorBody),
    /// The server failed
    #[response(status = 500)]
    Failed(ErrorBody),
}

/// The token endpoint (RFC 6749 3.2): exchange a code (with its PKCE verifier), client
/// credentials or a refresh token for an access token. Clients authenticate with HTTP Basic
/// or `client_id`/`client_secret` in the form.
#[utoipa::path(post, path = "/oauth/token", tag = "oauth", security(()),
    request_body(content = TokenRequest, content_type = "application/x-www-form-urlencoded"),
    responses((status = 200, description = "The access token (and a refresh token for codes and refreshes)", body = TokenResponse),
        ClientRefusals))]
async fn token(
    State(state): State<AppState>,
    Extension(trail): Extension<AuditTrail>,
    ClientForm(req, basic): ClientForm<TokenRequest>,
) -> Response {
    no_store_json(state.app.token(req, basic, &trail).await)
}

/// Revoke a refresh token (its whole grant) or an access token (RFC 7009); unknown tokens are
/// answered the same way.
#[utoipa::path(post, path = "/oauth/revoke", tag = "oauth", security(()),
    request_body(content = TokenQuery, content_type = "application/x-www-form-urlencoded"),
    responses((status = 200, description = "Revoked, or nothing to revoke"),
        ClientRefusals))]
async fn revoke(
    State(state): State<AppState>,
    Extension(trail): Extension<AuditTrail>,
    ClientForm(q, basic): ClientForm<TokenQuery>,
) -> Response {
    match state.app.revoke(q, basic, &trail).await {
        Ok(()) => StatusCode::OK.into_response(),
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// Whether a token is active (RFC 7662), for a confidential client (a resource server).
#[utoipa::path(post, path = "/oauth/introspect", tag = "oauth", security(()),
    request_body(content = TokenQuery, content_type = "application/x-www-form-urlencoded"),
    responses((status = 200, description = "`active`, and the token's claims when active", content_type = "application/json", body = Object),
        ClientRefusals))]
async fn introspect(
    State(state): State<AppState>,
    Extension(trail): Extension<AuditTrail>,
    ClientForm(q, basic): ClientForm<TokenQuery>,
) -> Response {
    no_store_json(state.app.introspect(q, basic, &trail).await)
}

/// The form of one of the pages, posted from the server's own origin: a form that cannot be
/// read (at most 64 KiB, each field once) is an error page, one posted from elsewhere a refusal
/// page (CSRF).
pub(crate) struct PageForm<T> {
    pub(crate) form: T,
}

impl<T: DeserializeOwned> axum::extract::FromRequest<AppState> for PageForm<T> {
    type Rejection = Response;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let same_origin = csrf::same_origin(req.headers(), state.app.issuer());
        let form = match axum::body::to_bytes(req.into_body(), 64 * 1024).await {
            Ok(body) => serde_urlencoded::from_bytes::<T>(&body).ok(),
            Err(_) => None,
        };
        let Some(form) = form else {
            return Err(error_page(
                StatusCode::BAD_REQUEST,
                "Invalid form",
                "the form could not be read, or its fields are malformed or repeated",
            ));
        };
        if !same_origin {
            return Err(error_page(
                StatusCode::FORBIDDEN,
                "Request refused",
                csrf::REFUSAL,
            ));
        }
        Ok(PageForm { form })
    }
}

/// The session of the browser's cookie, if current.
async fn browser_session(app: &App, headers: &HeaderMap) -> Option<Caller> {
    let token = csrf::session_cookie(headers)?;
    app.session_caller(&token, true, Timestamp::now())
        .await
        .ok()
}

fn parse_query(raw: Option<&str>) -> Option<AuthorizeQuery> {
    serde_urlencoded::from_str(raw.unwrap_or_default()).ok()
}

/// The authorization endpoint (RFC 6749 4.1, PKCE RFC 7636): a page for a person, who logs in
/// and allows or denies the application; the browser is then sent back to the client's
/// `redirect_uri` with a code or an error.
#[utoipa::path(get, path = "/oauth/authorize", tag = "oauth", security(()), params(AuthorizeQuery),
    responses((status = 200, description = "The login or consent page", content_type = "text/html"),
        (status = 303, description = "Back to the client with an error"),
        (status = 400, description = "A request that cannot be sent back to the client", content_type = "text/html"),
        (status = 403, description = "The application belongs to another organization", content_type = "text/html"),
        (status = 429, description = "Too many requests from this address", body = ErrorBody),
        (status = 500, description = "The server failed", body = ErrorBody)))]
async fn authorize_page(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    let Some(q) = parse_query(raw.as_deref()) else {
        return error_page(
            StatusCode::BAD_REQUEST,
            "Invalid authorization request",
            "the request's parameters are malformed or repeated",
        );
    };
    let auth = match state.app.check_authorization(&q).await {
        Ok(a) => a,
        Err(refusal) => return refused(refusal),
    };
    match browser_session(&state.app, &headers).await {
        None => login_page(&auth, &q, None, StatusCode::OK),
        Some(caller) => consent_page(&state.app, &auth, &q, &caller).await,
    }
}

fn refused(refusal: AuthorizeRefusal) -> Response {
    match refusal {
        AuthorizeRefusal::Page(message) => error_page(
            StatusCode::BAD_REQUEST,
            "This sign-in link cannot be used",
            &message,
        ),
        AuthorizeRefusal::Redirect(url) => Redirect::to(&url).into_response(),
    }
}

/// The authorization parameters that were given, as hidden fields of a form.
fn carried(q: &AuthorizeQuery) -> String {
    let query = serde_urlencoded::to_string(q).unwrap_or_default();
    let pairs: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect();
    let refs: Vec<(&str, Option<&str>)> = pairs
        .iter()
        .map(|(k, v)| (k.as_str(), Some(v.as_str())))
        .collect();
    hidden(&refs)
}

fn login_page(
    auth: &Authorization,
    q: &AuthorizeQuery,
    error: Option<&str>,
    status: StatusCode,
) -> Response {
    let body = format!(
        "<h1>Log in to plantd</h1><p><strong>{}</strong> asks to use your plantd account.</p>{}\
         <form method=\"post\" action=\"/oauth/authorize\">{}{}{}\
         <input type=\"hidden\" name=\"action\" value=\"login\"><button class=\"primary\" type=\"submit\">Log in</button></form>",
        escape(&auth.application.name),
        notice(error),
        carried(q),
        field("email", "Email", "email", "username", None),
        field("password", "Password", "password", "current-password", None),
    );
    page(status, "Log in", &body)
}

fn scope_words(s: plantd_model::Scope) -> &'static str {
    use plantd_model::Scope::*;
    match s {
        ReadAssets => "see data sources, assets and dashboards",
        WriteAssets => "change data sources, assets and dashboards",
        ReadTelemetry => "read telemetry",
        WriteTelemetry => "send telemetry",
        ReadAlerts => "see alerts and alert rules",
        WriteAlerts => "acknowledge and resolve alerts, change alert rules",
        Admin => "administer the organization (members, keys, applications)",
    }
}

async fn consent_page(
    app: &App,
    auth: &Authorization,
    q: &AuthorizeQuery,
    caller: &Caller,
) -> Response {
    if caller.org_id != auth.application.organization_id {
        return error_page(
            StatusCode::FORBIDDEN,
            "Application of another organization",
            "this application belongs to another organization than the one you are signed in to",
        );
    }
    let email = app
        .me(caller)
        .await
        .map(|(u, _)| u.email)
        .unwrap_or_default();
    let granted = App::consented_scopes(auth, caller);
    let withheld: Vec<_> = auth
        .scopes
        .iter()
        .filter(|s| !granted.contains(s))
        .collect();
    let items = |list: &mut dyn Iterator<Item = plantd_model::Scope>| -> String {
        list.map(|s| format!("<li>{} <code>{}</code></li>", escape(scope_words(s)), s))
            .collect()
    };
    let withheld_html = if withheld.is_empty() {
        String::new()
    } else {
        format!(
            "<p>Your role does not allow, so it will not get:</p><ul>{}</ul>",
            items(&mut withheld.into_iter().copied())
        )
    };
    let body = format!(
        "<h1>Allow {} to use plantd?</h1><p>Signed in as <strong>{}</strong>.</p>\
         <p>It will be able to:</p><ul>{}</ul>{}\
         <form method=\"post\" action=\"/oauth/authorize\">{}\
         <button class=\"primary\" type=\"submit\" name=\"action\" value=\"approve\">Allow</button>\
         <button type=\"submit\" name=\"action\" value=\"deny\">Deny</button></form>",
        escape(&auth.application.name),
        escape(&email),
        items(&mut granted.iter().copied()),
        withheld_html,
        carried(q),
    );
    page(StatusCode::OK, "Allow access", &body)
}

#[derive(Deserialize)]
struct AuthorizeForm {
    action: Option<String>,
    email: Option<String>,
    password: Option<String>,
    #[serde(flatten)]
    query: AuthorizeQuery,
}

/// The login and consent forms of the authorization page (posted from this origin).
#[utoipa::path(post, path = "/oauth/authorize", tag = "oauth", security(()),
    request_body(content = Object, content_type = "application/x-www-form-urlencoded"),
    responses((status = 200, description = "The login page again, with what went wrong", content_type = "text/html"),
        (status = 303, description = "To the consent page after a login, or back to the client with a code or an error"),
        (status = 400, description = "The form cannot be read", content_type = "text/html"),
        (status = 401, description = "Wrong email or password, or the session ended", content_type = "text/html"),
        (status = 403, description = "Posted from another origin, or an application of another organization", content_type = "text/html"),
        (status = 429, description = "Too many requests from this address, or too many failed logins", body = ErrorBody),
        (status = 500, description = "The server failed", body = ErrorBody)))]
async fn authorize_form(
    State(state): State<AppState>,
    Extension(trail): Extension<AuditTrail>,
    headers: HeaderMap,
    PageForm { form: f }: PageForm<AuthorizeForm>,
) -> Response {
    let auth = match state.app.check_authorization(&f.query).await {
        Ok(a) => a,
        Err(refusal) => return refused(refusal),
    };
    let q = &f.query;
    match f.action.as_deref() {
        Some("login") => {
            trail.event(AuditEvent::SessionLogin);
            let login = Login {
                email: f.email.clone().unwrap_or_default(),
                password: f.password.clone().unwrap_or_default(),
                organization_id: Some(auth.application.organization_id.clone()),
            };
            match state.app.login(login, &trail).await {
                Ok(new) => {
                    let query = serde_urlencoded::to_string(q).unwrap_or_default();
                    let mut r = Redirect::to(&format!("/oauth/authorize?{query}")).into_response();
                    r.headers_mut().insert(
                        header::SET_COOKIE,
                        csrf::set_cookie(&new.token, state.app.issuer()),
                    );
                    r
                }
                Err(e) => match crate::pages::login_refusal_status(&e) {
                    Some(status) => login_page(&auth, q, Some(&e.to_string()), status),
                    None => ApiError::from(e).into_response(),
                },
            }
        }
        Some(action @ ("approve" | "deny")) => {
            let Some(caller) = browser_session(&state.app, &headers).await else {
                return login_page(
                    &auth,
                    q,
                    Some("your session has ended; log in again"),
                    StatusCode::UNAUTHORIZED,
                );
            };
            trail.act_as(Actor::from(&caller));
            trail.resource(&auth.application.client_id);
            if action == "deny" {
                return Redirect::to(
                    &state
                        .app
                        .deny_authorization(&auth, "the user denied the request"),
                )
                .into_response();
            }
            match state.app.approve_authorization(&auth, &caller).await {
                Ok(url) => Redirect::to(&url).into_response(),
                Err(AppError::Forbidden(m)) => {
                    error_page(StatusCode::FORBIDDEN, "Request refused", &m)
                }
                Err(e) => ApiError::from(e).into_response(),
            }
        }
        _ => error_page(
            StatusCode::BAD_REQUEST,
            "Invalid form",
            "the form names no known action",
        ),
    }
}

#[derive(Deserialize, Default)]
struct TokenParam {
    token: Option<String>,
}

#[derive(Deserialize)]
struct AccountForm {
    token: Option<String>,
    email: Option<String>,
    password: Option<String>,
    name: Option<String>,
}

/// The message of a refused account form, for the field it names (or the whole form).
fn form_error(e: AppError) -> Result<(Option<String>, String), ApiError> {
    match e {
        AppError::Invalid(details) => {
            let first = details.into_iter().next();
            Ok(first.map_or((None, "invalid form".into()), |d| {
                (Some(d.field), d.message)
            }))
        }
        AppError::Conflict(m) => Ok((None, m)),
        other => Err(ApiError::from(other)),
    }
}

async fn invitation_page(State(state): State<AppState>, RawQuery(raw): RawQuery) -> Response {
    let token = serde_urlencoded::from_str::<TokenParam>(raw.as_deref().unwrap_or_default())
        .unwrap_or_default()
        .token
        .unwrap_or_default();
    invitation_form_page(&state.app, &token, None, StatusCode::OK).await
}

async fn invitation_form_page(
    app: &App,
    token: &str,
    error: Option<(Option<String>, String)>,
    status: StatusCode,
) -> Response {
    let preview = match app.invitation_preview(token).await {
        Ok(p) => p,
        Err(e) => return ApiError::from(e).into_response(),
    };
    let Some((email, org, has_account)) = preview else {
        return error_page(
            StatusCode::BAD_REQUEST,
            "Invitation link not valid",
            "this invitation link is invalid, has expired or was used already; ask for a new invitation",
        );
    };
    let (field_name, message) = error.map_or((None, None), |(f, m)| (f, Some(m)));
    let err_for = |name: &str| {
        (field_name.as_deref() == Some(name))
            .then_some(message.as_deref())
            .flatten()
    };
    let whole = if field_name.is_none() {
        message.as_deref()
    } else {
        None
    };
    let fields = if has_account {
        field(
            "password",
            "Your plantd password",
            "password",
            "current-password",
            err_for("password"),
        )
    } else {
        format!(
            "{}{}",
            field("name", "Your name", "text", "name", err_for("name")),
            field(
                "password",
                "Choose a password (at least 12 characters)",
                "password",
                "new-password",
                err_for("password")
            )
        )
    };
    let body = format!(
        "<h1>Join {} on plantd</h1><p>Invitation for <strong>{}</strong>.</p>{}\
         <form method=\"post\" action=\"/invitations/accept\">{}{}<button class=\"primary\" type=\"submit\">Accept invitation</button></form>",
        escape(&org),
        escape(&email),
        notice(whole),
        hidden(&[("token", Some(token))]),
        fields
    );
    page(status, "Accept invitation", &body)
}

async fn invitation_form(
    State(state): State<AppState>,
    Extension(trail): Extension<AuditTrail>,
    PageForm { form: f }: PageForm<AccountForm>,
) -> Response {
    let token = f.token.unwrap_or_default();
    let accept = AcceptInvitation {
        token: token.clone(),
        password: f.password.unwrap_or_default(),
        name: f.name.filter(|n| !n.trim().is_empty()),
    };
    match state.app.accept_invitation(accept, Some(&trail)).await {
        Ok((user, _, _)) => page(
            StatusCode::OK,
            "Invitation accepted",
            &format!(
                "<h1>Welcome, {}</h1><p>You have joined the organization. Log in with <strong>{}</strong> and your password.</p>",
                escape(&user.name),
                escape(&user.email)
            ),
        ),
        Err(e) => match form_error(e) {
            Ok(err) => {
                invitation_form_page(&state.app, &token, Some(err), StatusCode::BAD_REQUEST).await
            }
            Err(e) => e.into_response(),
        },
    }
}

async fn reset_page(RawQuery(raw): RawQuery) -> Response {
    let token = serde_urlencoded::from_str::<TokenParam>(raw.as_deref().unwrap_or_default())
        .unwrap_or_default()
        .token;
    reset_form_page(token.as_deref(), None, StatusCode::OK)
}

fn reset_form_page(
    token: Option<&str>,
    error: Option<(Option<String>, String)>,
    status: StatusCode,
) -> Response {
    let (field_name, message) = error.map_or((None, None), |(f, m)| (f, Some(m)));
    let err_for = |name: &str| {
        (field_name.as_deref() == Some(name))
            .then_some(message.as_deref())
            .flatten()
    };
    let whole = if field_name.as_deref().is_none_or(|f| f == "token") {
        message.as_deref()
    } else {
        None
    };
    let body = match token {
        Some(t) => format!(
            "<h1>Choose a new password</h1>{}<form method=\"post\" action=\"/password-reset\">{}{}\
             <button class=\"primary\" type=\"submit\">Set password</button></form>",
            notice(whole),
            hidden(&[("token", Some(t))]),
            field(
                "password",
                "New password (at least 12 characters)",
                "password",
                "new-password",
                err_for("password")
            ),
        ),
        None => format!(
            "<h1>Reset your password</h1><p>We will email a link to the address if it has an account.</p>{}\
             <form method=\"post\" action=\"/password-reset\">{}<button class=\"primary\" type=\"submit\">Send link</button></form>",
            notice(whole),
            field("email", "Email", "email", "username", err_for("email")),
        ),
    };
    page(status, "Reset password", &body)
}

async fn reset_form(
    State(state): State<AppState>,
    Extension(trail): Extension<AuditTrail>,
    PageForm { form: f }: PageForm<AccountForm>,
) -> Response {
    if f.token.is_some() {
        trail.event(AuditEvent::PasswordResetConfirm);
    }
    let result = match &f.token {
        Some(token) => state
            .app
            .confirm_password_reset(ResetConfirm {
                token: token.clone(),
                password: f.password.clone().unwrap_or_default(),
            })
            .await
            .map(|()| "Your password has been changed and every session of your account has ended. Log in with the new password."),
        None => state
            .app
            .request_password_reset(ResetRequest {
                email: f.email.clone().unwrap_or_default(),
            })
            .await
            .map(|()| "If the address has a plantd account, a link to reset its password is on its way. It works once, for one hour."),
    };
    match result {
        Ok(message) => page(
            StatusCode::OK,
            "Reset password",
            &format!("<h1>Reset password</h1><p>{}</p>", escape(message)),
        ),
        Err(e) => match form_error(e) {
            Ok(err) => reset_form_page(f.token.as_deref(), Some(err), StatusCode::BAD_REQUEST),
            Err(e) => e.into_response(),
        },
    }
}
