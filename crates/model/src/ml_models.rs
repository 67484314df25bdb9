//! ML training jobs and models (SPEC 2.7, 4.6): a job's states, its request and metrics, and the
//! model it makes, as clients see them. The algorithm is `plantd-ml`'s; decisions where SPEC
//! says "not shown" are in docs/api.md ("ML training and models").

use crate::Timestamp;
use crate::dashboard::{
    DisplayOptions, Layout, MAX_WIDGETS, Threshold, Widget, WidgetQuery, WidgetType,
};
use crate::telemetry::Aggregation;
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
    format!("{SCORE_TAG_PREFIX}{model_id}")
}

/// How every score tag begins.
pub const SCORE_TAG_PREFIX: &str = "anomaly_score:";

/// The start of the ids of the widgets a deployment of `model_id` adds to dashboards.
fn widget_prefix(model_id: &str) -> String {
    format!("ml-{model_id}-")
}

/// `layout` with the widgets of `model`'s deployment (docs/api.md, "Deploy"): every asset of the
/// deployment that a telemetry widget shows (by id, or through a variable whose default or
/// options name it) gets, below the layout, a trend of the score with the model's threshold and
/// the alerts on that asset; the widgets of an earlier deployment of the model are removed
/// first, and an undeployed model's only removed. Answers `None` when nothing changes. Pairs
/// that do not fit in [`MAX_WIDGETS`] are left out.
pub fn with_score_widgets(layout: &Layout, model: &Model) -> Option<Layout> {
    let prefix = widget_prefix(&model.id);
    let mut out = layout.clone();
    out.widgets.retain(|w| !w.id.starts_with(&prefix));
    if let Some(d) = &model.deployment {
        // The asset references (`PUMP-1` or `$asset`) of the layout that reach a deployed asset,
        // each once, with the range of the first widget that uses it.
        let deployed = |a: &str| d.asset_ids.iter().any(|x| x == a);
        let mut refs: Vec<(String, Option<String>)> = Vec::new();
        for w in &out.widgets {
            let Some(q) = w.query.as_ref().filter(|_| w.kind.reads_telemetry()) else {
                continue;
            };
            let Some(a) = q.asset_id.as_deref() else {
                continue;
            };
            let reaches = match a.strip_prefix('$') {
                Some(name) => out.variables.iter().any(|v| {
                    v.name == name
                        && (deployed(&v.default) || v.options.iter().any(|o| deployed(o)))
                }),
                None => deployed(a),
            };
            if reaches && !refs.iter().any(|(r, _)| r == a) {
                refs.push((a.to_string(), q.range.clone()));
            }
        }
        let mut y = out.widgets.iter().map(|w| w.y + w.h).max().unwrap_or(0);
        let half = (out.columns / 2).max(1);
        for (n, (asset, range)) in refs.into_iter().enumerate() {
            if out.widgets.len() + 2 > MAX_WIDGETS || y > 1_000 {
                break;
            }
            let query = |tags: Vec<String>| WidgetQuery {
                data_source_id: None,
                asset_id: Some(asset.clone()),
                tags,
                aggregation: None,
                range: range.clone(),
            };
            out.widgets.push(Widget {
                id: format!("{prefix}{n}-score"),
                kind: WidgetType::LineChart,
                title: format!("Anomaly score: {}", model.name)
                    .chars()
                    .take(200)
                    .collect(),
                x: 0,
                y,
                w: if out.columns > 1 { half } else { 1 },
                h: 4,
                query: Some(WidgetQuery {
                    aggregation: Some(Aggregation::Max),
                    ..query(vec![d.score_tag.clone()])
                }),
                options: Some(DisplayOptions {
                    decimals: Some(3),
                    min: Some(0.0),
                    max: Some(1.0),
                    thresholds: vec![Threshold {
                        value: model.threshold,
                        color: "critical".into(),
                    }],
                    unit: None,
                }),
                text: None,
            });
            out.widgets.push(Widget {
                id: format!("{prefix}{n}-alerts"),
                kind: WidgetType::AlertList,
                title: "Alerts".into(),
                x: if out.columns > 1 { half } else { 0 },
                y: if out.columns > 1 { y } else { y + 4 },
                w: if out.columns > 1 {
                    out.columns - half
                } else {
                    1
                },
                h: 4,
                query: Some(WidgetQuery {
                    range: None,
                    ..query(Vec::new())
                }),
                options: None,
                text: None,
            });
            y += if out.columns > 1 { 4 } else { 8 };
        }
    }
    (out != *layout).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Validator;
    use crate::dashboard::check_layout;

    fn model(deployed: &[&str]) -> Model {
        Model {
            id: "m1".into(),
            org_id: "o".into(),
            name: "Pump".into(),
            algorithm: Algorithm::IsolationForest,
            features: vec!["t".into()],
            hyperparameters: serde_json::from_value(serde_json::json!({})).unwrap(),
            dataset_id: "d".into(),
            dataset_version: None,
            training_job_id: "j".into(),
            metrics: TrainingMetrics::default(),
            threshold: 0.62,
            status: "deployed".into(),
            deployment: (!deployed.is_empty()).then(|| Deployment {
                asset_ids: deployed.iter().map(|s| s.to_string()).collect(),
                feature_tags: Default::default(),
                score_tag: score_tag("m1"),
                deployed_at: Timestamp::from_millis(0),
            }),
            created_at: Timestamp::from_millis(0),
        }
    }

    fn layout() -> Layout {
        serde_json::from_value(serde_json::json!({
            "variables": [{"name": "asset", "default": "P-2", "options": ["P-2", "P-3"]}],
            "widgets": [
                {"id": "a", "type": "line_chart", "x": 0, "y": 0, "w": 6, "h": 4,
                 "query": {"asset_id": "P-1", "tags": ["temp"], "range": "24h"}},
                {"id": "b", "type": "stat", "x": 6, "y": 0, "w": 6, "h": 5,
                 "query": {"asset_id": "$asset", "tags": ["temp"]}},
                {"id": "c", "type": "text", "x": 0, "y": 5, "w": 12, "h": 1, "text": "x"}
            ]
        }))
        .unwrap()
    }

    #[test]
    fn a_deployment_draws_its_score_where_its_assets_are_shown_and_undeploy_removes_it() {
        let l = layout();
        // An asset the dashboard does not show: nothing changes.
        assert_eq!(with_score_widgets(&l, &model(&["P-9"])), None);
        let with = with_score_widgets(&l, &model(&["P-1", "P-3"])).unwrap();
        let mut v = Validator::new();
        check_layout(&mut v, "layout", &with);
        assert!(v.finish().is_ok());
        let added: Vec<_> = with.widgets[3..].iter().collect();
        assert_eq!(added.len(), 4);
        let q = added[0].query.as_ref().unwrap();
        assert_eq!(
            (q.asset_id.as_deref(), q.range.as_deref()),
            (Some("P-1"), Some("24h"))
        );
        assert_eq!(q.tags, vec!["anomaly_score:m1".to_string()]);
        assert_eq!(added[0].options.as_ref().unwrap().thresholds[0].value, 0.62);
        assert_eq!(added[0].y, 6);
        assert_eq!(added[1].kind, WidgetType::AlertList);
        // The variable reaches P-3 through its options.
        assert_eq!(
            added[2].query.as_ref().unwrap().asset_id.as_deref(),
            Some("$asset")
        );
        assert_eq!(added[2].y, 10);
        // Deploying again changes nothing; undeploying removes exactly what was added.
        assert_eq!(with_score_widgets(&with, &model(&["P-1", "P-3"])), None);
        assert_eq!(with_score_widgets(&with, &model(&[])), Some(l));
    }

    #[test]
    fn a_full_dashboard_gets_no_widgets() {
        let mut l = layout();
        let w = l.widgets[0].clone();
        for i in 0..(MAX_WIDGETS - 3) {
            l.widgets.push(Widget {
                id: format!("w{i}"),
                ..w.clone()
            });
        }
        assert_eq!(l.widgets.len(), MAX_WIDGETS);
        assert_eq!(with_score_widgets(&l, &model(&["P-1"])), None);
    }
}
