//! Region migrations (issue 33): the records of this instance's organizations' moves to another
//! region, and an organization's resident rows read and written whatever a table's columns, so
//! that the copy sent to the target region, and its check there, work on both backends.
//! Telemetry is copied through the telemetry engine (crate `plantd-tsdb`), not here.

use plantd_model::{Timestamp, new_id};
use serde::{Deserialize, Serialize};
use sqlx::any::{AnyRow, AnyTypeInfoKind};
use sqlx::{Row, ValueRef};

use crate::error::conflict_on_unique;
use crate::sql::opt_ts;
use crate::{Backend, Result, Store, StoreError};

/// How a resident table's rows belong to an organization.
#[derive(Clone, Copy)]
enum Scope {
    /// An `org_id` column.
    Org,
    /// A `dataset_id` column naming one of the organization's ML datasets.
    Dataset,
}

/// A table of resident data: its name, how its rows are the organization's, and the order its
/// rows are read in (its key).
pub struct ResidentTable {
    pub name: &'static str,
    scope: Scope,
    order: &'static str,
}

const fn t(name: &'static str, scope: Scope, order: &'static str) -> ResidentTable {
    ResidentTable { name, scope, order }
}

/// Every table of resident data (SPEC 4.14: telemetry, alerts, dashboards, user data, ML
/// models, audit logs, OTA packages, and what they hang on), parents before children: copied
/// in this order, deleted in the reverse. Not here: the replicated tables (organizations,
/// users, memberships, API keys), telemetry (copied point by point through the engine),
/// sessions and one-time tokens (a user signs in again at the new region), OAuth grants, codes
/// and refresh tokens (bound to the source's signing keys), and this instance's own tables.
pub const RESIDENT_TABLES: &[ResidentTable] = &[
    t("data_sources", Scope::Org, "id"),
    t("provisioned_assets", Scope::Org, "asset_id"),
    t("tag_metadata", Scope::Org, "asset_id, tag_name"),
    t("alert_rules", Scope::Org, "id"),
    t("alerts", Scope::Org, "id"),
    t("alert_events", Scope::Org, "id"),
    t("notification_settings", Scope::Org, "org_id"),
    t("notifications", Scope::Org, "id"),
    t("webhooks", Scope::Org, "id"),
    t("webhook_deliveries", Scope::Org, "id"),
    t("audit_logs", Scope::Org, "id"),
    t("api_key_usage", Scope::Org, "key_id, day, endpoint"),
    t("dashboards", Scope::Org, "id"),
    t("oauth_applications", Scope::Org, "id"),
    t("products", Scope::Org, "id"),
    t("license_signing_keys", Scope::Org, "org_id"),
    t("licenses", Scope::Org, "id"),
    t("license_activations", Scope::Org, "id"),
    t("device_groups", Scope::Org, "id"),
    t("devices", Scope::Org, "id"),
    t("device_assets", Scope::Org, "device_id"),
    t("device_tags", Scope::Org, "device_id, tag"),
    t("device_group_members", Scope::Org, "device_id, group_id"),
    t("enrollment_tokens", Scope::Org, "id"),
    t("device_commands", Scope::Org, "id"),
    t("device_status_history", Scope::Org, "id"),
    t("ota_packages", Scope::Org, "id"),
    t("ota_deployments", Scope::Org, "id"),
    t(
        "ota_deployment_devices",
        Scope::Org,
        "deployment_id, device_id",
    ),
    t("ml_datasets", Scope::Org, "id"),
    t("ml_label_classes", Scope::Dataset, "id"),
    t("ml_dataset_chunks", Scope::Dataset, "id"),
    t(
        "ml_dataset_spans",
        Scope::Dataset,
        "dataset_id, chunk_id, from_gen",
    ),
    t(
        "ml_dataset_labels",
        Scope::Dataset,
        "dataset_id, row_id, from_gen",
    ),
    t("ml_dataset_versions", Scope::Dataset, "dataset_id, version"),
    t("ml_validation_rules", Scope::Dataset, "id"),
    t("ml_training_jobs", Scope::Org, "id"),
    t("ml_models", Scope::Org, "id"),
    t("bi_config", Scope::Org, "org_id"),
    t("bi_saved_queries", Scope::Org, "id"),
    t("bi_query_runs", Scope::Org, "id"),
    t("bi_rls_rules", Scope::Org, "id"),
    t("bi_reports", Scope::Org, "id"),
    t("bi_report_runs", Scope::Org, "id"),
];

