//! Data sources (SPEC 2.2, 4.1): CRUD, filters, and the connection test.

use axum::Json;
use axum::extract::{Path, State};
use axum::response::IntoResponse;
use axum::response::Response;
use plantd_connectors::Protocol;
use plantd_model::Timestamp;
use plantd_model::data_source::{
    DataSource, DataSourceStatus, DataSourceType, MAX_NAME_LEN, derive_endpoint, validate_config,
};
use plantd_model::page::PageMeta;
use plantd_model::page::PageQuery;
use plantd_model::validation::Validator;
use plantd_store::{DataSourceUpdate, NewDataSource};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::envelope::{Data, List, created, no_content, ok};
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{ValidJson, ValidQuery};
use crate::routes::page_of;
use crate::state::{AppState, Caller};

#[derive(Serialize, utoipa::ToSchema)]
pub struct DataSourceView {
    pub id: String,
    pub name: String,
    #[serde(rename = "type")]
    pub source_type: DataSourceType,
    pub endpoint: String,
    /// `connected` only while the protocol session is up.
    pub status: DataSourceStatus,
    /// Tags the connector reads.
    pub tag_count: i64,
    /// False: the source keeps its settings and runs no connector.
    pub enabled: bool,
    /// Why the connector is not connected, or the last problem it met while connected.
    pub last_error: Option<String>,
    /// Protocol settings; passwords are write-only and show as `password_set: true`.
    #[schema(value_type = Object)]
    pub config: Value,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl From<DataSource> for DataSourceView {
    fn from(ds: DataSource) -> Self {
        Self {
            config: ds.public_config(),
            id: ds.id,
            name: ds.name,
            source_type: ds.source_type,
            endpoint: ds.endpoint,
            status: ds.status,
            tag_count: ds.tag_count,
            enabled: ds.enabled,
            last_error: ds.last_error,
            created_at: ds.created_at,
            updated_at: ds.updated_at,
        }
    }
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateDataSource {
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
pub struct UpdateDataSource {
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

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DataSourceQuery {
    /// opcua, modbus or mqtt
    #[serde(rename = "type")]
    #[param(inline)]
    pub source_type: Option<DataSourceType>,
    /// connected or disconnected
    #[param(inline)]
    pub status: Option<DataSourceStatus>,
    #[serde(default, deserialize_with = "plantd_model::page::opt_i64")]
    pub page: Option<i64>,
    #[serde(default, deserialize_with = "plantd_model::page::opt_i64")]
    pub per_page: Option<i64>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ConnectionTestResult {
    pub success: bool,
    /// Time the check took, when it succeeded.
    pub latency_ms: Option<f64>,
    /// What happened, in words a user can act on ("connection refused", ...).
    pub message: String,
    /// What was dialled: the endpoint or broker URL, or `host:port` for Modbus.
    pub target: String,
    pub tested_at: Timestamp,
}

fn check_endpoint(v: &mut Validator, endpoint: &Option<String>) {
    if let Some(e) = endpoint {
        v.text("endpoint", e, 2000);
    }
}

/// List data sources, oldest first.
#[utoipa::path(get, path = "/data-sources", tag = "data-sources", security(("api_key" = [])), params(DataSourceQuery),
    responses((status = 200, body = List<DataSourceView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub async fn list_data_sources(
    State(state): State<AppState>,
    caller: Caller,
    ValidQuery(q): ValidQuery<DataSourceQuery>,
) -> ApiResult<Response> {
    let page = page_of(PageQuery {
        page: q.page,
        per_page: q.per_page,
    })?;
    let all = state.store.org_data_sources(&caller.org_id).await?;
    let rendered = state.rendered_data_sources.get(&caller.org_id, &all)?;
    let matching: Vec<usize> = all
        .iter()
        .enumerate()
        .filter(|(_, d)| q.source_type.is_none_or(|t| d.source_type == t))
        .filter(|(_, d)| q.status.is_none_or(|s| d.status == s))
        .map(|(i, _)| i)
        .collect();
    let data: Vec<&RawValue> = matching
        .iter()
        .skip(page.offset() as usize)
        .take(page.limit() as usize)
        .map(|&i| &*rendered[i])
        .collect();
    Ok(Json(List {
        data,
        meta: PageMeta::new(page, matching.len() as u64),
    })
    .into_response())
}

/// The JSON of each organization's data sources, rendered once per list the store hands out
/// (the store's list changes identity whenever a data source changes), so that listing is
/// copying rather than serializing.
#[derive(Default)]
pub struct RenderedDataSources {
    orgs: Mutex<HashMap<String, RenderedEntry>>,
}

/// The store's list a rendering was made from, and the rendering.
type RenderedEntry = (Arc<Vec<DataSource>>, RenderedList);

/// One JSON fragment per data source, in list order.
type RenderedList = Arc<Vec<Box<RawValue>>>;

impl RenderedDataSources {
    fn get(&self, org_id: &str, list: &Arc<Vec<DataSource>>) -> ApiResult<RenderedList> {
        if let Some((source, rendered)) = self
            .orgs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(org_id)
            && Arc::ptr_eq(source, list)
        {
            return Ok(rendered.clone());
        }
        let rendered = Arc::new(
            list.iter()
                .map(|d| serde_json::value::to_raw_value(&DataSourceView::from(d.clone())))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| ApiError::Internal(e.to_string()))?,
        );
        self.orgs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(org_id.to_string(), (list.clone(), rendered.clone()));
        Ok(rendered)
    }
}

/// Create a data source; it starts `disconnected` with `tag_count` 0.
#[utoipa::path(post, path = "/data-sources", tag = "data-sources", security(("api_key" = [])), request_body = CreateDataSource,
    responses((status = 201, body = Data<DataSourceView>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn create_data_source(
    State(state): State<AppState>,
    caller: Caller,
    ValidJson(body): ValidJson<CreateDataSource>,
) -> ApiResult<Response> {
    let mut v = Validator::new();
    v.text("name", &body.name, MAX_NAME_LEN);
    check_endpoint(&mut v, &body.endpoint);
    let config = validate_config(body.source_type, &body.config, "config", &mut v);
    v.finish().map_err(ApiError::Validation)?;
    let endpoint = body
        .endpoint
        .unwrap_or_else(|| derive_endpoint(body.source_type, &config));
    let ds = state
        .store
        .create_data_source(NewDataSource {
            org_id: &caller.org_id,
            name: body.name.trim(),
            source_type: body.source_type,
            endpoint: &endpoint,
            config: &config,
            enabled: body.enabled.unwrap_or(true),
        })
        .await?;
    Ok(created(&ds.id.clone(), DataSourceView::from(ds)))
}

#[utoipa::path(get, path = "/data-sources/{id}", tag = "data-sources", security(("api_key" = [])), params(("id" = String, Path)),
    responses((status = 200, body = Data<DataSourceView>), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn get_data_source(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let ds = state
        .store
        .data_source(&caller.org_id, &id)
        .await
        .map_err(ApiError::missing("data source"))?;
    Ok(ok(DataSourceView::from(ds)))
}

/// Update name, type, config or endpoint. A new `config` replaces the old one whole, except that
/// a stored password is kept when the new config names the same username and gives no password.
/// When `config` changes and no `endpoint` is given, the endpoint is derived again.
#[utoipa::path(put, path = "/data-sources/{id}", tag = "data-sources", security(("api_key" = [])), params(("id" = String, Path)), request_body = UpdateDataSource,
    responses((status = 200, body = Data<DataSourceView>), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn update_data_source(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ValidJson(body): ValidJson<UpdateDataSource>,
) -> ApiResult<Response> {
    let current = state
        .store
        .data_source(&caller.org_id, &id)
        .await
        .map_err(ApiError::missing("data source"))?;
    let mut v = Validator::new();
    if let Some(name) = &body.name {
        v.text("name", name, MAX_NAME_LEN);
    }
    check_endpoint(&mut v, &body.endpoint);
    let new_type = body.source_type.unwrap_or(current.source_type);
    if new_type != current.source_type && body.config.is_none() {
        v.add("config", "is required when the type changes");
    }
    let config = body.config.as_ref().map(|c| {
        let mut c = c.clone();
        keep_stored_password(&current, new_type, &mut c);
        validate_config(new_type, &c, "config", &mut v)
    });
    v.finish().map_err(ApiError::Validation)?;
    let endpoint = body
        .endpoint
        .or_else(|| config.as_ref().map(|c| derive_endpoint(new_type, c)));
    let update = DataSourceUpdate {
        name: body.name.map(|n| n.trim().to_string()),
        source_type: body.source_type,
        endpoint,
        config,
        enabled: body.enabled,
    };
    let ds = state
        .store
        .update_data_source(&caller.org_id, &id, update)
        .await
        .map_err(ApiError::missing("data source"))?;
    Ok(ok(DataSourceView::from(ds)))
}

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

#[utoipa::path(delete, path = "/data-sources/{id}", tag = "data-sources", security(("api_key" = [])), params(("id" = String, Path)),
    responses((status = 204, description = "Deleted"), (status = 404, body = ErrorBody)))]
pub async fn delete_data_source(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    state
        .store
        .delete_data_source(&caller.org_id, &id)
        .await
        .map_err(ApiError::missing("data source"))?;
    Ok(no_content())
}

/// Check the source at the protocol level: OPC UA opens a session and reads the server status,
/// Modbus reads the first mapped register, MQTT connects and waits for CONNACK.
#[utoipa::path(post, path = "/data-sources/{id}/test", tag = "data-sources", security(("api_key" = [])), params(("id" = String, Path)),
    responses((status = 200, body = Data<ConnectionTestResult>), (status = 404, body = ErrorBody)))]
pub async fn test_data_source(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let ds = state
        .store
        .data_source(&caller.org_id, &id)
        .await
        .map_err(ApiError::missing("data source"))?;
    let probe =
        match Protocol::from_config(ds.source_type, &ds.config, &state.config.connectors_pki_dir) {
            Ok(protocol) => plantd_connectors::probe(&protocol).await,
            Err(message) => plantd_connectors::Probe {
                success: false,
                latency: None,
                message,
                target: ds.endpoint.clone(),
            },
        };
    Ok(ok(ConnectionTestResult {
        success: probe.success,
        latency_ms: probe
            .latency
            .map(|d| (d.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0),
        message: probe.message,
        target: probe.target,
        tested_at: Timestamp::now(),
    }))
}
