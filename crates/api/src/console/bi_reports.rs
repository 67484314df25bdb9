//! The BI administration pages: scheduled reports (create, run now, enable, delete) with each
//! report's run history, and embedding (turn it on, the origins that may frame dashboards, a
//! guest token issued for a dashboard with the copyable iframe snippet, drawn by `bi.js`).
//! Every change goes through `/v1` from the forms, as on the other pages.

use axum::extract::State;
use axum::response::Response;
use maud::html;
use plantd_model::page::Page;

use super::browser::Browser;
use super::kit::{ALL, OrPage, PathId, action_button, field, time};
use super::layout::{shell, shell_titled};
use crate::state::AppState;

const SCRIPTS: &[&str] = &["bi.js"];

/// The reports, with the form that schedules one.
pub(crate) async fn reports(
    State(state): State<AppState>,
    browser: Browser,
) -> Result<Response, Response> {
    let org = browser.org_id();
    let reports = state.app.reports(org).await.or_page(&browser)?;
    let dashboards = state
        .app
        .dashboards(org, ALL)
        .await
        .or_page(&browser)?
        .items;
    let name_of = |id: &str| {
        dashboards
            .iter()
            .find(|d| d.id == id)
            .map_or_else(|| format!("{id} (deleted)"), |d| d.name.clone())
    };
    let smtp = state.app.config().smtp.is_some();
    let body = html! {
        h1 { "Reports" }
        p class="hint" {
            "A report mails a dashboard as PDF or CSV on a cron schedule (UTC), read under the row-level security of the person who created it."
        }
        @if !smtp {
            p class="notice" { "No SMTP relay is configured on this server ([smtp] in the configuration): runs are recorded as failed until one is." }
        }
        @if reports.is_empty() {
            p class="quiet" { "No reports yet." }
        } @else {
            table class="list" id="reports" {
                thead { tr { th scope="col" { "Name" } th scope="col" { "Dashboard" } th scope="col" { "Schedule (UTC)" } th scope="col" { "Format" } th scope="col" { "Recipients" } th scope="col" { "Next run" } th scope="col" { "Actions" } } }
                tbody {
                    @for r in &reports {
                        tr {
                            td { a href=(format!("/bi/reports/{}", r.id)) { (r.name) } }
                            td { (name_of(&r.dashboard_id)) }
                            td { code { (r.schedule) } }
                            td { (r.format.as_str()) }
                            td { (r.recipients.join(", ")) }
                            td {
                                @match r.next_run_at {
                                    Some(t) if r.enabled => (time(t)),
                                    _ => span class="badge" { "disabled" },
                                }
                            }
                            td class="actions" {
                                form class="api-form inline" data-method="POST" data-action=(format!("/v1/bi/reports/{}/run", r.id)) data-redirect=(format!("/bi/reports/{}", r.id)) {
                                    button type="submit" { "Run now" }
                                }
                                form class="api-form inline" data-method="PUT" data-action=(format!("/v1/bi/reports/{}", r.id)) {
                                    input type="hidden" name="enabled" data-type="boolean" value=(if r.enabled { "false" } else { "true" });
                                    button type="submit" { (if r.enabled { "Disable" } else { "Enable" }) }
                                }
                                (action_button("DELETE", &format!("/v1/bi/reports/{}", r.id), "Delete", "danger",
                                    Some(format!("Delete the report “{}” and its run history?", r.name))))
                            }
                        }
                    }
                }
            }
        }
        section {
            h2 { "New report" }
            @if dashboards.is_empty() {
                p class="hint" { "Create a dashboard first: a report mails one." }
            } @else {
                form class="api-form" data-method="POST" data-action="/v1/bi/reports" data-redirect="/bi/reports/{id}" {
                    (field("report-name", "name", "Name", html! { input id="report-name" name="name" required maxlength="200"; }))
                    label for="report-dashboard" { "Dashboard" }
                    select id="report-dashboard" name="dashboard_id" {
                        @for d in &dashboards { option value=(d.id) { (d.name) } }
                    }
                    p class="field-error" data-error-for="dashboard_id" {}
                    (field("report-schedule", "schedule", "Schedule: minute hour day month weekday (UTC)", html! {
                        input id="report-schedule" name="schedule" required value="0 6 * * MON-FRI" spellcheck="false";
                    }))
                    label for="report-format" { "Format" }
                    select id="report-format" name="format" {
                        option value="pdf" { "PDF (A4)" }
                        option value="csv" { "CSV" }
                    }
                    p class="field-error" data-error-for="format" {}
                    (field("report-recipients", "recipients", "Recipients (comma-separated)", html! {
                        input id="report-recipients" name="recipients" data-type="list" required placeholder="ops@plant.example, lead@plant.example";
                    }))
                    button type="submit" class="primary" { "Schedule" }
                    p class="form-error" role="alert" {}
                }
            }
        }
    };
    Ok(shell(&browser, body, SCRIPTS))
}

