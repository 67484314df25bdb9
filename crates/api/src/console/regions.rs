//! Regions (issue 33): the organization's primary region and residency, the regions the
//! deployment serves with their health (peers probed when the page is asked for) and
//! certifications, and how far each replica of the replicated data is behind. Shown by every
//! region, so a person on the wrong one sees where their organization's data lives.

use axum::extract::State;
use axum::response::Response;
use maud::{Markup, html};

use super::browser::Browser;
use super::kit::{OrPage, maybe_time};
use super::layout::shell;
use crate::state::AppState;

fn state_badge(status: &str) -> Markup {
    let (shape, class) = match status {
        "healthy" | "synced" | "active" => ("●", "ok"),
        "degraded" | "lagging" => ("◆", "warning"),
        "unavailable" | "unknown" => ("○", "stale"),
        _ => ("▲", "critical"),
    };
    html! { span class=(format!("badge {class}")) { (shape) " " (status) } }
}

pub(crate) async fn page(
    State(state): State<AppState>,
    browser: Browser,
) -> Result<Response, Response> {
    let app = &state.app;
    let view = app
        .org_region_view(browser.org_id())
        .await
        .or_page(&browser)?;
    let replication = app
        .replication_status(browser.org_id())
        .await
        .or_page(&browser)?;
    let health = app.regions_health().await;
    let regions = app.regions();
    let here = app.region_settings().region;
    let targets: Vec<_> = view
        .available_regions
        .iter()
        .filter(|r| **r != view.primary_region)
        .collect();
    let may_move = browser.may(plantd_model::Scope::Admin)
        && browser.caller.tier == plantd_model::tier::Tier::Enterprise
        && view.primary_region == here
        && !targets.is_empty()
        && !view
            .migration
            .as_ref()
            .is_some_and(|m| m.status == "scheduled" || m.status == "running");
    let body = html! {
        h1 { "Regions" }
        p {
            "This server serves " strong { (here) } ". "
            (browser.org_name) "'s data lives in " strong id="primary-region" { (view.primary_region) }
            @if view.primary_region != here {
                " (" a href=(view.endpoints.dashboard.clone().unwrap_or_default()) { "open its console there" } ")"
            }
            "; strict data residency is "
            @if view.data_residency_enabled { "on" } @else { "off" } "."
        }
        table class="list" id="regions" {
            thead { tr { th scope="col" { "Region" } th scope="col" { "Location" } th scope="col" { "Status" } th scope="col" { "Latency" } th scope="col" { "Certifications" } th scope="col" { "API" } } }
            tbody {
                @for r in &regions {
                    @let probed = health.iter().find(|h| h.id == r.id);
                    tr data-region=(r.id) {
                        td { (r.name) " (" code { (r.id) } ")" @if r.current { " · this server" } }
                        td { (r.location) }
                        td { (state_badge(probed.map_or(r.status, |h| h.status))) }
                        td { @match probed.and_then(|h| h.latency_ms) { Some(ms) => { (ms) " ms" }, None => "–" } }
                        td { @if r.certifications.is_empty() { "–" } @else { (r.certifications.join(", ")) } }
                        td { @match &r.endpoints.api { Some(api) => code { (api) }, None => "–" } }
                    }
                }
            }
        }
        section {
            h2 { "Replication" }
            p { "Organization settings, users, roles and API keys reach every region; telemetry, alerts, dashboards and the rest stay in the primary region." }
            @if replication.replicas.is_empty() {
                p id="no-replicas" { "No other region serves this deployment." }
            } @else {
                table class="list" id="replicas" {
                    thead { tr { th scope="col" { "Replica" } th scope="col" { "Status" } th scope="col" { "Lag" } th scope="col" { "Pending" } th scope="col" { "Last sync" } } }
                    tbody {
                        @for r in &replication.replicas {
                            tr {
                                td { code { (r.region) } }
                                td { (state_badge(r.status)) }
                                td { (r.lag_seconds) " s" }
                                td { (r.pending) }
                                td { (maybe_time(r.last_sync)) }
                            }
                        }
                    }
                }
            }
        }
        section id="migration" {
            h2 { "Migration" }
            @match &view.migration {
                Some(m) => {
                    p {
                        "Move from " code { (m.source_region) } " to " code { (m.target_region) } ": "
                        (state_badge(match m.status.as_str() { "completed" => "synced", "running" | "scheduled" => "lagging", other => other }))
                        " " strong class="migration-status" { (m.status) }
                        @if m.status == "running" { " (" (m.progress) " %; the data is read-only until it ends)" }
                        @if m.status == "scheduled" { " for " (maybe_time(Some(m.migration_time))) }
                        @if let Some(f) = m.finished_at { "; ended " (maybe_time(Some(f))) }
                        "."
                    }
                    @if let Some(e) = &m.error { p class="form-error" { (e) } }
                }
                None => p { "This organization never moved." }
            }
            @if may_move {
                form class="api-form" data-method="PUT" data-action="/api/v1/organizations/current/region"
                    data-confirm="Move the organization's data? It is read-only while it moves." {
                    label for="target-region" { "Move the data to" }
                    select id="target-region" name="region" {
                        @for r in &targets { option value=(r) { (r) } }
                    }
                    p class="field-error" data-error-for="region" {}
                    button type="submit" { "Move now" }
                    p class="form-error" role="alert" {}
                }
            }
        }
    };
    Ok(shell(&browser, body, &[]))
}
