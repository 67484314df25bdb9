//! ML training jobs (SPEC 4.6; docs/api.md, "ML training and models"): a request checked
//! against its dataset, queued, and run by a worker off the request path, one at a time per
//! node: the dataset's feature columns read into memory, an isolation forest fitted on a
//! blocking thread with both cores, progress written every half second (the job's beat) and a
//! cancel seen within a second; the model stored with its metrics in the transaction that
//! completes the job. A job whose beat stops (its node crashed) is failed by any node.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use plantd_ml::evaluate;
use plantd_ml::forest::{Forest, Params, Rows};
use plantd_model::Timestamp;
use plantd_model::ml::ColumnType;
use plantd_model::ml_models::{
    Algorithm, Hyperparameters, JobStatus, Model, ScoreSummary, TrainingJob, TrainingMetrics,
};
use plantd_model::page::{Page, Paged};
use plantd_model::validation::Validator;
use plantd_store::Cancel;
use serde::Deserialize;
use tokio::sync::watch;

use crate::app::App;
use crate::caller::Caller;
use crate::error::{AppError, AppResult};

/// `POST /v1/ml/training`.
#[derive(Clone, Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewTrainingJob {
    pub name: String,
    pub dataset_id: String,
    /// A version of the dataset; default: the working copy when the job runs.
    pub dataset_version: Option<String>,
    /// Number columns to train on; default: every number column.
    pub features: Option<Vec<String>>,
    pub algorithm: Algorithm,
    #[serde(default)]
    pub hyperparameters: Hyperparameters,
}

/// A job's beat: how often a running job writes its progress and reads a cancel.
const BEAT: Duration = Duration::from_millis(500);
/// A running job whose beat is older than this is failed.
const STALE_MS: i64 = 30_000;
const WORKER: &str = "ml_training";
const NORMAL_NAMES: [&str; 5] = ["normal", "ok", "good", "healthy", "nominal"];

fn params(h: &Hyperparameters) -> Params {
    Params {
        n_estimators: h.n_estimators as usize,
        max_samples: h.max_samples.map(|m| m as usize),
        max_features: h.max_features,
        contamination: h.contamination,
        seed: h.seed,
    }
}

/// The scores' distribution.
fn summary(scores: &[f64]) -> ScoreSummary {
    let mut histogram = vec![0u64; 20];
    for s in scores {
        histogram[((s * 20.0) as usize).min(19)] += 1;
    }
    let p = evaluate::percentiles(scores, &[50.0, 90.0, 99.0]);
    ScoreSummary {
        min: scores.iter().copied().fold(f64::INFINITY, f64::min),
        p50: p[0],
        p90: p[1],
        p99: p[2],
        max: scores.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        histogram,
    }
}

/// What the job reads: the feature values row-major, and per row whether it is labelled an
/// anomaly (`None`: unlabelled).
struct TrainingSet {
    values: Vec<f64>,
    n_features: usize,
    labels: Vec<Option<bool>>,
}

impl App {
    pub async fn create_training_job(
        &self,
        caller: &Caller,
        new: NewTrainingJob,
    ) -> AppResult<TrainingJob> {
        let org = &caller.org_id;
        let dataset = match self.store().dataset(org, &new.dataset_id).await {
            Ok(d) => d,
            Err(plantd_store::StoreError::NotFound) => {
                return Err(AppError::invalid(
                    "dataset_id",
                    "is not a dataset of the organization",
                ));
            }
            Err(e) => return Err(e.into()),
        };
        let rows = match &new.dataset_version {
            None => dataset.row_count,
            Some(v) => match self.store().dataset_version(&dataset.id, v).await {
                Ok(v) => v.row_count,
                Err(plantd_store::StoreError::NotFound) => {
                    return Err(AppError::invalid(
                        "dataset_version",
                        "is not a version of the dataset",
                    ));
                }
                Err(e) => return Err(e.into()),
            },
        };
        let numbers: Vec<&str> = dataset
            .columns
            .iter()
            .filter(|c| c.column_type == ColumnType::Number)
            .map(|c| c.name.as_str())
            .collect();
        let features = new
            .features
            .clone()
            .unwrap_or_else(|| numbers.iter().map(|s| s.to_string()).collect());
        let mut v = Validator::new();
        let name = new.name.trim().to_string();
        v.check(
            (1..=100).contains(&name.chars().count()),
            "name",
            "must be 1 to 100 characters",
        );
        v.check(
            rows >= 2,
            "dataset_id",
            "the dataset needs at least 2 rows to train on",
        );
        v.check(
            !features.is_empty(),
            "features",
            "name at least one number column",
        );
        for (i, f) in features.iter().enumerate() {
            let field = format!("features[{i}]");
            match dataset.columns.iter().find(|c| &c.name == f) {
                None => v.add(field, format!("'{f}' is not a column of the dataset")),
                Some(c) if c.column_type != ColumnType::Number => v.add(
                    field,
                    format!(
                        "'{f}' is a {} column; features are number columns",
                        c.column_type.as_str()
                    ),
                ),
                Some(_) if features[..i].contains(f) => {
                    v.add(field, format!("'{f}' is named twice"))
                }
                Some(_) => {}
            }
        }
        for (field, message) in params(&new.hyperparameters).check(rows as usize) {
            v.add(field, message);
        }
        v.finish()?;
        let job = TrainingJob {
            id: plantd_model::new_id(),
            org_id: org.clone(),
            name,
            dataset_id: dataset.id,
            dataset_version: new.dataset_version,
            features,
            algorithm: new.algorithm,
            hyperparameters: new.hyperparameters,
            status: JobStatus::Queued,
            progress: 0.0,
            error: None,
            metrics: None,
            model_id: None,
            created_at: Timestamp::now(),
            created_by: caller.actor().to_string(),
            started_at: None,
            finished_at: None,
            duration_seconds: None,
        };
        self.store().insert_training_job(&job).await?;
        self.ml_wake().notify_one();
        Ok(job)
    }

