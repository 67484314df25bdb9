//! The web console (served at `/`): server-rendered pages (maud) for people, over the same use
//! cases as the API; the pages' small scripts call `/v1` with the session cookie and listen on
//! `/v1/ws`. Scripts, styles and the vendored uPlot are embedded in the binary (`assets/`) and
//! served from `/assets/`; the Content-Security-Policy allows scripts and styles from this origin
//! only, so no page has inline script.

mod admin;
mod browser;
mod layout;
mod licenses;
mod pages;
mod session;

use axum::Router;
use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use crate::state::AppState;

/// The console's routes; a login attempt counts against the client address's unauthenticated
/// limit, as the authorization server's forms do.
pub fn router(state: AppState) -> Router<AppState> {
    let login = post(session::login).route_layer(axum::middleware::from_fn_with_state(
        state,
        crate::oauth_server::limit,
    ));
    Router::new()
        .route("/", get(pages::overview))
        .route("/login", get(session::login_page).merge(login))
        .route("/logout", post(session::logout))
        .route("/dashboards", get(pages::dashboards))
        .route("/dashboards/{id}", get(pages::dashboard))
        .route("/dashboards/{id}/edit", get(pages::dashboard_editor))
        .route("/alerts", get(pages::alerts))
        .route("/alert-rules", get(pages::alert_rules))
        .route("/data-sources", get(admin::data_sources))
        .route("/api-keys", get(admin::api_keys))
        .route("/members", get(admin::members))
        .route("/licenses", get(licenses::licenses))
        .route("/assets/{*path}", get(asset))
}

/// The embedded files: path under `/assets/`, content type, bytes.
const ASSETS: [(&str, &str, &[u8]); 7] = [
    (
        "console.css",
        "text/css; charset=utf-8",
        include_bytes!("../../assets/console.css"),
    ),
    (
        "console.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/console.js"),
    ),
    (
        "dashboard.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/dashboard.js"),
    ),
    (
        "dashboard_edit.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/dashboard_edit.js"),
    ),
    (
        "vendor/uplot/uPlot.iife.min.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/vendor/uplot/uPlot.iife.min.js"),
    ),
    (
        "vendor/uplot/uPlot.min.css",
        "text/css; charset=utf-8",
        include_bytes!("../../assets/vendor/uplot/uPlot.min.css"),
    ),
    (
        "vendor/uplot/LICENSE",
        "text/plain; charset=utf-8",
        include_bytes!("../../assets/vendor/uplot/LICENSE"),
    ),
];

async fn asset(Path(path): Path<String>) -> Response {
    match ASSETS.iter().find(|(p, _, _)| *p == path) {
        Some((_, content_type, bytes)) => (
            [
                (header::CONTENT_TYPE, *content_type),
                // Files change only with the binary; an hour keeps reloads cheap.
                (header::CACHE_CONTROL, "public, max-age=3600"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            *bytes,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "no such file").into_response(),
    }
}
