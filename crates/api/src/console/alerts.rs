//! Alerts (filtered by status and severity, acknowledge and resolve, live) and alert rules
//! (list with enable, disable, edit and delete; a form to create one).

use axum::extract::{RawQuery, State};
use axum::response::Response;
use maud::html;
use plantd_app::alerts::AlertFilter;
use plantd_app::fleet::DeviceFilter;
use plantd_model::Scope;
use plantd_model::alert::{AlertStatus, Severity};
use plantd_model::page::Page;
use serde::Deserialize;

use super::browser::Browser;
use super::kit::{ALL, OrPage, alert_table, pager, severity_badge};
use super::layout::shell;
use crate::state::AppState;

#[derive(Deserialize, Default)]
struct AlertsQuery {
    status: Option<String>,
    severity: Option<String>,
    page: Option<String>,
}

/// Alerts on one page of the alerts list.
const ALERTS_PER_PAGE: u32 = 100;

/// Alerts, filtered by status and severity, with acknowledge and resolve; live.
pub(crate) async fn alerts(
    State(state): State<AppState>,
    browser: Browser,
    RawQuery(raw): RawQuery,
) -> Result<Response, Response> {
    let q: AlertsQuery =
        serde_urlencoded::from_str(raw.as_deref().unwrap_or_default()).unwrap_or_default();
    let status = q.status.as_deref().and_then(AlertStatus::parse);
    let severity = q.severity.as_deref().and_then(Severity::parse);
    let filter = AlertFilter {
        status,
        severity,
        start: None,
        end: None,
    };
    let wanted: u32 = q
        .page
        .as_deref()
        .and_then(|p| p.parse().ok())
        .unwrap_or(1)
        .max(1);
    let fetch = |page: u32| {
        state.app.alerts(
            browser.org_id(),
            &filter,
            Page {
                page,
                per_page: ALERTS_PER_PAGE,
            },
        )
    };
    let mut list = fetch(wanted).await.or_page(&browser)?;
    let pages = (list.total.div_ceil(u64::from(ALERTS_PER_PAGE))).max(1) as u32;
    let page = wanted.min(pages);
    if page != wanted {
        list = fetch(page).await.or_page(&browser)?;
    }
    let write = browser.may(Scope::WriteAlerts);
    let body = html! {
        div id="alerts-page" {
            h1 { "Alerts" }
            form class="filters" method="get" action="/alerts" {
                label for="f-status" { "Status" }
                select id="f-status" name="status" {
                    option value="" { "any" }
                    @for s in ["active", "acknowledged", "resolved"] {
                        option value=(s) selected[q.status.as_deref() == Some(s)] { (s) }
                    }
                }
                label for="f-severity" { "Severity" }
                select id="f-severity" name="severity" {
                    option value="" { "any" }
                    @for s in ["critical", "warning", "info"] {
                        option value=(s) selected[q.severity.as_deref() == Some(s)] { (s) }
                    }
                }
                button type="submit" { "Filter" }
            }
            p class="quiet" { (list.total) " alerts, newest first; new ones appear here as they happen." }
            (alert_table(&list.items, write))
            (pager("/alerts", &[("status", q.status.as_deref().unwrap_or_default()), ("severity", q.severity.as_deref().unwrap_or_default())], page as usize, pages as usize))
        }
    };
    Ok(shell(&browser, body, &[]))
}

/// The devices a rule form offers.
const RULE_DEVICES: Page = Page {
    page: 1,
    per_page: 200,
};

