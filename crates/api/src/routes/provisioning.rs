//! Edge provisioning (SPEC 4.15; issue 34; bodies decided in docs/api.md, "Edge provisioning"):
//! assets imported from a CSV, a YAML file or a QR label become data sources named by their
//! asset ids, the list of what was provisioned, and the edge agent's configuration.

use axum::Extension;
use axum::extract::{FromRequest, Multipart, Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::response::Response;
use plantd_app::access::AuditTrail;
use plantd_app::edge_uplink::EdgeConfigView;
use plantd_app::provisioning::{FileFormat, ImportReport, MAX_IMPORT_BYTES, Method};
use plantd_model::Scope::{Admin, ReadAssets, WriteAssets};
use plantd_model::Timestamp;
use plantd_model::audit::AuditEvent;
use plantd_model::provisioning::AssetRow;
use serde::Serialize;
use serde_json::Value;

use crate::envelope::{Data, ok};
use crate::error::{ApiError, ApiResult};
use crate::extract::{Auth, ValidJson, field_bytes, form_error, multipart_form};
use crate::routing::{Policy, Route, route};
use crate::state::AppState;

pub(crate) fn routes() -> Vec<Route> {
    vec![
        route!(
            import_csv,
            Policy::scope(WriteAssets, AuditEvent::ProvisioningImport)
        ),
        route!(
            import_yaml,
            Policy::scope(WriteAssets, AuditEvent::ProvisioningImport)
        ),
        route!(
            import_qr,
            Policy::scope(WriteAssets, AuditEvent::ProvisioningImport)
        ),
        route!(
            list_assets,
            Policy::scope(ReadAssets, AuditEvent::ProvisioningList)
        ),
        route!(
            start_usb_watch,
            Policy::scope(Admin, AuditEvent::UsbWatchStart)
        ),
        route!(
            get_usb_watch,
            Policy::scope(ReadAssets, AuditEvent::UsbWatchRead)
        ),
        route!(
            edge_config,
            Policy::scope(ReadAssets, AuditEvent::EdgeConfigRead)
        ),
        route!(enroll, Policy::scope(Admin, AuditEvent::EdgeEnroll)),
        route!(setup_state, Policy::public(AuditEvent::EdgeSetupRead)),
        route!(setup, Policy::public(AuditEvent::EdgeSetup)),
        route!(network, Policy::scope(Admin, AuditEvent::EdgeNetworkRead)),
        route!(
            change_network,
            Policy::scope(Admin, AuditEvent::EdgeNetworkChange)
        ),
        route!(
            templates,
            Policy::scope(ReadAssets, AuditEvent::EdgeTemplatesRead)
        ),
        route!(
            clone,
            Policy::scope(WriteAssets, AuditEvent::ProvisioningClone)
        ),
        route!(
            sync_cloud,
            Policy::scope(WriteAssets, AuditEvent::ProvisioningCloudSync)
        ),
        route!(discover, Policy::scope(Admin, AuditEvent::DiscoveryScan)),
    ]
}

/// Probe the addresses named for Modbus TCP (device identification), OPC UA (Hello),
/// BACnet/IP (Who-Is, UDP 47808) and EtherNet/IP (List Identity, UDP 44818) devices; only
/// those addresses are touched. Admin only (it sends packets into the plant's network).
#[utoipa::path(post, path = "/api/discover/scan", tag = "provisioning",
    request_body = plantd_model::discovery::ScanRequest,
    responses((status = 200, body = Data<plantd_app::discovery::ScanReport>)))]
async fn discover(
    State(state): State<AppState>,
    _caller: Auth,
    ValidJson(body): ValidJson<plantd_model::discovery::ScanRequest>,
) -> ApiResult<Response> {
    Ok(ok(state.app.discover(body).await?))
}

/// An import's form (multipart/form-data); the file may also be sent as the whole body.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub struct ImportForm {
    /// The file (up to 2 MiB).
    #[schema(value_type = String, format = Binary)]
    file: Vec<u8>,
}

/// Whether the body is a multipart form (else the file is the body itself).
fn is_multipart(req: &Request) -> bool {
    req.headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("multipart/form-data"))
}

