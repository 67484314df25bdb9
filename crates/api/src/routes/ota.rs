//! OTA (SPEC 4.8): firmware packages (a streamed multipart upload, release, and the download
//! devices resume with HTTP Range), the public key their manifests are signed with, and
//! deployments with their devices, cancel, rollback and continue. `read:assets` reads,
//! `write:assets` changes; a device downloads with its own password as its bearer token.

use axum::extract::multipart::MultipartRejection;
use axum::extract::{Multipart, Request, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use plantd_app::ota::NewDeploymentRequest;
use plantd_app::ota_packages::{MAX_PACKAGE_BYTES, PackageFields, PackageUpload};
use plantd_model::Scope::{ReadAssets, WriteAssets};
use plantd_model::audit::AuditEvent;
use plantd_model::ota::{Deployment, DeploymentDevice, DeploymentStatus, DeviceState, Package};
use plantd_model::page::PageQuery;

use super::licenses::PublicKeyView;
use crate::envelope::{Data, List, created, list, ok, page_of_query, paged_query};
use crate::error::{ApiError, ApiResult};
use crate::extract::{Auth, ById, ValidJson, ValidQuery, form_error, multipart_form, text_field};
use crate::routing::{Policy, Route, route};
use crate::state::AppState;

pub(crate) fn routes() -> Vec<Route> {
    vec![
        route!(
            list_packages,
            Policy::scope(ReadAssets, AuditEvent::OtaPackageList)
        ),
        // The multipart framing around the largest file, on top of it.
        route!(
            upload_package,
            Policy::scope(WriteAssets, AuditEvent::OtaPackageUpload)
        )
        .body_limit(MAX_PACKAGE_BYTES as usize + 1024 * 1024),
        route!(
            get_package,
            Policy::scope(ReadAssets, AuditEvent::OtaPackageRead)
        ),
        route!(
            release_package,
            Policy::scope(WriteAssets, AuditEvent::OtaPackageRelease)
        ),
        route!(
            download_package,
            Policy::scope_or_device(ReadAssets, AuditEvent::OtaPackageDownload)
        ),
        route!(
            public_key,
            Policy::scope_or_device(ReadAssets, AuditEvent::OtaPublicKey)
        ),
        route!(
            list_deployments,
            Policy::scope(ReadAssets, AuditEvent::OtaDeploymentList)
        ),
        route!(
            create_deployment,
            Policy::scope(WriteAssets, AuditEvent::OtaDeploymentCreate).limit(10, 3600)
        ),
        route!(
            get_deployment,
            Policy::scope(ReadAssets, AuditEvent::OtaDeploymentRead)
        ),
        route!(
            deployment_devices,
            Policy::scope(ReadAssets, AuditEvent::OtaDeploymentDevices)
        ),
        route!(
            cancel_deployment,
            Policy::scope(WriteAssets, AuditEvent::OtaDeploymentCancel)
        ),
        route!(
            rollback_deployment,
            Policy::scope(WriteAssets, AuditEvent::OtaDeploymentRollback)
        ),
        route!(
            continue_deployment,
            Policy::scope(WriteAssets, AuditEvent::OtaDeploymentContinue)
        ),
    ]
}

/// The upload's form (multipart/form-data).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub struct PackageForm {
    /// The package file (up to 2 GiB), streamed to disk.
    #[schema(value_type = String, format = Binary)]
    file: Vec<u8>,
    /// 1 to 64 printable characters without spaces.
    version: String,
    /// Default: the file's name.
    name: Option<String>,
    device_type: Option<String>,
    release_notes: Option<String>,
}

/// Packages, newest first.
#[utoipa::path(get, path = "/ota/packages", tag = "ota", params(PageQuery),
    responses((status = 200, body = List<Package>)))]
async fn list_packages(
    State(state): State<AppState>,
    caller: Auth,
    ValidQuery(q): ValidQuery<PageQuery>,
) -> ApiResult<Response> {
    let page = page_of_query(q)?;
    let paged = state.app.packages(&caller.org_id, page).await?;
    Ok(list(page, paged, |p| p))
}

