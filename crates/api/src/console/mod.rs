//! The web console (served at `/`): server-rendered pages (maud) for people, over the same use
//! cases as the API; the pages' small scripts call `/v1` with the session cookie and listen on
//! `/v1/ws`. Scripts, styles and the vendored uPlot are embedded in the binary (`assets/`) and
//! served from `/assets/`; the Content-Security-Policy allows scripts and styles from this origin
//! only, so no page has inline script.

mod alerts;
mod api_keys;
mod bi;
mod bi_reports;
mod browser;
mod dashboards;
mod data_sources;
mod fleet;
mod kit;
mod layout;
mod licenses;
mod members;
mod ml_datasets;
mod ml_models;
mod ota;
mod overview;
mod page;
mod provisioning;
mod regions;
mod session;
mod setup;

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use plantd_model::Scope;
use plantd_model::audit::AuditEvent;

use self::page::{ConsolePage, Here, REGIONS_PAGE};
use crate::pipeline::audit_as;
use crate::state::AppState;

const ADMINS_ONLY: &str = "this page is for owners and admins";
/// The edge agent's setup wizard.
const SETUP_PAGE: &str = "/setup";

/// Every page of the console, in navigation order.
pub(crate) static PAGES: [ConsolePage; 32] = [
    ConsolePage {
        path: "/",
        title: "Overview",
        section: "/",
        nav: true,
        needs: None,
        route: || get(overview::page),
    },
    ConsolePage {
        path: "/dashboards",
        title: "Dashboards",
        section: "/dashboards",
        nav: true,
        needs: None,
        route: || get(dashboards::list),
    },
    ConsolePage {
        path: "/dashboards/{id}",
        title: "Dashboard",
        section: "/dashboards",
        nav: false,
        needs: None,
        route: || get(dashboards::view),
    },
    ConsolePage {
        path: "/dashboards/{id}/edit",
        title: "Edit dashboard",
        section: "/dashboards",
        nav: false,
        needs: Some((
            Scope::WriteAssets,
            "your role does not allow changing dashboards",
        )),
        route: || get(dashboards::editor),
    },
    ConsolePage {
        path: "/alerts",
        title: "Alerts",
        section: "/alerts",
        nav: true,
        needs: None,
        route: || get(alerts::alerts),
    },
    ConsolePage {
        path: "/alert-rules",
        title: "Alert rules",
        section: "/alert-rules",
        nav: true,
        needs: None,
        route: || get(alerts::rules),
    },
    ConsolePage {
        path: "/data-sources",
        title: "Data sources",
        section: "/data-sources",
        nav: true,
        needs: None,
        route: || get(data_sources::page),
    },
    ConsolePage {
        path: "/data-sources/{id}",
        title: "Browse a data source",
        section: "/data-sources",
        nav: false,
        needs: Some((
            Scope::WriteAssets,
            "your role does not allow browsing devices or choosing what they collect",
        )),
        route: || get(data_sources::browse),
    },
    ConsolePage {
        path: "/devices",
        title: "Devices",
        section: "/devices",
        nav: true,
        needs: None,
        route: || get(fleet::devices),
    },
    ConsolePage {
        path: "/devices/{id}",
        title: "Device",
        section: "/devices",
        nav: false,
        needs: None,
        route: || get(fleet::device),
    },
    ConsolePage {
        path: "/fleet",
        title: "Groups and enrollment",
        section: "/fleet",
        nav: true,
        needs: None,
        route: || get(fleet::enrollment),
    },
    ConsolePage {
        path: "/ota/packages",
        title: "Firmware",
        section: "/ota/packages",
        nav: true,
        needs: None,
        route: || get(ota::packages),
    },
    ConsolePage {
        path: "/ota/deployments",
        title: "Deployments",
        section: "/ota/deployments",
        nav: true,
        needs: None,
        route: || get(ota::deployments),
    },
    ConsolePage {
        path: "/ota/deployments/{id}",
        title: "Deployment",
        section: "/ota/deployments",
        nav: false,
        needs: None,
        route: || get(ota::deployment),
    },
    ConsolePage {
        path: "/ml/datasets",
        title: "Datasets",
        section: "/ml/datasets",
        nav: true,
        needs: None,
        route: || get(ml_datasets::datasets),
    },
    ConsolePage {
        path: "/ml/datasets/{id}",
        title: "Dataset",
        section: "/ml/datasets",
        nav: false,
        needs: None,
        route: || get(ml_datasets::dataset),
    },
    ConsolePage {
        path: "/ml/datasets/{id}/label",
        title: "Label rows",
        section: "/ml/datasets",
        nav: false,
        needs: None,
        route: || get(ml_datasets::labeling),
    },
    ConsolePage {
        path: "/ml/training",
        title: "Training",
        section: "/ml/training",
        nav: true,
        needs: None,
        route: || get(ml_models::training),
    },
    ConsolePage {
        path: "/ml/models",
        title: "Models",
        section: "/ml/models",
        nav: true,
        needs: None,
        route: || get(ml_models::models),
    },
    ConsolePage {
        path: "/ml/models/{id}",
        title: "Model",
        section: "/ml/models",
        nav: false,
        needs: None,
        route: || get(ml_models::model),
    },
    ConsolePage {
        path: "/bi",
        title: "SQL Lab",
        section: "/bi",
        nav: true,
        needs: Some((
            Scope::ReadTelemetry,
            "your role does not allow reading telemetry",
        )),
        route: || get(bi::sql_lab),
    },
    ConsolePage {
        path: "/bi/rls",
        title: "Row-level security",
        section: "/bi/rls",
        nav: true,
        needs: Some((Scope::Admin, ADMINS_ONLY)),
        route: || get(bi::rls),
    },
    ConsolePage {
        path: "/bi/reports",
        title: "Reports",
        section: "/bi/reports",
        nav: true,
        needs: Some((Scope::Admin, ADMINS_ONLY)),
        route: || get(bi_reports::reports),
    },
    ConsolePage {
        path: "/bi/reports/{id}",
        title: "Report",
        section: "/bi/reports",
        nav: false,
        needs: Some((Scope::Admin, ADMINS_ONLY)),
        route: || get(bi_reports::report),
    },
    ConsolePage {
        path: "/bi/embed",
        title: "Embedding",
        section: "/bi/embed",
        nav: true,
        needs: Some((Scope::Admin, ADMINS_ONLY)),
        route: || get(bi_reports::embed),
    },
    ConsolePage {
        path: "/api-keys",
        title: "API keys",
        section: "/api-keys",
        nav: true,
        needs: Some((Scope::Admin, ADMINS_ONLY)),
        route: || get(api_keys::page),
    },
    ConsolePage {
        path: "/members",
        title: "Members",
        section: "/members",
        nav: true,
        needs: Some((Scope::Admin, ADMINS_ONLY)),
        route: || get(members::page),
    },
    ConsolePage {
        path: "/licenses",
        title: "Licenses",
        section: "/licenses",
        nav: true,
        needs: Some((Scope::Admin, ADMINS_ONLY)),
        route: || get(licenses::page),
    },
    ConsolePage {
        path: "/provisioning",
        title: "Provisioning",
        section: "/provisioning",
        nav: true,
        needs: None,
        route: || get(provisioning::page),
    },
    ConsolePage {
        path: REGIONS_PAGE,
        title: "Regions",
        section: REGIONS_PAGE,
        nav: true,
        needs: None,
        route: || get(regions::page),
    },
    // The edge agent's setup wizard: its first step without a session (the setup code), then
    // for the logged-in owner (no navigation; linked from Provisioning on an agent).
    ConsolePage {
        path: SETUP_PAGE,
        title: "Setup",
        section: "/provisioning",
        nav: false,
        needs: None,
        route: || get(setup::page),
    },
    // Not a page of its own: the login form (no navigation, no session).
    ConsolePage {
        path: "/login",
        title: "Log in",
        section: "",
        nav: false,
        needs: None,
        route: || get(session::login_page),
    },
];

