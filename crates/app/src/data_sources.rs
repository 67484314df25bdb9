//! Data sources (SPEC 2.2, 4.1): create, change and delete them (their connectors follow through
//! the store's change feed), and test one at the protocol level.

use plantd_connectors::{BrowseError, Probe, Protocol};
use plantd_model::data_source::{
    BrowseEntry, DataSource, DataSourceType, MAX_NAME_LEN, derive_endpoint, validate_config,
};
use plantd_model::validation::{FieldError, Validator};
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashSet;
use std::sync::Arc;

use crate::app::App;
use crate::error::{AppError, AppResult};

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewDataSource {
    pub name: String,
    #[serde(rename = "type")]
    pub source_type: DataSourceType,
    /// By type: modbus `{host, port (502), unit_id (1)}`; opcua `{endpoint: "opc.tcp://...",
    /// security_mode, security_policy, username, password, root_node}`; mqtt `{broker_url,
    /// topics, payload_format, qos, client_id, username, password}`.
    #[schema(value_type = Object)]
    pub config: Value,
    /// Shown connection address; derived from `config` when absent.
    pub endpoint: Option<String>,
    /// Run a connector for this source (default true).
    pub enabled: Option<bool>,
}

/// Partial update: absent fields keep their value. Read-only fields of a fetched data source
/// (`id`, `status`, `tag_count`, `last_error`, `created_at`, `updated_at`) are accepted and
/// ignored.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DataSourceUpdate {
    pub name: Option<String>,
    #[serde(rename = "type")]
    pub source_type: Option<DataSourceType>,
    #[schema(value_type = Option<Object>)]
    pub config: Option<Value>,
    pub endpoint: Option<String>,
    /// Switch the connector on or off; settings are kept either way.
    pub enabled: Option<bool>,
    #[schema(value_type = Option<String>, read_only)]
    pub id: Option<Value>,
    #[schema(value_type = Option<String>, read_only)]
    pub last_error: Option<Value>,
    #[schema(value_type = Option<String>, read_only)]
    pub status: Option<Value>,
    #[schema(value_type = Option<i64>, read_only)]
    pub tag_count: Option<Value>,
    #[schema(value_type = Option<String>, read_only)]
    pub created_at: Option<Value>,
    #[schema(value_type = Option<String>, read_only)]
    pub updated_at: Option<Value>,
}

fn check_endpoint(v: &mut Validator, endpoint: &Option<String>) {
    if let Some(e) = endpoint {
        v.text("endpoint", e, 2000);
    }
}

/// A new config replaces the old one whole, except that a stored password is kept when the new
/// config names the same username and gives no password.
fn keep_stored_password(current: &DataSource, new_type: DataSourceType, config: &mut Value) {
    let Some(obj) = config.as_object_mut() else {
        return;
    };
    let same_user =
        obj.get("username").is_some() && obj.get("username") == current.config.get("username");
    if new_type == current.source_type
        && same_user
        && !obj.contains_key("password")
        && let Some(pw) = current.config.get("password")
    {
        obj.insert("password".into(), pw.clone());
    }
    obj.remove("password_set");
}

impl App {
    /// The organization's data sources, oldest first (served from memory; the list changes
    /// identity whenever a data source changes).
    pub async fn data_sources(&self, org_id: &str) -> AppResult<Arc<Vec<DataSource>>> {
        Ok(self.store().org_data_sources(org_id).await?)
    }

    pub async fn data_source(&self, org_id: &str, id: &str) -> AppResult<DataSource> {
        self.store()
            .data_source(org_id, id)
            .await
            .map_err(AppError::missing("data source"))
    }

    /// Creates a data source; it starts `disconnected` with `tag_count` 0.
    pub async fn create_data_source(
        &self,
        org_id: &str,
        new: NewDataSource,
    ) -> AppResult<DataSource> {
        let mut v = Validator::new();
        v.text("name", &new.name, MAX_NAME_LEN);
        check_endpoint(&mut v, &new.endpoint);
        let config = validate_config(new.source_type, &new.config, "config", &mut v);
        v.finish()?;
        let endpoint = new
            .endpoint
            .unwrap_or_else(|| derive_endpoint(new.source_type, &config));
        Ok(self
            .store()
            .create_data_source(plantd_store::NewDataSource {
                org_id,
                name: new.name.trim(),
                source_type: new.source_type,
                endpoint: &endpoint,
                config: &config,
                enabled: new.enabled.unwrap_or(true),
            })
            .await?)
    }

