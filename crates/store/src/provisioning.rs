//! Assets provisioned on an edge agent (issue 34): one import writes every asset's data source
//! (created, or updated when a source of that name exists) and its record in one transaction,
//! so an import is applied whole or not at all.

use plantd_model::data_source::{DataSource, DataSourceStatus};
use plantd_model::provisioning::AssetRow;
use plantd_model::{Timestamp, new_id};
use serde_json::Value;
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::data_sources::insert_data_source;
use crate::rows::OrgTable;
use crate::sql::json_column;
use crate::{Result, Store};

/// Two imports that create the same asset at once: the second is refused, not half applied.
const CONCURRENT_IMPORT: &str = "another import created one of these assets at the same moment; nothing of this one was written: send it again";

const PROVISIONED: OrgTable = OrgTable {
    name: "provisioned_assets",
    columns: "org_id, asset_id, data_source_id, asset, method, created_at, updated_at",
    order: "asset_id",
};

/// An asset to write: as described, and its data source's endpoint and checked config.
pub struct AssetWrite<'a> {
    pub row: &'a AssetRow,
    pub endpoint: String,
    pub config: Value,
}

/// A provisioned asset as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct ProvisionedAsset {
    pub asset: AssetRow,
    pub data_source_id: String,
    /// How it came: csv, yaml, qr, usb, cloud, clone.
    pub method: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// An edge agent's enrollment with its cloud.
#[derive(Clone, Debug, PartialEq)]
pub struct Uplink {
    pub cloud_url: String,
    pub device_id: String,
    pub password: String,
    /// What the cloud answered of its MQTT channel (`client_id`, `username`, `topics`).
    pub mqtt: Value,
    pub enrolled_at: Timestamp,
    /// What the cloud said of its regions (`{"current", "known": [...]}`).
    pub regions: Value,
}

/// What an import did to one asset.
#[derive(Clone, Debug, PartialEq)]
pub struct Provisioned {
    pub asset_id: String,
    pub data_source_id: String,
    /// False: the data source existed and was updated.
    pub created: bool,
}

fn from_row(row: &AnyRow) -> Result<ProvisionedAsset> {
    Ok(ProvisionedAsset {
        asset: json_column(row, "asset")?,
        data_source_id: row.try_get("data_source_id")?,
        method: row.try_get("method")?,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
        updated_at: Timestamp::from_millis(row.try_get("updated_at")?),
    })
}

impl Store {
    /// Writes every asset's data source (named by its asset id) and record in one transaction.
    pub async fn provision_assets(
        &self,
        org_id: &str,
        method: &str,
        assets: &[AssetWrite<'_>],
    ) -> Result<Vec<Provisioned>> {
        let now = Timestamp::now().millis();
        let mut tx = self.begin_write().await?;
        let mut done = Vec::with_capacity(assets.len());
        for a in assets {
            let row = a.row;
            let existing: Option<String> =
                sqlx::query("SELECT id FROM data_sources WHERE org_id = $1 AND name = $2")
                    .bind(org_id)
                    .bind(&row.asset_id)
                    .fetch_optional(&mut *tx)
                    .await?
                    .map(|r| r.try_get("id"))
                    .transpose()?;
            let created = existing.is_none();
            let id = match existing {
                Some(id) => {
                    sqlx::query(
                        "UPDATE data_sources SET type = $1, endpoint = $2, config = $3, enabled = $4, updated_at = $5 \
                         WHERE org_id = $6 AND id = $7",
                    )
                    .bind(row.protocol.as_str())
                    .bind(&a.endpoint)
                    .bind(a.config.to_string())
                    .bind(i64::from(row.enabled))
                    .bind(now)
                    .bind(org_id)
                    .bind(&id)
                    .execute(&mut *tx)
                    .await?;
                    id
                }
                None => {
                    let ds = DataSource {
                        id: new_id(),
                        org_id: org_id.to_string(),
                        name: row.asset_id.clone(),
                        source_type: row.protocol,
                        endpoint: a.endpoint.clone(),
                        status: DataSourceStatus::Disconnected,
                        tag_count: 0,
                        enabled: row.enabled,
                        last_error: None,
                        config: a.config.clone(),
                        created_at: Timestamp::from_millis(now),
                        updated_at: Timestamp::from_millis(now),
                    };
                    insert_data_source(&mut tx, &ds, CONCURRENT_IMPORT).await?;
                    ds.id
                }
            };
            sqlx::query(
                "INSERT INTO provisioned_assets (org_id, asset_id, data_source_id, asset, method, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $6) \
                 ON CONFLICT (org_id, asset_id) DO UPDATE SET data_source_id = $3, asset = $4, method = $5, updated_at = $6",
            )
            .bind(org_id)
            .bind(&row.asset_id)
            .bind(&id)
            .bind(serde_json::to_string(row)?)
            .bind(method)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            done.push(Provisioned {
                asset_id: row.asset_id.clone(),
                data_source_id: id,
                created,
            });
        }
        self.commit_data_source_write(tx, org_id).await?;
        Ok(done)
    }

    /// Watches `path` for the organization's USB auto-import (replacing a former path).
    pub async fn set_usb_watch(&self, org_id: &str, path: &str) -> Result<Timestamp> {
        let now = Timestamp::now();
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO usb_watches (org_id, path, started_at) VALUES ($1, $2, $3) \
             ON CONFLICT (org_id) DO UPDATE SET path = $2, started_at = $3",
        )
        .bind(org_id)
        .bind(path)
        .bind(now.millis())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(now)
    }

