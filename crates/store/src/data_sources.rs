//! Data sources of an organization. Lists are served from memory (see `data_source_cache`);
//! every write invalidates them after committing, and on PostgreSQL notifies the other nodes
//! inside its transaction.

use plantd_model::data_source::{DataSource, DataSourceStatus, DataSourceType};
use plantd_model::{Timestamp, new_id};
use serde_json::Value;
use sqlx::Row;
use sqlx::any::AnyRow;

use std::sync::Arc;

use crate::rows::{OrgTable, delete_in};
use crate::{Result, Store, StoreError, conflict_on_unique};

/// Data sources, oldest first.
const DATA_SOURCES: OrgTable = OrgTable {
    name: "data_sources",
    columns: "*",
    order: "created_at, id",
};

pub struct NewDataSource<'a> {
    pub org_id: &'a str,
    pub name: &'a str,
    pub source_type: DataSourceType,
    pub endpoint: &'a str,
    pub config: &'a Value,
    pub enabled: bool,
}

/// The fields a `PUT` may change; `None` keeps the stored value.
#[derive(Default)]
pub struct DataSourceUpdate {
    pub name: Option<String>,
    pub source_type: Option<DataSourceType>,
    pub endpoint: Option<String>,
    pub config: Option<Value>,
    pub enabled: Option<bool>,
}

/// What a connector reports about its source.
#[derive(Clone, Debug, PartialEq)]
pub struct ConnectorState {
    pub status: DataSourceStatus,
    pub tag_count: i64,
    pub last_error: Option<String>,
}

const DUPLICATE_NAME: &str = "a data source with this name already exists";

fn from_row(row: &AnyRow) -> Result<DataSource> {
    let t: String = row.try_get("type")?;
    let status: String = row.try_get("status")?;
    let config: String = row.try_get("config")?;
    Ok(DataSource {
        id: row.try_get("id")?,
        org_id: row.try_get("org_id")?,
        name: row.try_get("name")?,
        source_type: DataSourceType::parse(&t)
            .ok_or_else(|| StoreError::Corrupt(format!("data source type {t}")))?,
        endpoint: row.try_get("endpoint")?,
        status: DataSourceStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("data source status {status}")))?,
        tag_count: row.try_get("tag_count")?,
        enabled: row.try_get::<i64, _>("enabled")? != 0,
        last_error: row.try_get("last_error")?,
        config: serde_json::from_str(&config)?,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
        updated_at: Timestamp::from_millis(row.try_get("updated_at")?),
    })
}

/// Inserts `ds` in `tx`; a name the organization already uses is a conflict saying `taken`.
pub(crate) async fn insert_data_source(
    tx: &mut crate::WriteTx,
    ds: &DataSource,
    taken: &str,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO data_sources (id, org_id, name, type, endpoint, status, tag_count, config, created_at, updated_at, enabled) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
    )
    .bind(&ds.id)
    .bind(&ds.org_id)
    .bind(&ds.name)
    .bind(ds.source_type.as_str())
    .bind(&ds.endpoint)
    .bind(ds.status.as_str())
    .bind(ds.tag_count)
    .bind(ds.config.to_string())
    .bind(ds.created_at.millis())
    .bind(ds.updated_at.millis())
    .bind(i64::from(ds.enabled))
    .execute(&mut **tx)
    .await
    .map_err(|e| conflict_on_unique(e, taken))?;
    Ok(())
}

impl Store {
    pub async fn create_data_source(&self, new: NewDataSource<'_>) -> Result<DataSource> {
        let now = Timestamp::now();
        let ds = DataSource {
            id: new_id(),
            org_id: new.org_id.to_string(),
            name: new.name.to_string(),
            source_type: new.source_type,
            endpoint: new.endpoint.to_string(),
            status: DataSourceStatus::Disconnected,
            tag_count: 0,
            enabled: new.enabled,
            last_error: None,
            config: new.config.clone(),
            created_at: now,
            updated_at: now,
        };
        let mut tx = self.begin_write().await?;
        insert_data_source(&mut tx, &ds, DUPLICATE_NAME).await?;
        self.commit_data_source_write(tx, new.org_id).await?;
        Ok(ds)
    }

