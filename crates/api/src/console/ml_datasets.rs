//! The ML dataset pages: the datasets (the list, a form that creates one and uploads its CSV
//! with progress, and one made from telemetry), one dataset (its facts, its columns profiled
//! with histograms drawn on the server as SVG, label classes, versions with compare and
//! rollback, validation rules and the last validation; `assets/ml_datasets.js` sends the
//! multipart uploads and shows what validate and compare answer) and the labeling page, made for
//! the keyboard (`assets/ml_label.js`). Every change goes through `/v1`.

use axum::extract::State;
use axum::response::Response;
use maud::{Markup, html};
use plantd_model::Scope;
use plantd_model::ml::{
    Bin, CLASS_COLORS, ColumnProfile, Dataset, DatasetSource, DatasetVersion, LabelClass, Quality,
    RuleType, ValidationResult, ValidationRule,
};
use plantd_model::telemetry::{Aggregation, Interval};
use serde_json::Value;

use super::browser::Browser;
use super::kit::{ALL, OrPage, PathId, action_button, byte_size, field, format_value, time};
use super::layout::{shell, shell_titled};
use crate::state::AppState;

fn interval_text(i: Interval) -> &'static str {
    match i {
        Interval::Minute => "1m",
        Interval::FiveMinutes => "5m",
        Interval::Hour => "1h",
        Interval::Day => "1d",
    }
}

fn aggregation_text(a: Aggregation) -> &'static str {
    match a {
        Aggregation::Avg => "avg",
        Aggregation::Min => "min",
        Aggregation::Max => "max",
        Aggregation::Sum => "sum",
        Aggregation::Count => "count",
    }
}

/// Where the rows came from, in one line.
fn source_text(s: &DatasetSource) -> String {
    match s {
        DatasetSource::Upload => "uploaded CSV".to_string(),
        DatasetSource::Telemetry(t) => format!(
            "telemetry: {} · {} · {} per {}",
            t.asset_ids.join(", "),
            t.tags.join(", "),
            aggregation_text(t.aggregation),
            interval_text(t.interval),
        ),
    }
}

fn is_telemetry(d: &Dataset) -> bool {
    matches!(d.source, DatasetSource::Telemetry(_))
}

/// A profile's minimum or maximum: a number as an operator reads it, a timestamp as written.
fn json_text(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "–".to_string(),
        Some(Value::Number(n)) => n.as_f64().map_or_else(|| n.to_string(), format_value),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

fn number(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_string(), format_value)
}

/// A colour square of a label class (an SVG fill: the CSP allows no inline style).
fn swatch(color: &str) -> Markup {
    html! {
        svg class="swatch" width="14" height="14" aria-hidden="true" {
            rect x="0.5" y="0.5" width="13" height="13" rx="2" fill=(color) {}
        }
    }
}

const HIST_WIDTH: f64 = 120.0;
const HIST_HEIGHT: f64 = 32.0;

/// A number column's ten bins as bars; another column's most frequent values.
fn distribution(p: &ColumnProfile) -> Markup {
    let most = p.histogram.iter().map(|b| b.count).max().unwrap_or(0);
    if let (Some(first), Some(last), true) = (p.histogram.first(), p.histogram.last(), most > 0) {
        let w = HIST_WIDTH / p.histogram.len() as f64;
        let label = format!(
            "histogram of {}: {} bins from {} to {}",
            p.name,
            p.histogram.len(),
            format_value(first.start),
            format_value(last.end)
        );
        let bar_width = format!("{:.1}", (w - 1.0).max(1.0));
        // (x, y, height, bin): an empty bin has no bar, any other at least a pixel.
        let bars: Vec<(String, String, String, &Bin)> = p
            .histogram
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let h = if b.count == 0 {
                    0.0
                } else {
                    (b.count as f64 / most as f64 * (HIST_HEIGHT - 2.0)).max(1.0)
                };
                (
                    format!("{:.1}", i as f64 * w + 0.5),
                    format!("{:.1}", HIST_HEIGHT - h),
                    format!("{h:.1}"),
                    b,
                )
            })
            .collect();
        return html! {
            svg class="histogram" width=(HIST_WIDTH) height=(HIST_HEIGHT) role="img" aria-label=(label) {
                @for (x, y, h, b) in &bars {
                    rect x=(x) y=(y) width=(bar_width) height=(h) data-count=(b.count) {
                        title { (format_value(b.start)) " – " (format_value(b.end)) ": " (b.count) }
                    }
                }
            }
        };
    }
    html! {
        @if p.top_values.is_empty() {
            span class="quiet" { "–" }
        } @else {
            ul class="top-values" {
                @for t in p.top_values.iter().take(3) {
                    li { code { (t.value) } " " small { "× " (t.count) } }
                }
            }
        }
    }
}