/// One report: what it sends when, and its runs.
pub(crate) async fn report(
    State(state): State<AppState>,
    browser: Browser,
    PathId(id): PathId,
) -> Result<Response, Response> {
    let org = browser.org_id();
    let r = state.app.report(org, &id).await.or_page(&browser)?;
    let runs = state
        .app
        .report_runs(
            org,
            &id,
            Page {
                page: 1,
                per_page: 50,
            },
        )
        .await
        .or_page(&browser)?;
    let dashboard = state.app.dashboard(org, &r.dashboard_id).await.ok();
    let body = html! {
        div class="page-head" {
            h1 { "Report: " (r.name) }
            form class="api-form inline" data-method="POST" data-action=(format!("/v1/bi/reports/{}/run", r.id)) {
                button type="submit" class="primary" { "Run now" }
            }
        }
        dl class="facts" {
            dt { "Dashboard" }
            dd {
                @match &dashboard {
                    Some(d) => a href=(format!("/dashboards/{}", d.id)) { (d.name) },
                    None => span class="error" { "deleted: runs fail until another is chosen" },
                }
            }
            dt { "Schedule (UTC)" } dd { code { (r.schedule) } }
            dt { "Format" } dd { (r.format.as_str()) }
            dt { "Recipients" } dd { (r.recipients.join(", ")) }
            dt { "Next run" }
            dd {
                @match r.next_run_at {
                    Some(t) if r.enabled => (time(t)),
                    _ => "disabled",
                }
            }
        }
        h2 { "Runs" }
        @if runs.items.is_empty() {
            p class="quiet" { "No runs yet." }
        } @else {
            table class="list" id="report-runs" {
                thead { tr { th scope="col" { "Started" } th scope="col" { "Trigger" } th scope="col" { "Status" } th scope="col" { "Size" } th scope="col" { "Recipients" } th scope="col" { "Finished" } } }
                tbody {
                    @for run in &runs.items {
                        tr {
                            td { (time(run.started_at)) }
                            td { (run.trigger.as_str()) }
                            td {
                                span class=(format!("badge {}", match run.status.as_str() { "success" => "ok", "error" => "critical", _ => "" })) { (run.status.as_str()) }
                                @if let Some(e) = &run.error { " " span class="hint" { (e) } }
                            }
                            td class="num" { @if let Some(n) = run.size_bytes { (n) " B" } }
                            td { (run.recipients.join(", ")) }
                            td { @if let Some(t) = run.finished_at { (time(t)) } }
                        }
                    }
                }
            }
        }
        p { a href="/bi/reports" { "All reports" } }
    };
    Ok(shell_titled(&browser, &r.name, body, SCRIPTS))
}

/// Embedding: the switch, the origins that may frame dashboards, and a guest token for a
/// dashboard with the snippet that frames it.
pub(crate) async fn embed(
    State(state): State<AppState>,
    browser: Browser,
) -> Result<Response, Response> {
    let org = browser.org_id();
    let config = state.app.bi_config(org).await.or_page(&browser)?;
    let dashboards = state
        .app
        .dashboards(org, ALL)
        .await
        .or_page(&browser)?
        .items;
    let ttl = state.app.config().guest_token_ttl.as_secs();
    let body = html! {
        h1 { "Embedded dashboards" }
        p class="hint" {
            "Another site frames a dashboard with a guest token that the site's server asks for (" code { "POST /v1/bi-embed/guest-token" } ", admin). "
            "A token lives " (ttl) " s, opens only its dashboards' widget data, under the member role's row-level security and its own conditions."
        }
        form class="api-form" data-method="PUT" data-action="/v1/bi/config" {
            h2 { "Settings" }
            label {
                input type="checkbox" name="bi_embed_enabled" checked[config.bi_embed_enabled];
                " Dashboards may be embedded"
            }
            p class="field-error" data-error-for="bi_embed_enabled" {}
            (field("embed-origins", "embed_allowed_origins", "Sites that may frame them (origins, comma-separated)", html! {
                input id="embed-origins" name="embed_allowed_origins" data-type="list" data-empty="send"
                    value=(config.embed_allowed_origins.join(", ")) placeholder="https://portal.example.com";
            }))
            button type="submit" { "Save" }
            p class="form-error" role="alert" {}
        }
        @if config.bi_embed_enabled {
            section {
                h2 { "Guest token and snippet" }
                @if dashboards.is_empty() {
                    p class="hint" { "No dashboards yet." }
                } @else {
                    // Drawn by bi.js: the answer's token becomes the snippet.
                    form id="guest-token" {
                        label for="embed-dashboard" { "Dashboard" }
                        select id="embed-dashboard" name="dashboard_id" {
                            @for d in &dashboards { option value=(d.id) { (d.name) } }
                        }
                        p class="field-error" data-error-for="dashboard_id" {}
                        (field("embed-clause", "rls[0].clause", "Row condition of the token (optional, SQL)", html! {
                            input id="embed-clause" name="clause" placeholder="asset_id = 'pump-1'";
                        }))
                        button type="submit" class="primary" { "Issue a guest token" }
                        p class="form-error" role="alert" {}
                    }
                    div id="embed-snippet" hidden {
                        p { "Expires " span id="embed-expires" {} ". Paste into the page that frames the dashboard:" }
                        textarea id="embed-code" rows="3" readonly spellcheck="false" {}
                        button type="button" id="embed-copy" { "Copy" }
                        " "
                        a id="embed-open" target="_blank" rel="noopener" { "Open the embedded view" }
                    }
                }
            }
        }
    };
    Ok(shell(&browser, body, SCRIPTS))
}
