//! ML training jobs and models (SPEC 2.7, 4.6): a job's states, its request and metrics, and the
//! model it makes, as clients see them. The algorithm is `plantd-ml`'s; decisions where SPEC
//! says "not shown" are in docs/api.md ("ML training and models").

use crate::Timestamp;
use serde::{Deserialize, Serialize};

/// queued → running → completed | failed | cancelled; queued → cancelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum JobStatus {
    Queued,
    Running,
    Completed,
    Failed,
    Cancelled,
}

impl JobStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Queued => "queued",
            JobStatus::Running => "running",
            JobStatus::Completed => "completed",
            JobStatus::Failed => "failed",
            JobStatus::Cancelled => "cancelled",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Queued,
            Self::Running,
            Self::Completed,
            Self::Failed,
            Self::Cancelled,
        ]
        .into_iter()
        .find(|x| x.as_str() == s)
    }
    pub fn finished(self) -> bool {
        matches!(
            self,
            JobStatus::Completed | JobStatus::Failed | JobStatus::Cancelled
        )
    }
}

/// The algorithms a job trains.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Algorithm {
    IsolationForest,
}

/// An isolation forest's hyperparameters as asked (defaults filled in by the job).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Hyperparameters {
    /// 1 to 10,000 trees; default 100.
    #[serde(default = "default_trees")]
    pub n_estimators: u64,
    /// Rows per tree, 2 to the dataset's row count; default min(256, rows).
    #[serde(default)]
    pub max_samples: Option<u64>,
    /// Share of the features each tree splits on, (0, 1]; default 1.
    #[serde(default = "one")]
    pub max_features: f64,
    /// Expected share of anomalies, (0, 0.5]; default 0.1. Sets the threshold.
    #[serde(default = "default_contamination")]
    pub contamination: f64,
    /// Default 0: the same seed, data and parameters give the same model.
    #[serde(default)]
    pub seed: u64,
}

fn default_trees() -> u64 {
    100
}
fn one() -> f64 {
    1.0
}
fn default_contamination() -> f64 {
    0.1
}

impl Default for Hyperparameters {
    fn default() -> Self {
        Self {
            n_estimators: default_trees(),
            max_samples: None,
            max_features: one(),
            contamination: default_contamination(),
            seed: 0,
        }
    }
}

/// The distribution of the training rows' scores.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ScoreSummary {
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    /// Twenty equal bins over [0, 1].
    pub histogram: Vec<u64>,
}

/// What a training measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TrainingMetrics {
    pub rows: u64,
    pub scores: ScoreSummary,
    pub threshold: f64,
    /// Training rows scored above the threshold.
    pub flagged: u64,
    /// Against the dataset's labels, when it has rows of both kinds (docs/api.md).
    pub labelled_rows: Option<u64>,
    pub roc_auc: Option<f64>,
    pub precision: Option<f64>,
    pub recall: Option<f64>,
}

/// A training job as clients see it.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct TrainingJob {
    pub id: String,
    #[serde(skip)]
    pub org_id: String,
    pub name: String,
    pub dataset_id: String,
    /// The version trained on; `null`: the working copy as it was when the job ran.
    pub dataset_version: Option<String>,
    pub features: Vec<String>,
    pub algorithm: Algorithm,
    pub hyperparameters: Hyperparameters,
    pub status: JobStatus,
    /// 0 to 1.
    pub progress: f64,
    pub error: Option<String>,
    pub metrics: Option<TrainingMetrics>,
    pub model_id: Option<String>,
    pub created_at: Timestamp,
    pub created_by: String,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
    /// Seconds from start to finish.
    pub duration_seconds: Option<f64>,
}

/// Where a deployed model reads and writes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Deployment {
    pub asset_ids: Vec<String>,
    /// The tag each feature reads.
    #[schema(value_type = Object)]
    pub feature_tags: std::collections::BTreeMap<String, String>,
    /// The tag the score is written to on each asset.
    pub score_tag: String,
    pub deployed_at: Timestamp,
}

/// A model as clients see it (without its trees: `GET .../download`).
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Model {
    pub id: String,
    #[serde(skip)]
    pub org_id: String,
    pub name: String,
    pub algorithm: Algorithm,
    pub features: Vec<String>,
    pub hyperparameters: Hyperparameters,
    pub dataset_id: String,
    pub dataset_version: Option<String>,
    pub training_job_id: String,
    pub metrics: TrainingMetrics,
    pub threshold: f64,
    /// `ready` or `deployed`.
    pub status: String,
    pub deployment: Option<Deployment>,
    pub created_at: Timestamp,
}

/// The tag a deployed model writes its score to.
pub fn score_tag(model_id: &str) -> String {
    format!("anomaly_score:{model_id}")
}
