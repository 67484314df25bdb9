//! Fleet (SPEC 4.7): devices, their health and commands, groups and enrollment tokens.
//! `read:assets` reads, `write:assets` changes; a device registers itself with an enrollment
//! token and no API key.

use axum::Extension;
use axum::extract::State;
use axum::response::Response;
use plantd_app::Caller;
use plantd_app::access::AuditTrail;
use plantd_app::fleet::{
    CreatedToken, DeviceHealth, DeviceUpdate, GroupUpdate, NewCommand, NewDeviceRequest, NewGroup,
    NewTokenRequest, RegisteredDevice,
};
use plantd_model::Scope::{ReadAssets, WriteAssets};
use plantd_model::audit::AuditEvent;
use plantd_model::device::{Command, Device, DeviceGroup, DeviceStatus, EnrollmentToken};
use plantd_model::page::PageQuery;

use crate::envelope::{Data, List, created, list, no_content, ok, page_of_query, paged_query};
use crate::error::ApiResult;
use crate::extract::{Auth, ById, JsonBytes, ValidJson, ValidQuery, parse_json};
use crate::routing::{Policy, Route, route};
use crate::state::AppState;

pub(crate) fn routes() -> Vec<Route> {
    vec![
        route!(
            list_devices,
            Policy::scope(ReadAssets, AuditEvent::DeviceList)
        ),
        route!(
            register_device,
            Policy::scope_or_proof(WriteAssets, AuditEvent::DeviceRegister)
        ),
        route!(
            put_device_assets,
            Policy::scope(WriteAssets, AuditEvent::DeviceAssetsSet)
        ),
        route!(
            get_device_assets,
            Policy::scope_or_device(ReadAssets, AuditEvent::DeviceAssetsRead)
        ),
        route!(
            get_device,
            Policy::scope(ReadAssets, AuditEvent::DeviceRead)
        ),
        route!(
            update_device,
            Policy::scope(WriteAssets, AuditEvent::DeviceUpdate)
        ),
        route!(
            delete_device,
            Policy::scope(WriteAssets, AuditEvent::DeviceDelete)
        ),
        route!(
            device_health,
            Policy::scope(ReadAssets, AuditEvent::DeviceHealth)
        ),
        route!(
            send_command,
            Policy::scope(WriteAssets, AuditEvent::DeviceCommand)
        ),
        route!(
            list_commands,
            Policy::scope(ReadAssets, AuditEvent::DeviceCommands)
        ),
        route!(
            list_groups,
            Policy::scope(ReadAssets, AuditEvent::DeviceGroupList)
        ),
        route!(
            create_group,
            Policy::scope(WriteAssets, AuditEvent::DeviceGroupCreate)
        ),
        route!(
            get_group,
            Policy::scope(ReadAssets, AuditEvent::DeviceGroupRead)
        ),
        route!(
            update_group,
            Policy::scope(WriteAssets, AuditEvent::DeviceGroupUpdate)
        ),
        route!(
            delete_group,
            Policy::scope(WriteAssets, AuditEvent::DeviceGroupDelete)
        ),
        route!(
            create_token,
            Policy::scope(WriteAssets, AuditEvent::EnrollmentTokenCreate)
        ),
        route!(
            list_tokens,
            Policy::scope(ReadAssets, AuditEvent::EnrollmentTokenList)
        ),
        route!(
            revoke_token,
            Policy::scope(WriteAssets, AuditEvent::EnrollmentTokenRevoke)
        ),
    ]
}

paged_query! {
pub struct DeviceQuery {
    /// online, offline or unknown
    #[param(inline)]
    pub status: Option<DeviceStatus>,
    /// Devices in this group.
    pub group_id: Option<String>,
    /// Comma-separated tags: a device must carry all of them.
    pub tags: Option<String>,
}
}

/// Devices, oldest first, filtered by status, group and tags.
#[utoipa::path(get, path = "/fleet/devices", tag = "fleet", params(DeviceQuery),
    responses((status = 200, body = List<Device>)))]
async fn list_devices(
    State(state): State<AppState>,
    caller: Auth,
    ValidQuery(q): ValidQuery<DeviceQuery>,
) -> ApiResult<Response> {
    let page = q.page()?;
    let filter = plantd_app::fleet::DeviceFilter {
        status: q.status,
        group_id: q.group_id.filter(|g| !g.trim().is_empty()),
        tags: plantd_app::fleet::tag_list(q.tags.as_deref()),
    };
    let paged = state.app.devices(&caller.org_id, filter, page).await?;
    Ok(list(page, paged, |d| d))
}

