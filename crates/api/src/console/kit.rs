//! What the console's pages share, so that no page imports another: reading a use case's answer
//! or showing why it failed ([`OrPage`]), form fields, times, values, badges and the alert
//! table (the overview and the alerts page show it).

use axum::extract::{FromRequestParts, Path};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::Response;
use maud::{Markup, html};
use plantd_app::AppResult;
use plantd_model::alert::{Alert, AlertStatus, Severity};
use plantd_model::page::Page;

use super::browser::Browser;
use super::layout::failed;

/// The `{id}` of a page's path; one that is not text (`%FF`) is a missing page, answered as a
/// page rather than axum's plain-text refusal.
pub(crate) struct PathId(pub(crate) String);

impl<S: Send + Sync> FromRequestParts<S> for PathId {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        Path::<String>::from_request_parts(parts, state)
            .await
            .map(|Path(id)| PathId(id))
            .map_err(|_| {
                crate::pages::error_page(
                    StatusCode::NOT_FOUND,
                    "Not found",
                    "there is no such page on this server",
                )
            })
    }
}

/// Every row of a list that a page shows whole.
pub(crate) const ALL: Page = Page {
    page: 1,
    per_page: 1000,
};

/// A use case's answer, or the page saying why it failed (never a blank page), for handlers
/// that answer `Result<Response, Response>`: `app.thing(org).await.or_page(&browser)?`.
pub(crate) trait OrPage<T> {
    // The error is the page that is answered: boxing it would only move it.
    #[allow(clippy::result_large_err)]
    fn or_page(self, browser: &Browser) -> Result<T, Response>;
}

impl<T> OrPage<T> for AppResult<T> {
    fn or_page(self, browser: &Browser) -> Result<T, Response> {
        self.map_err(|e| failed(browser, &e))
    }
}

/// A field with its label and the place its error appears (`console.js` fills it from the
/// API's `details`).
pub(crate) fn field(id: &str, name: &str, label: &str, attrs: Markup) -> Markup {
    html! {
        label for=(id) { (label) }
        (attrs)
        p class="field-error" data-error-for=(name) {}
    }
}

/// An input of `kind` (`text`, `password`, `number`, or `list`: comma-separated values).
pub(crate) fn input(id: &str, name: &str, kind: &str, required: bool, placeholder: &str) -> Markup {
    match kind {
        "number" => html! {
            input id=(id) name=(name) type="number" data-type="number" required[required] placeholder=(placeholder);
        },
        "list" => html! {
            input id=(id) name=(name) type="text" data-type="list" required[required] placeholder=(placeholder);
        },
        _ => html! {
            input id=(id) name=(name) type=(kind) required[required] placeholder=(placeholder);
        },
    }
}