fn resident_table(name: &str) -> Result<&'static ResidentTable> {
    RESIDENT_TABLES
        .iter()
        .find(|t| t.name == name)
        .ok_or_else(|| StoreError::Corrupt(format!("'{name}' is not a table of resident data")))
}

fn scope_sql(scope: Scope) -> &'static str {
    match scope {
        Scope::Org => "org_id = $1",
        Scope::Dataset => "dataset_id IN (SELECT id FROM ml_datasets WHERE org_id = $1)",
    }
}

/// One value of a row, as it travels between regions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cell {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    /// Base64 in JSON.
    Blob(#[serde(with = "base64_bytes")] Vec<u8>),
}

mod base64_bytes {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(bytes))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        STANDARD.decode(text).map_err(serde::de::Error::custom)
    }
}

/// Some rows of one resident table, with its column names.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableRows {
    pub table: String,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Cell>>,
}

/// A column's kind, for binding a NULL of the right type.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Int,
    Real,
    Text,
    Blob,
}

fn kind_of(declared: &str) -> Kind {
    let d = declared.to_ascii_uppercase();
    if d.contains("INT") {
        Kind::Int
    } else if d.contains("REAL") || d.contains("DOUB") || d.contains("FLOA") {
        Kind::Real
    } else if d.contains("BLOB") || d.contains("BYTEA") {
        Kind::Blob
    } else {
        Kind::Text
    }
}

fn cell_of(row: &AnyRow, i: usize) -> Result<Cell> {
    let raw = row.try_get_raw(i)?;
    if raw.is_null() {
        return Ok(Cell::Null);
    }
    Ok(match raw.type_info().kind() {
        AnyTypeInfoKind::Null => Cell::Null,
        AnyTypeInfoKind::Bool => Cell::Int(row.try_get::<bool, _>(i)? as i64),
        AnyTypeInfoKind::SmallInt | AnyTypeInfoKind::Integer | AnyTypeInfoKind::BigInt => {
            Cell::Int(row.try_get::<i64, _>(i)?)
        }
        AnyTypeInfoKind::Real | AnyTypeInfoKind::Double => Cell::Real(row.try_get::<f64, _>(i)?),
        AnyTypeInfoKind::Text => Cell::Text(row.try_get::<String, _>(i)?),
        AnyTypeInfoKind::Blob => Cell::Blob(row.try_get::<Vec<u8>, _>(i)?),
    })
}

/// A migration of an organization's resident data to another region.
#[derive(Clone, Debug, PartialEq)]
pub struct RegionMigration {
    pub id: String,
    pub org_id: String,
    pub source_region: String,
    pub target_region: String,
    /// `scheduled`, `running`, `completed` or `failed`.
    pub status: String,
    pub migration_time: Timestamp,
    pub created_at: Timestamp,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
    pub progress: i64,
    pub error: Option<String>,
    /// JSON: what was copied and verified.
    pub verified: Option<String>,
    pub delete_after: Option<Timestamp>,
    pub source_deleted_at: Option<Timestamp>,
}

const MIGRATION_COLUMNS: &str = "id, org_id, source_region, target_region, status, migration_time, created_at, started_at, finished_at, progress, error, verified, delete_after, source_deleted_at";

fn migration_from_row(row: &AnyRow) -> Result<RegionMigration> {
    Ok(RegionMigration {
        id: row.try_get("id")?,
        org_id: row.try_get("org_id")?,
        source_region: row.try_get("source_region")?,
        target_region: row.try_get("target_region")?,
        status: row.try_get("status")?,
        migration_time: Timestamp::from_millis(row.try_get("migration_time")?),
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
        started_at: opt_ts(row, "started_at")?,
        finished_at: opt_ts(row, "finished_at")?,
        progress: row.try_get("progress")?,
        error: row.try_get("error")?,
        verified: row.try_get("verified")?,
        delete_after: opt_ts(row, "delete_after")?,
        source_deleted_at: opt_ts(row, "source_deleted_at")?,
    })
}

