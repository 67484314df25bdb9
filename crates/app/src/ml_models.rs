//! ML models (SPEC 4.6; docs/api.md, "ML training and models"): list and read, test one row or
//! a batch, download in the versioned JSON format, deploy to assets and undeploy; and the live
//! scorer, which scores a deployed model on the points this node ingests and writes the score
//! as a tag of each asset, where charts and alert rules read it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use plantd_ml::forest::{Forest, Rows};
use plantd_model::Timestamp;
use plantd_model::ml_models::{Deployment, Model, score_tag, with_score_widgets};
use plantd_model::page::{Page, Paged};
use plantd_model::telemetry::{Point, Quality};
use plantd_model::validation::Validator;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::{broadcast, watch};

use crate::app::App;
use crate::caller::{Caller, Credential};
use crate::error::{AppError, AppResult};
use crate::events::Event;
use crate::telemetry::Batch;

/// `POST /v1/ml/models/{id}/test`: one row (`features`) or many (`rows`).
#[derive(Clone, Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelTest {
    #[schema(value_type = Option<Object>)]
    pub features: Option<serde_json::Map<String, Value>>,
    #[schema(value_type = Option<Vec<Object>>)]
    pub rows: Option<Vec<serde_json::Map<String, Value>>>,
}

/// A row's score.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct Scored {
    pub anomaly_score: f64,
    pub is_anomaly: bool,
}

/// The answer to a test.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct TestResult {
    /// One row: its score.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anomaly_score: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_anomaly: Option<bool>,
    /// Many rows: theirs, in order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub results: Option<Vec<Scored>>,
    pub threshold: f64,
}

/// `POST /v1/ml/models/{id}/deploy`.
#[derive(Clone, Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeployRequest {
    pub asset_ids: Vec<String>,
    /// The tag each feature reads; default: the tag of the feature's own name.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub feature_tags: BTreeMap<String, String>,
}

/// The most rows a batch test scores.
const MAX_TEST_ROWS: usize = 10_000;

/// A row of features by name, in the model's order; a missing, unknown or non-number feature
/// names its field.
fn feature_row(
    model: &Model,
    values: &serde_json::Map<String, Value>,
    field: &str,
    v: &mut Validator,
) -> Vec<f64> {
    for k in values.keys() {
        if !model.features.contains(k) {
            v.add(
                format!("{field}.{k}"),
                format!(
                    "is not a feature of the model ({})",
                    model.features.join(", ")
                ),
            );
        }
    }
    model
        .features
        .iter()
        .map(|f| match values.get(f) {
            Some(Value::Number(n)) => n.as_f64().unwrap_or(f64::NAN),
            Some(Value::Null) => f64::NAN,
            Some(_) => {
                v.add(
                    format!("{field}.{f}"),
                    "must be a number (or null: missing)",
                );
                f64::NAN
            }
            None => {
                v.add(
                    format!("{field}.{f}"),
                    "is required: a feature of the model",
                );
                f64::NAN
            }
        })
        .collect()
}

impl App {
    pub async fn models(&self, org_id: &str, page: Page) -> AppResult<Paged<Model>> {
        let (items, total) = self
            .store()
            .models(org_id, (page.limit(), page.offset()))
            .await?;
        Ok(Paged { items, total })
    }

    pub async fn model(&self, org_id: &str, id: &str) -> AppResult<Model> {
        self.store()
            .model(org_id, id)
            .await
            .map_err(AppError::missing("model"))
    }

    /// The model's forest in the download format (docs/ml-model-format.md).
    pub async fn model_download(&self, org_id: &str, id: &str) -> AppResult<String> {
        self.model(org_id, id).await?;
        Ok(self.store().model_forest(org_id, id).await?)
    }