/// Alert rules: list with enable/disable, edit and delete; a form to create one.
pub(crate) async fn rules(
    State(state): State<AppState>,
    browser: Browser,
) -> Result<Response, Response> {
    let org = browser.org_id();
    let loaded = async {
        Ok::<_, plantd_app::AppError>((
            state.app.alert_rules(org).await?,
            state.app.data_sources(org).await?,
            state.app.groups(org, ALL).await?.items,
            state
                .app
                .devices(org, DeviceFilter::default(), RULE_DEVICES)
                .await?,
        ))
    }
    .await;
    let (rules, sources, groups, devices) = loaded.or_page(&browser)?;
    let write = browser.may(Scope::WriteAlerts);
    // What a rule can watch: data sources, device groups and devices (the first
    // RULE_DEVICES.per_page by name; any other through the API).
    let watched: Vec<(&str, &str, &str)> = sources
        .iter()
        .map(|s| ("Data sources", s.id.as_str(), s.name.as_str()))
        .chain(
            groups
                .iter()
                .map(|g| ("Device groups", g.id.as_str(), g.name.as_str())),
        )
        .chain(
            devices
                .items
                .iter()
                .map(|d| ("Devices", d.id.as_str(), d.name.as_str())),
        )
        .collect();
    let source_name = |id: &str| {
        watched
            .iter()
            .find(|(_, w, _)| *w == id)
            .map_or(id.to_string(), |(_, _, name)| name.to_string())
    };
    let rule_form = |rule: Option<&plantd_model::alert::AlertRule>| {
        let prefix = rule.map_or("new".to_string(), |r| r.id.clone());
        let id = |f: &str| format!("{prefix}-{f}");
        html! {
            form class="api-form rule-form"
                data-method=(if rule.is_some() { "PUT" } else { "POST" })
                data-action=(rule.map_or("/v1/alert-rules".to_string(), |r| format!("/v1/alert-rules/{}", r.id))) {
                label for=(id("name")) { "Name" }
                input id=(id("name")) name="name" required maxlength="200" value=(rule.map_or("", |r| r.name.as_str()));
                p class="field-error" data-error-for="name" {}
                label for=(id("severity")) { "Severity" }
                select id=(id("severity")) name="severity" {
                    @for s in ["critical", "warning", "info"] {
                        option value=(s) selected[rule.is_some_and(|r| r.severity.as_str() == s)] { (s) }
                    }
                }
                label for=(id("ds")) { "Watches (a data source, a device group or a device)" }
                select id=(id("ds")) name="data_source_id" required {
                    @for kind in ["Data sources", "Device groups", "Devices"] {
                        @if watched.iter().any(|(k, _, _)| *k == kind) {
                            optgroup label=(kind) {
                                @for (_, w, name) in watched.iter().filter(|(k, _, _)| *k == kind) {
                                    option value=(w) selected[rule.is_some_and(|r| r.data_source_id == *w)] { (name) }
                                }
                            }
                        }
                    }
                }
                p class="field-error" data-error-for="data_source_id" {}
                label for=(id("asset")) { "Asset (empty: every asset of the source or device)" }
                input id=(id("asset")) name="asset_id" maxlength="128" value=(rule.and_then(|r| r.asset_id.as_deref()).unwrap_or(""));
                p class="field-error" data-error-for="asset_id" {}
                fieldset {
                    legend { "Condition" }
                    label for=(id("tag")) { "Tag" }
                    input id=(id("tag")) name="condition.tag_name" required maxlength="128" value=(rule.map_or("", |r| r.condition.tag_name.as_str()));
                    p class="field-error" data-error-for="condition.tag_name" {}
                    label for=(id("op")) { "Operator" }
                    select id=(id("op")) name="condition.operator" {
                        @for (op, text) in [("gt", ">"), ("gte", "≥"), ("lt", "<"), ("lte", "≤"), ("eq", "="), ("neq", "≠")] {
                            option value=(op) selected[rule.is_some_and(|r| r.condition.operator.as_str() == op)] { (text) " (" (op) ")" }
                        }
                    }
                    label for=(id("value")) { "Value" }
                    input id=(id("value")) name="condition.value" data-type="number" type="number" step="any" required value=(rule.map_or(String::new(), |r| r.condition.value.to_string()));
                    p class="field-error" data-error-for="condition.value" {}
                    label for=(id("duration")) { "For at least (seconds)" }
                    input id=(id("duration")) name="condition.duration_seconds" data-type="number" type="number" min="0" max="604800" required value=(rule.map_or("0".to_string(), |r| r.condition.duration_seconds.to_string()));
                    p class="field-error" data-error-for="condition.duration_seconds" {}
                }
                button type="submit" class="primary" { (if rule.is_some() { "Save" } else { "Create rule" }) }
                p class="form-error" role="alert" {}
            }
        }
    };
    let body = html! {
        h1 { "Alert rules" }
        @if rules.is_empty() { p class="quiet" { "No rules yet." } }
        @else {
            table class="list" {
                thead { tr { th scope="col" { "Name" } th scope="col" { "Severity" } th scope="col" { "Condition" } th scope="col" { "Source / asset" } th scope="col" { "State" } @if write { th scope="col" { "Actions" } } } }
                tbody {
                    @for r in &rules {
                        tr {
                            td { (r.name) }
                            td { (severity_badge(r.severity)) }
                            td { code { (r.condition.tag_name) " " (r.condition.operator.as_str()) " " (r.condition.value) } " for " (r.condition.duration_seconds) " s" }
                            td { (source_name(&r.data_source_id)) " / " (r.asset_id.as_deref().unwrap_or("every asset")) }
                            td { @if r.enabled { span class="badge ok" { "● enabled" } } @else { span class="badge stale" { "○ disabled" } } }
                            @if write {
                                td class="actions" {
                                    form class="api-form inline" data-method="POST" data-action=(format!("/v1/alert-rules/{}/{}", r.id, if r.enabled { "disable" } else { "enable" })) {
                                        button type="submit" { (if r.enabled { "Disable" } else { "Enable" }) }
                                    }
                                    form class="api-form inline" data-method="DELETE" data-action=(format!("/v1/alert-rules/{}", r.id)) data-confirm=(format!("Delete the rule “{}”?", r.name)) {
                                        button type="submit" class="danger" { "Delete" }
                                    }
                                    details { summary { "Edit" } (rule_form(Some(r))) }
                                }
                            }
                        }
                    }
                }
            }
        }
        @if write {
            section {
                h2 { "New rule" }
                @if sources.is_empty() {
                    p class="quiet" { "Rules watch a data source: " a href="/data-sources" { "add one first" } "." }
                } @else {
                    (rule_form(None))
                }
            }
        }
    };
    Ok(shell(&browser, body, &[]))
}