impl Store {
    /// The columns of a table with their kinds, in table order.
    async fn columns_of(&self, table: &str) -> Result<Vec<(String, Kind)>> {
        let sql = match self.backend() {
            Backend::Sqlite => "SELECT name, type FROM pragma_table_info($1) ORDER BY cid",
            Backend::Postgres => {
                "SELECT CAST(column_name AS TEXT), CAST(data_type AS TEXT) FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position"
            }
        };
        let rows: Vec<(String, String)> = sqlx::query_as(sql)
            .bind(table)
            .fetch_all(self.pool())
            .await?;
        Ok(rows
            .into_iter()
            .map(|(name, ty)| (name, kind_of(&ty)))
            .collect())
    }

    /// Up to `limit` of the organization's rows of a resident table, after the first `offset`,
    /// in the table's key order, every column.
    pub async fn resident_rows(
        &self,
        table: &str,
        org_id: &str,
        offset: i64,
        limit: i64,
    ) -> Result<TableRows> {
        let t = resident_table(table)?;
        let columns: Vec<String> = self
            .columns_of(t.name)
            .await?
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        let sql = format!(
            "SELECT {} FROM {} WHERE {} ORDER BY {} LIMIT $2 OFFSET $3",
            columns.join(", "),
            t.name,
            scope_sql(t.scope),
            t.order
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(org_id)
            .bind(limit)
            .bind(offset)
            .fetch_all(self.pool())
            .await?;
        let rows = rows
            .iter()
            .map(|r| (0..columns.len()).map(|i| cell_of(r, i)).collect())
            .collect::<Result<Vec<Vec<Cell>>>>()?;
        Ok(TableRows {
            table: t.name.to_string(),
            columns,
            rows,
        })
    }

    /// Writes rows of a resident table copied from another region, in one transaction; a row
    /// already here is left as it is (a batch delivered twice writes once). Every row must be
    /// the organization's, and every column one this table has.
    pub async fn import_resident_rows(&self, org_id: &str, rows: &TableRows) -> Result<u64> {
        let t = resident_table(&rows.table)?;
        let local = self.columns_of(t.name).await?;
        let mut kinds = Vec::with_capacity(rows.columns.len());
        for c in &rows.columns {
            let kind = local.iter().find(|(n, _)| n == c).map(|(_, k)| *k).ok_or_else(|| {
                StoreError::Corrupt(format!(
                    "column '{c}' of table '{}' is not known here (the regions run different versions)",
                    t.name
                ))
            })?;
            kinds.push(kind);
        }
        let owner_column = match t.scope {
            Scope::Org => "org_id",
            Scope::Dataset => "dataset_id",
        };
        let owner = rows
            .columns
            .iter()
            .position(|c| c == owner_column)
            .ok_or_else(|| {
                StoreError::Corrupt(format!("rows of '{}' without {owner_column}", t.name))
            })?;
        let mut tx = self.begin_write().await?;
        if let Scope::Dataset = t.scope {
            let mut ids: Vec<&str> = rows
                .rows
                .iter()
                .filter_map(|r| match r.get(owner) {
                    Some(Cell::Text(s)) => Some(s.as_str()),
                    _ => None,
                })
                .collect();
            ids.sort_unstable();
            ids.dedup();
            for id in ids {
                let owned: Option<(String,)> =
                    sqlx::query_as("SELECT id FROM ml_datasets WHERE id = $1 AND org_id = $2")
                        .bind(id)
                        .bind(org_id)
                        .fetch_optional(&mut *tx)
                        .await?;
                if owned.is_none() {
                    return Err(StoreError::Corrupt(format!(
                        "rows of '{}' name dataset '{id}', not one of the organization's",
                        t.name
                    )));
                }
            }
        }
        let marks: Vec<String> = (1..=rows.columns.len()).map(|i| format!("${i}")).collect();
        let sql = format!(
            "INSERT INTO {} ({}) VALUES ({}) ON CONFLICT DO NOTHING",
            t.name,
            rows.columns.join(", "),
            marks.join(", ")
        );
        let mut written = 0;
        for row in &rows.rows {
            if row.len() != kinds.len() {
                return Err(StoreError::Corrupt(format!(
                    "a row of '{}' has {} values for {} columns",
                    t.name,
                    row.len(),
                    kinds.len()
                )));
            }
            if let Scope::Org = t.scope
                && row[owner] != Cell::Text(org_id.to_string())
            {
                return Err(StoreError::Corrupt(format!(
                    "a row of '{}' belongs to another organization",
                    t.name
                )));
            }
            let mut q = sqlx::query(sqlx::AssertSqlSafe(sql.clone()));
            for (cell, kind) in row.iter().zip(&kinds) {
                q = match (cell, kind) {
                    (Cell::Null, Kind::Int) => q.bind(None::<i64>),
                    (Cell::Null, Kind::Real) => q.bind(None::<f64>),
                    (Cell::Null, Kind::Blob) => q.bind(None::<Vec<u8>>),
                    (Cell::Null, Kind::Text) => q.bind(None::<String>),
                    (Cell::Int(v), _) => q.bind(*v),
                    (Cell::Real(v), _) => q.bind(*v),
                    (Cell::Text(v), _) => q.bind(v.clone()),
                    (Cell::Blob(v), _) => q.bind(v.clone()),
                };
            }
            written += q.execute(&mut *tx).await?.rows_affected();
        }
        tx.commit().await?;
        if t.name == "data_sources" {
            self.data_sources_changed(org_id).await?;
        }
        Ok(written)
    }

    /// Deletes the organization's rows of every resident table (children first), in one
    /// transaction. Returns the rows deleted.
    pub async fn delete_resident_rows(&self, org_id: &str) -> Result<u64> {
        let mut tx = self.begin_write().await?;
        let mut deleted = 0;
        for t in RESIDENT_TABLES.iter().rev() {
            let sql = format!("DELETE FROM {} WHERE {}", t.name, scope_sql(t.scope));
            deleted += sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(org_id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        }
        tx.commit().await?;
        self.data_sources_changed(org_id).await?;
        Ok(deleted)
    }

    /// Schedules a migration; a 409 when the organization has one scheduled or running.
    pub async fn create_region_migration(
        &self,
        org_id: &str,
        source_region: &str,
        target_region: &str,
        migration_time: Timestamp,
    ) -> Result<RegionMigration> {
        let id = new_id();
        let now = Timestamp::now();
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO region_migrations (id, org_id, source_region, target_region, status, migration_time, created_at, progress) VALUES ($1, $2, $3, $4, 'scheduled', $5, $6, 0)",
        )
        .bind(&id)
        .bind(org_id)
        .bind(source_region)
        .bind(target_region)
        .bind(migration_time.millis())
        .bind(now.millis())
        .execute(&mut *tx)
        .await
        .map_err(|e| {
            conflict_on_unique(e, "the organization already has a region migration scheduled or running")
        })?;
        tx.commit().await?;
        self.region_migration(&id).await
    }

    pub async fn region_migration(&self, id: &str) -> Result<RegionMigration> {
        let sql = format!("SELECT {MIGRATION_COLUMNS} FROM region_migrations WHERE id = $1");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(self.pool())
            .await?
            .ok_or(StoreError::NotFound)?;
        migration_from_row(&row)
    }

    /// The organization's newest migration, if it ever had one.
    pub async fn latest_region_migration(&self, org_id: &str) -> Result<Option<RegionMigration>> {
        let sql = format!(
            "SELECT {MIGRATION_COLUMNS} FROM region_migrations WHERE org_id = $1 ORDER BY created_at DESC, id DESC LIMIT 1"
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(org_id)
            .fetch_optional(self.pool())
            .await?
            .as_ref()
            .map(migration_from_row)
            .transpose()
    }

    /// Migrations in `status`, oldest first (with `due_by`: only those due by then).
    pub async fn region_migrations_in(
        &self,
        status: &str,
        due_by: Option<Timestamp>,
    ) -> Result<Vec<RegionMigration>> {
        let sql = format!(
            "SELECT {MIGRATION_COLUMNS} FROM region_migrations WHERE status = $1 AND migration_time <= $2 ORDER BY migration_time, id"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(status)
            .bind(due_by.map_or(i64::MAX, |t| t.millis()))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(migration_from_row).collect()
    }

    /// Starts a scheduled migration; false when it is no longer scheduled (another node took it).
    pub async fn start_region_migration(&self, id: &str, now: Timestamp) -> Result<bool> {
        let mut tx = self.begin_write().await?;
        let started = sqlx::query(
            "UPDATE region_migrations SET status = 'running', started_at = $2, progress = 0 WHERE id = $1 AND status = 'scheduled'",
        )
        .bind(id)
        .bind(now.millis())
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        Ok(started == 1)
    }

    pub async fn set_region_migration_progress(&self, id: &str, progress: i64) -> Result<()> {
        let mut tx = self.begin_write_unsynced().await?;
        sqlx::query(
            "UPDATE region_migrations SET progress = $2 WHERE id = $1 AND status = 'running'",
        )
        .bind(id)
        .bind(progress.clamp(0, 100))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Ends a running migration: `completed` (with what was verified and when the source's copy
    /// goes) or `failed` (with why).
    pub async fn finish_region_migration(
        &self,
        id: &str,
        outcome: std::result::Result<(String, Timestamp), String>,
    ) -> Result<()> {
        let now = Timestamp::now().millis();
        let mut tx = self.begin_write().await?;
        let q = match &outcome {
            Ok((verified, delete_after)) => sqlx::query(
                "UPDATE region_migrations SET status = 'completed', progress = 100, finished_at = $2, verified = $3, delete_after = $4 WHERE id = $1",
            )
            .bind(id)
            .bind(now)
            .bind(verified.clone())
            .bind(delete_after.millis()),
            Err(why) => sqlx::query(
                "UPDATE region_migrations SET status = 'failed', finished_at = $2, error = $3 WHERE id = $1",
            )
            .bind(id)
            .bind(now)
            .bind(why.clone()),
        };
        q.execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Completed migrations whose source copy is due for deletion by `now`.
    pub async fn region_migrations_to_delete(
        &self,
        now: Timestamp,
    ) -> Result<Vec<RegionMigration>> {
        let sql = format!(
            "SELECT {MIGRATION_COLUMNS} FROM region_migrations WHERE status = 'completed' AND source_deleted_at IS NULL AND delete_after <= $1 ORDER BY delete_after, id"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(now.millis())
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(migration_from_row).collect()
    }

    pub async fn mark_migration_source_deleted(&self, id: &str, now: Timestamp) -> Result<()> {
        let mut tx = self.begin_write().await?;
        sqlx::query("UPDATE region_migrations SET source_deleted_at = $2 WHERE id = $1")
            .bind(id)
            .bind(now.millis())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Moves the organization's primary region (replicated to every region by the triggers of
    /// migration 0023). Nothing happens when it is already there.
    pub async fn set_org_primary_region(&self, org_id: &str, region: &str) -> Result<()> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "UPDATE organizations SET primary_region = $2 WHERE id = $1 AND (primary_region IS NULL OR primary_region <> $2)",
        )
        .bind(org_id)
        .bind(region)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_travel_as_json() {
        let rows = TableRows {
            table: "dashboards".into(),
            columns: vec!["a".into(), "b".into(), "c".into(), "d".into(), "e".into()],
            rows: vec![vec![
                Cell::Null,
                Cell::Int(-3),
                Cell::Real(0.5),
                Cell::Text("x".into()),
                Cell::Blob(vec![0, 255, 7]),
            ]],
        };
        let text = serde_json::to_string(&rows).unwrap();
        assert!(text.contains(r#"{"blob":"AP8H"}"#), "{text}");
        assert_eq!(serde_json::from_str::<TableRows>(&text).unwrap(), rows);
        assert_eq!(kind_of("DOUBLE PRECISION"), Kind::Real);
        assert_eq!(kind_of("bigint"), Kind::Int);
        assert_eq!(kind_of("bytea"), Kind::Blob);
        assert_eq!(kind_of("TEXT"), Kind::Text);
    }

    #[test]
    fn every_resident_table_has_a_scope_and_comes_after_its_parents() {
        let pos = |n: &str| RESIDENT_TABLES.iter().position(|t| t.name == n).unwrap();
        assert!(pos("webhooks") < pos("webhook_deliveries"));
        assert!(pos("products") < pos("licenses"));
        assert!(pos("licenses") < pos("license_activations"));
        assert!(pos("devices") < pos("device_tags"));
        assert!(pos("ota_packages") < pos("ota_deployments"));
        assert!(pos("ml_dataset_chunks") < pos("ml_dataset_spans"));
        assert!(pos("ml_datasets") < pos("ml_models"));
        assert!(pos("bi_reports") < pos("bi_report_runs"));
    }
}
