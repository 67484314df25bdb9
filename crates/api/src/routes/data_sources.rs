//! Data sources (SPEC 2.2, 4.1): CRUD, filters, and the connection test.

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use plantd_app::data_sources::{DataSourceUpdate, NewDataSource};
use plantd_model::Scope::{ReadAssets, WriteAssets};
use plantd_model::Timestamp;
use plantd_model::audit::AuditEvent;
use plantd_model::data_source::{BrowseEntry, DataSource, DataSourceStatus, DataSourceType};
use plantd_model::page::PageMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::envelope::{Data, List, created, no_content, ok, paged_query};
use crate::error::{ApiError, ApiResult};
use crate::extract::{Auth, ById, ValidJson, ValidQuery};
use crate::routing::{Policy, Route, route};
use crate::state::AppState;

pub(crate) fn routes() -> Vec<Route> {
    vec![
        route!(
            list_data_sources,
            Policy::scope(ReadAssets, AuditEvent::DataSourceList)
        ),
        route!(
            create_data_source,
            Policy::scope(WriteAssets, AuditEvent::DataSourceCreate)
        ),
        route!(
            get_data_source,
            Policy::scope(ReadAssets, AuditEvent::DataSourceRead)
        ),
        route!(
            update_data_source,
            Policy::scope(WriteAssets, AuditEvent::DataSourceUpdate)
        ),
        route!(
            delete_data_source,
            Policy::scope(WriteAssets, AuditEvent::DataSourceDelete)
        ),
        route!(
            test_data_source,
            Policy::scope(WriteAssets, AuditEvent::DataSourceTest)
        ),
        route!(
            browse_data_source,
            Policy::scope(WriteAssets, AuditEvent::DataSourceBrowse)
        ),
    ]
}

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

impl From<&DataSource> for DataSourceView {
    fn from(ds: &DataSource) -> Self {
        Self {
            config: ds.public_config(),
            id: ds.id.clone(),
            name: ds.name.clone(),
            source_type: ds.source_type,
            endpoint: ds.endpoint.clone(),
            status: ds.status,
            tag_count: ds.tag_count,
            enabled: ds.enabled,
            last_error: ds.last_error.clone(),
            created_at: ds.created_at,
            updated_at: ds.updated_at,
        }
    }
}

paged_query! {
pub struct DataSourceQuery {
    /// opcua, modbus or mqtt
    #[serde(rename = "type")]
    #[param(inline)]
    pub source_type: Option<DataSourceType>,
    /// connected or disconnected
    #[param(inline)]
    pub status: Option<DataSourceStatus>,
}
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

/// List data sources, oldest first.
#[utoipa::path(get, path = "/data-sources", tag = "data-sources", params(DataSourceQuery),
    responses((status = 200, body = List<DataSourceView>)))]
async fn list_data_sources(
    State(state): State<AppState>,
    caller: Auth,
    ValidQuery(q): ValidQuery<DataSourceQuery>,
) -> ApiResult<Response> {
    let page = q.page()?;
    let all = state.app.data_sources(&caller.org_id).await?;
    let rendered = state
        .rendered_data_sources
        .get(&caller.org_id, &all, |d| {
            serde_json::value::to_raw_value(&DataSourceView::from(d))
        })
        .map_err(ApiError::internal)?;
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

/// Create a data source; it starts `disconnected` with `tag_count` 0.
#[utoipa::path(post, path = "/data-sources", tag = "data-sources", request_body = NewDataSource,
    responses((status = 201, body = Data<DataSourceView>), (status = 409, description = "A data source of this name exists")))]
async fn create_data_source(
    State(state): State<AppState>,
    caller: Auth,
    ValidJson(body): ValidJson<NewDataSource>,
) -> ApiResult<Response> {
    let ds = state.app.create_data_source(&caller.org_id, body).await?;
    Ok(created(&ds.id, DataSourceView::from(&ds)))
}

#[utoipa::path(get, path = "/data-sources/{id}", tag = "data-sources", params(("id" = String, Path)),
    responses((status = 200, body = Data<DataSourceView>)))]
async fn get_data_source(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    let ds = state.app.data_source(r.org(), &r.id).await?;
    Ok(ok(DataSourceView::from(&ds)))
}

/// Update name, type, config or endpoint. A new `config` replaces the old one whole, except that
/// a stored password is kept when the new config names the same username and gives no password.
/// When `config` changes and no `endpoint` is given, the endpoint is derived again.
#[utoipa::path(put, path = "/data-sources/{id}", tag = "data-sources", params(("id" = String, Path)), request_body = DataSourceUpdate,
    responses((status = 200, body = Data<DataSourceView>), (status = 409, description = "A data source of this name exists")))]
async fn update_data_source(
    State(state): State<AppState>,
    r: ById,
    ValidJson(body): ValidJson<DataSourceUpdate>,
) -> ApiResult<Response> {
    let ds = state.app.update_data_source(r.org(), &r.id, body).await?;
    Ok(ok(DataSourceView::from(&ds)))
}

#[utoipa::path(delete, path = "/data-sources/{id}", tag = "data-sources", params(("id" = String, Path)),
    responses((status = 204, description = "Deleted")))]
async fn delete_data_source(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    state.app.delete_data_source(r.org(), &r.id).await?;
    Ok(no_content())
}

/// Check the source at the protocol level: OPC UA opens a session and reads the server status,
/// Modbus reads the first mapped register, MQTT connects and waits for CONNACK.
#[utoipa::path(post, path = "/data-sources/{id}/test", tag = "data-sources", params(("id" = String, Path)),
    responses((status = 200, body = Data<ConnectionTestResult>)))]
async fn test_data_source(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    let probe = state.app.test_data_source(r.org(), &r.id).await?;
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

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BrowseQuery {
    /// OPC UA: the node whose children to list (default the source's `root_node`, else the
    /// Objects folder); MQTT: a topic filter (default `#`); Modbus: leave out.
    pub node: Option<String>,
    /// MQTT: seconds to listen, 1 to 30 (default 3).
    pub listen_seconds: Option<u64>,
}

/// One level of what the source offers: OPC UA objects and variables, the Modbus register
/// map, the topics an MQTT broker carries; each says whether it is collected now. Asks the
/// device (`write:assets`, as the connection test: a browse reads what the source's
/// credentials can see).
#[utoipa::path(get, path = "/data-sources/{id}/browse", tag = "data-sources",
    params(("id" = String, Path), BrowseQuery),
    responses((status = 200, body = Data<Vec<BrowseEntry>>),
        (status = 409, description = "The device could not be reached or asked (`device_unavailable`)")))]
async fn browse_data_source(
    State(state): State<AppState>,
    r: ById,
    ValidQuery(q): ValidQuery<BrowseQuery>,
) -> ApiResult<Response> {
    let listen = match q.listen_seconds {
        None => 3,
        Some(n @ 1..=30) => n,
        Some(_) => {
            return Err(ApiError::validation(
                "listen_seconds",
                "must be 1 to 30".to_string(),
            ));
        }
    };
    let entries = state
        .app
        .browse_data_source(
            r.org(),
            &r.id,
            q.node.as_deref().filter(|n| !n.is_empty()),
            std::time::Duration::from_secs(listen),
        )
        .await?;
    Ok(ok(entries))
}
