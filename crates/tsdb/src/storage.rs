//! Storage used per organization, for the tier's storage quota (SPEC 8.3): the bytes of its
//! blocks and packed minute hours plus [`BLOCK_ROW_BYTES`] per such row and [`ROLLUP_ROW_BYTES`]
//! per rollup row (key and index overhead on either engine), read from the database when first
//! needed and by the retention job, and grown by every ingest in between by [`RAW_POINT_BYTES`] per point (a
//! point's size before its block is compressed: the estimate errs towards refusing early).

use sqlx::Row;
use std::collections::HashMap;
use std::sync::Mutex;

use crate::error::Result;

pub const RAW_POINT_BYTES: u64 = 18;
pub const BLOCK_ROW_BYTES: u64 = 48;
pub const ROLLUP_ROW_BYTES: u64 = 64;

#[derive(Default)]
pub(crate) struct StorageUsage {
    bytes: Mutex<HashMap<String, u64>>,
}

impl StorageUsage {
    pub(crate) fn add(&self, org_id: &str, points: usize) {
        let mut m = self.bytes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = m.get_mut(org_id) {
            // Replaced points are counted as new: the estimate errs towards refusing early.
            *b += points as u64 * RAW_POINT_BYTES;
        }
    }

    /// Counts the organization again at its next read (its points were deleted).
    pub(crate) fn forget(&self, org_id: &str) {
        self.bytes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(org_id);
    }
}

/// Whether adding `points` to `used` bytes would pass `limit_gb` (decimal gigabytes).
pub fn over_quota(used: u64, points: usize, limit_gb: u64) -> bool {
    used.saturating_add(points as u64 * RAW_POINT_BYTES) > limit_gb.saturating_mul(1_000_000_000)
}

impl StorageUsage {
    /// Estimated bytes of telemetry an organization stores.
    pub(crate) async fn bytes(&self, pool: &sqlx::AnyPool, org_id: &str) -> Result<u64> {
        if let Some(b) = self
            .bytes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(org_id)
        {
            return Ok(*b);
        }
        let b = count(pool, org_id).await?;
        self.bytes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(org_id.to_string(), b);
        Ok(b)
    }

    /// Reads every known organization's usage again (after retention deleted data).
    pub(crate) async fn recount(&self, pool: &sqlx::AnyPool) -> Result<()> {
        let orgs: Vec<String> = self
            .bytes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect();
        for org in orgs {
            let b = count(pool, &org).await?;
            self.bytes
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(org, b);
        }
        Ok(())
    }
}

/// Counts an organization's stored bytes in the database.
async fn count(pool: &sqlx::AnyPool, org_id: &str) -> Result<u64> {
    // Raw blocks and packed minutes and hours alike: a row with its bytes.
    let packed = sqlx::query(
        "SELECT COUNT(*) AS n, CAST(COALESCE(SUM(LENGTH(p.data)), 0) AS BIGINT) AS bytes FROM \
         (SELECT b.data FROM telemetry_block b JOIN telemetry_series s ON s.id = b.series_id WHERE s.org_id = $1 \
          UNION ALL \
          SELECT m.data FROM telemetry_minute_block m JOIN telemetry_series s ON s.id = m.series_id WHERE s.org_id = $2 \
          UNION ALL \
          SELECT h.data FROM telemetry_hour_block h JOIN telemetry_series s ON s.id = h.series_id WHERE s.org_id = $3) p",
    )
    .bind(org_id)
    .bind(org_id)
    .bind(org_id)
    .fetch_one(pool)
    .await?;
    let (rows, bytes): (i64, i64) = (packed.try_get("n")?, packed.try_get("bytes")?);
    let rollups: i64 = sqlx::query(
        "SELECT COUNT(*) AS n FROM telemetry_rollup r JOIN telemetry_series s ON s.id = r.series_id WHERE s.org_id = $1",
    )
    .bind(org_id)
    .fetch_one(pool)
    .await?
    .try_get("n")?;
    Ok(bytes as u64 + rows as u64 * BLOCK_ROW_BYTES + rollups as u64 * ROLLUP_ROW_BYTES)
}

#[cfg(test)]
mod tests {
    #[test]
    fn quota_in_decimal_gigabytes() {
        assert!(!super::over_quota(999_999_982, 1, 1));
        assert!(super::over_quota(999_999_983, 1, 1));
        assert!(super::over_quota(0, 60_000_000, 1));
    }
}