/// A rule's config in words.
fn rule_config(r: &ValidationRule) -> String {
    let c = &r.config;
    match r.rule_type {
        RuleType::Range => {
            let bound = |k: &str| c.get(k).and_then(Value::as_f64).map(format_value);
            match (bound("min"), bound("max")) {
                (Some(a), Some(b)) => format!("{a} ≤ value ≤ {b}"),
                (Some(a), None) => format!("value ≥ {a}"),
                (None, Some(b)) => format!("value ≤ {b}"),
                (None, None) => String::new(),
            }
        }
        RuleType::AllowedValues => c
            .get("values")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_string))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default(),
        RuleType::Regex => c
            .get("pattern")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        RuleType::NotNull | RuleType::Unique => String::new(),
    }
}

/// A validation's outcome (`ml_datasets.js` draws a new one the same way): valid or not, the
/// grade, the score, each issue with its rows (links to the labeling page at that row).
fn validation(dataset_id: &str, v: &ValidationResult) -> Markup {
    html! {
        p class="validation-summary" {
            @if v.valid {
                span class="badge ok" data-valid="true" { "✓ valid" }
            } @else {
                span class="badge warning" data-valid="false" { "◆ rules violated" }
            }
            " grade " strong class="grade" data-grade=(v.grade) { (v.grade) }
            " · quality score " span class="score" { (format!("{:.1}", v.quality_score)) }
            " · " (v.row_count) " rows · validated " (time(v.validated_at))
        }
        @if !v.issues.is_empty() {
            table class="list compact" id="validation-issues" {
                thead { tr { th scope="col" { "Rule" } th scope="col" { "Column" } th scope="col" { "Type" } th scope="col" class="num" { "Violations" } th scope="col" { "Rows" } } }
                tbody {
                    @for i in &v.issues {
                        tr data-rule-id=(i.rule_id) {
                            td { (i.rule_name) }
                            td { (i.column) }
                            td { (i.rule_type.as_str()) }
                            td class="num" data-violations=(i.violations) { (i.violations) }
                            td class="row-ids" {
                                @for (k, row) in i.rows.iter().enumerate() {
                                    @if k > 0 { ", " }
                                    a href=(format!("/ml/datasets/{dataset_id}/label?row={row}")) { (row) }
                                }
                                @if i.rows_truncated { " …" }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The datasets with the two ways to create one.
pub(crate) async fn datasets(
    State(state): State<AppState>,
    browser: Browser,
) -> Result<Response, Response> {
    let list = state
        .app
        .datasets(browser.org_id(), ALL)
        .await
        .or_page(&browser)?;
    let write = browser.may(Scope::WriteAssets);
    let body = html! {
        h1 { "Datasets" }
        p class="quiet" { "Training sets with their labels, versions and validation." }
        table class="list" id="datasets" {
            thead { tr { th scope="col" { "Name" } th scope="col" class="num" { "Rows" } th scope="col" class="num" { "Columns" } th scope="col" { "Version" } th scope="col" { "Source" } th scope="col" { "Created" } } }
            tbody {
                @if list.items.is_empty() {
                    tr class="empty" { td colspan="6" { "No datasets yet." } }
                }
                @for d in &list.items {
                    tr data-dataset-id=(d.id) data-rows=(d.row_count) {
                        td { a href=(format!("/ml/datasets/{}", d.id)) { (d.name) } }
                        td class="num" { (d.row_count) }
                        td class="num" { (d.columns.len()) }
                        td { @if let Some(v) = &d.current_version { code { (v) } } @else { "–" } }
                        td { (source_text(&d.source)) }
                        td { (time(d.created_at)) }
                    }
                }
            }
        }
        @if write {
            div class="forms" {
                section {
                    h2 { "From a file" }
                    form id="dataset-upload" {
                        (field("ds-name", "name", "Name", html! { input id="ds-name" name="name" required maxlength="100"; }))
                        (field("ds-description", "description", "Description", html! { input id="ds-description" name="description" maxlength="2000"; }))
                        label for="ds-file" { "CSV file (the first line names the columns; up to 1 GiB)" }
                        input id="ds-file" name="file" type="file" accept=".csv,text/csv" required;
                        p class="field-error" data-error-for="file" {}
                        ul class="upload-errors" id="ds-upload-errors" hidden {}
                        progress id="ds-progress" max="100" value="0" hidden {}
                        button type="submit" class="primary" { "Create and upload" }
                        p class="form-error" role="alert" {}
                    }
                }
                section {
                    h2 { "From telemetry" }
                    form class="api-form" id="dataset-telemetry" data-method="POST" data-action="/v1/ml/datasets" data-redirect="/ml/datasets/{id}" {
                        (field("tm-name", "name", "Name", html! { input id="tm-name" name="name" required maxlength="100"; }))
                        (field("tm-description", "description", "Description", html! { input id="tm-description" name="description" maxlength="2000"; }))
                        (field("tm-assets", "telemetry.asset_ids", "Asset ids (comma separated, up to 20)", html! {
                            input id="tm-assets" name="telemetry.asset_ids" data-type="list" required placeholder="Pump_01, Pump_02";
                        }))
                        (field("tm-tags", "telemetry.tags", "Tags (comma separated)", html! {
                            input id="tm-tags" name="telemetry.tags" data-type="list" required placeholder="Vibration_X, Temperature";
                        }))
                        // The browser's local times; the script sends them as RFC 3339.
                        (field("tm-start", "telemetry.start", "Start", html! {
                            input id="tm-start" type="datetime-local" data-time-for="telemetry.start" required;
                            input type="hidden" name="telemetry.start";
                        }))
                        (field("tm-end", "telemetry.end", "End", html! {
                            input id="tm-end" type="datetime-local" data-time-for="telemetry.end" required;
                            input type="hidden" name="telemetry.end";
                        }))
                        (field("tm-interval", "telemetry.interval", "Interval (a row per bucket)", html! {
                            select id="tm-interval" name="telemetry.interval" {
                                option value="1m" { "1 minute" }
                                option value="5m" selected { "5 minutes" }
                                option value="1h" { "1 hour" }
                                option value="1d" { "1 day" }
                            }
                        }))
                        (field("tm-aggregation", "telemetry.aggregation", "Aggregation", html! {
                            select id="tm-aggregation" name="telemetry.aggregation" {
                                option value="avg" selected { "average" }
                                option value="min" { "minimum" }
                                option value="max" { "maximum" }
                                option value="sum" { "sum" }
                                option value="count" { "count" }
                            }
                        }))
                        button type="submit" class="primary" { "Create from telemetry" }
                        p class="form-error" role="alert" {}
                    }
                }
            }
        }
    };
    Ok(shell(&browser, body, &["ml_datasets.js"]))
}

/// The dataset's facts, as a definition list.
fn facts(d: &Dataset) -> Markup {
    html! {
        @if !d.description.is_empty() { p class="quiet" { (d.description) } }
        dl class="facts" id="dataset-facts" {
            dt { "Source" } dd { (source_text(&d.source)) }
            dt { "Rows" } dd data-rows=(d.row_count) { (d.row_count) }
            dt { "Columns" } dd { (d.columns.len()) }
            dt { "Storage" } dd { (byte_size(d.size_bytes)) " compressed, from " (byte_size(d.file_size_bytes)) " of CSV" }
            dt { "Current version" } dd { @if let Some(v) = &d.current_version { code { (v) } } @else { "none yet" } }
            dt { "Labels" } dd { (d.labels.labeled) " labelled · " (d.labels.skipped) " skipped · " (d.labels.flagged) " flagged" }
            dt { "Created" } dd { (time(d.created_at)) " by " (d.created_by) }
            dt { "Updated" } dd { (time(d.updated_at)) }
        }
    }
}

/// Each column with its profile and distribution.
fn columns(q: &Quality) -> Markup {
    html! {
        h2 { "Columns" }
        @if q.columns.is_empty() {
            p class="quiet" id="no-columns" { "No columns yet: they come from the first upload." }
        } @else {
            div class="table-wrap" {
                table class="list compact" id="columns" {
                    thead { tr {
                        th scope="col" { "Column" } th scope="col" { "Type" } th scope="col" class="num" { "Count" }
                        th scope="col" class="num" { "Nulls" } th scope="col" class="num" { "Distinct" }
                        th scope="col" class="num" { "Min" } th scope="col" class="num" { "Max" }
                        th scope="col" class="num" { "Mean" } th scope="col" class="num" { "Std" } th scope="col" { "Distribution" }
                    } }
                    tbody {
                        @for p in &q.columns {
                            tr data-column=(p.name) {
                                th scope="row" { (p.name) }
                                td { (p.column_type.as_str()) }
                                td class="num" { (p.count) }
                                td class="num" { (p.nulls) }
                                td class="num" { (p.distinct) }
                                td class="num" { (json_text(p.min.as_ref())) }
                                td class="num" { (json_text(p.max.as_ref())) }
                                td class="num" { (number(p.mean)) }
                                td class="num" { (number(p.std)) }
                                td { (distribution(p)) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The label classes with their counts, and the form that adds one.
fn classes(d: &Dataset, list: &[LabelClass], write: bool) -> Markup {
    let next_color = CLASS_COLORS[list.len() % CLASS_COLORS.len()];
    html! {
        h2 { "Label classes" }
        table class="list compact" id="label-classes" {
            thead { tr { th scope="col" { "Class" } th scope="col" { "Description" } th scope="col" class="num" { "Rows" } } }
            tbody {
                @if list.is_empty() { tr class="empty" { td colspan="3" { "No classes yet." } } }
                @for c in list {
                    tr data-class-id=(c.id) {
                        td { (swatch(&c.color)) " " (c.name) }
                        td { (c.description) }
                        td class="num" data-count=(c.count) { (c.count) }
                    }
                }
            }
        }
        @if write {
            form class="api-form" id="class-form" data-method="POST" data-action=(format!("/v1/ml/datasets/{}/label-classes", d.id)) {
                (field("class-name", "name", "New class", html! { input id="class-name" name="name" required maxlength="64" placeholder="normal"; }))
                (field("class-color", "color", "Colour", html! { input id="class-color" name="color" type="color" value=(next_color); }))
                (field("class-description", "description", "Description", html! { input id="class-description" name="description" maxlength="500"; }))
                button type="submit" { "Add class" }
                p class="form-error" role="alert" {}
            }
        }
    }
}

/// Uploading more rows (a dataset of uploads only).
fn rows_upload(d: &Dataset) -> Markup {
    html! {
        details class="rows-upload" open[d.row_count == 0] {
            summary { "Upload rows" }
            form id="rows-upload" data-action=(format!("/v1/ml/datasets/{}/upload", d.id)) {
                label for="rows-file" { "CSV file (the same columns, in the same order)" }
                input id="rows-file" name="file" type="file" accept=".csv,text/csv" required;
                p class="field-error" data-error-for="file" {}
                ul class="upload-errors" hidden {}
                label for="rows-mode" { "Mode" }
                select id="rows-mode" name="mode" {
                    option value="append" selected { "append after the last row" }
                    option value="replace" { "replace every row (their labels are dropped)" }
                }
                progress id="rows-progress" max="100" value="0" hidden {}
                button type="submit" { "Upload" }
                p class="form-error" role="alert" {}
            }
        }
    }
}

/// The versions, newest first, with rollback, the form that makes one, and compare.
fn versions(d: &Dataset, list: &[DatasetVersion], write: bool) -> Markup {
    let base = format!("/v1/ml/datasets/{}", d.id);
    html! {
        h2 { "Versions" }
        table class="list compact" id="versions" {
            thead { tr {
                th scope="col" { "Version" } th scope="col" { "Created" } th scope="col" class="num" { "Rows" }
                th scope="col" class="num" { "Labels" } th scope="col" { "Notes" }
                @if write { th scope="col" { "Actions" } }
            } }
            tbody {
                @if list.is_empty() { tr class="empty" { td colspan=(if write { "6" } else { "5" }) { "No versions yet." } } }
                @for v in list {
                    tr data-version=(v.version) {
                        td { code { (v.version) } }
                        td { (time(v.created_at)) br; small class="quiet" { "by " (v.created_by) } }
                        td class="num" { (v.row_count) }
                        td class="num" { (v.label_count) }
                        td { (v.notes) }
                        @if write {
                            td class="actions" {
                                (action_button("POST", &format!("{base}/versions/{}/rollback", v.version), "Roll back", "danger",
                                    Some(format!("Make the working copy version {}'s rows and labels? Every version stays.", v.version))))
                            }
                        }
                    }
                }
            }
        }
        div class="forms" {
            @if write {
                section {
                    h3 { "New version" }
                    form id="version-form" data-action=(format!("{base}/versions")) {
                        (field("version-notes", "notes", "Notes", html! { textarea id="version-notes" name="notes" maxlength="2000" rows="2" {} }))
                        @if !is_telemetry(d) {
                            label for="version-file" { "CSV file replacing the rows first (optional)" }
                            input id="version-file" name="file" type="file" accept=".csv,text/csv";
                            p class="field-error" data-error-for="file" {}
                            ul class="upload-errors" hidden {}
                        }
                        progress id="version-progress" max="100" value="0" hidden {}
                        button type="submit" class="primary" { "New version" }
                        p class="form-error" role="alert" {}
                    }
                }
            }
            @if !list.is_empty() {
                section {
                    h3 { "Compare" }
                    form id="compare-form" data-action=(format!("{base}/versions/compare")) {
                        label for="cmp-v1" { "From" }
                        select id="cmp-v1" name="v1" {
                            @for v in list { option value=(v.version) { (v.version) } }
                        }
                        label for="cmp-v2" { "To" }
                        select id="cmp-v2" name="v2" {
                            option value="working" selected { "the working copy" }
                            @for v in list { option value=(v.version) { (v.version) } }
                        }
                        button type="submit" { "Compare" }
                        p class="form-error" role="alert" {}
                    }
                    div id="compare-result" aria-live="polite" {}
                }
            }
        }
    }
}

/// The rules, the form that adds one, the validate button and the last validation.
fn rules(
    d: &Dataset,
    list: &[ValidationRule],
    last: Option<&ValidationResult>,
    write: bool,
) -> Markup {
    let base = format!("/v1/ml/datasets/{}", d.id);
    html! {
        h2 { "Validation" }
        table class="list compact" id="validation-rules" {
            thead { tr { th scope="col" { "Rule" } th scope="col" { "Type" } th scope="col" { "Column" } th scope="col" { "Checks" } th scope="col" { "Created" } } }
            tbody {
                @if list.is_empty() { tr class="empty" { td colspan="5" { "No rules yet." } } }
                @for r in list {
                    tr data-rule-id=(r.id) {
                        td { (r.name) }
                        td { (r.rule_type.as_str()) }
                        td { (r.column) }
                        td { (rule_config(r)) }
                        td { (time(r.created_at)) }
                    }
                }
            }
        }
        @if write && !d.columns.is_empty() {
            form class="api-form" id="rule-form" data-method="POST" data-action=(format!("{base}/validation-rules")) {
                // Each type's config fields are enabled by `ml_datasets.js` when the type is chosen;
                // the hidden one makes `config` an object even for types without settings.
                input type="hidden" name="config" data-type="json" value="{}";
                (field("rule-name", "name", "New rule", html! { input id="rule-name" name="name" required maxlength="100" placeholder="temperature in range"; }))
                (field("rule-type", "rule_type", "Type", html! {
                    select id="rule-type" name="rule_type" {
                        option value="range" selected { "range (number columns)" }
                        option value="not_null" { "not null" }
                        option value="unique" { "unique" }
                        option value="allowed_values" { "allowed values" }
                        option value="regex" { "regular expression" }
                    }
                }))
                (field("rule-column", "column", "Column", html! {
                    select id="rule-column" name="column" {
                        @for c in &d.columns { option value=(c.name) { (c.name) " (" (c.column_type.as_str()) ")" } }
                    }
                }))
                div class="rule-config" data-rule-types="range" {
                    (field("rule-min", "config.min", "Minimum", html! { input id="rule-min" name="config.min" type="number" step="any" data-type="number"; }))
                    (field("rule-max", "config.max", "Maximum", html! { input id="rule-max" name="config.max" type="number" step="any" data-type="number"; }))
                }
                div class="rule-config" data-rule-types="allowed_values" hidden {
                    (field("rule-values", "config.values", "Allowed values (comma separated)", html! {
                        input id="rule-values" name="config.values" data-type="list" disabled placeholder="ok, warn";
                    }))
                }
                div class="rule-config" data-rule-types="regex" hidden {
                    (field("rule-pattern", "config.pattern", "Pattern", html! { input id="rule-pattern" name="config.pattern" disabled maxlength="1000" placeholder="^[A-Z]{2}-\\d+$"; }))
                }
                p class="field-error" data-error-for="config" {}
                button type="submit" { "Add rule" }
                p class="form-error" role="alert" {}
            }
        }
        @if write {
            div class="actions" {
                button type="button" class="primary" id="validate-button" { "Validate" }
                span class="quiet" { "checks every rule on every row" }
            }
            p class="form-error" id="validate-error" role="alert" {}
        }
        div id="validation" aria-live="polite" {
            @if let Some(v) = last {
                (validation(&d.id, v))
            } @else {
                p class="quiet" { "Not validated yet." }
            }
        }
    }
}

/// One dataset: facts, columns, label classes, versions, validation.
pub(crate) async fn dataset(
    State(state): State<AppState>,
    browser: Browser,
    PathId(id): PathId,
) -> Result<Response, Response> {
    let org = browser.org_id();
    let d = state.app.dataset(org, &id).await.or_page(&browser)?;
    let quality = state
        .app
        .dataset_quality(org, &id)
        .await
        .or_page(&browser)?;
    let label_classes = state.app.label_classes(org, &id).await.or_page(&browser)?;
    let version_list = state
        .app
        .dataset_versions(org, &id, ALL)
        .await
        .or_page(&browser)?
        .items;
    let rule_list = state
        .app
        .validation_rules(org, &id)
        .await
        .or_page(&browser)?;
    let write = browser.may(Scope::WriteAssets);
    let body = html! {
        div id="dataset" data-id=(d.id) {
            div class="page-head" {
                h1 { (d.name) }
                a class="button primary" id="label-link" href=(format!("/ml/datasets/{}/label", d.id)) { "Label rows" }
                a class="button" id="export-labels" href=(format!("/v1/ml/datasets/{}/labels/export?format=csv", d.id)) download { "Export labels" }
            }
            (facts(&d))
            @if write && !is_telemetry(&d) { (rows_upload(&d)) }
            (columns(&quality))
            (classes(&d, &label_classes, write))
            (versions(&d, &version_list, write))
            (rules(&d, &rule_list, quality.last_validation.as_ref(), write))
        }
    };
    Ok(shell_titled(&browser, &d.name, body, &["ml_datasets.js"]))
}

/// The labeling page: one row at a time, the classes as numbered buttons, the keys of
/// `ml_label.js`; a dataset made from telemetry shows its trend around the row.
pub(crate) async fn labeling(
    State(state): State<AppState>,
    browser: Browser,
    PathId(id): PathId,
) -> Result<Response, Response> {
    let org = browser.org_id();
    let d = state.app.dataset(org, &id).await.or_page(&browser)?;
    let label_classes = state.app.label_classes(org, &id).await.or_page(&browser)?;
    let write = browser.may(Scope::WriteAssets);
    let telemetry = is_telemetry(&d);
    let done = d.labels.labeled + d.labels.skipped;
    let body = html! {
        div class="page-head" {
            h1 { "Label: " (d.name) }
            a class="button" href=(format!("/ml/datasets/{}", d.id)) { "Back to the dataset" }
        }
        @if d.row_count == 0 {
            p class="quiet" { "This dataset has no rows to label yet." }
        } @else {
            @if label_classes.is_empty() {
                p class="banner" { "No label classes yet: " a href=(format!("/ml/datasets/{}", d.id)) { "add them on the dataset's page" } "." }
            }
            @if !write {
                p class="quiet" { "Your role may look at the rows but not label them." }
            }
            div id="labeler" data-id=(d.id) data-row-count=(d.row_count) data-write=(write) data-source=(if telemetry { "telemetry" } else { "upload" }) {
                div class="label-progress" {
                    label for="label-progress" { "Progress" }
                    progress id="label-progress" max=(d.row_count) value=(done) {}
                    p id="label-progress-text" {
                        span id="count-labeled" { (d.labels.labeled) } " labelled · "
                        span id="count-skipped" { (d.labels.skipped) } " skipped · "
                        span id="count-flagged" { (d.labels.flagged) } " flagged, of "
                        (d.row_count) " rows"
                    }
                }
                div class="label-classes" id="class-buttons" role="group" aria-label="Classes" {
                    @for (i, c) in label_classes.iter().enumerate() {
                        button type="button" class="label-class" data-class-id=(c.id) data-color=(c.color)
                            data-key=[(i < 9).then_some(i + 1)] aria-pressed="false" disabled[!write] {
                            @if i < 9 { kbd { (i + 1) } }
                            (swatch(&c.color))
                            span class="name" { (c.name) }
                            span class="count" { (c.count) }
                        }
                    }
                }
                div class="row-head" {
                    h2 { "Row " span id="row-id" { "…" } }
                    span id="row-state" {}
                    span class="quiet" id="row-position" {}
                }
                div class="row-nav" {
                    button type="button" id="row-prev" { "← Previous" }
                    button type="button" id="row-next" { "Next →" }
                    button type="button" id="row-skip" disabled[!write] { kbd { "s" } " Skip" }
                    button type="button" id="row-flag" aria-pressed="false" disabled[!write] { kbd { "f" } " Flag" }
                    button type="button" id="row-undo" disabled[!write] { kbd { "u" } " Undo" }
                }
                p class="quiet" id="label-status" role="status" aria-live="polite" {}
                p class="error" id="label-error" role="alert" hidden {}
                @if telemetry {
                    div class="row-trend" id="row-trend" role="img" aria-label="The dataset's number columns over the 50 rows before and after this one, the row marked" {}
                }
                table class="list compact" id="row-values" {
                    thead { tr { th scope="col" { "Column" } th scope="col" { "Value" } } }
                    tbody {}
                }
                p class="hint" {
                    "Keys: " kbd { "1" } "–" kbd { "9" } " label the row with that class and go on, "
                    kbd { "s" } " skips, " kbd { "f" } " flags or unflags, " kbd { "u" } " or " kbd { "Ctrl+Z" }
                    " undoes the last of these, " kbd { "←" } " " kbd { "→" } " move."
                }
            }
        }
    };
    let scripts: &[&str] = if telemetry {
        &["vendor/uplot/uPlot.iife.min.js", "ml_label.js"]
    } else {
        &["ml_label.js"]
    };
    Ok(shell_titled(
        &browser,
        &format!("Label {}", d.name),
        body,
        scripts,
    ))
}
