//! The ML training and model pages: the training jobs (kept live by `assets/ml_models.js`, which
//! polls each queued or running job until it finishes and cancels one) with the form that
//! trains a model on a dataset's number columns; the models; and one model (its facts and
//! metrics, the training rows' score histogram drawn on the server as SVG with the threshold, a
//! row tested, the deploy and undeploy forms, and, while deployed, each asset's score over the
//! last hour drawn with uPlot and the open alerts on it). Every change goes through `/v1`.

use std::collections::HashMap;

use axum::extract::State;
use axum::response::Response;
use maud::{Markup, html};
use plantd_model::Scope;
use plantd_model::ml::{ColumnType, Dataset};
use plantd_model::ml_models::{Hyperparameters, JobStatus, Model, TrainingJob, TrainingMetrics};

use super::browser::Browser;
use super::kit::{ALL, OrPage, PathId, action_button, field, format_value, maybe_time, time};
use super::layout::{shell, shell_titled};
use crate::state::AppState;

/// A job's state as text, shape and colour (`ml_models.js` draws the same).
fn job_badge(s: JobStatus) -> Markup {
    let (shape, class) = match s {
        JobStatus::Queued => ("○", "queued"),
        JobStatus::Running => ("●", "info"),
        JobStatus::Completed => ("✓", "ok"),
        JobStatus::Failed => ("▲", "critical"),
        JobStatus::Cancelled => ("✕", "resolved"),
    };
    html! { span class=(format!("badge {class}")) data-status=(s.as_str()) { (shape) " " (s.as_str()) } }
}

/// A model's state: deployed (scoring live telemetry) or ready.
fn model_badge(m: &Model) -> Markup {
    if m.deployment.is_some() {
        html! { span class="badge ok" data-status="deployed" { "● deployed" } }
    } else {
        html! { span class="badge" data-status=(m.status) { "○ " (m.status) } }
    }
}

/// Seconds as a person reads a job's duration (`ml_models.js` writes the same).
fn duration_text(s: f64) -> String {
    if s < 60.0 {
        format!("{s:.1} s")
    } else {
        let whole = s.round() as u64;
        format!("{} min {} s", whole / 60, whole % 60)
    }
}

/// A share (0..1) to three places, or a dash.
fn ratio(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_string(), |x| format!("{x:.3}"))
}

/// Dataset names by id, for the lists that name a job's or a model's dataset.
fn dataset_names(datasets: &[Dataset]) -> HashMap<&str, &str> {
    datasets
        .iter()
        .map(|d| (d.id.as_str(), d.name.as_str()))
        .collect()
}

fn number_columns(d: &Dataset) -> Vec<&str> {
    d.columns
        .iter()
        .filter(|c| c.column_type == ColumnType::Number)
        .map(|c| c.name.as_str())
        .collect()
}

/// A dataset's name (a link to it), or its id when it is gone.
fn dataset_link(names: &HashMap<&str, &str>, id: &str) -> Markup {
    html! {
        @if let Some(name) = names.get(id) {
            a href=(format!("/ml/datasets/{id}")) { (name) }
        } @else {
            code { (id) }
        }
    }
}

fn version_text(v: Option<&str>) -> Markup {
    html! {
        @if let Some(v) = v { code { (v) } } @else { span class="quiet" { "working copy" } }
    }
}

fn hyperparameters_text(h: &Hyperparameters) -> String {
    format!(
        "{} trees · max_samples {} · max_features {} · contamination {} · seed {}",
        h.n_estimators,
        h.max_samples
            .map_or_else(|| "min(256, rows)".to_string(), |m| m.to_string()),
        format_value(h.max_features),
        format_value(h.contamination),
        h.seed
    )
}