    async fn forest(&self, org_id: &str, id: &str) -> AppResult<Forest> {
        let text = self.store().model_forest(org_id, id).await?;
        let v: Value =
            serde_json::from_str(&text).map_err(|e| AppError::internal("reading a model", e))?;
        Forest::from_json(&v)
            .map_err(|e| AppError::internal("reading a model", std::io::Error::other(e)))
    }

    pub async fn test_model(&self, org_id: &str, id: &str, t: ModelTest) -> AppResult<TestResult> {
        let model = self.model(org_id, id).await?;
        let mut v = Validator::new();
        let rows: Vec<Vec<f64>> = match (&t.features, &t.rows) {
            (Some(f), None) => vec![feature_row(&model, f, "features", &mut v)],
            (None, Some(rows)) => {
                v.check(
                    (1..=MAX_TEST_ROWS).contains(&rows.len()),
                    "rows",
                    format!("must hold 1 to {MAX_TEST_ROWS} rows"),
                );
                rows.iter()
                    .enumerate()
                    .map(|(i, r)| feature_row(&model, r, &format!("rows[{i}]"), &mut v))
                    .collect()
            }
            _ => {
                v.add(
                    "features",
                    "send features (one row) or rows (a batch), not both",
                );
                Vec::new()
            }
        };
        v.finish()?;
        let forest = self.forest(org_id, id).await?;
        let scored: Vec<Scored> = rows
            .iter()
            .map(|r| {
                let s = forest.score_row(r);
                Scored {
                    anomaly_score: s,
                    is_anomaly: s > forest.threshold,
                }
            })
            .collect();
        Ok(match t.features {
            Some(_) => TestResult {
                anomaly_score: Some(scored[0].anomaly_score),
                is_anomaly: Some(scored[0].is_anomaly),
                results: None,
                threshold: forest.threshold,
            },
            None => TestResult {
                anomaly_score: None,
                is_anomaly: None,
                results: Some(scored),
                threshold: forest.threshold,
            },
        })
    }

    pub async fn deploy_model(&self, org_id: &str, id: &str, d: DeployRequest) -> AppResult<Model> {
        let model = self.model(org_id, id).await?;
        let mut v = Validator::new();
        v.check(
            (1..=1000).contains(&d.asset_ids.len()),
            "asset_ids",
            "must name 1 to 1000 assets",
        );
        for (i, a) in d.asset_ids.iter().enumerate() {
            v.check(
                plantd_model::telemetry::check_name(a).is_ok(),
                &format!("asset_ids[{i}]"),
                "must be an asset id",
            );
        }
        for (f, tag) in &d.feature_tags {
            v.check(
                model.features.contains(f),
                &format!("feature_tags.{f}"),
                format!(
                    "is not a feature of the model ({})",
                    model.features.join(", ")
                ),
            );
            v.check(
                plantd_model::telemetry::check_name(tag).is_ok(),
                &format!("feature_tags.{f}"),
                "must be a tag name",
            );
        }
        v.finish()?;
        let feature_tags = model
            .features
            .iter()
            .map(|f| {
                (
                    f.clone(),
                    d.feature_tags.get(f).cloned().unwrap_or_else(|| f.clone()),
                )
            })
            .collect();
        let deployment = Deployment {
            asset_ids: d.asset_ids,
            feature_tags,
            score_tag: score_tag(&model.id),
            deployed_at: Timestamp::now(),
        };
        self.store()
            .set_model_deployment(org_id, id, Some(&deployment), Timestamp::now())
            .await?;
        self.scorer_wake().notify_one();
        let model = self.model(org_id, id).await?;
        self.draw_on_dashboards(&model).await?;
        Ok(model)
    }

    pub async fn undeploy_model(&self, org_id: &str, id: &str) -> AppResult<Model> {
        self.model(org_id, id).await?;
        self.store()
            .set_model_deployment(org_id, id, None, Timestamp::now())
            .await?;
        self.scorer_wake().notify_one();
        let model = self.model(org_id, id).await?;
        self.draw_on_dashboards(&model).await?;
        Ok(model)
    }

