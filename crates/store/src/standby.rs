//! The secondary region's copy of an organization's resident data (issue 33, active-passive):
//! which organizations this region copies to their secondary region, the copies sent and
//! held, strict residency, and the failover that makes a held copy the primary one.

use plantd_model::Timestamp;
use sqlx::Row;

use crate::{Result, Store, StoreError};

/// A copy sent (from the primary region) or held (in the secondary region).
#[derive(Clone, Debug, PartialEq)]
pub struct StandbyCopy {
    pub org_id: String,
    /// `sent` or `held`.
    pub role: String,
    /// Sent: the secondary region; held: the primary region it came from.
    pub region: String,
    pub copied_at: Timestamp,
    pub points: i64,
    pub rows: i64,
}

impl Store {
    /// Enterprise organizations served by `region` (or not yet placed), with whether strict
    /// residency keeps their data there.
    pub async fn orgs_served_by(&self, region: &str) -> Result<Vec<(String, bool)>> {
        let rows = sqlx::query(
            "SELECT id, data_residency_enabled FROM organizations WHERE tier = 'enterprise' AND (primary_region = $1 OR primary_region IS NULL) ORDER BY id",
        )
        .bind(region)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get("id")?,
                    r.try_get::<i64, _>("data_residency_enabled")? != 0,
                ))
            })
            .collect()
    }

    pub async fn standby_copy(&self, org_id: &str, role: &str) -> Result<Option<StandbyCopy>> {
        let row = sqlx::query(
            "SELECT org_id, role, region, copied_at, points, rows_copied FROM region_standby WHERE org_id = $1 AND role = $2",
        )
        .bind(org_id)
        .bind(role)
        .fetch_optional(self.pool())
        .await?;
        row.map(|r| {
            Ok(StandbyCopy {
                org_id: r.try_get("org_id")?,
                role: r.try_get("role")?,
                region: r.try_get("region")?,
                copied_at: Timestamp::from_millis(r.try_get("copied_at")?),
                points: r.try_get("points")?,
                rows: r.try_get("rows_copied")?,
            })
        })
        .transpose()
    }

    /// Records a copy sent or held (replacing the previous one).
    pub async fn record_standby_copy(&self, c: &StandbyCopy) -> Result<()> {
        let mut tx = self.begin_write().await?;
        sqlx::query("DELETE FROM region_standby WHERE org_id = $1 AND role = $2")
            .bind(&c.org_id)
            .bind(&c.role)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO region_standby (org_id, role, region, copied_at, points, rows_copied) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&c.org_id)
        .bind(&c.role)
        .bind(&c.region)
        .bind(c.copied_at.millis())
        .bind(c.points)
        .bind(c.rows)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    pub async fn forget_standby_copy(&self, org_id: &str, role: &str) -> Result<()> {
        let mut tx = self.begin_write().await?;
        sqlx::query("DELETE FROM region_standby WHERE org_id = $1 AND role = $2")
            .bind(org_id)
            .bind(role)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Turns strict data residency on or off (replicated like every organization setting).
    pub async fn set_org_residency(&self, org_id: &str, strict: bool) -> Result<()> {
        let mut tx = self.begin_write().await?;
        let changed = sqlx::query(
            "UPDATE organizations SET data_residency_enabled = $2, updated_at = $3 WHERE id = $1",
        )
        .bind(org_id)
        .bind(i64::from(strict))
        .bind(Timestamp::now().millis())
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if changed == 0 {
            return Err(StoreError::NotFound);
        }
        tx.commit().await?;
        Ok(())
    }
}