/// One job as a row (`ml_models.js` fills the same cells, by class, as the job changes).
fn job_row(j: &TrainingJob, names: &HashMap<&str, &str>, write: bool) -> Markup {
    html! {
        tr data-job-id=(j.id) data-status=(j.status.as_str()) {
            td class="name" { (j.name) }
            td class="dataset" { (dataset_link(names, &j.dataset_id)) " " small { (version_text(j.dataset_version.as_deref())) } }
            td class="status" {
                (job_badge(j.status))
                @if let Some(e) = &j.error { br; small class="job-error" { (e) } }
            }
            td class="progress" {
                progress max="1" value=(format!("{:.3}", j.progress)) aria-label=(format!("progress of {}", j.name)) {}
                " " span class="pct" { (format!("{:.0} %", j.progress * 100.0)) }
            }
            td class="started" { (maybe_time(j.started_at)) }
            td class="duration num" { (j.duration_seconds.map_or_else(|| "–".to_string(), duration_text)) }
            td class="model" {
                @if let Some(m) = &j.model_id { a class="model-link" href=(format!("/ml/models/{m}")) { "Open the model" } } @else { "–" }
            }
            @if write {
                td class="actions" {
                    @if !j.status.finished() {
                        (action_button("DELETE", &format!("/v1/ml/training/{}", j.id), "Cancel", "danger",
                            Some(format!("Cancel the training job “{}”?", j.name))))
                    }
                }
            }
        }
    }
}

/// The form that trains a model: a dataset of at least 2 rows, its number columns (all ticked;
/// `ml_models.js` puts another dataset's in when it is chosen, from its option's
/// `data-columns`), the name and the hyperparameters.
fn training_form(datasets: &[&Dataset]) -> Markup {
    let first = datasets.first().map(|d| (d.id.as_str(), number_columns(d)));
    html! {
        section {
            h2 { "Train a model" }
            @if let Some((first_id, columns)) = first {
                form class="api-form" id="training-form" data-method="POST" data-action="/v1/ml/training" {
                    input type="hidden" name="algorithm" value="isolation_forest";
                    (field("train-dataset", "dataset_id", "Dataset (at least 2 rows)", html! {
                        select id="train-dataset" name="dataset_id" {
                            @for d in datasets {
                                option value=(d.id) data-name=(d.name)
                                    data-columns=(serde_json::to_string(&number_columns(d)).unwrap_or_default()) {
                                    (d.name) " (" (d.row_count) " rows)"
                                }
                            }
                        }
                    }))
                    fieldset id="train-features" data-dataset-id=(first_id) {
                        legend { "Features: the number columns to train on" }
                        div class="feature-boxes" id="train-feature-boxes" {
                            @if columns.is_empty() {
                                p class="quiet" { "This dataset has no number columns." }
                            }
                            @for c in &columns {
                                label class="check" { input type="checkbox" name="features" data-type="list" value=(c) checked; " " (c) }
                            }
                        }
                        p class="field-error" data-error-for="features" {}
                    }
                    (field("train-name", "name", "Name", html! { input id="train-name" name="name" required maxlength="100" placeholder="pump anomalies"; }))
                    (field("train-trees", "hyperparameters.n_estimators", "Trees (n_estimators, 1 to 10,000)", html! {
                        input id="train-trees" name="hyperparameters.n_estimators" type="number" step="1" data-type="number" value="100";
                    }))
                    (field("train-contamination", "hyperparameters.contamination", "Contamination (the expected share of anomalies, over 0 up to 0.5)", html! {
                        input id="train-contamination" name="hyperparameters.contamination" type="number" step="any" data-type="number" value="0.1";
                    }))
                    (field("train-samples", "hyperparameters.max_samples", "Rows per tree (max_samples, optional)", html! {
                        input id="train-samples" name="hyperparameters.max_samples" type="number" step="1" data-type="number" placeholder="min(256, rows)";
                    }))
                    (field("train-seed", "hyperparameters.seed", "Seed", html! {
                        input id="train-seed" name="hyperparameters.seed" type="number" step="1" data-type="number" value="0";
                    }))
                    button type="submit" class="primary" { "Train" }
                    p class="form-error" role="alert" {}
                    p class="quiet" id="training-started" role="status" aria-live="polite" {}
                }
            } @else {
                p class="quiet" id="no-training-data" {
                    "No dataset has 2 rows or more yet: " a href="/ml/datasets" { "create one" } "."
                }
            }
        }
    }
}