/// A form that sends one request to `/v1` and reloads the page (`console.js`): a button, and
/// `confirm` asked first when given.
pub(crate) fn action_button(
    method: &str,
    action: &str,
    label: &str,
    class: &str,
    confirm: Option<String>,
) -> Markup {
    html! {
        form class="api-form inline" data-method=(method) data-action=(action) data-confirm=[confirm] {
            button type="submit" class=(class) { (label) }
        }
    }
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

/// A value as an operator reads it: whole numbers without decimals, others to three places.
pub(crate) fn format_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// Severity as text, shape and colour (never colour alone).
pub(crate) fn severity_badge(s: Severity) -> Markup {
    let (shape, class) = match s {
        Severity::Critical => ("▲", "critical"),
        Severity::Warning => ("◆", "warning"),
        Severity::Info => ("●", "info"),
    };
    html! { span class=(format!("badge {class}")) { (shape) " " (s.as_str()) } }
}

fn status_badge(s: AlertStatus) -> Markup {
    let class = match s {
        AlertStatus::Active => "active",
        AlertStatus::Acknowledged => "acknowledged",
        AlertStatus::Resolved => "ok",
    };
    html! { span class=(format!("badge {class}")) { (s.as_str()) } }
}

/// Alerts as rows; with `actions`, acknowledge (with a note) and resolve forms.
pub(crate) fn alert_table(alerts: &[Alert], actions: bool) -> Markup {
    html! {
        table class="list" id="alerts-table" {
            thead {
                tr {
                    th scope="col" { "Severity" }
                    th scope="col" { "Status" }
                    th scope="col" { "Alert" }
                    th scope="col" { "Asset" }
                    th scope="col" class="num" { "Value" }
                    th scope="col" { "Triggered" }
                    th scope="col" { "Acknowledged" }
                    @if actions { th scope="col" { "Actions" } }
                }
            }
            tbody {
                @for a in alerts {
                    tr data-alert-id=(a.id) data-status=(a.status.as_str()) {
                        td { (severity_badge(a.severity)) }
                        td { (status_badge(a.status)) }
                        td { (a.headline()) @if let Some(m) = &a.message { br; small { (m) } } }
                        td { (a.asset_id) @if let Some(t) = &a.tag_name { " / " (t) } }
                        td class="num" { @if let Some(v) = a.value { (format_value(v)) } }
                        td { (time(a.triggered_at)) }
                        td {
                            @if let Some(at) = a.acknowledged_at {
                                (time(at))
                                @if let Some(by) = &a.acknowledged_by { br; small { "by " (by) } }
                                @if let Some(n) = &a.note { br; small class="note" { "“" (n) "”" } }
                            } @else { "–" }
                        }
                        @if actions {
                            td class="actions" {
                                @if a.status == AlertStatus::Active {
                                    form class="api-form inline" data-method="POST" data-action=(format!("/v1/alerts/{}/acknowledge", a.id)) {
                                        label for=(format!("note-{}", a.id)) class="visually-hidden" { "Note" }
                                        input id=(format!("note-{}", a.id)) name="note" placeholder="Note (optional)" maxlength="1000";
                                        button type="submit" { "Acknowledge" }
                                        p class="form-error" role="alert" {}
                                    }
                                }
                                @if a.status != AlertStatus::Resolved {
                                    form class="api-form inline" data-method="POST" data-action=(format!("/v1/alerts/{}/resolve", a.id)) {
                                        button type="submit" { "Resolve" }
                                        p class="form-error" role="alert" {}
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Links to the previous and next pages of a list at `path`, keeping its `params` (a page
/// number is added); nothing when there is one page.
pub(crate) fn pager(path: &str, params: &[(&str, &str)], page: usize, pages: usize) -> Markup {
    let href = |n: usize| {
        let mut q: Vec<(&str, String)> = params
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (*k, v.to_string()))
            .collect();
        if n > 1 {
            q.push(("page", n.to_string()));
        }
        match serde_urlencoded::to_string(&q) {
            Ok(s) if !s.is_empty() => format!("{path}?{s}"),
            _ => path.to_string(),
        }
    };
    html! {
        @if pages > 1 {
            nav class="pager" aria-label="Pages" {
                @if page > 1 {
                    a href=(href(1)) { "« First" }
                    a href=(href(page - 1)) rel="prev" { "‹ Previous" }
                }
                span aria-current="page" { "Page " (page) " of " (pages) }
                @if page < pages {
                    a href=(href(page + 1)) rel="next" { "Next ›" }
                    a href=(href(pages)) { "Last »" }
                }
            }
        }
    }
}

/// A size in bytes as a person reads it: `512 B`, `3.4 KiB`, `12.0 MiB`, `1.2 GiB`.
pub(crate) fn byte_size(n: u64) -> String {
    const KIB: f64 = 1024.0;
    let x = n as f64;
    if x >= KIB * KIB * KIB {
        format!("{:.1} GiB", x / (KIB * KIB * KIB))
    } else if x >= KIB * KIB {
        format!("{:.1} MiB", x / (KIB * KIB))
    } else if x >= KIB {
        format!("{:.1} KiB", x / KIB)
    } else {
        format!("{n} B")
    }
}