    pub async fn data_source(&self, org_id: &str, id: &str) -> Result<DataSource> {
        self.org_row(&DATA_SOURCES, org_id, id, from_row).await
    }

    /// Every data source of an organization, oldest first, from memory when possible.
    pub async fn org_data_sources(&self, org_id: &str) -> Result<Arc<Vec<DataSource>>> {
        let generation = match self.data_source_cache.get(org_id) {
            Ok(hit) => return Ok(hit),
            Err(generation) => generation,
        };
        let list = Arc::new(self.org_rows(&DATA_SOURCES, org_id, from_row).await?);
        self.data_source_cache.put(org_id, generation, list.clone());
        Ok(list)
    }

    /// Ends a data source write: notifies other nodes (PostgreSQL) inside the transaction,
    /// commits, then forgets this node's cached list.
    /// Tells this node (and, on PostgreSQL, the others) that the organization's data sources
    /// changed in a write of another file (a region migration copied or deleted them).
    pub async fn data_sources_changed(&self, org_id: &str) -> Result<()> {
        let tx = self.begin_write().await?;
        self.commit_data_source_write(tx, org_id).await
    }

    pub(crate) async fn commit_data_source_write(
        &self,
        mut tx: crate::WriteTx,
        org_id: &str,
    ) -> Result<()> {
        if self.backend() == crate::Backend::Postgres {
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(crate::data_source_cache::CHANNEL)
                .bind(org_id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        self.data_source_cache.invalidate(org_id);
        Ok(())
    }

    pub async fn update_data_source(
        &self,
        org_id: &str,
        id: &str,
        u: DataSourceUpdate,
    ) -> Result<DataSource> {
        let current = self.data_source(org_id, id).await?;
        let name = u.name.unwrap_or(current.name);
        let source_type = u.source_type.unwrap_or(current.source_type);
        let endpoint = u.endpoint.unwrap_or(current.endpoint);
        let config = u.config.unwrap_or(current.config);
        let enabled = u.enabled.unwrap_or(current.enabled);
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "UPDATE data_sources SET name = $1, type = $2, endpoint = $3, config = $4, updated_at = $5, enabled = $8 \
             WHERE org_id = $6 AND id = $7",
        )
        .bind(&name)
        .bind(source_type.as_str())
        .bind(&endpoint)
        .bind(config.to_string())
        .bind(Timestamp::now().millis())
        .bind(org_id)
        .bind(id)
        .bind(i64::from(enabled))
        .execute(&mut *tx)
        .await
        .map_err(|e| conflict_on_unique(e, DUPLICATE_NAME))?;
        self.commit_data_source_write(tx, org_id).await?;
        self.data_source(org_id, id).await
    }

    pub async fn delete_data_source(&self, org_id: &str, id: &str) -> Result<()> {
        let mut tx = self.begin_write().await?;
        delete_in(&mut tx, &DATA_SOURCES, org_id, id).await?;
        self.commit_data_source_write(tx, org_id).await
    }

    /// Every data source of every organization (for the connector supervisor).
    pub async fn all_data_sources(&self) -> Result<Vec<DataSource>> {
        let rows = sqlx::query("SELECT * FROM data_sources ORDER BY created_at, id")
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(from_row).collect()
    }

    /// Records what a connector reports (not a user's change: `updated_at` stays). A source
    /// deleted meanwhile is no error.
    pub async fn set_connector_state(
        &self,
        org_id: &str,
        id: &str,
        state: &ConnectorState,
    ) -> Result<()> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "UPDATE data_sources SET status = $1, tag_count = $2, last_error = $3 \
             WHERE org_id = $4 AND id = $5",
        )
        .bind(state.status.as_str())
        .bind(state.tag_count)
        .bind(state.last_error.as_deref())
        .bind(org_id)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        self.commit_data_source_write(tx, org_id).await
    }

    /// Changes whenever a data source may have changed (on this node, or on another node
    /// sharing the PostgreSQL database).
    pub fn data_source_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.data_source_cache.changes()
    }
}