/// The training jobs, live, and the form that starts one.
pub(crate) async fn training(
    State(state): State<AppState>,
    browser: Browser,
) -> Result<Response, Response> {
    let org = browser.org_id();
    let jobs = state.app.training_jobs(org, ALL).await.or_page(&browser)?;
    let datasets = state.app.datasets(org, ALL).await.or_page(&browser)?;
    let names = dataset_names(&datasets.items);
    let trainable: Vec<&Dataset> = datasets.items.iter().filter(|d| d.row_count >= 2).collect();
    let write = browser.may(Scope::WriteAssets);
    let body = html! {
        div class="page-head" {
            h1 { "Training" }
            a class="button" href="/ml/models" { "Models" }
        }
        p class="quiet" { "Isolation forests trained on a dataset's number columns. Queued and running jobs follow here live." }
        p class="error" id="jobs-error" role="alert" hidden {}
        div class="table-wrap" {
            table class="list" id="training-jobs" data-write=(write) {
                thead { tr {
                    th scope="col" { "Name" } th scope="col" { "Dataset" } th scope="col" { "Status" }
                    th scope="col" { "Progress" } th scope="col" { "Started" } th scope="col" class="num" { "Duration" }
                    th scope="col" { "Model" }
                    @if write { th scope="col" { "Actions" } }
                } }
                tbody {
                    @if jobs.items.is_empty() {
                        tr class="empty" { td colspan=(if write { "8" } else { "7" }) { "No training jobs yet." } }
                    }
                    @for j in &jobs.items { (job_row(j, &names, write)) }
                }
            }
        }
        @if write {
            div class="forms" { (training_form(&trainable)) }
        }
    };
    Ok(shell(&browser, body, &["ml_models.js"]))
}

/// The models.
pub(crate) async fn models(
    State(state): State<AppState>,
    browser: Browser,
) -> Result<Response, Response> {
    let org = browser.org_id();
    let list = state.app.models(org, ALL).await.or_page(&browser)?;
    let datasets = state.app.datasets(org, ALL).await.or_page(&browser)?;
    let names = dataset_names(&datasets.items);
    let body = html! {
        div class="page-head" {
            h1 { "Models" }
            a class="button" href="/ml/training" { "Training" }
        }
        p class="quiet" { "Anomaly detectors trained on datasets; a deployed model scores its assets' live telemetry." }
        div class="table-wrap" {
            table class="list" id="models" {
                thead { tr {
                    th scope="col" { "Name" } th scope="col" { "Features" } th scope="col" { "Dataset / version" }
                    th scope="col" class="num" { "AUC" } th scope="col" class="num" { "Threshold" }
                    th scope="col" { "Status" } th scope="col" { "Created" }
                } }
                tbody {
                    @if list.items.is_empty() {
                        tr class="empty" { td colspan="7" { "No models yet: " a href="/ml/training" { "train one" } "." } }
                    }
                    @for m in &list.items {
                        tr data-model-id=(m.id) data-status=(if m.deployment.is_some() { "deployed" } else { m.status.as_str() }) {
                            td { a href=(format!("/ml/models/{}", m.id)) { (m.name) } }
                            td { (m.features.join(", ")) }
                            td { (dataset_link(&names, &m.dataset_id)) " " small { (version_text(m.dataset_version.as_deref())) } }
                            td class="num" { (ratio(m.metrics.roc_auc)) }
                            td class="num" { (format!("{:.3}", m.threshold)) }
                            td { (model_badge(m)) }
                            td { (time(m.created_at)) }
                        }
                    }
                }
            }
        }
    };
    Ok(shell(&browser, body, &[]))
}