    /// Every USB watch: organization, path, start.
    pub async fn usb_watches(&self) -> Result<Vec<(String, String, Timestamp)>> {
        sqlx::query("SELECT org_id, path, started_at FROM usb_watches ORDER BY org_id")
            .fetch_all(self.pool())
            .await?
            .iter()
            .map(|r| {
                Ok((
                    r.try_get("org_id")?,
                    r.try_get("path")?,
                    Timestamp::from_millis(r.try_get("started_at")?),
                ))
            })
            .collect()
    }

    /// Registers `assets` (checked rows) for a device of the organization; `NotFound` for
    /// another organization's device.
    pub async fn set_device_assets(
        &self,
        org_id: &str,
        device_id: &str,
        assets: &[AssetRow],
    ) -> Result<Timestamp> {
        let now = Timestamp::now();
        let mut tx = self.begin_write().await?;
        let found = sqlx::query("SELECT id FROM devices WHERE org_id = $1 AND id = $2")
            .bind(org_id)
            .bind(device_id)
            .fetch_optional(&mut *tx)
            .await?;
        if found.is_none() {
            return Err(crate::StoreError::NotFound);
        }
        sqlx::query(
            "INSERT INTO device_assets (device_id, org_id, assets, updated_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (device_id) DO UPDATE SET assets = $3, updated_at = $4",
        )
        .bind(device_id)
        .bind(org_id)
        .bind(serde_json::to_string(assets)?)
        .bind(now.millis())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(now)
    }

    /// The assets registered for a device: none registered is an empty list with no time.
    pub async fn device_assets(
        &self,
        org_id: &str,
        device_id: &str,
    ) -> Result<(Vec<AssetRow>, Option<Timestamp>)> {
        let row = sqlx::query(
            "SELECT assets, updated_at FROM device_assets WHERE org_id = $1 AND device_id = $2",
        )
        .bind(org_id)
        .bind(device_id)
        .fetch_optional(self.pool())
        .await?;
        match row {
            Some(r) => Ok((
                json_column(&r, "assets")?,
                Some(Timestamp::from_millis(r.try_get("updated_at")?)),
            )),
            None => Ok((Vec::new(), None)),
        }
    }

    /// Records the agent's enrollment (replacing a former one).
    pub async fn set_uplink(&self, org_id: &str, u: &Uplink) -> Result<()> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO edge_uplink (org_id, cloud_url, device_id, password, mqtt, enrolled_at, regions) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (org_id) DO UPDATE SET cloud_url = $2, \
             device_id = $3, password = $4, mqtt = $5, enrolled_at = $6, regions = $7",
        )
        .bind(org_id)
        .bind(&u.cloud_url)
        .bind(&u.device_id)
        .bind(&u.password)
        .bind(u.mqtt.to_string())
        .bind(u.enrolled_at.millis())
        .bind(u.regions.to_string())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Whether an organization of this database is enrolled with a cloud (an edge agent).
    pub async fn any_uplink(&self) -> Result<bool> {
        Ok(sqlx::query("SELECT org_id FROM edge_uplink LIMIT 1")
            .fetch_optional(self.pool())
            .await?
            .is_some())
    }

    /// The agent's enrollment, if it enrolled.
    pub async fn uplink(&self, org_id: &str) -> Result<Option<Uplink>> {
        let row = sqlx::query(
            "SELECT cloud_url, device_id, password, mqtt, enrolled_at, regions FROM edge_uplink WHERE org_id = $1",
        )
        .bind(org_id)
        .fetch_optional(self.pool())
        .await?;
        row.map(|r| {
            Ok(Uplink {
                cloud_url: r.try_get("cloud_url")?,
                device_id: r.try_get("device_id")?,
                password: r.try_get("password")?,
                mqtt: json_column(&r, "mqtt")?,
                enrolled_at: Timestamp::from_millis(r.try_get("enrolled_at")?),
                regions: json_column(&r, "regions")?,
            })
        })
        .transpose()
    }

    /// The organization's provisioned assets, by asset id.
    pub async fn provisioned_assets(&self, org_id: &str) -> Result<Vec<ProvisionedAsset>> {
        self.org_rows(&PROVISIONED, org_id, from_row).await
    }
}
