//! Embedded dashboards (SPEC 4.11; docs/api.md, "Embedded dashboards"): the list and guest
//! tokens take `admin`; the embedded page and its data take nothing but a guest token, as
//! `Authorization: Bearer` or `?token=`, which opens only its own dashboards.

use axum::extract::{Path, Query, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use maud::{DOCTYPE, html};
use plantd_app::bi_embed::{EmbeddableDashboard, GuestTokenRequest, GuestView};
use plantd_model::Scope::Admin;
use plantd_model::audit::AuditEvent;
use plantd_model::bi::DashboardData;
use plantd_model::page::PageQuery;
use serde::Deserialize;

use crate::envelope::{Data, List, list, ok, page_in_memory, page_of_query};
use crate::error::{ApiError, ApiResult};
use crate::extract::{Auth, ValidJson, ValidQuery};
use crate::routing::{Policy, Route, route};
use crate::state::AppState;

pub(crate) fn routes() -> Vec<Route> {
    vec![
        route!(dashboards, Policy::scope(Admin, AuditEvent::BiEmbedList)),
        route!(
            guest_token,
            Policy::scope(Admin, AuditEvent::BiGuestTokenCreate)
        ),
        route!(embed_page, Policy::public(AuditEvent::BiEmbedView)),
        route!(embed_data, Policy::public(AuditEvent::BiEmbedData)),
    ]
}

/// The dashboards that may be embedded (every console dashboard, while `bi_embed_enabled`).
#[utoipa::path(get, path = "/bi-embed/dashboards", tag = "bi", params(PageQuery),
    responses((status = 200, body = List<EmbeddableDashboard>),
        (status = 403, description = "Embedding is turned off for the organization")))]
async fn dashboards(
    State(state): State<AppState>,
    caller: Auth,
    ValidQuery(q): ValidQuery<PageQuery>,
) -> ApiResult<Response> {
    let page = page_of_query(q)?;
    let all = state.app.embeddable_dashboards(&caller.org_id).await?;
    Ok(list(page, page_in_memory(page, all), |d| d))
}

/// A guest token (RS256 JWT of type `guest+jwt`, `[bi] guest_token_ttl_secs`, default 5
/// minutes) opening the dashboard and the listed resources, under its own RLS clauses.
#[utoipa::path(post, path = "/bi-embed/guest-token", tag = "bi", request_body = GuestTokenRequest,
    responses((status = 200, body = Data<plantd_app::bi_embed::GuestToken>),
        (status = 400, description = "An unknown dashboard, resource type, table, or a clause that does not hold on its tables"),
        (status = 403, description = "Embedding is turned off for the organization")))]
async fn guest_token(
    State(state): State<AppState>,
    caller: Auth,
    ValidJson(body): ValidJson<GuestTokenRequest>,
) -> ApiResult<Response> {
    Ok(ok(state.app.issue_guest_token(&caller, body).await?))
}

#[derive(Deserialize, utoipa::IntoParams)]
struct TokenQuery {
    /// The guest token, when it cannot come as `Authorization: Bearer` (an iframe's address).
    token: Option<String>,
}

/// The dashboard variables a view's address chooses: `var-<name>=<value>`.
fn chosen_variables(query: Option<&str>) -> std::collections::HashMap<String, String> {
    form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .filter_map(|(k, v)| Some((k.strip_prefix("var-")?.to_string(), v.into_owned())))
        .collect()
}

const NO_TOKEN: &str = "a guest token is required: 'Authorization: Bearer <token>' or ?token=";

/// The guest token of a request: the bearer token, else `?token=`.
fn guest_token_of(headers: &HeaderMap, q: &TokenQuery) -> Option<String> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(crate::pipeline::bearer_token)
        .map(str::to_string)
        .or_else(|| q.token.clone().filter(|t| !t.is_empty()))
}

/// The headers of an embedded page: framed only by the organization's allowed origins (and
/// this server), the token in its address never sent on as a referrer, never cached.
fn embed_headers(response: &mut Response, frame_ancestors: &str) {
    let csp = format!(
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
         connect-src 'self'; frame-ancestors {frame_ancestors}; base-uri 'none'; form-action 'none'"
    );
    let headers = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&csp) {
        headers.insert(header::CONTENT_SECURITY_POLICY, v);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
}

/// Whether the client is a browser loading a page (an iframe's request accepts `text/html`):
/// it is shown a refusal as a page, any other client the API's error envelope.
fn browser_asks_for_html(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("text/html"))
}