const SCORE_WIDTH: f64 = 400.0;
const SCORE_HEIGHT: f64 = 100.0;

/// A bin of the score histogram as drawn: where, how tall, its rows, its scores, and whether
/// they are above the threshold.
struct Bar {
    x: String,
    y: String,
    height: String,
    count: u64,
    from: f64,
    to: f64,
    over: bool,
}

/// The training rows' scores: twenty bins over [0, 1], bins above the threshold marked, and the
/// threshold as a dashed vertical line.
fn score_histogram(m: &TrainingMetrics, threshold: f64) -> Markup {
    let bins = &m.scores.histogram;
    if bins.is_empty() {
        return html! { p class="quiet" { "No score distribution recorded." } };
    }
    let most = bins.iter().copied().max().unwrap_or(0).max(1);
    let w = SCORE_WIDTH / bins.len() as f64;
    let bar_width = format!("{:.1}", (w - 1.0).max(1.0));
    let bars: Vec<Bar> = bins
        .iter()
        .enumerate()
        .map(|(i, &count)| {
            let h = if count == 0 {
                0.0
            } else {
                (count as f64 / most as f64 * (SCORE_HEIGHT - 2.0)).max(1.0)
            };
            let from = i as f64 / bins.len() as f64;
            Bar {
                x: format!("{:.1}", i as f64 * w + 0.5),
                y: format!("{:.1}", SCORE_HEIGHT - h),
                height: format!("{h:.1}"),
                count,
                from,
                to: (i + 1) as f64 / bins.len() as f64,
                over: from >= threshold,
            }
        })
        .collect();
    let x = threshold.clamp(0.0, 1.0) * SCORE_WIDTH;
    let tx = format!("{x:.1}");
    let (label_x, anchor) = if x > SCORE_WIDTH / 2.0 {
        (format!("{:.1}", x - 4.0), "end")
    } else {
        (format!("{:.1}", x + 4.0), "start")
    };
    let total = SCORE_HEIGHT + 16.0;
    let label = format!(
        "histogram of the {} training rows' anomaly scores in {} bins from 0 to 1; threshold {:.3}, {} rows above it",
        m.rows,
        bins.len(),
        threshold,
        m.flagged
    );
    html! {
        svg class="histogram score-histogram" id="score-histogram" width=(SCORE_WIDTH) height=(total)
            viewBox=(format!("0 0 {SCORE_WIDTH} {total}")) role="img" aria-label=(label) data-threshold=(threshold) {
            line class="axis" x1="0" y1=(SCORE_HEIGHT) x2=(SCORE_WIDTH) y2=(SCORE_HEIGHT) {}
            @for b in &bars {
                rect x=(b.x) y=(b.y) width=(bar_width) height=(b.height) data-count=(b.count) class=[b.over.then_some("over")] {
                    title { (format!("{:.2}", b.from)) " – " (format!("{:.2}", b.to)) ": " (b.count) " rows" }
                }
            }
            line class="threshold" x1=(tx) y1="0" x2=(tx) y2=(SCORE_HEIGHT) {
                title { "threshold " (format!("{threshold:.3}")) }
            }
            text class="threshold-label" x=(label_x) y="10" text-anchor=(anchor) { "threshold " (format!("{threshold:.3}")) }
            text x="0" y=(total - 3.0) text-anchor="start" { "0" }
            text x=(SCORE_WIDTH / 2.0) y=(total - 3.0) text-anchor="middle" { "0.5" }
            text x=(SCORE_WIDTH) y=(total - 3.0) text-anchor="end" { "1" }
        }
    }
}