/// Upload a package (multipart/form-data: `file` and `version` required; `name`,
/// `device_type`, `release_notes` optional). The file is streamed to disk with its SHA-256
/// computed on the way, stored once per content, and its manifest signed; the package is a
/// draft until released. An aborted or refused upload leaves nothing behind.
#[utoipa::path(post, path = "/ota/packages", tag = "ota",
    request_body(content = PackageForm, content_type = "multipart/form-data"),
    responses((status = 201, body = Data<Package>),
        (status = 409, description = "A package with this name and version exists")))]
async fn upload_package(
    State(state): State<AppState>,
    caller: Auth,
    form: Result<Multipart, MultipartRejection>,
) -> ApiResult<Response> {
    let mut form = multipart_form(form, "the fields file and version")?;
    let mut fields = PackageFields::default();
    let mut upload: Option<PackageUpload> = None;
    while let Some(mut field) = form.next_field().await.map_err(form_error)? {
        let name = field.name().unwrap_or_default().to_string();
        match name.as_str() {
            "file" => {
                if upload.is_some() {
                    return Err(ApiError::validation("file", "send one file"));
                }
                fields.file_name = field.file_name().map(str::to_string);
                let mut up = state.app.package_upload().await?;
                while let Some(chunk) = field.chunk().await.map_err(form_error)? {
                    up.write(&chunk).await?;
                }
                upload = Some(up);
            }
            "version" => fields.version = Some(text_field(field, "version").await?),
            "name" => fields.name = Some(text_field(field, "name").await?),
            "device_type" => fields.device_type = Some(text_field(field, "device_type").await?),
            "release_notes" => {
                fields.release_notes = Some(text_field(field, "release_notes").await?)
            }
            other => {
                return Err(ApiError::validation(
                    other,
                    "unknown field: the form takes file, version, name, device_type and release_notes",
                ));
            }
        }
    }
    let package = state
        .app
        .create_package(&caller.org_id, upload, fields)
        .await?;
    Ok(created(&package.id.clone(), package))
}

#[utoipa::path(get, path = "/ota/packages/{id}", tag = "ota", params(("id" = String, Path)),
    responses((status = 200, body = Data<Package>)))]
async fn get_package(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    Ok(ok(state.app.package(r.org(), &r.id).await?))
}

/// Release a draft: it can then be deployed and devices can download it. Once only.
#[utoipa::path(post, path = "/ota/packages/{id}/release", tag = "ota", params(("id" = String, Path)),
    responses((status = 200, body = Data<Package>),
        (status = 409, description = "Released already (`package_already_released`)")))]
async fn release_package(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    Ok(ok(state.app.release_package(r.org(), &r.id).await?))
}

/// The package's file. Devices present their own password (`Authorization: Bearer pdm_...`)
/// and get released packages of their organization; `Range: bytes=N-` resumes an interrupted
/// download (206). Never compressed, so ranges are bytes of the file.
#[utoipa::path(get, path = "/ota/packages/{id}/download", tag = "ota", params(("id" = String, Path)),
    responses((status = 200, description = "The file", content_type = "application/octet-stream"),
        (status = 206, description = "The requested range of the file"),
        (status = 416, description = "The range is outside the file")))]
async fn download_package(
    State(state): State<AppState>,
    r: ById,
    request: Request,
) -> ApiResult<Response> {
    let (package, path) = state.app.package_file(&r.caller, &r.id).await?;
    let served = tower_http::services::ServeFile::new(path)
        .try_call(request)
        .await
        .map_err(ApiError::internal)?;
    let mut response = served.map(axum::body::Body::new).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    let file_name = format!("{}-{}.bin", package.name, package.version)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || ".-_".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect::<String>();
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{file_name}\"")) {
        headers.insert(header::CONTENT_DISPOSITION, v);
    }
    if let Ok(v) = HeaderValue::from_str(&package.sha256) {
        headers.insert("x-checksum-sha256", v);
    }
    if let Ok(v) = HeaderValue::from_str(&format!("\"{}\"", package.sha256)) {
        headers.insert(header::ETAG, v);
    }
    Ok(response)
}

/// The key package manifests are signed with: the organization's Ed25519 key, the same that
/// signs license keys. Devices read it with their own password.
#[utoipa::path(get, path = "/ota/public-key", tag = "ota",
    responses((status = 200, body = Data<PublicKeyView>)))]