    /// The ids of the classes whose rows are anomalies when a model is measured against
    /// labels: every class not named normal, ok, good, healthy or nominal (any case).
    async fn anomaly_classes(&self, dataset_id: &str) -> AppResult<Vec<String>> {
        Ok(self
            .store()
            .label_classes(dataset_id)
            .await?
            .into_iter()
            .filter(|c| !NORMAL_NAMES.contains(&c.name.to_lowercase().as_str()))
            .map(|c| c.id)
            .collect())
    }

    pub async fn training_jobs(&self, org_id: &str, page: Page) -> AppResult<Paged<TrainingJob>> {
        let (items, total) = self
            .store()
            .training_jobs(org_id, (page.limit(), page.offset()))
            .await?;
        Ok(Paged { items, total })
    }

    pub async fn training_job(&self, org_id: &str, id: &str) -> AppResult<TrainingJob> {
        self.store()
            .training_job(org_id, id)
            .await
            .map_err(AppError::missing("training job"))
    }

    /// Cancels a queued job at once and a running one within a second; a finished job is
    /// refused (409 `job_finished`).
    pub async fn cancel_training_job(&self, org_id: &str, id: &str) -> AppResult<TrainingJob> {
        self.training_job(org_id, id).await?;
        match self
            .store()
            .cancel_training_job(org_id, id, Timestamp::now())
            .await?
        {
            Cancel::Cancelled => {}
            Cancel::Requested => {
                // The runner sees the request at its next beat and ends the job.
                for _ in 0..30 {
                    if self.training_job(org_id, id).await?.status.finished() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            Cancel::Finished(s) => {
                return Err(AppError::Refused {
                    code: "job_finished",
                    message: format!("the job is {} and cannot be cancelled", s.as_str()),
                });
            }
        }
        self.training_job(org_id, id).await
    }

    /// Reads the job's feature columns and labels.
    async fn training_set(&self, job: &TrainingJob) -> AppResult<TrainingSet> {
        let dataset = self.store().dataset(&job.org_id, &job.dataset_id).await?;
        let generation = match &job.dataset_version {
            Some(v) => Some(
                self.store()
                    .dataset_version(&dataset.id, v)
                    .await?
                    .generation,
            ),
            None => None,
        };
        let columns: Vec<usize> = job
            .features
            .iter()
            .map(|f| dataset.columns.iter().position(|c| &c.name == f))
            .collect::<Option<_>>()
            .ok_or_else(|| {
                AppError::invalid("features", "a feature column is missing from the dataset")
            })?;
        let n_features = columns.len();
        let values = self
            .scan_rows(
                &dataset.id,
                generation,
                Vec::<f64>::new(),
                move |out, _, chunk| {
                    for r in 0..chunk.rows() {
                        for &c in &columns {
                            out.push(match chunk.columns[c].cell(r) {
                                plantd_ml::Cell::Number(x) => x,
                                _ => f64::NAN,
                            });
                        }
                    }
                },
            )
            .await?;
        let rows = values.len() / n_features.max(1);
        let anomalies = self.anomaly_classes(&dataset.id).await?;
        let mut labels = vec![None; rows];
        for l in self
            .store()
            .row_labels(&dataset.id, generation, (1, rows as u64))
            .await?
        {
            if let (Some(class), Some(slot)) =
                (&l.label_class_id, labels.get_mut(l.row_id as usize - 1))
            {
                *slot = Some(anomalies.contains(class));
            }
        }
        Ok(TrainingSet {
            values,
            n_features,
            labels,
        })
    }

    /// Runs a claimed job to its end.
    async fn run_training_job(&self, job: TrainingJob) {
        let outcome = self.train(&job).await;
        let now = Timestamp::now();
        let ended = match outcome {
            Ok(true) => Ok(()),
            Ok(false) => {
                self.store()
                    .end_training_job(&job.id, JobStatus::Cancelled, None, now)
                    .await
            }
            Err(e) => {
                let message = plantd_model::error_chain(&e);
                tracing::warn!(job = %job.id, error = %message, "a training job failed");
                self.store()
                    .end_training_job(&job.id, JobStatus::Failed, Some(&message), now)
                    .await
            }
        };
        if let Err(e) = ended {
            tracing::warn!(job = %job.id, error = %plantd_model::error_chain(&e), "could not record the end of a training job");
        }
    }

    /// Fits and stores the model; `Ok(false)` when the job was cancelled.
    async fn train(&self, job: &TrainingJob) -> AppResult<bool> {
        let set = self.training_set(job).await?;
        let cancelled = Arc::new(AtomicBool::new(false));
        let trees_done = Arc::new(AtomicUsize::new(0));
        let total = job.hyperparameters.n_estimators as f64;
        // The beat: progress out, a cancel in.
        let beat = {
            let (app, id, cancelled, trees_done) = (
                self.clone(),
                job.id.clone(),
                cancelled.clone(),
                trees_done.clone(),
            );
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(BEAT).await;
                    let progress = 0.05 + 0.9 * trees_done.load(Ordering::Relaxed) as f64 / total;
                    match app
                        .store()
                        .training_progress(&id, progress, Timestamp::now())
                        .await
                    {
                        Ok(true) => cancelled.store(true, Ordering::Relaxed),
                        Ok(false) => {}
                        Err(e) => {
                            tracing::warn!(error = %plantd_model::error_chain(&e), "could not record a training job's progress")
                        }
                    }
                }
            })
        };
        let p = params(&job.hyperparameters);
        let (c2, t2) = (cancelled.clone(), trees_done.clone());
        let fitted = tokio::task::spawn_blocking(move || {
            let rows = Rows {
                values: &set.values,
                n_features: set.n_features,
            };
            let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
            let mut forest =
                Forest::fit(&rows, &p, threads, &|| c2.load(Ordering::Relaxed), &|k| {
                    t2.store(k, Ordering::Relaxed)
                })?;
            let scores = forest.score(&rows, threads);
            forest.set_threshold(&scores, p.contamination);
            Some((forest, scores, set.labels))
        })
        .await;
        beat.abort();
        let Some((forest, scores, labels)) =
            fitted.map_err(|e| AppError::internal("fitting a model", e))?
        else {
            return Ok(false);
        };
        let metrics = metrics(&forest, &scores, &labels);
        let model = Model {
            id: plantd_model::new_id(),
            org_id: job.org_id.clone(),
            name: job.name.clone(),
            algorithm: job.algorithm,
            features: job.features.clone(),
            hyperparameters: job.hyperparameters.clone(),
            dataset_id: job.dataset_id.clone(),
            dataset_version: job.dataset_version.clone(),
            training_job_id: job.id.clone(),
            threshold: forest.threshold,
            metrics: metrics.clone(),
            status: "ready".into(),
            deployment: None,
            created_at: Timestamp::now(),
        };
        let text = forest.to_json(&job.features).to_string();
        Ok(self
            .store()
            .complete_training_job(&job.id, &model, &text, &metrics, Timestamp::now())
            .await?)
    }
}