/// The model's facts: what it is, what it was trained on, where it is deployed.
fn facts(m: &Model, dataset: Option<&Dataset>) -> Markup {
    html! {
        dl class="facts" id="model-facts" {
            dt { "Status" } dd { (model_badge(m)) }
            dt { "Algorithm" } dd { "isolation forest" }
            dt { "Features" } dd { (m.features.join(", ")) }
            dt { "Dataset" } dd {
                @if let Some(d) = dataset { a href=(format!("/ml/datasets/{}", d.id)) { (d.name) } } @else { code { (m.dataset_id) } }
                " · " (version_text(m.dataset_version.as_deref()))
            }
            dt { "Hyperparameters" } dd { (hyperparameters_text(&m.hyperparameters)) }
            dt { "Training job" } dd { a href="/ml/training" { code { (m.training_job_id) } } }
            dt { "Created" } dd { (time(m.created_at)) }
            @if let Some(dep) = &m.deployment {
                dt { "Deployed to" } dd id="deployed-assets" { (dep.asset_ids.join(", ")) }
                dt { "Reads" } dd {
                    @for (k, (f, tag)) in dep.feature_tags.iter().enumerate() {
                        @if k > 0 { ", " }
                        (f) " ← " code { (tag) }
                    }
                }
                dt { "Writes" } dd { code { (dep.score_tag) } " on each asset" }
                dt { "Deployed" } dd { (time(dep.deployed_at)) }
            }
        }
    }
}

/// What the training measured.
fn metrics(m: &Model) -> Markup {
    let t = &m.metrics;
    let share = if t.rows > 0 {
        format!(" ({:.1} %)", t.flagged as f64 / t.rows as f64 * 100.0)
    } else {
        String::new()
    };
    html! {
        h2 { "Metrics" }
        dl class="facts" id="model-metrics" {
            dt { "Training rows" } dd data-rows=(t.rows) { (t.rows) }
            dt { "Flagged" } dd data-flagged=(t.flagged) { (t.flagged) (share) }
            dt { "Threshold" } dd data-threshold=(m.threshold) { (format!("{:.3}", m.threshold)) }
            dt { "Scores" } dd {
                "min " (format!("{:.3}", t.scores.min)) " · median " (format!("{:.3}", t.scores.p50))
                " · p90 " (format!("{:.3}", t.scores.p90)) " · p99 " (format!("{:.3}", t.scores.p99))
                " · max " (format!("{:.3}", t.scores.max))
            }
            @if let Some(n) = t.labelled_rows { dt { "Labelled rows" } dd { (n) } }
            @if t.roc_auc.is_some() { dt { "ROC AUC" } dd data-auc=[t.roc_auc] { (ratio(t.roc_auc)) } }
            @if t.precision.is_some() { dt { "Precision" } dd { (ratio(t.precision)) } }
            @if t.recall.is_some() { dt { "Recall" } dd { (ratio(t.recall)) } }
        }
        h3 { "Training rows' scores" }
        (score_histogram(t, m.threshold))
    }
}

/// A row scored: one number per feature (empty: the training median).
fn test_form(m: &Model) -> Markup {
    html! {
        section {
            h2 { "Test a row" }
            form id="model-test" data-action=(format!("/v1/ml/models/{}/test", m.id)) {
                @for (i, f) in m.features.iter().enumerate() {
                    label for=(format!("test-f-{i}")) { (f) }
                    input id=(format!("test-f-{i}")) type="number" step="any" data-feature=(f);
                    p class="field-error" data-error-for=(format!("features.{f}")) {}
                }
                p class="hint" { "An empty value is missing: the training rows' median stands in." }
                button type="submit" class="primary" { "Score" }
                p class="form-error" role="alert" {}
                output class="result" id="test-result" aria-live="polite" {}
            }
        }
    }
}

