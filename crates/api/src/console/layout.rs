//! The console's page shell: the document around every page (navigation, the signed-in person,
//! scripts), its security headers, error pages, and times shown in the browser's zone.

use axum::http::StatusCode;
use axum::response::Response;
use maud::{DOCTYPE, Markup, html};
use plantd_app::AppError;

use super::browser::Browser;

/// Content-Security-Policy of every console page: this origin's scripts, styles, images and
/// connections (the API and its WebSocket) only; no inline script; not framed.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// The console's navigation: path and label.
const NAV: [(&str, &str); 8] = [
    ("/", "Overview"),
    ("/dashboards", "Dashboards"),
    ("/alerts", "Alerts"),
    ("/alert-rules", "Alert rules"),
    ("/data-sources", "Data sources"),
    ("/api-keys", "API keys"),
    ("/members", "Members"),
    ("/licenses", "Licenses"),
];

/// A page of the console: `title`, the navigation (with `active` marked) and the signed-in
/// person, then `body`; `scripts` after the body (paths under `/assets/`).
pub(crate) fn shell(
    browser: Option<&Browser>,
    title: &str,
    active: &str,
    body: Markup,
    scripts: &[&str],
) -> Response {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · plantd" }
                link rel="icon" href="data:,";
                link rel="stylesheet" href="/assets/vendor/uplot/uPlot.min.css";
                link rel="stylesheet" href="/assets/console.css";
            }
            body {
                a class="skip" href="#content" { "Skip to content" }
                @if let Some(b) = browser {
                    header class="topbar" {
                        a class="brand" href="/" { "plantd" }
                        nav aria-label="Main" {
                            @for (path, label) in NAV {
                                @if path == active {
                                    a href=(path) aria-current="page" { (label) }
                                } @else {
                                    a href=(path) { (label) }
                                }
                            }
                        }
                        div class="user" {
                            button type="button" id="theme-toggle" aria-label="Switch between light and dark theme" { "Theme" }
                            span class="who" { (b.email) " · " (b.org_name) }
                            form method="post" action="/logout" {
                                button type="submit" { "Log out" }
                            }
                        }
                    }
                }
                main id="content" {
                    (body)
                }
                script src="/assets/console.js" {}
                @for s in scripts {
                    script src=(format!("/assets/{s}")) {}
                }
            }
        }
    };
    page_response(StatusCode::OK, markup)
}

/// An HTML answer with the console's headers.
pub(crate) fn page_response(status: StatusCode, markup: Markup) -> Response {
    crate::pages::html_page(status, markup.into_string(), CSP, "same-origin")
}

/// A page that shows what failed instead of its content (never a blank page), with the status
/// the API would answer.
pub(crate) fn failed(browser: &Browser, title: &str, active: &str, e: &AppError) -> Response {
    let status = match e {
        AppError::NotFound(_) => StatusCode::NOT_FOUND,
        AppError::Forbidden(_) => StatusCode::FORBIDDEN,
        AppError::Invalid(_) => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    error_shell(browser, status, title, active, &e.to_string())
}

/// A page that shows an error instead of its content (never a blank page).
pub(crate) fn error_shell(
    browser: &Browser,
    status: StatusCode,
    title: &str,
    active: &str,
    message: &str,
) -> Response {
    let mut r = shell(
        Some(browser),
        title,
        active,
        html! {
            h1 { (title) }
            p class="error" role="alert" { (message) }
        },
        &[],
    );
    *r.status_mut() = status;
    r
}

/// A time for people: the `<time>` element carries the instant, the console's script shows it
/// in the browser's time zone (UTC until then).
pub(crate) fn time(t: plantd_model::Timestamp) -> Markup {
    let text = t.to_rfc3339();
    html! { time datetime=(text) { (text) } }
}

/// An optional time, or a dash.
pub(crate) fn maybe_time(t: Option<plantd_model::Timestamp>) -> Markup {
    match t {
        Some(t) => time(t),
        None => html! { "–" },
    }
}
