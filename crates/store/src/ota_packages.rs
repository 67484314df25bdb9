//! OTA packages as stored: the row of each package (its file is the application's,
//! content-addressed on disk, and its signature the manifest's).

use plantd_model::Timestamp;
use plantd_model::ota::{Package, PackageStatus};
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::error::conflict_on_unique;
use crate::rows::OrgTable;
use crate::{Result, Store, StoreError};

const PACKAGES: OrgTable = OrgTable {
    name: "ota_packages",
    columns: "*",
    order: "created_at DESC, id",
};

fn package_from_row(row: &AnyRow) -> Result<Package> {
    let status: String = row.try_get("status")?;
    let id: String = row.try_get("id")?;
    let version: String = row.try_get("version")?;
    let size: i64 = row.try_get("size_bytes")?;
    let sha256: String = row.try_get("sha256")?;
    Ok(Package {
        manifest: plantd_model::ota::manifest(&id, &version, size as u64, &sha256),
        id,
        org_id: row.try_get("org_id")?,
        name: row.try_get("name")?,
        version,
        device_type: row.try_get("device_type")?,
        release_notes: row.try_get("release_notes")?,
        size_bytes: size as u64,
        sha256,
        status: PackageStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("package status {status}")))?,
        signature: row.try_get("signature")?,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
        released_at: row
            .try_get::<Option<i64>, _>("released_at")?
            .map(Timestamp::from_millis),
    })
}

impl Store {
    /// Stores an uploaded package; the same name and version twice is a conflict.
    pub async fn insert_package(&self, p: &Package) -> Result<Package> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO ota_packages (id, org_id, name, version, device_type, release_notes, size_bytes, \
             sha256, signature, status, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'draft', $10)",
        )
        .bind(&p.id)
        .bind(&p.org_id)
        .bind(&p.name)
        .bind(&p.version)
        .bind(&p.device_type)
        .bind(&p.release_notes)
        .bind(p.size_bytes as i64)
        .bind(&p.sha256)
        .bind(&p.signature)
        .bind(p.created_at.millis())
        .execute(&mut *tx)
        .await
        .map_err(|e| {
            conflict_on_unique(
                e,
                &format!("package '{}' version '{}' exists", p.name, p.version),
            )
        })?;
        tx.commit().await?;
        self.package(&p.org_id, &p.id).await
    }

    pub async fn packages(&self, org_id: &str, page: (i64, i64)) -> Result<(Vec<Package>, u64)> {
        self.org_page(&PACKAGES, org_id, page, package_from_row)
            .await
    }

    pub async fn package(&self, org_id: &str, id: &str) -> Result<Package> {
        self.org_row(&PACKAGES, org_id, id, package_from_row).await
    }

    /// Releases a draft; `false` when it was released already.
    pub async fn release_package(&self, org_id: &str, id: &str, now: Timestamp) -> Result<bool> {
        let mut tx = self.begin_write().await?;
        let done = sqlx::query(
            "UPDATE ota_packages SET status = 'released', released_at = $1 \
             WHERE org_id = $2 AND id = $3 AND status = 'draft'",
        )
        .bind(now.millis())
        .bind(org_id)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(done.rows_affected() > 0)
    }

    /// Whether any package (of any organization) has this file.
    pub async fn package_file_in_use(&self, sha256: &str) -> Result<bool> {
        Ok(
            sqlx::query("SELECT 1 AS one FROM ota_packages WHERE sha256 = $1")
                .bind(sha256)
                .fetch_optional(self.pool())
                .await?
                .is_some(),
        )
    }
}