/// Register a device: an operator with an API key holding `write:assets` (no token), or the
/// device itself with `enrollment_token` (no API key). The answer holds the device's MQTT
/// credentials; the password is shown only here.
#[utoipa::path(post, path = "/fleet/devices", tag = "fleet", request_body = NewDeviceRequest,
    responses((status = 201, body = Data<RegisteredDevice>),
        (status = 409, description = "The serial number is registered, or the token is expired, revoked or used up (`enrollment_token_expired`, `enrollment_token_revoked`, `enrollment_token_used_up`)")))]
async fn register_device(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    Extension(trail): Extension<AuditTrail>,
    ValidJson(body): ValidJson<NewDeviceRequest>,
) -> ApiResult<Response> {
    let caller = caller.map(|Extension(c)| c);
    let device = state
        .app
        .register_device(caller.as_ref(), body, &trail)
        .await?;
    Ok(created(&device.device.id.clone(), device))
}

#[utoipa::path(get, path = "/fleet/devices/{id}", tag = "fleet", params(("id" = String, Path)),
    responses((status = 200, body = Data<Device>)))]
async fn get_device(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    Ok(ok(state.app.device(r.org(), &r.id).await?))
}

/// Partial update; `group_ids` sets the device's groups.
#[utoipa::path(put, path = "/fleet/devices/{id}", tag = "fleet", params(("id" = String, Path)), request_body = DeviceUpdate,
    responses((status = 200, body = Data<Device>)))]
async fn update_device(
    State(state): State<AppState>,
    r: ById,
    ValidJson(body): ValidJson<DeviceUpdate>,
) -> ApiResult<Response> {
    Ok(ok(state.app.update_device(r.org(), &r.id, body).await?))
}

/// Delete a device: it is disconnected within seconds and its credentials are refused.
#[utoipa::path(delete, path = "/fleet/devices/{id}", tag = "fleet", params(("id" = String, Path)),
    responses((status = 204, description = "Deleted")))]
async fn delete_device(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    state.app.delete_device(r.org(), &r.id).await?;
    Ok(no_content())
}

/// The last heartbeat's figures and the status history.
#[utoipa::path(get, path = "/fleet/devices/{id}/health", tag = "fleet", params(("id" = String, Path)),
    responses((status = 200, body = Data<DeviceHealth>)))]
async fn device_health(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    Ok(ok(state.app.device_health(r.org(), &r.id).await?))
}

/// Queue a command: delivered on the device's command topic at once or when it connects,
/// until its time to live.
#[utoipa::path(post, path = "/fleet/devices/{id}/command", tag = "fleet", params(("id" = String, Path)), request_body = NewCommand,
    responses((status = 201, body = Data<Command>)))]
async fn send_command(
    State(state): State<AppState>,
    r: ById,
    ValidJson(body): ValidJson<NewCommand>,
) -> ApiResult<Response> {
    let command = state.app.send_command(r.org(), &r.id, body).await?;
    Ok(created(&command.id.clone(), command))
}

/// The device's commands, newest first.
#[utoipa::path(get, path = "/fleet/devices/{id}/commands", tag = "fleet", params(("id" = String, Path), PageQuery),
    responses((status = 200, body = List<Command>)))]
async fn list_commands(
    State(state): State<AppState>,
    r: ById,
    ValidQuery(q): ValidQuery<PageQuery>,
) -> ApiResult<Response> {
    let page = page_of_query(q)?;
    let paged = state.app.device_commands(r.org(), &r.id, page).await?;
    Ok(list(page, paged, |c| c))
}

/// Groups by name, with their device counts.
#[utoipa::path(get, path = "/fleet/groups", tag = "fleet", params(PageQuery),
    responses((status = 200, body = List<DeviceGroup>)))]
async fn list_groups(
    State(state): State<AppState>,
    caller: Auth,
    ValidQuery(q): ValidQuery<PageQuery>,
) -> ApiResult<Response> {
    let page = page_of_query(q)?;
    let paged = state.app.groups(&caller.org_id, page).await?;
    Ok(list(page, paged, |g| g))
}

#[utoipa::path(post, path = "/fleet/groups", tag = "fleet", request_body = NewGroup,
    responses((status = 201, body = Data<DeviceGroup>), (status = 409, description = "The name is taken")))]