fn metrics(forest: &Forest, scores: &[f64], labels: &[Option<bool>]) -> TrainingMetrics {
    let flagged = scores.iter().filter(|s| **s > forest.threshold).count() as u64;
    let (s, l): (Vec<f64>, Vec<bool>) = scores
        .iter()
        .zip(labels)
        .filter_map(|(s, l)| l.map(|l| (*s, l)))
        .unzip();
    let auc = evaluate::roc_auc(&s, &l);
    let (mut tp, mut fp, mut fn_) = (0u64, 0u64, 0u64);
    for (score, anomaly) in s.iter().zip(&l) {
        match (*score > forest.threshold, *anomaly) {
            (true, true) => tp += 1,
            (true, false) => fp += 1,
            (false, true) => fn_ += 1,
            _ => {}
        }
    }
    let ratio = |a: u64, b: u64| (b > 0).then(|| a as f64 / b as f64);
    let both = auc.is_some();
    TrainingMetrics {
        rows: scores.len() as u64,
        scores: summary(scores),
        threshold: forest.threshold,
        flagged,
        labelled_rows: both.then_some(s.len() as u64),
        roc_auc: auc,
        precision: if both { ratio(tp, tp + fp) } else { None },
        recall: if both { ratio(tp, tp + fn_) } else { None },
    }
}

/// The training worker: runs queued jobs one at a time on this node, and fails jobs whose
/// node stopped.
pub(crate) async fn run(app: App, mut stop: watch::Receiver<bool>) {
    app.workers().register(WORKER);
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = app.ml_wake().notified() => {}
            _ = stop.changed() => return,
        }
        let now = Timestamp::now();
        let result = async {
            app.store()
                .fail_stale_training_jobs(Timestamp::from_millis(now.millis() - STALE_MS), now)
                .await?;
            while let Some(job) = app.store().claim_training_job(Timestamp::now()).await? {
                tokio::select! {
                    _ = app.run_training_job(job) => {}
                    _ = stop.changed() => return Ok(()),
                }
            }
            Ok::<(), plantd_store::StoreError>(())
        }
        .await;
        app.workers()
            .report(WORKER, result.map_err(|e| plantd_model::error_chain(&e)));
    }
}
