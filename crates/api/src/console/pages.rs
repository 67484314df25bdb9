//! The console's operating pages: the overview of assets (latest values, open alerts),
//! dashboards (list, view, editor), alerts and alert rules. Lists are rendered here; changes go
//! through `/v1` from the pages' forms (`console.js`), so the API's validation and audit apply.

use axum::extract::{Path, RawQuery, State};
use axum::response::Response;
use maud::{Markup, html};
use plantd_model::Scope;
use plantd_model::alert::{Alert, AlertStatus, Severity};
use plantd_model::page::Page;
use plantd_store::AlertFilter;
use serde::Deserialize;

use super::browser::Browser;
use super::layout::{failed, shell, time};
use crate::state::AppState;

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

/// Assets with their latest values, and the open alerts.
pub(crate) async fn overview(State(state): State<AppState>, browser: Browser) -> Response {
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
        Ok::<_, plantd_app::AppError>((latest, open))
    }
    .await;
    let (latest, alerts) = match loaded {
        Ok(x) => x,
        Err(e) => return failed(&browser, "Overview", "/", &e),
    };
    let open: Vec<&Alert> = alerts.iter().collect();
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
                            thead { tr { th scope="col" { "Tag" } th scope="col" class="num" { "Value" } th scope="col" { "Updated" } } }
                            tbody {
                                @for v in values {
                                    tr data-asset=(asset) data-tag=(v.tag_name) {
                                        th scope="row" { (v.tag_name) }
                                        td class="num value" { (format_value(v.value)) }
                                        td class="age" { (time(v.timestamp)) }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    shell(Some(&browser), "Overview", "/", body, &[])
}

fn format_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// Alerts as rows; with `actions`, acknowledge (with a note) and resolve forms.
pub(crate) fn alert_table(alerts: &[&Alert], actions: bool) -> Markup {
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

/// The dashboards, with create, import, duplicate, export and delete.
pub(crate) async fn dashboards(State(state): State<AppState>, browser: Browser) -> Response {
    let list = match state
        .app
        .dashboards(
            browser.org_id(),
            Page {
                page: 1,
                per_page: 1000,
            },
        )
        .await
    {
        Ok(l) => l,
        Err(e) => return failed(&browser, "Dashboards", "/dashboards", &e),
    };
    let write = browser.may(Scope::WriteAssets);
    let body = html! {
        h1 { "Dashboards" }
        @if list.items.is_empty() {
            p class="quiet" { "No dashboards yet." }
        } @else {
            table class="list" {
                thead { tr { th scope="col" { "Name" } th scope="col" { "Description" } th scope="col" { "Widgets" } th scope="col" { "Updated" } th scope="col" { "Actions" } } }
                tbody {
                    @for d in &list.items {
                        tr {
                            td { a href=(format!("/dashboards/{}", d.id)) { (d.name) } }
                            td { (d.description) }
                            td class="num" { (d.layout.widgets.len()) }
                            td { (time(d.updated_at)) }
                            td class="actions" {
                                a href=(format!("/v1/dashboards/{}/export", d.id)) download { "Export" }
                                @if write {
                                    " "
                                    a href=(format!("/dashboards/{}/edit", d.id)) { "Edit" }
                                    form class="api-form inline" data-method="POST" data-action=(format!("/v1/dashboards/{}/duplicate", d.id)) data-redirect="/dashboards" {
                                        button type="submit" { "Duplicate" }
                                    }
                                    form class="api-form inline" data-method="DELETE" data-action=(format!("/v1/dashboards/{}", d.id)) data-confirm=(format!("Delete the dashboard “{}”?", d.name)) {
                                        button type="submit" class="danger" { "Delete" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        @if write {
            div class="forms" {
                section {
                    h2 { "New dashboard" }
                    form class="api-form" data-method="POST" data-action="/v1/dashboards" data-redirect="/dashboards/{id}/edit" {
                        label for="new-name" { "Name" }
                        input id="new-name" name="name" required maxlength="200";
                        p class="field-error" data-error-for="name" {}
                        label for="new-description" { "Description" }
                        input id="new-description" name="description" maxlength="2000";
                        p class="field-error" data-error-for="description" {}
                        button type="submit" class="primary" { "Create and edit" }
                        p class="form-error" role="alert" {}
                    }
                }
                section {
                    h2 { "Import" }
                    form class="api-form" data-method="POST" data-action="/v1/dashboards/import" data-body="document" data-redirect="/dashboards/{id}" {
                        label for="import-document" { "Exported dashboard (JSON)" }
                        textarea id="import-document" name="document" rows="6" required {}
                        p class="field-error" data-error-for="document" {}
                        button type="submit" { "Import" }
                        p class="form-error" role="alert" {}
                    }
                }
            }
        }
    };
    shell(Some(&browser), "Dashboards", "/dashboards", body, &[])
}

/// One dashboard, drawn and kept live by `dashboard.js`.
pub(crate) async fn dashboard(
    State(state): State<AppState>,
    browser: Browser,
    Path(id): Path<String>,
) -> Response {
    let d = match state.app.dashboard(browser.org_id(), &id).await {
        Ok(d) => d,
        Err(e) => return failed(&browser, "Dashboard", "/dashboards", &e),
    };
    let body = html! {
        div class="page-head" {
            h1 { (d.name) }
            @if browser.may(Scope::WriteAssets) {
                a class="button" href=(format!("/dashboards/{}/edit", d.id)) { "Edit" }
            }
        }
        @if !d.description.is_empty() { p class="quiet" { (d.description) } }
        div id="dashboard" data-dashboard-id=(d.id) {
            div class="dash-toolbar" id="toolbar" {}
            p class="error" id="dash-error" role="alert" hidden {}
            div class="grid" id="grid" {}
        }
    };
    shell(
        Some(&browser),
        &d.name,
        "/dashboards",
        body,
        &["vendor/uplot/uPlot.iife.min.js", "dashboard.js"],
    )
}

/// The editor: add, move, resize and configure widgets, then save (`dashboard_edit.js`).
pub(crate) async fn dashboard_editor(
    State(state): State<AppState>,
    browser: Browser,
    Path(id): Path<String>,
) -> Response {
    let d = match state.app.dashboard(browser.org_id(), &id).await {
        Ok(d) => d,
        Err(e) => return failed(&browser, "Dashboard", "/dashboards", &e),
    };
    let assets = state.app.assets(browser.org_id()).await.unwrap_or_default();
    let body = html! {
        div class="page-head" {
            h1 { "Edit: " (d.name) }
            a class="button" href=(format!("/dashboards/{}", d.id)) { "View" }
        }
        div id="editor" data-dashboard-id=(d.id) {
            p class="error" id="editor-error" role="alert" hidden {}
            div class="editor-toolbar" id="editor-toolbar" {}
            div class="editor-body" {
                div class="grid editing" id="editor-grid" {}
                aside id="widget-form" aria-label="Widget settings" {}
            }
        }
        datalist id="asset-list" {
            @for (asset, _) in &assets { option value=(asset) {} }
        }
        @for (asset, tags) in &assets {
            datalist id=(format!("tags-{asset}")) class="tag-list" data-asset=(asset) {
                @for t in tags { option value=(t) {} }
            }
        }
    };
    shell(
        Some(&browser),
        &format!("Edit {}", d.name),
        "/dashboards",
        body,
        &["dashboard_edit.js"],
    )
}

#[derive(Deserialize, Default)]
struct AlertsQuery {
    status: Option<String>,
    severity: Option<String>,
}

/// Alerts, filtered by status and severity, with acknowledge and resolve; live.
pub(crate) async fn alerts(
    State(state): State<AppState>,
    browser: Browser,
    RawQuery(raw): RawQuery,
) -> Response {
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
    let list = match state
        .app
        .alerts(
            browser.org_id(),
            &filter,
            Page {
                page: 1,
                per_page: 200,
            },
        )
        .await
    {
        Ok(l) => l,
        Err(e) => return failed(&browser, "Alerts", "/alerts", &e),
    };
    let rows: Vec<&Alert> = list.items.iter().collect();
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
            p class="quiet" { (list.total) " alerts" @if list.total > 200 { " (newest 200 shown)" } "; new ones appear here as they happen." }
            (alert_table(&rows, write))
        }
    };
    shell(Some(&browser), "Alerts", "/alerts", body, &[])
}

/// Alert rules: list with enable/disable, edit and delete; a form to create one.
pub(crate) async fn alert_rules(State(state): State<AppState>, browser: Browser) -> Response {
    let org = browser.org_id();
    let loaded = async {
        Ok::<_, plantd_app::AppError>((
            state.app.alert_rules(org).await?,
            state.app.data_sources(org).await?,
        ))
    }
    .await;
    let (rules, sources) = match loaded {
        Ok(x) => x,
        Err(e) => return failed(&browser, "Alert rules", "/alert-rules", &e),
    };
    let write = browser.may(Scope::WriteAlerts);
    let source_name = |id: &str| {
        sources
            .iter()
            .find(|s| s.id == id)
            .map_or(id.to_string(), |s| s.name.clone())
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
                label for=(id("ds")) { "Data source" }
                select id=(id("ds")) name="data_source_id" required {
                    @for s in sources.iter() {
                        option value=(s.id) selected[rule.is_some_and(|r| r.data_source_id == s.id)] { (s.name) }
                    }
                }
                p class="field-error" data-error-for="data_source_id" {}
                label for=(id("asset")) { "Asset (empty: every asset of the source)" }
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
    shell(Some(&browser), "Alert rules", "/alert-rules", body, &[])
}
