//! The overview: the open alerts, and the organization's tags with their latest values, what
//! needs attention first (alarms, then stale values), searched and paged: a plant of 100,000
//! tags sends one page of them, and the page follows live only what it shows.

use axum::extract::{RawQuery, State};
use axum::response::Response;
use maud::html;
use plantd_app::overview::{OverviewQuery, OverviewRow, TagState};
use serde::Deserialize;

use super::browser::Browser;
use super::kit::{OrPage, alert_table, format_value, pager, severity_badge, time};
use super::layout::shell;
use crate::state::AppState;

/// Open alerts shown on the overview (all of them on the alerts page).
const OPEN_ALERTS_SHOWN: usize = 20;

#[derive(Deserialize, Default)]
struct Params {
    q: Option<String>,
    abnormal: Option<String>,
    page: Option<String>,
}

/// Open alerts, and one page of tags with their latest values.
pub(crate) async fn page(
    State(state): State<AppState>,
    browser: Browser,
    RawQuery(raw): RawQuery,
) -> Result<Response, Response> {
    let p: Params =
        serde_urlencoded::from_str(raw.as_deref().unwrap_or_default()).unwrap_or_default();
    let search = p.q.unwrap_or_default();
    let abnormal_only = p.abnormal.as_deref().is_some_and(|v| !v.is_empty());
    let query = OverviewQuery {
        search: Some(search.clone()),
        abnormal_only,
        page: p.page.and_then(|n| n.parse().ok()).unwrap_or(1),
    };
    let o = state
        .app
        .overview(browser.org_id(), &query)
        .await
        .or_page(&browser)?;
    // The page's rows as cards, one per asset (an asset continued from the previous page says
    // so).
    let mut cards: Vec<(&str, Vec<&OverviewRow>)> = Vec::new();
    for row in &o.rows {
        match cards.last_mut() {
            Some((asset, rows)) if *asset == row.asset_id => rows.push(row),
            _ => cards.push((&row.asset_id, vec![row])),
        }
    }
    let first_row = (o.page - 1) * plantd_app::overview::OVERVIEW_PAGE_ROWS;
    let continued = |i: usize| i == 0 && o.page > 1;
    let abnormal_flag = if abnormal_only { "1" } else { "" };
    let body = html! {
        h1 { "Overview" }
        section aria-labelledby="open-alerts" {
            h2 id="open-alerts" { "Open alerts (" (o.open_alerts.len()) ")" }
            @if o.open_alerts.is_empty() {
                p class="quiet" { "No open alerts." }
            } @else {
                (alert_table(&o.open_alerts[..o.open_alerts.len().min(OPEN_ALERTS_SHOWN)], false))
                @if o.open_alerts.len() > OPEN_ALERTS_SHOWN {
                    p { "The newest " (OPEN_ALERTS_SHOWN) " are shown: " a href="/alerts?status=active" { "all open alerts" } "." }
                }
            }
        }
        section aria-labelledby="assets" id="overview" data-complete=[o.complete.then_some("true")] {
            h2 id="assets" { "Assets" }
            @if o.tags == 0 {
                p class="quiet" { "No data yet. Add a data source, or send points to " code { "POST /v1/telemetry" } "." }
            } @else {
                p class="overview-summary" {
                    span { (o.assets) " assets" } span { (o.tags) " tags" }
                    @if o.in_alarm > 0 { span { (severity_badge(plantd_model::alert::Severity::Critical)) " " (o.in_alarm) " in alarm" } }
                    @if o.stale > 0 { span { span class="badge stale" { "◌ stale" } " " (o.stale) } }
                }
                form class="filters" method="get" action="/" role="search" {
                    label for="overview-q" { "Search" }
                    input id="overview-q" type="search" name="q" value=(search) placeholder="asset or tag" maxlength="128";
                    label class="check" for="overview-abnormal" {
                        input id="overview-abnormal" type="checkbox" name="abnormal" value="1" checked[abnormal_only];
                        " Only alarms and stale values"
                    }
                    button type="submit" { "Show" }
                }
                p class="quiet" aria-live="polite" {
                    @if o.matching == 0 {
                        "No tag matches."
                    } @else {
                        "Tags " (first_row + 1) "–" (first_row + o.rows.len()) " of " (o.matching)
                        @if !o.complete { " matching" }
                        "; alarms first, then stale values; live."
                    }
                }
            }
            div class="cards" {
                @for (i, (asset, rows)) in cards.iter().enumerate() {
                    @let worst = rows.first().map(|r| r.state).unwrap_or(TagState::Normal);
                    article class=(card_class(worst)) data-asset=(asset) {
                        h3 { (asset) @if continued(i) { " " small class="quiet" { "(continued)" } } }
                        table class="list compact" {
                            thead { tr { th scope="col" { "Tag" } th scope="col" class="num" { "Value" } th scope="col" { span class="visually-hidden" { "Unit" } } th scope="col" { "Updated" } } }
                            tbody {
                                @for r in rows {
                                    @let v = &r.reading;
                                    tr data-asset=(asset) data-tag=(v.tag_name) class=[row_class(r.state)] {
                                        th scope="row" { (v.tag_name) }
                                        td class="num value" { (format_value(v.value)) }
                                        td class="unit" { @if let Some(u) = &r.unit { (u) } }
                                        td class="age" {
                                            (time(v.timestamp))
                                            @if let TagState::Alarm(rank) = r.state { " " (severity_badge(rank.severity())) }
                                            @if v.stale { " " span class="badge stale" title="its source no longer confirms it" { "◌ stale" } }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            (pager("/", &[("q", search.as_str()), ("abnormal", abnormal_flag)], o.page, o.pages))
        }
    };
    Ok(shell(&browser, body, &[]))
}

fn row_class(s: TagState) -> Option<&'static str> {
    match s {
        TagState::Alarm(_) => Some("alarm"),
        TagState::Stale => Some("stale"),
        TagState::Normal => None,
    }
}

fn card_class(s: TagState) -> &'static str {
    match s {
        TagState::Alarm(_) => "card alarm",
        TagState::Stale => "card stale",
        TagState::Normal => "card",
    }
}
