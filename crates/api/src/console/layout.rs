//! The console's page shell: the document around every page (navigation from the page table,
//! the signed-in person, scripts), its security headers and error pages.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, Markup, html};
use plantd_app::AppError;

use super::browser::{Browser, NotShown};
use crate::pages::CONSOLE_CSP;

/// A page of the console, titled as its declaration says (see [`shell_titled`]).
pub(crate) fn shell(browser: &Browser, body: Markup, scripts: &[&str]) -> Response {
    shell_titled(browser, browser.page.title, body, scripts)
}

/// A page of the console: `title`, the navigation (the pages the person may see, with the
/// page's section marked) and the signed-in person, then `body`; `scripts` after the body
/// (paths under `/assets/`).
pub(crate) fn shell_titled(
    browser: &Browser,
    title: &str,
    body: Markup,
    scripts: &[&str],
) -> Response {
    document(Some(browser), title, body, scripts)
}

/// The page of someone not signed in (the login form): no navigation.
pub(crate) fn bare(title: &str, body: Markup) -> Response {
    document(None, title, body, &[])
}

fn document(browser: Option<&Browser>, title: &str, body: Markup, scripts: &[&str]) -> Response {
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
                            @for p in b.pages.iter().filter(|p| p.nav && b.may_see(p)) {
                                @if p.section == b.page.section {
                                    a href=(p.path) aria-current="page" { (p.title) }
                                } @else {
                                    a href=(p.path) { (p.title) }
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
    crate::pages::html_page(status, markup.into_string(), CONSOLE_CSP, "same-origin")
}

/// A page that shows what failed instead of its content (never a blank page), with the status
/// the API would answer (an internal error is logged once, here, with its cause chain).
pub(crate) fn failed(browser: &Browser, e: &AppError) -> Response {
    let status = match e {
        AppError::NotFound(_) => StatusCode::NOT_FOUND,
        AppError::Forbidden(_) | AppError::MissingScope { .. } => StatusCode::FORBIDDEN,
        AppError::Invalid(_) => StatusCode::BAD_REQUEST,
        AppError::LimitReached { .. } => StatusCode::TOO_MANY_REQUESTS,
        _ => {
            tracing::error!(error = %plantd_model::error_chain(e), page = browser.page.path, "a console page failed");
            StatusCode::INTERNAL_SERVER_ERROR
        }
    };
    error_shell(browser, status, &e.to_string())
}

/// A page that shows an error instead of its content (never a blank page).
pub(crate) fn error_shell(browser: &Browser, status: StatusCode, message: &str) -> Response {
    let title = browser.page.title;
    let mut r = shell(
        browser,
        html! {
            h1 { (title) }
            p class="error" role="alert" { (message) }
        },
        &[],
    );
    *r.status_mut() = status;
    r
}

impl IntoResponse for NotShown {
    fn into_response(self) -> Response {
        match self {
            NotShown::Login(r) | NotShown::Elsewhere(r) | NotShown::Failed(r) => r,
            NotShown::Forbidden(browser, why) => error_shell(&browser, StatusCode::FORBIDDEN, why),
        }
    }
}
