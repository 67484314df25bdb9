//! ML training jobs and models as stored: jobs claimed by one node at a time, beating while
//! they run, cancelled at once when queued and by request when running, and completed in the
//! transaction that stores their model; models with their forest (read only to score or to
//! download) and deployment.

use plantd_model::Timestamp;
use plantd_model::ml_models::{Deployment, JobStatus, Model, TrainingJob, TrainingMetrics};
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::rows::OrgTable;
use crate::sql::{json_column, opt_json_column, opt_ts};
use crate::{Result, Store, StoreError};

const JOBS: OrgTable = OrgTable {
    name: "ml_training_jobs",
    columns: "*",
    order: "created_at DESC, id",
};

const MODELS: OrgTable = OrgTable {
    name: "ml_models",
    columns: "id, org_id, name, training_job_id, dataset_id, dataset_version, algorithm, features, \
              hyperparameters, metrics, threshold, status, deployment, created_at",
    order: "created_at DESC, id",
};

fn job_from_row(row: &AnyRow) -> Result<TrainingJob> {
    let status: String = row.try_get("status")?;
    let started_at = opt_ts(row, "started_at")?;
    let finished_at = opt_ts(row, "finished_at")?;
    Ok(TrainingJob {
        id: row.try_get("id")?,
        org_id: row.try_get("org_id")?,
        name: row.try_get("name")?,
        dataset_id: row.try_get("dataset_id")?,
        dataset_version: row.try_get("dataset_version")?,
        features: json_column(row, "features")?,
        algorithm: serde_json::from_value(serde_json::Value::String(row.try_get("algorithm")?))?,
        hyperparameters: json_column(row, "hyperparameters")?,
        status: JobStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("training job status {status}")))?,
        progress: row.try_get("progress")?,
        error: row.try_get("error")?,
        metrics: opt_json_column(row, "metrics")?,
        model_id: row.try_get("model_id")?,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
        created_by: row.try_get("created_by")?,
        duration_seconds: match (started_at, finished_at) {
            (Some(s), Some(f)) => Some((f.millis() - s.millis()) as f64 / 1000.0),
            _ => None,
        },
        started_at,
        finished_at,
    })
}

fn model_from_row(row: &AnyRow) -> Result<Model> {
    Ok(Model {
        id: row.try_get("id")?,
        org_id: row.try_get("org_id")?,
        name: row.try_get("name")?,
        algorithm: serde_json::from_value(serde_json::Value::String(row.try_get("algorithm")?))?,
        features: json_column(row, "features")?,
        hyperparameters: json_column(row, "hyperparameters")?,
        dataset_id: row.try_get("dataset_id")?,
        dataset_version: row.try_get("dataset_version")?,
        training_job_id: row.try_get("training_job_id")?,
        metrics: json_column(row, "metrics")?,
        threshold: row.try_get("threshold")?,
        status: row.try_get("status")?,
        deployment: opt_json_column::<Deployment>(row, "deployment")?,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
    })
}

/// What cancelling a job did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cancel {
    /// It was queued: it is cancelled.
    Cancelled,
    /// It runs: its runner stops within a second.
    Requested,
    /// It had finished with this status.
    Finished(JobStatus),
}