    /// Puts the score of a deployed model on every dashboard of its organization that shows one
    /// of its assets, or takes it off when the model is undeployed
    /// ([`plantd_model::ml_models::with_score_widgets`]).
    async fn draw_on_dashboards(&self, model: &Model) -> AppResult<()> {
        const PAGE: i64 = 200;
        let mut offset = 0;
        loop {
            let (page, total) = self.store().dashboards(&model.org_id, PAGE, offset).await?;
            for d in &page {
                if let Some(layout) = with_score_widgets(&d.layout, model) {
                    self.store()
                        .update_dashboard(&model.org_id, &d.id, &d.name, &d.description, &layout)
                        .await?;
                }
            }
            offset += PAGE;
            if page.is_empty() || offset as u64 >= total {
                return Ok(());
            }
        }
    }
}

/// A deployed model as the scorer holds it: the forest, and per asset the latest value of each
/// feature (held until a newer one comes).
struct Live {
    model: Model,
    deployment: Deployment,
    forest: Forest,
    /// tag -> the feature's index
    tags: HashMap<String, usize>,
    /// Each deployed asset's state, looked up once per point.
    latest: HashMap<String, AssetState>,
}

/// A deployed asset as the scorer holds it: the latest value of each feature (NaN until the
/// first), and the batch point that last updated it (its index), cleared after each batch.
struct AssetState {
    values: Vec<f64>,
    newest: Option<usize>,
}

/// How often the scorer reads the deployed models again (other nodes deploy too).
const RELOAD: std::time::Duration = std::time::Duration::from_secs(5);