/// The console's routes: every page of [`PAGES`] (with its declaration on its requests), login
/// and logout (audited; a login attempt counts against the client address's unauthenticated
/// limit, as the authorization server's forms do), and the embedded files.
pub fn router(state: AppState) -> Router<AppState> {
    let mut router = Router::new();
    // Logging out is no page; its `Browser` is on the login page's declaration.
    let mut logout = None;
    for page in &PAGES {
        let here = Here {
            page,
            pages: &PAGES,
        };
        let mut route = (page.route)().layer(Extension(here));
        if page.path == "/login" {
            logout = Some(
                audit_as(&state, AuditEvent::SessionLogout, post(session::logout))
                    .layer(Extension(here)),
            );
            route = route.merge(
                audit_as(&state, AuditEvent::SessionLogin, post(session::login)).route_layer(
                    axum::middleware::from_fn_with_state(state.clone(), crate::oauth_server::limit),
                ),
            );
        }
        if page.path == SETUP_PAGE {
            route = route.merge(
                audit_as(&state, AuditEvent::EdgeSetup, post(setup::set_password)).route_layer(
                    axum::middleware::from_fn_with_state(state.clone(), crate::oauth_server::limit),
                ),
            );
        }
        router = router.route(page.path, route);
    }
    router
        .route("/logout", logout.expect("PAGES declares /login"))
        .route("/assets/{*path}", get(asset))
}

/// The embedded files: path under `/assets/`, content type, bytes.
const ASSETS: [(&str, &str, &[u8]); 18] = [
    (
        "setup.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/setup.js"),
    ),
    (
        "bi.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/bi.js"),
    ),
    (
        "embed.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/embed.js"),
    ),
    (
        "docs.css",
        "text/css; charset=utf-8",
        include_bytes!("../../assets/docs.css"),
    ),
    (
        "docs.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/docs.js"),
    ),
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
        "browse.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/browse.js"),
    ),
    (
        "provisioning.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/provisioning.js"),
    ),
    (
        "ota.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/ota.js"),
    ),
    (
        "ml_datasets.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/ml_datasets.js"),
    ),
    (
        "ml_label.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/ml_label.js"),
    ),
    (
        "ml_models.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/ml_models.js"),
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

async fn asset(kit::PathId(path): kit::PathId) -> Response {
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