/// The page an embedding shows when the token opens nothing: a message, frameable anywhere
/// (it holds no data and no action), with the refusal's status.
fn refused_page(status: StatusCode, message: &str) -> Response {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { "Embedded dashboard · plantd" }
                link rel="stylesheet" href="/assets/console.css";
            }
            body class="kiosk embed" {
                main { p class="error" role="alert" { (message) } }
            }
        }
    };
    let mut response = (status, Html(markup.into_string())).into_response();
    embed_headers(&mut response, "*");
    response
}

fn kiosk_page(view: &GuestView, token: &str) -> Response {
    let d = &view.dashboard;
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (d.name) " · plantd" }
                link rel="icon" href="data:,";
                link rel="stylesheet" href="/assets/vendor/uplot/uPlot.min.css";
                link rel="stylesheet" href="/assets/console.css";
            }
            body class="kiosk embed" {
                main id="embed" data-dashboard-id=(d.id) data-token=(token) data-origins=(view.config.embed_allowed_origins.join(" ")) {
                    div class="page-head" {
                        h1 { (d.name) }
                        span id="embed-variables" {}
                        span class="quiet" id="embed-updated" {}
                    }
                    p class="error" id="embed-error" role="alert" hidden {}
                    div class="grid" id="embed-grid" {}
                }
                script src="/assets/vendor/uplot/uPlot.iife.min.js" {}
                script src="/assets/embed.js" {}
            }
        }
    };
    let mut response = (StatusCode::OK, Html(markup.into_string())).into_response();
    let origins = view.config.embed_allowed_origins.join(" ");
    embed_headers(&mut response, format!("'self' {origins}").trim_end());
    response
}

/// The dashboard in kiosk mode for a guest token: its widgets drawn by `embed.js` from the
/// data route, refreshed every 30 s. Framed only from the organization's
/// `embed_allowed_origins` (CSP `frame-ancestors`).
#[utoipa::path(get, path = "/bi-embed/embed/{dashboard_id}", tag = "bi",
    params(("dashboard_id" = String, Path), TokenQuery),
    responses((status = 200, description = "The embedded dashboard (HTML)", content_type = "text/html"),
        (status = 401, description = "No guest token, or an invalid or expired one"),
        (status = 403, description = "The token does not open this dashboard, or embedding is turned off")))]
async fn embed_page(
    State(state): State<AppState>,
    Path(dashboard_id): Path<String>,
    headers: HeaderMap,
    Query(q): Query<TokenQuery>,
) -> Response {
    let refused = |message: String, refusal: ApiError| {
        if browser_asks_for_html(&headers) && !refusal.status().is_server_error() {
            refused_page(refusal.status(), &message)
        } else {
            refusal.into_response()
        }
    };
    let Some(token) = guest_token_of(&headers, &q) else {
        return refused(NO_TOKEN.into(), ApiError::Authentication(NO_TOKEN.into()));
    };
    match state.app.guest_view(&token, &dashboard_id).await {
        Ok(view) => kiosk_page(&view, &token),
        Err(e) => refused(e.to_string(), e.into()),
    }
}

/// What the embedded dashboard's widgets show now: each widget's query run through the BI
/// engine under the `member` role's rules and the token's clauses, with the variables the
/// address chooses (`var-<name>=<value>`, one of the variable's options; 400 on `var-<name>`
/// otherwise). Nothing else is open to a guest token.
#[utoipa::path(get, path = "/bi-embed/embed/{dashboard_id}/data", tag = "bi",
    params(("dashboard_id" = String, Path), TokenQuery),
    responses((status = 200, body = Data<DashboardData>),
        (status = 400, description = "A `var-<name>` names no variable of the dashboard, or a value it does not offer"),
        (status = 401, description = "No guest token, or an invalid or expired one"),
        (status = 403, description = "The token does not open this dashboard, or embedding is turned off"),
        (status = 429, description = "The organization already runs max_concurrent_queries queries")))]
async fn embed_data(
    State(state): State<AppState>,
    Path(dashboard_id): Path<String>,
    headers: HeaderMap,
    Query(q): Query<TokenQuery>,
    RawQuery(raw): RawQuery,
) -> ApiResult<Response> {
    let token =
        guest_token_of(&headers, &q).ok_or_else(|| ApiError::Authentication(NO_TOKEN.into()))?;
    Ok(ok(state
        .app
        .guest_dashboard_data(&token, &dashboard_id, &chosen_variables(raw.as_deref()))
        .await?))
}