/// The live scorer: for each committed batch of this node, each deployed model of its
/// organization takes the batch's values of its feature tags on its assets; an asset whose
/// features all have a value gets a score at the batch's newest time of those points, written
/// as its score tag through the same ingest as any point (never on the ingest request's path:
/// the bus delivers the batch after its answer).
pub(crate) async fn run_scorer(app: App, mut stop: watch::Receiver<bool>) {
    app.workers().register(SCORER);
    let mut events = app.events().subscribe();
    let mut live: HashMap<String, (plantd_model::Tier, Vec<Live>)> = HashMap::new();
    let mut reload = tokio::time::interval(RELOAD);
    loop {
        tokio::select! {
            _ = reload.tick() => load(&app, &mut live).await,
            _ = app.scorer_wake().notified() => load(&app, &mut live).await,
            e = events.recv() => match e {
                Ok(Event::Telemetry { org_id, points }) => {
                    if let Some((tier, models)) = live.get_mut(&*org_id) {
                        score(&app, &org_id, *tier, models, &points).await;
                    }
                }
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(skipped = n, "the live scorer fell behind and skipped batches");
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = stop.changed() => return,
        }
    }
}

const SCORER: &str = "ml_scorer";

async fn load(app: &App, live: &mut HashMap<String, (plantd_model::Tier, Vec<Live>)>) {
    let result = app.store().deployed_models().await;
    let models = match result {
        Ok(m) => m,
        Err(e) => {
            app.workers()
                .report(SCORER, Err(plantd_model::error_chain(&e)));
            return;
        }
    };
    let mut next: HashMap<String, (plantd_model::Tier, Vec<Live>)> = HashMap::new();
    for model in models {
        let Some(deployment) = model.deployment.clone() else {
            continue;
        };
        // Keep what the model held when its deployment did not change.
        let kept = live.get_mut(&model.org_id).and_then(|(_, v)| {
            v.iter()
                .position(|l| l.model.id == model.id && l.deployment == deployment)
                .map(|i| v.swap_remove(i))
        });
        let entry = match kept {
            Some(l) => l,
            None => match app.forest(&model.org_id, &model.id).await {
                Ok(forest) => Live {
                    tags: model
                        .features
                        .iter()
                        .enumerate()
                        .filter_map(|(i, f)| deployment.feature_tags.get(f).map(|t| (t.clone(), i)))
                        .collect(),
                    latest: deployment
                        .asset_ids
                        .iter()
                        .map(|a| {
                            let values = vec![f64::NAN; model.features.len()];
                            (
                                a.clone(),
                                AssetState {
                                    values,
                                    newest: None,
                                },
                            )
                        })
                        .collect(),
                    forest,
                    deployment,
                    model,
                },
                Err(e) => {
                    tracing::warn!(model = %model.id, error = %plantd_model::error_chain(&e), "a deployed model cannot be read");
                    continue;
                }
            },
        };
        let org = entry.model.org_id.clone();
        if !next.contains_key(&org) {
            // The organization's tier sets the ingestion limits its scores count against.
            let tier = match app.store().org(&org).await {
                Ok(o) => o.tier,
                Err(_) => continue,
            };
            next.insert(org.clone(), (tier, Vec::new()));
        }
        if let Some((_, v)) = next.get_mut(&org) {
            v.push(entry);
        }
    }
    *live = next;
    app.workers().report(SCORER, Ok(()));
}

async fn score(
    app: &App,
    org_id: &str,
    tier: plantd_model::Tier,
    models: &mut [Live],
    points: &Arc<Vec<Point>>,
) {
    let started = std::time::Instant::now();
    let mut out = Vec::new();
    for m in models.iter_mut() {
        // Each feature point updates its asset's values and, when it is the newest so far,
        // the point the score takes its time and data source from.
        let mut touched: Vec<&str> = Vec::new();
        for (k, p) in points.iter().enumerate() {
            let Some(&i) = m.tags.get(&p.tag_name) else {
                continue;
            };
            if p.quality != Quality::Good {
                continue;
            }
            let Some(state) = m.latest.get_mut(&p.asset_id) else {
                continue;
            };
            state.values[i] = p.value;
            match state.newest {
                None => {
                    state.newest = Some(k);
                    touched.push(p.asset_id.as_str());
                }
                Some(n) if p.timestamp.millis() >= points[n].timestamp.millis() => {
                    state.newest = Some(k);
                }
                Some(_) => {}
            }
        }
        // The touched assets whose every feature has a value, scored together (rows walk
        // each tree side by side).
        let d = m.model.features.len();
        let mut rows = Vec::with_capacity(touched.len() * d);
        let mut scored = Vec::with_capacity(touched.len());
        for asset in touched {
            let Some(state) = m.latest.get_mut(asset) else {
                continue;
            };
            let newest = state.newest.take();
            if let Some(n) = newest.filter(|_| !state.values.iter().any(|x| x.is_nan())) {
                rows.extend_from_slice(&state.values);
                scored.push((asset, &points[n]));
            }
        }
        if scored.is_empty() {
            continue;
        }
        let scores = m.forest.score(
            &Rows {
                values: &rows,
                n_features: d,
            },
            1,
        );
        for ((asset, newest), value) in scored.into_iter().zip(scores) {
            out.push(Point {
                asset_id: asset.to_string(),
                tag_name: m.deployment.score_tag.clone(),
                value,
                timestamp: newest.timestamp,
                quality: Quality::Good,
                // The source of the points scored: alert rules of that source see the score.
                data_source_id: newest.data_source_id.clone(),
            });
        }
    }
    metrics::histogram!("plantd_ml_scoring_duration_seconds")
        .record(started.elapsed().as_secs_f64());
    if out.is_empty() {
        return;
    }
    let caller = Caller {
        credential: Credential::Model,
        org_id: org_id.to_string(),
        user_id: None,
        scopes: vec![plantd_model::Scope::WriteTelemetry],
        tier,
    };
    if let Err(e) = app.ingest(&caller, Batch::Points(out), None).await {
        tracing::warn!(error = %plantd_model::error_chain(&e), "could not write live anomaly scores");
    }
}