/// Deploying (again: it replaces the deployment) to assets, each feature read from a tag, and
/// undeploying.
fn deploy_form(m: &Model) -> Markup {
    let dep = m.deployment.as_ref();
    html! {
        section {
            h2 { "Deploy" }
            p class="quiet" { "Scores each asset's live telemetry; the score is written as the tag "
                code { (plantd_model::ml_models::score_tag(&m.id)) } ", where charts and alert rules read it." }
            form id="model-deploy" data-action=(format!("/v1/ml/models/{}/deploy", m.id)) {
                (field("deploy-assets", "asset_ids", "Asset ids (comma separated, up to 100)", html! {
                    input id="deploy-assets" name="asset_ids" required placeholder="Pump_01, Pump_02"
                        value=(dep.map(|d| d.asset_ids.join(", ")).unwrap_or_default());
                }))
                fieldset {
                    legend { "The tag each feature reads" }
                    @for (i, f) in m.features.iter().enumerate() {
                        label for=(format!("deploy-tag-{i}")) { (f) }
                        input id=(format!("deploy-tag-{i}")) data-feature=(f) maxlength="128"
                            value=(dep.and_then(|d| d.feature_tags.get(f)).unwrap_or(f));
                        p class="field-error" data-error-for=(format!("feature_tags.{f}")) {}
                    }
                }
                button type="submit" class="primary" { @if dep.is_some() { "Deploy again" } @else { "Deploy" } }
                p class="form-error" role="alert" {}
            }
            @if dep.is_some() {
                div class="actions" id="undeploy" {
                    (action_button("POST", &format!("/v1/ml/models/{}/undeploy", m.id), "Undeploy", "danger",
                        Some(format!("Stop scoring with “{}”? Its scores stay stored.", m.name))))
                }
            }
        }
    }
}

/// While deployed: each asset's score over the last hour (drawn and refreshed by
/// `ml_models.js`) and the open alerts on it.
fn live_scores(m: &Model) -> Markup {
    html! {
        @if let Some(dep) = &m.deployment {
            section id="live-scores" data-model-id=(m.id) data-score-tag=(dep.score_tag) data-threshold=(m.threshold) {
                h2 { "Live scores" }
                p class="quiet" {
                    "Each asset's " code { (dep.score_tag) } " over the last hour, refreshed every 5 s; the dashed line is the threshold ("
                    (format!("{:.3}", m.threshold)) "). Alert rules on the tag fire as on any tag."
                }
                p class="error" id="live-error" role="alert" hidden {}
                @for a in &dep.asset_ids {
                    div class="score-asset" data-asset=(a) {
                        h3 { (a) }
                        div class="score-chart" role="img" aria-label=(format!("anomaly score of {a} over the last hour")) {}
                        p class="note score-note" {}
                        h4 { "Open alerts on the score" }
                        ul class="score-alerts" { li class="quiet" { "Reading…" } }
                    }
                }
            }
        }
    }
}

/// One model: facts, metrics with the score histogram, test, deploy, download, live scores.
pub(crate) async fn model(
    State(state): State<AppState>,
    browser: Browser,
    PathId(id): PathId,
) -> Result<Response, Response> {
    let org = browser.org_id();
    let m = state.app.model(org, &id).await.or_page(&browser)?;
    // Only its name: a model outlives its dataset, which then shows as its id.
    let dataset = state.app.dataset(org, &m.dataset_id).await.ok();
    let write = browser.may(Scope::WriteAssets);
    let body = html! {
        div id="model" data-id=(m.id) {
            div class="page-head" {
                h1 { (m.name) }
                a class="button" id="model-download" href=(format!("/v1/ml/models/{}/download", m.id)) download { "Download" }
                a class="button" href="/ml/models" { "Models" }
            }
            (facts(&m, dataset.as_ref()))
            (metrics(&m))
            div class="forms" {
                (test_form(&m))
                @if write { (deploy_form(&m)) }
            }
            (live_scores(&m))
        }
    };
    let scripts: &[&str] = if m.deployment.is_some() {
        &["vendor/uplot/uPlot.iife.min.js", "ml_models.js"]
    } else {
        &["ml_models.js"]
    };
    Ok(shell_titled(&browser, &m.name, body, scripts))
}
