//! Retention per level: raw points, minute (rows and packed hours), hour and day rollups are
//! deleted once older than their configured age (defaults of SPEC 8.6 for the edge: 7 days, 30 days, 365 days, 5 years).

use plantd_model::Timestamp;
use serde::{Deserialize, Serialize};
use sqlx::Row;

use plantd_store::{Backend, Store};

use crate::blocks::{self, NewBlock};
use crate::error::Result;
use crate::levels::{DAY, LEVELS};
use crate::rollups;
use crate::storage::StorageUsage;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Retention {
    pub raw_days: i64,
    pub minute_days: i64,
    pub hour_days: i64,
    pub day_days: i64,
    /// The edge's retention of ML predictions (the models' score series, tags
    /// `anomaly_score:<model>`): no level of them is kept longer (`plantd edge`, 90 days).
    #[serde(skip)]
    pub predictions_days: Option<i64>,
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            raw_days: 7,
            minute_days: 30,
            hour_days: 365,
            day_days: 5 * 365,
            predictions_days: None,
        }
    }
}

impl Retention {
    /// The retention of one tag's series: a prediction's levels kept at most
    /// `predictions_days`.
    fn of_tag(&self, tag: &str) -> Retention {
        match self.predictions_days {
            Some(days) if tag.starts_with(plantd_model::ml_models::SCORE_TAG_PREFIX) => Retention {
                raw_days: self.raw_days.min(days),
                minute_days: self.minute_days.min(days),
                hour_days: self.hour_days.min(days),
                day_days: self.day_days.min(days),
                predictions_days: None,
            },
            _ => *self,
        }
    }

    /// Coarser levels must outlive finer ones by at least a day: a late point (accepted while
    /// its raw neighbours exist) recomputes its hour from minutes and its day from hours.
    pub fn check(&self) -> std::result::Result<(), String> {
        if self.raw_days < 1 {
            return Err("telemetry retention raw_days must be at least 1".into());
        }
        if !(self.minute_days > self.raw_days
            && self.hour_days > self.raw_days
            && self.day_days >= self.hour_days)
        {
            return Err("telemetry retention must satisfy raw_days < minute_days, raw_days < hour_days <= day_days".into());
        }
        Ok(())
    }

    /// The oldest timestamp accepted on ingest: raw points older than this are already gone.
    pub fn oldest_accepted(&self, now: Timestamp) -> Timestamp {
        Timestamp::from_millis(now.millis() - self.raw_days * DAY)
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RetentionReport {
    pub raw_deleted: u64,
    pub rollups_deleted: u64,
    /// Batches the edge agent could not forward within the raw retention, dropped unsent.
    pub outbox_records_deleted: u64,
    pub outbox_points_deleted: u64,
}

/// Deletes what each level's retention has passed, series by series in a transaction each (so
/// ingest is never held up for long): blocks wholly older than the raw retention, the older points
/// of the block across its edge (rewritten), and rollup buckets by their end. Then counts the
/// organizations' storage again.
pub(crate) async fn enforce(
    store: &Store,
    r: Retention,
    storage: &StorageUsage,
    now: Timestamp,
) -> Result<RetentionReport> {
    let series: Vec<(i64, String, String)> =
        sqlx::query("SELECT id, org_id, tag_name FROM telemetry_series")
            .fetch_all(store.pool())
            .await?
            .iter()
            .map(|row| {
                Ok((
                    row.try_get("id")?,
                    row.try_get("org_id")?,
                    row.try_get("tag_name")?,
                ))
            })
            .collect::<std::result::Result<_, sqlx::Error>>()?;
    let sqlite = store.backend() == Backend::Sqlite;
    let cutoff = |days: i64| now.millis() - days * DAY;
    let mut report = RetentionReport::default();
    for (id, org, tag) in series {
        let r = r.of_tag(&tag);
        let raw_cutoff = cutoff(r.raw_days);
        let mut tx = store.begin_write().await?;
        if !sqlite {
            blocks::lock_orgs(&mut tx, std::iter::once(org.as_str())).await?;
        }
        let whole = "FROM telemetry_block WHERE series_id = $1 AND start_ts < $2 AND end_ts < $2";
        let gone: i64 = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT CAST(COALESCE(SUM(count), 0) AS BIGINT) AS n {whole}"
        )))
        .bind(id)
        .bind(raw_cutoff)
        .fetch_one(&mut *tx)
        .await?
        .try_get("n")?;
        sqlx::query(sqlx::AssertSqlSafe(format!("DELETE {whole}")))
            .bind(id)
            .bind(raw_cutoff)
            .execute(&mut *tx)
            .await?;
        report.raw_deleted += gone as u64;
        for b in blocks::overlapping(&mut tx, id, raw_cutoff, raw_cutoff).await? {
            if b.start >= raw_cutoff {
                continue;
            }
            let mut kept = b.columns()?;
            let before = kept.len();
            kept.retain_range(raw_cutoff, i64::MAX);
            report.raw_deleted += (before - kept.len()) as u64;
            blocks::delete_span(&mut tx, id, b.start, b.start).await?;
            let block = NewBlock {
                series: id,
                columns: kept,
                sealed: b.sealed,
            };
            blocks::insert(&mut tx, sqlite, &[block]).await?;
        }
        // A bucket goes once its end, not its start, is older than the retention.
        for ((level, width), days) in
            LEVELS
                .into_iter()
                .zip([r.minute_days, r.hour_days, r.day_days])
        {
            let before = cutoff(days) - width + 1;
            report.rollups_deleted += sqlx::query(
                "DELETE FROM telemetry_rollup WHERE level = $1 AND series_id = $2 AND bucket < $3",
            )
            .bind(level)
            .bind(id)
            .bind(before)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if let Some(p) = rollups::Packing::of_level(level) {
                report.rollups_deleted += rollups::delete_before(&mut tx, p, id, before).await?;
            }
        }
        tx.commit().await?;
    }
    // The edge's outbox keeps no batch longer than the agent keeps its raw points.
    let mut tx = store.begin_write().await?;
    let (records, points) = crate::outbox::expire(&mut tx, cutoff(r.raw_days)).await?;
    tx.commit().await?;
    report.outbox_records_deleted = records;
    report.outbox_points_deleted = points;
    storage.recount(store.pool()).await?;
    Ok(report)
}