/// The file of an import: the multipart field `file`, or the whole body.
async fn uploaded_file(req: Request) -> ApiResult<Vec<u8>> {
    let bytes = if is_multipart(&req) {
        let mut form = multipart_form(Multipart::from_request(req, &()).await, "the field file")?;
        let mut file = None;
        while let Some(field) = form.next_field().await.map_err(form_error)? {
            let name = field.name().unwrap_or_default().to_string();
            if name != "file" {
                return Err(ApiError::validation(
                    name,
                    "unknown field: the form takes file",
                ));
            }
            if file.is_some() {
                return Err(ApiError::validation("file", "send one file"));
            }
            file = Some(field_bytes(field, "file", MAX_IMPORT_BYTES).await?);
        }
        file.unwrap_or_default()
    } else {
        axum::body::to_bytes(req.into_body(), MAX_IMPORT_BYTES)
            .await
            .map_err(|_| {
                ApiError::validation("body", format!("must be at most {MAX_IMPORT_BYTES} bytes"))
            })?
            .to_vec()
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::validation(
            "file",
            "is required: send the file as the multipart field file or as the body",
        ));
    }
    Ok(bytes)
}

/// The uploaded file imported.
async fn import(
    state: &AppState,
    caller: &Auth,
    req: Request,
    format: FileFormat,
    method: Method,
) -> ApiResult<Response> {
    let file = uploaded_file(req).await?;
    Ok(ok(state
        .app
        .import_file(&caller.org_id, format, &file, method)
        .await?))
}

/// Import assets from a CSV (columns asset_id, asset_type, protocol, host, port, sensors; the
/// sensors cell lists `name` or `name:address` separated by `;`). Each asset becomes (or
/// updates) the data source named by its id; a file with a bad line names each bad line and
/// imports nothing.
#[utoipa::path(post, path = "/provisioning/import/csv", tag = "provisioning",
    request_body(content((ImportForm = "multipart/form-data"), (String = "text/csv"))),
    responses((status = 200, body = Data<ImportReport>),
        (status = 409, description = "A migration of the organization is under way")))]
async fn import_csv(
    State(state): State<AppState>,
    caller: Auth,
    req: Request,
) -> ApiResult<Response> {
    import(&state, &caller, req, FileFormat::Csv, Method::Csv).await
}

/// Import assets from a YAML file (`assets:` a list of assets with the CSV's fields and SPEC
/// 2.17's asset keys; docs/api.md). A file with a bad entry names each and imports nothing.
#[utoipa::path(post, path = "/provisioning/import/yaml", tag = "provisioning",
    request_body(content((ImportForm = "multipart/form-data"), (String = "application/yaml"))),
    responses((status = 200, body = Data<ImportReport>),
        (status = 409, description = "A migration of the organization is under way")))]
async fn import_yaml(
    State(state): State<AppState>,
    caller: Auth,
    req: Request,
) -> ApiResult<Response> {
    import(&state, &caller, req, FileFormat::Yaml, Method::Yaml).await
}

/// A QR label's payload (SPEC 2.16): `id` asset id, `t` asset type, `h` host, `s` sensors
/// `[{n: name, a: register address or node index}]`; optional `p` protocol (modbus, the
/// default, or opcua) and `o` port.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[allow(dead_code)]
pub struct QrLabel {
    id: String,
    t: String,
    h: String,
    s: Vec<QrSensor>,
    p: Option<String>,
    o: Option<u16>,
}

#[derive(serde::Deserialize, utoipa::ToSchema)]
#[allow(dead_code)]
pub struct QrSensor {
    n: String,
    a: Option<i64>,
}

/// Provision the asset a QR label describes (a phone scanning the label posts its payload).
#[utoipa::path(post, path = "/provisioning/import/qr", tag = "provisioning", request_body = QrLabel,
    responses((status = 200, body = Data<ImportReport>),
        (status = 409, description = "A migration of the organization is under way")))]
async fn import_qr(
    State(state): State<AppState>,
    caller: Auth,
    ValidJson(label): ValidJson<Value>,
) -> ApiResult<Response> {
    Ok(ok(state.app.import_qr(&caller.org_id, &label).await?))
}

/// A provisioned asset: as described, its data source, how and when it came.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ProvisionedView {
    #[serde(flatten)]
    pub asset: AssetRow,
    pub data_source_id: String,
    /// csv, yaml, qr, usb, cloud or clone.
    pub method: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// The provisioned assets, by asset id.
#[utoipa::path(get, path = "/provisioning/assets", tag = "provisioning",
    responses((status = 200, body = Data<Vec<ProvisionedView>>)))]
async fn list_assets(State(state): State<AppState>, caller: Auth) -> ApiResult<Response> {
    let assets = state.app.provisioned_assets(&caller.org_id).await?;
    let data: Vec<ProvisionedView> = assets
        .into_iter()
        .map(|p| ProvisionedView {
            asset: p.asset,
            data_source_id: p.data_source_id,
            method: p.method,
            created_at: p.created_at,
            updated_at: p.updated_at,
        })
        .collect();
    Ok(ok(data))
}