    /// Updates name, type, config, endpoint or the switch. When `config` changes and no
    /// `endpoint` is given, the endpoint is derived again.
    pub async fn update_data_source(
        &self,
        org_id: &str,
        id: &str,
        update: DataSourceUpdate,
    ) -> AppResult<DataSource> {
        let current = self.data_source(org_id, id).await?;
        let mut v = Validator::new();
        if let Some(name) = &update.name {
            v.text("name", name, MAX_NAME_LEN);
        }
        check_endpoint(&mut v, &update.endpoint);
        let new_type = update.source_type.unwrap_or(current.source_type);
        if new_type != current.source_type && update.config.is_none() {
            v.add("config", "is required when the type changes");
        }
        let config = update.config.as_ref().map(|c| {
            let mut c = c.clone();
            keep_stored_password(&current, new_type, &mut c);
            validate_config(new_type, &c, "config", &mut v)
        });
        v.finish()?;
        let endpoint = update
            .endpoint
            .or_else(|| config.as_ref().map(|c| derive_endpoint(new_type, c)));
        self.store()
            .update_data_source(
                org_id,
                id,
                plantd_store::DataSourceUpdate {
                    name: update.name.map(|n| n.trim().to_string()),
                    source_type: update.source_type,
                    endpoint,
                    config,
                    enabled: update.enabled,
                },
            )
            .await
            .map_err(AppError::missing("data source"))
    }

    pub async fn delete_data_source(&self, org_id: &str, id: &str) -> AppResult<()> {
        self.store()
            .delete_data_source(org_id, id)
            .await
            .map_err(AppError::missing("data source"))
    }

    /// Checks the source at the protocol level: OPC UA opens a session and reads the server
    /// status, Modbus reads the first mapped register, MQTT connects and waits for CONNACK.
    pub async fn test_data_source(&self, org_id: &str, id: &str) -> AppResult<Probe> {
        let ds = self.data_source(org_id, id).await?;
        let pki = &self.config().connectors_pki_dir;
        Ok(
            match Protocol::from_config(ds.source_type, &ds.config, pki) {
                Ok(protocol) => plantd_connectors::probe(&protocol).await,
                Err(e) => Probe {
                    success: false,
                    latency: None,
                    message: e.to_string(),
                    target: ds.endpoint.clone(),
                },
            },
        )
    }

    /// One level of what a source offers (docs/api.md, "Browsing a source"): OPC UA objects
    /// and variables under `node`, the Modbus register map, the topics an MQTT broker carries
    /// under `node` while listening `listen`; each says whether it is collected now.
    pub async fn browse_data_source(
        &self,
        org_id: &str,
        id: &str,
        node: Option<&str>,
        listen: std::time::Duration,
    ) -> AppResult<Vec<BrowseEntry>> {
        let ds = self.data_source(org_id, id).await?;
        let protocol = Protocol::from_config(
            ds.source_type,
            &ds.config,
            &self.config().connectors_pki_dir,
        )
        .map_err(|e| AppError::Internal {
            context: "a stored data source config".into(),
            source: Box::new(e),
        })?;
        let mut entries = plantd_connectors::browse(&protocol, node, listen)
            .await
            .map_err(|e| match e {
                BrowseError::BadNode(m) => AppError::Invalid(vec![FieldError::new("node", m)]),
                BrowseError::UnknownNode(_) => AppError::NotFound("node"),
                BrowseError::Device(m) => AppError::Refused {
                    code: "device_unavailable",
                    message: format!("cannot browse {}: {m}", ds.endpoint),
                },
            })?;
        match &protocol {
            Protocol::Opcua(c, _) if !c.nodes.is_empty() => {
                let listed: HashSet<&str> = c.nodes.iter().map(|n| n.node_id.as_str()).collect();
                for e in &mut entries {
                    e.collected = listed.contains(e.node_id.as_str());
                }
            }
            // Browsing from the root: what was stored from this source.
            Protocol::Opcua(..) => {
                let stored: HashSet<(String, String)> = self
                    .tsdb()
                    .series_of_source(org_id, id)
                    .await?
                    .into_iter()
                    .collect();
                for e in &mut entries {
                    if let (Some(a), Some(t)) = (&e.asset_id, &e.tag_name) {
                        e.collected = stored.contains(&(a.clone(), t.clone()));
                    }
                }
            }
            Protocol::Modbus(_) => entries.iter_mut().for_each(|e| e.collected = true),
            Protocol::Mqtt(c) => {
                for e in &mut entries {
                    e.collected = c
                        .topics
                        .iter()
                        .any(|f| plantd_connectors::mqtt::topic_matches(f, &e.node_id));
                }
            }
        }
        Ok(entries)
    }
}