async fn public_key(State(state): State<AppState>, caller: Auth) -> ApiResult<Response> {
    let key = state.app.ota_public_key(&caller.org_id).await?;
    Ok(ok(PublicKeyView {
        algorithm: "Ed25519",
        public_key: base64::engine::general_purpose::STANDARD.encode(key.bytes),
        public_key_pem: key.pem,
    }))
}

paged_query! {
pub struct DeploymentQuery {
    /// scheduled, in_progress, paused, completed, failed, cancelled or rolled_back
    #[param(inline)]
    pub status: Option<DeploymentStatus>,
}
}

/// Deployments, newest first.
#[utoipa::path(get, path = "/ota/deployments", tag = "ota", params(DeploymentQuery),
    responses((status = 200, body = List<Deployment>)))]
async fn list_deployments(
    State(state): State<AppState>,
    caller: Auth,
    ValidQuery(q): ValidQuery<DeploymentQuery>,
) -> ApiResult<Response> {
    let page = q.page()?;
    let paged = state
        .app
        .deployments(&caller.org_id, q.status, page)
        .await?;
    Ok(list(page, paged, |d| d))
}

/// Deploy a released package to a group, devices or tags, in phases (default 10%, 50%, 100%,
/// each stopping above 20% failed) or all at once. 10 per hour.
#[utoipa::path(post, path = "/ota/deployments", tag = "ota", request_body = NewDeploymentRequest,
    responses((status = 201, body = Data<Deployment>),
        (status = 409, description = "The package is not released (`package_not_released`), or a target takes part in another active deployment (`devices_in_active_deployment`)")))]
async fn create_deployment(
    State(state): State<AppState>,
    caller: Auth,
    ValidJson(body): ValidJson<NewDeploymentRequest>,
) -> ApiResult<Response> {
    let d = state.app.create_deployment(&caller.org_id, body).await?;
    Ok(created(&d.id.clone(), d))
}

#[utoipa::path(get, path = "/ota/deployments/{id}", tag = "ota", params(("id" = String, Path)),
    responses((status = 200, body = Data<Deployment>)))]
async fn get_deployment(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    Ok(ok(state.app.deployment(r.org(), &r.id).await?))
}

paged_query! {
pub struct DeploymentDeviceQuery {
    /// Only devices in this state.
    #[param(inline)]
    pub state: Option<DeviceState>,
}
}

/// The deployment's devices by phase, with their state and the device's last message.
#[utoipa::path(get, path = "/ota/deployments/{id}/devices", tag = "ota", params(("id" = String, Path), DeploymentDeviceQuery),
    responses((status = 200, body = List<DeploymentDevice>)))]
async fn deployment_devices(
    State(state): State<AppState>,
    r: ById,
    ValidQuery(q): ValidQuery<DeploymentDeviceQuery>,
) -> ApiResult<Response> {
    let page = q.page()?;
    let paged = state
        .app
        .deployment_devices(r.org(), &r.id, q.state, page)
        .await?;
    Ok(list(page, paged, |d| d))
}

/// Cancel: devices not reached yet are not updated; those updating finish and report.
#[utoipa::path(post, path = "/ota/deployments/{id}/cancel", tag = "ota", params(("id" = String, Path)),
    responses((status = 200, body = Data<Deployment>),
        (status = 409, description = "The deployment is final (`deployment_finished`)")))]
async fn cancel_deployment(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    Ok(ok(state.app.cancel_deployment(r.org(), &r.id).await?))
}

/// Roll back: every device that installed the package returns to its previous version.
#[utoipa::path(post, path = "/ota/deployments/{id}/rollback", tag = "ota", params(("id" = String, Path)),
    responses((status = 200, body = Data<Deployment>),
        (status = 409, description = "Rolled back or cancelled already (`deployment_finished`)")))]
async fn rollback_deployment(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    Ok(ok(state.app.roll_back_deployment(r.org(), &r.id).await?))
}

/// Start the next phase of a deployment paused after a phase with `wait_for_continue`.
#[utoipa::path(post, path = "/ota/deployments/{id}/continue", tag = "ota", params(("id" = String, Path)),
    responses((status = 200, body = Data<Deployment>),
        (status = 409, description = "The deployment is not paused (`deployment_not_paused`)")))]
async fn continue_deployment(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    Ok(ok(state.app.continue_deployment(r.org(), &r.id).await?))
}