async fn create_group(
    State(state): State<AppState>,
    caller: Auth,
    ValidJson(body): ValidJson<NewGroup>,
) -> ApiResult<Response> {
    let group = state.app.create_group(&caller.org_id, body).await?;
    Ok(created(&group.id.clone(), group))
}

#[utoipa::path(get, path = "/fleet/groups/{id}", tag = "fleet", params(("id" = String, Path)),
    responses((status = 200, body = Data<DeviceGroup>)))]
async fn get_group(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    Ok(ok(state.app.group(r.org(), &r.id).await?))
}

#[utoipa::path(put, path = "/fleet/groups/{id}", tag = "fleet", params(("id" = String, Path)), request_body = GroupUpdate,
    responses((status = 200, body = Data<DeviceGroup>), (status = 409, description = "The name is taken")))]
async fn update_group(
    State(state): State<AppState>,
    r: ById,
    ValidJson(body): ValidJson<GroupUpdate>,
) -> ApiResult<Response> {
    Ok(ok(state.app.update_group(r.org(), &r.id, body).await?))
}

/// Delete a group; its devices stay, without it.
#[utoipa::path(delete, path = "/fleet/groups/{id}", tag = "fleet", params(("id" = String, Path)),
    responses((status = 204, description = "Deleted")))]
async fn delete_group(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    state.app.delete_group(r.org(), &r.id).await?;
    Ok(no_content())
}

/// Create an enrollment token (the body is optional); its secret is shown only in this answer.
#[utoipa::path(post, path = "/fleet/enrollment/token", tag = "fleet", request_body(content = Option<NewTokenRequest>),
    responses((status = 201, body = Data<CreatedToken>)))]
async fn create_token(
    State(state): State<AppState>,
    caller: Auth,
    JsonBytes(bytes): JsonBytes,
) -> ApiResult<Response> {
    let req: NewTokenRequest = if bytes.iter().all(u8::is_ascii_whitespace) {
        NewTokenRequest::default()
    } else {
        parse_json(&bytes)?
    };
    let token = state
        .app
        .create_enrollment_token(&caller.org_id, req)
        .await?;
    Ok(created(&token.record.id.clone(), token))
}

/// Enrollment tokens, newest first, without their secrets.
#[utoipa::path(get, path = "/fleet/enrollment/tokens", tag = "fleet", params(PageQuery),
    responses((status = 200, body = List<EnrollmentToken>)))]
async fn list_tokens(
    State(state): State<AppState>,
    caller: Auth,
    ValidQuery(q): ValidQuery<PageQuery>,
) -> ApiResult<Response> {
    let page = page_of_query(q)?;
    let paged = state.app.enrollment_tokens(&caller.org_id, page).await?;
    Ok(list(page, paged, |t| t))
}

/// Revoke a token: it enrolls no more devices; those it enrolled keep working.
#[utoipa::path(post, path = "/fleet/enrollment/tokens/{id}/revoke", tag = "fleet", params(("id" = String, Path)),
    responses((status = 200, body = Data<EnrollmentToken>)))]
async fn revoke_token(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    Ok(ok(state
        .app
        .revoke_enrollment_token(r.org(), &r.id)
        .await?))
}

/// `PUT /fleet/devices/{id}/assets`.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeviceAssetsBody {
    /// Rows with the CSV import's fields (docs/api.md, "Edge provisioning"); `[]` clears them.
    #[schema(value_type = Vec<Object>)]
    pub assets: Vec<serde_json::Value>,
}

/// Register the assets an edge device provisions at its next cloud sync (each row checked as
/// an import's; a bad one is named `assets[i].field` and nothing is stored).
#[utoipa::path(put, path = "/fleet/devices/{id}/assets", tag = "fleet", params(("id" = String, Path)),
    request_body = DeviceAssetsBody,
    responses((status = 200, body = Data<plantd_app::edge_uplink::DeviceAssets>)))]
async fn put_device_assets(
    State(state): State<AppState>,
    r: ById,
    ValidJson(body): ValidJson<DeviceAssetsBody>,
) -> ApiResult<Response> {
    Ok(ok(state
        .app
        .set_device_assets(r.org(), &r.id, body.assets)
        .await?))
}

/// The assets registered for a device; the device itself reads its own with its password.
#[utoipa::path(get, path = "/fleet/devices/{id}/assets", tag = "fleet", params(("id" = String, Path)),
    responses((status = 200, body = Data<plantd_app::edge_uplink::DeviceAssets>)))]
async fn get_device_assets(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    Ok(ok(state.app.device_assets(&r.caller, &r.id).await?))
}