/// The edge agent's mode and retention (SPEC 2.16, 8.6); 404 on an instance that is not an
/// edge agent.
#[utoipa::path(get, path = "/edge/config", tag = "provisioning",
    responses((status = 200, body = Data<EdgeConfigView>),
        (status = 404, description = "This instance is not an edge agent (`plantd edge`)")))]
async fn edge_config(State(state): State<AppState>, caller: Auth) -> ApiResult<Response> {
    Ok(ok(state.app.edge_config(&caller.org_id).await?))
}

/// `POST /edge/enroll`.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EnrollBody {
    /// The cloud's root address (`https://plant.example.com`).
    pub cloud_url: String,
    /// An enrollment token of the cloud (`POST /v1/fleet/enrollment/token` there).
    pub token: String,
}

/// Enroll this agent with a cloud: it registers there as a fleet device with the token and
/// keeps its credentials (replacing a former enrollment). Admin only.
#[utoipa::path(post, path = "/edge/enroll", tag = "provisioning", request_body = EnrollBody,
    responses((status = 200, body = Data<plantd_app::edge_uplink::CloudLink>),
        (status = 409, description = "The cloud cannot be reached or refused the token (`cloud_unreachable`)")))]
async fn enroll(
    State(state): State<AppState>,
    caller: Auth,
    ValidJson(body): ValidJson<EnrollBody>,
) -> ApiResult<Response> {
    Ok(ok(state
        .app
        .enroll(&caller.org_id, &body.cloud_url, &body.token)
        .await?))
}

/// Whether the agent's setup wizard waits for the owner's password (the console's `/setup`);
/// 404 on an instance that is not an edge agent.
#[utoipa::path(get, path = "/edge/setup", tag = "provisioning", security(()),
    responses((status = 200, body = Data<plantd_app::edge_setup::SetupState>),
        (status = 404, description = "This instance is not an edge agent (`plantd edge`)")))]
async fn setup_state(State(state): State<AppState>) -> ApiResult<Response> {
    let setup = state
        .app
        .edge_setup_state()
        .await?
        .ok_or(ApiError::NotFound(
            "setup (this instance is not an edge agent: `plantd edge`)".into(),
        ))?;
    Ok(ok(setup))
}

/// The wizard's first step: the setup code the agent printed sets the owner's password
/// (`admin@localhost`) and logs in (the answer of `POST /v1/auth/login`). The code works once;
/// 409 `setup_done` once the password is set.
#[utoipa::path(post, path = "/edge/setup", tag = "provisioning", security(()),
    request_body = plantd_app::edge_setup::SetupPassword,
    responses((status = 200, body = Data<crate::routes::auth::LoginAnswer>),
        (status = 400, description = "A wrong or used setup code (`setup_code`), or a password the rules refuse"),
        (status = 409, description = "The password is set already (`setup_done`)")))]
async fn setup(
    State(state): State<AppState>,
    Extension(trail): Extension<AuditTrail>,
    ValidJson(body): ValidJson<plantd_app::edge_setup::SetupPassword>,
) -> ApiResult<Response> {
    let new = state.app.finish_edge_setup(body, &trail).await?;
    Ok(crate::routes::auth::login_answer(&state, new))
}

/// The host's network as the agent sees it (interfaces, addresses, gateways, name servers)
/// and whether `PUT` can change it here. Admin only.
#[utoipa::path(get, path = "/edge/network", tag = "provisioning",
    responses((status = 200, body = Data<plantd_app::edge_setup::HostNetwork>),
        (status = 404, description = "This instance is not an edge agent (`plantd edge`)")))]
async fn network(State(state): State<AppState>, _caller: Auth) -> ApiResult<Response> {
    Ok(ok(state.app.host_network().await?))
}

/// Set an interface's IPv4 settings (DHCP, or a static address, gateway and name servers)
/// through NetworkManager; 409 `network_not_applicable` on a host without it. Admin only.
#[utoipa::path(put, path = "/edge/network", tag = "provisioning",
    request_body = plantd_app::edge_setup::NetworkChange,
    responses((status = 200, body = Data<plantd_app::edge_setup::HostNetwork>),
        (status = 404, description = "This instance is not an edge agent (`plantd edge`)"),
        (status = 409, description = "This host's network cannot be set from here (`network_not_applicable`), or NetworkManager refused (`network_change_failed`)")))]
async fn change_network(
    State(state): State<AppState>,
    _caller: Auth,
    ValidJson(body): ValidJson<plantd_app::edge_setup::NetworkChange>,
) -> ApiResult<Response> {
    Ok(ok(state.app.apply_network(body).await?))
}