impl Store {
    pub async fn insert_training_job(&self, j: &TrainingJob) -> Result<()> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO ml_training_jobs (id, org_id, name, dataset_id, dataset_version, features, \
             algorithm, hyperparameters, status, progress, cancel_requested, created_at, created_by, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, 'isolation_forest', $7, 'queued', 0, 0, $8, $9, $8)",
        )
        .bind(&j.id)
        .bind(&j.org_id)
        .bind(&j.name)
        .bind(&j.dataset_id)
        .bind(j.dataset_version.clone())
        .bind(serde_json::to_string(&j.features)?)
        .bind(serde_json::to_string(&j.hyperparameters)?)
        .bind(j.created_at.millis())
        .bind(&j.created_by)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    pub async fn training_job(&self, org_id: &str, id: &str) -> Result<TrainingJob> {
        self.org_row(&JOBS, org_id, id, job_from_row).await
    }

    pub async fn training_jobs(
        &self,
        org_id: &str,
        page: (i64, i64),
    ) -> Result<(Vec<TrainingJob>, u64)> {
        self.org_page(&JOBS, org_id, page, job_from_row).await
    }

    /// Takes the oldest queued job for this node, if any.
    pub async fn claim_training_job(&self, now: Timestamp) -> Result<Option<TrainingJob>> {
        loop {
            let Some(row) = sqlx::query(
                "SELECT id, org_id FROM ml_training_jobs WHERE status = 'queued' ORDER BY created_at, id LIMIT 1",
            )
            .fetch_optional(self.pool())
            .await?
            else {
                return Ok(None);
            };
            let id: String = row.try_get("id")?;
            let org: String = row.try_get("org_id")?;
            let mut tx = self.begin_write().await?;
            let done = sqlx::query(
                "UPDATE ml_training_jobs SET status = 'running', started_at = $1, updated_at = $1 \
                 WHERE id = $2 AND status = 'queued'",
            )
            .bind(now.millis())
            .bind(&id)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            if done.rows_affected() > 0 {
                return self.training_job(&org, &id).await.map(Some);
            }
            // Another node took it, or it was cancelled: look again.
        }
    }

    /// Records a running job's progress (its beat); answers whether it was asked to stop.
    pub async fn training_progress(&self, id: &str, progress: f64, now: Timestamp) -> Result<bool> {
        let mut tx = self.begin_write_unsynced().await?;
        sqlx::query(
            "UPDATE ml_training_jobs SET progress = $1, updated_at = $2 WHERE id = $3 AND status = 'running'",
        )
        .bind(progress)
        .bind(now.millis())
        .bind(id)
        .execute(&mut *tx)
        .await?;
        let row =
            sqlx::query("SELECT cancel_requested, status FROM ml_training_jobs WHERE id = $1")
                .bind(id)
                .fetch_one(&mut *tx)
                .await?;
        tx.commit().await?;
        let status: String = row.try_get("status")?;
        Ok(row.try_get::<i32, _>("cancel_requested")? != 0 || status != "running")
    }

    pub async fn cancel_training_job(
        &self,
        org_id: &str,
        id: &str,
        now: Timestamp,
    ) -> Result<Cancel> {
        let mut tx = self.begin_write().await?;
        let queued = sqlx::query(
            "UPDATE ml_training_jobs SET status = 'cancelled', finished_at = $1, updated_at = $1 \
             WHERE org_id = $2 AND id = $3 AND status = 'queued'",
        )
        .bind(now.millis())
        .bind(org_id)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        if queued.rows_affected() > 0 {
            tx.commit().await?;
            return Ok(Cancel::Cancelled);
        }
        let running = sqlx::query(
            "UPDATE ml_training_jobs SET cancel_requested = 1 WHERE org_id = $1 AND id = $2 AND status = 'running'",
        )
        .bind(org_id)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        if running.rows_affected() > 0 {
            return Ok(Cancel::Requested);
        }
        Ok(Cancel::Finished(
            self.training_job(org_id, id).await?.status,
        ))
    }

    /// Ends a running job as failed or cancelled.
    pub async fn end_training_job(
        &self,
        id: &str,
        status: JobStatus,
        error: Option<&str>,
        now: Timestamp,
    ) -> Result<()> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "UPDATE ml_training_jobs SET status = $1, error = $2, finished_at = $3, updated_at = $3 \
             WHERE id = $4 AND status = 'running'",
        )
        .bind(status.as_str())
        .bind(error.map(str::to_string))
        .bind(now.millis())
        .bind(id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Fails running jobs whose beat stopped before `before` (their node crashed).
    pub async fn fail_stale_training_jobs(&self, before: Timestamp, now: Timestamp) -> Result<u64> {
        let mut tx = self.begin_write().await?;
        let done = sqlx::query(
            "UPDATE ml_training_jobs SET status = 'failed', error = 'the node running the job stopped; start it again', \
             finished_at = $1, updated_at = $1 WHERE status = 'running' AND updated_at < $2",
        )
        .bind(now.millis())
        .bind(before.millis())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(done.rows_affected())
    }

    /// Stores the model of a running job and completes the job, in one transaction; `false`
    /// when the job was no longer running (cancelled meanwhile).
    pub async fn complete_training_job(
        &self,
        job_id: &str,
        model: &Model,
        forest: &str,
        metrics: &TrainingMetrics,
        now: Timestamp,
    ) -> Result<bool> {
        let mut tx = self.begin_write().await?;
        let done = sqlx::query(
            "UPDATE ml_training_jobs SET status = 'completed', progress = 1, metrics = $1, model_id = $2, \
             finished_at = $3, updated_at = $3 WHERE id = $4 AND status = 'running' AND cancel_requested = 0",
        )
        .bind(serde_json::to_string(metrics)?)
        .bind(&model.id)
        .bind(now.millis())
        .bind(job_id)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        sqlx::query(
            "INSERT INTO ml_models (id, org_id, name, training_job_id, dataset_id, dataset_version, algorithm, \
             features, hyperparameters, metrics, threshold, status, forest, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, 'isolation_forest', $7, $8, $9, $10, 'ready', $11, $12, $12)",
        )
        .bind(&model.id)
        .bind(&model.org_id)
        .bind(&model.name)
        .bind(job_id)
        .bind(&model.dataset_id)
        .bind(model.dataset_version.clone())
        .bind(serde_json::to_string(&model.features)?)
        .bind(serde_json::to_string(&model.hyperparameters)?)
        .bind(serde_json::to_string(metrics)?)
        .bind(model.threshold)
        .bind(forest)
        .bind(now.millis())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    pub async fn model(&self, org_id: &str, id: &str) -> Result<Model> {
        self.org_row(&MODELS, org_id, id, model_from_row).await
    }

    pub async fn models(&self, org_id: &str, page: (i64, i64)) -> Result<(Vec<Model>, u64)> {
        self.org_page(&MODELS, org_id, page, model_from_row).await
    }

    /// The model's forest in the download format.
    pub async fn model_forest(&self, org_id: &str, id: &str) -> Result<String> {
        Ok(
            sqlx::query("SELECT forest FROM ml_models WHERE org_id = $1 AND id = $2")
                .bind(org_id)
                .bind(id)
                .fetch_optional(self.pool())
                .await?
                .ok_or(StoreError::NotFound)?
                .try_get("forest")?,
        )
    }

    /// Deploys (`Some`) or undeploys a model.
    pub async fn set_model_deployment(
        &self,
        org_id: &str,
        id: &str,
        deployment: Option<&Deployment>,
        now: Timestamp,
    ) -> Result<()> {
        let mut tx = self.begin_write().await?;
        let done = sqlx::query(
            "UPDATE ml_models SET deployment = $1, status = $2, updated_at = $3 WHERE org_id = $4 AND id = $5",
        )
        .bind(deployment.map(serde_json::to_string).transpose()?)
        .bind(if deployment.is_some() { "deployed" } else { "ready" })
        .bind(now.millis())
        .bind(org_id)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        crate::rows::touched(done)
    }

    /// Every deployed model of every organization, for the live scorer.
    pub async fn deployed_models(&self) -> Result<Vec<Model>> {
        let sql = format!(
            "SELECT {} FROM ml_models WHERE status = 'deployed'",
            MODELS.columns
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(model_from_row).collect()
    }
}
