//! The overview: the organization's assets with their latest values, and the open alerts.

use axum::extract::State;
use axum::response::Response;
use maud::html;
use plantd_app::alerts::AlertFilter;
use plantd_model::alert::AlertStatus;
use plantd_model::page::Page;

use super::browser::Browser;
use super::kit::{OrPage, alert_table, format_value, time};
use super::layout::shell;
use crate::state::AppState;

/// Assets with their latest values, and the open alerts.
pub(crate) async fn page(
    State(state): State<AppState>,
    browser: Browser,
) -> Result<Response, Response> {
    let app = &state.app;
    let org = browser.org_id();
    let loaded = async {
        let assets = app.assets(org).await?;
        let mut latest = Vec::with_capacity(assets.len());
        for (asset, _) in &assets {
            latest.push((asset.clone(), app.latest_values(org, asset, None).await?));
        }
        let mut open = Vec::new();
        for status in [AlertStatus::Active, AlertStatus::Acknowledged] {
            let filter = AlertFilter {
                status: Some(status),
                severity: None,
                start: None,
                end: None,
            };
            let page = Page {
                page: 1,
                per_page: 100,
            };
            open.extend(app.alerts(org, &filter, page).await?.items);
        }
        let units = app.tag_units(org).await?;
        Ok::<_, plantd_app::AppError>((latest, open, units))
    }
    .await;
    let (latest, open, units) = loaded.or_page(&browser)?;
    let unit = |asset: &str, tag: &str| units.get(&(asset.to_string(), tag.to_string())).cloned();
    let body = html! {
        h1 { "Overview" }
        section aria-labelledby="open-alerts" {
            h2 id="open-alerts" { "Open alerts (" (open.len()) ")" }
            @if open.is_empty() {
                p class="quiet" { "No open alerts." }
            } @else {
                (alert_table(&open, false))
            }
        }
        section aria-labelledby="assets" id="overview" {
            h2 id="assets" { "Assets" }
            @if latest.is_empty() {
                p class="quiet" { "No data yet. Add a data source, or send points to " code { "POST /v1/telemetry" } "." }
            }
            div class="cards" {
                @for (asset, values) in &latest {
                    article class="card" data-asset=(asset) {
                        h3 { (asset) }
                        table class="list compact" {
                            thead { tr { th scope="col" { "Tag" } th scope="col" class="num" { "Value" } th scope="col" { span class="visually-hidden" { "Unit" } } th scope="col" { "Updated" } } }
                            tbody {
                                @for v in values {
                                    tr data-asset=(asset) data-tag=(v.tag_name) class=[v.stale.then_some("stale")] {
                                        th scope="row" { (v.tag_name) }
                                        td class="num value" { (format_value(v.value)) }
                                        td class="unit" { @if let Some(u) = unit(asset, &v.tag_name) { (u) } }
                                        td class="age" {
                                            (time(v.timestamp))
                                            @if v.stale { " " span class="badge stale" title="its source no longer confirms it" { "◌ stale" } }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    Ok(shell(&browser, body, &[]))
}