/// The kinds of asset the setup wizard offers: each one's sensors with their units and
/// registers in the simulator's Modbus map, to fill a CSV import line.
#[utoipa::path(get, path = "/edge/templates", tag = "provisioning",
    responses((status = 200, body = Data<Vec<plantd_model::provisioning::AssetTemplate>>),
        (status = 404, description = "This instance is not an edge agent (`plantd edge`)")))]
async fn templates(State(state): State<AppState>, _caller: Auth) -> ApiResult<Response> {
    Ok(ok(state.app.edge_templates()?))
}

/// Pull the assets registered for this agent in the cloud (`PUT /v1/fleet/devices/{id}/assets`
/// there) and provision them, as an import would.
#[utoipa::path(post, path = "/provisioning/sync/cloud", tag = "provisioning",
    responses((status = 200, body = Data<ImportReport>),
        (status = 409, description = "Not enrolled (`not_enrolled`), or the cloud cannot be reached (`cloud_unreachable`)")))]
async fn sync_cloud(State(state): State<AppState>, caller: Auth) -> ApiResult<Response> {
    Ok(ok(state.app.sync_from_cloud(&caller.org_id).await?))
}

/// `POST /provisioning/usb/watch/start`.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UsbWatchStart {
    /// The absolute directory a USB stick mounts at (`/media/usb`); it may not exist yet.
    pub path: String,
}

/// Watch a mount directory: `twinbox_config.csv` or a `.yaml` file in it or in a folder of it
/// is imported, then marked `<file>.imported`. Replaces the organization's former watch; kept
/// across restarts. Admin only (it reads and writes the host's files).
#[utoipa::path(post, path = "/provisioning/usb/watch/start", tag = "provisioning", request_body = UsbWatchStart,
    responses((status = 200, body = Data<plantd_app::usb_watch::UsbWatchView>)))]
async fn start_usb_watch(
    State(state): State<AppState>,
    caller: Auth,
    ValidJson(body): ValidJson<UsbWatchStart>,
) -> ApiResult<Response> {
    Ok(ok(state
        .app
        .start_usb_watch(&caller.org_id, &body.path)
        .await?))
}

/// The organization's USB watch on this instance: its directory, whether a stick is there,
/// and the files imported or refused.
#[utoipa::path(get, path = "/provisioning/usb/watch", tag = "provisioning",
    responses((status = 200, body = Data<plantd_app::usb_watch::UsbWatchView>),
        (status = 404, description = "No watch was started")))]
async fn get_usb_watch(State(state): State<AppState>, caller: Auth) -> ApiResult<Response> {
    Ok(ok(state.app.usb_watch(&caller.org_id)?))
}

#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum CloneAction {
    Export,
    Import,
}

/// `POST /provisioning/clone` as JSON.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CloneBody {
    pub action: CloneAction,
    /// `import`: the document `export` answered.
    #[schema(value_type = Option<Object>)]
    pub file: Option<Value>,
}

/// Export this device's configuration as one document (`{"action": "export"}`: its
/// provisioned assets and the alert rules that watch them), or apply one exported elsewhere
/// (`{"action": "import", "file": <document>}`, or the document as the multipart field
/// `file`). An import is checked whole before anything is written.
#[utoipa::path(post, path = "/provisioning/clone", tag = "provisioning",
    request_body(content((CloneBody = "application/json"), (ImportForm = "multipart/form-data"))),
    responses((status = 200, description = "export: `{data: <document>}` (CloneDocument); import: `{data: <what was applied>}` (CloneReport)", body = Object),
        (status = 409, description = "A migration of the organization is under way")))]
async fn clone(State(state): State<AppState>, caller: Auth, req: Request) -> ApiResult<Response> {
    let document: Value = if is_multipart(&req) {
        let bytes = uploaded_file(req).await?;
        serde_json::from_slice(&bytes)
            .map_err(|e| ApiError::validation("file", format!("is not JSON: {e}")))?
    } else {
        let ValidJson(body) = ValidJson::<CloneBody>::from_request(req, &state).await?;
        match (body.action, body.file) {
            (CloneAction::Export, None) => {
                return Ok(ok(state.app.export_clone(&caller.org_id).await?));
            }
            (CloneAction::Export, Some(_)) => {
                return Err(ApiError::validation("file", "is only for import"));
            }
            (CloneAction::Import, Some(doc)) => doc,
            (CloneAction::Import, None) => {
                return Err(ApiError::validation(
                    "file",
                    "is required: the document an export answered",
                ));
            }
        }
    };
    Ok(ok(state
        .app
        .import_clone(&caller.org_id, &document)
        .await?))
}
