//! Licenses (SPEC 4.12; issue 16): issuing and managing licenses (administrators), the public
//! key that checks their keys offline, and the calls devices make with a license key alone
//! (activate, validate, deactivate), audited in the license's organization.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use base64::Engine;
use plantd_app::access::AuditTrail;
use plantd_app::licenses::LicenseFilter;
use plantd_app::licenses::{
    ActivationAnswer, ActivationRequest, Deactivation, DeviceDeactivation, NewLicense, Renewal,
    ValidationAnswer, ValidationRequest,
};
use plantd_model::Scope::Admin;
use plantd_model::audit::AuditEvent;
use plantd_model::license::{Activation, License, LicenseStatus};
use serde::Serialize;

use crate::envelope::{Data, List, created, list, no_content, ok, paged_query};
use crate::error::ApiResult;
use crate::extract::{Auth, ById, JsonBytes, ValidJson, ValidQuery, parse_json};
use crate::routing::{Policy, Route, route};
use crate::state::AppState;

pub(crate) fn routes() -> Vec<Route> {
    vec![
        route!(list_licenses, Policy::scope(Admin, AuditEvent::LicenseList)),
        route!(
            create_license,
            Policy::scope(Admin, AuditEvent::LicenseCreate)
        ),
        route!(public_key, Policy::any_key(AuditEvent::LicensePublicKey)),
        route!(get_license, Policy::scope(Admin, AuditEvent::LicenseRead)),
        route!(
            list_activations,
            Policy::scope(Admin, AuditEvent::LicenseActivations)
        ),
        route!(suspend, Policy::scope(Admin, AuditEvent::LicenseSuspend)),
        route!(
            reinstate,
            Policy::scope(Admin, AuditEvent::LicenseReinstate)
        ),
        route!(revoke, Policy::scope(Admin, AuditEvent::LicenseRevoke)),
        route!(renew, Policy::scope(Admin, AuditEvent::LicenseRenew)),
        route!(
            deactivate,
            Policy::scope(Admin, AuditEvent::LicenseDeactivate)
        ),
        route!(activate, Policy::public(AuditEvent::LicenseActivate)),
        route!(validate, Policy::public(AuditEvent::LicenseValidate)),
        route!(
            device_deactivate,
            Policy::public(AuditEvent::LicenseDeactivate)
        ),
    ]
}

paged_query! {
pub struct LicenseQuery {
    pub product_id: Option<String>,
    /// active, expired, suspended or revoked
    #[param(inline)]
    pub status: Option<LicenseStatus>,
    /// Exact address, case-insensitive.
    pub customer_email: Option<String>,
}
}

/// The key that checks license keys offline.
#[derive(Serialize, utoipa::ToSchema)]
pub struct PublicKeyView {
    /// Always `Ed25519`.
    pub algorithm: &'static str,
    /// The 32-byte public key, base64.
    pub public_key: String,
    /// The same as PEM (SubjectPublicKeyInfo): save it to a file for
    /// `plantd license verify KEY --public-key FILE`.
    pub public_key_pem: String,
}

/// Licenses, newest first.
#[utoipa::path(get, path = "/licenses", tag = "licenses", params(LicenseQuery),
    responses((status = 200, body = List<License>)))]
async fn list_licenses(
    State(state): State<AppState>,
    caller: Auth,
    ValidQuery(q): ValidQuery<LicenseQuery>,
) -> ApiResult<Response> {
    let page = q.page()?;
    let filter = LicenseFilter {
        product_id: q.product_id.filter(|p| !p.is_empty()),
        status: q.status,
        customer_email: q.customer_email.filter(|e| !e.is_empty()),
    };
    let paged = state.app.licenses(&caller.org_id, &filter, page).await?;
    Ok(list(page, paged, |l| l))
}

/// Issue a license for a product; the answer carries its signed `license_key`.
#[utoipa::path(post, path = "/licenses", tag = "licenses", request_body = NewLicense,
    responses((status = 201, body = Data<License>)))]
async fn create_license(
    State(state): State<AppState>,
    caller: Auth,
    ValidJson(body): ValidJson<NewLicense>,
) -> ApiResult<Response> {
    let license = state.app.create_license(&caller.org_id, body).await?;
    Ok(created(&license.id.clone(), license))
}

/// The organization's public key for license keys (made on first use).
#[utoipa::path(get, path = "/licenses/public-key", tag = "licenses",
    responses((status = 200, body = Data<PublicKeyView>)))]
async fn public_key(State(state): State<AppState>, caller: Auth) -> ApiResult<Response> {
    let key = state.app.license_public_key(&caller.org_id).await?;
    Ok(ok(PublicKeyView {
        algorithm: "Ed25519",
        public_key: base64::engine::general_purpose::STANDARD.encode(key.bytes),
        public_key_pem: key.pem,
    }))
}

#[utoipa::path(get, path = "/licenses/{id}", tag = "licenses", params(("id" = String, Path)),
    responses((status = 200, body = Data<License>)))]
async fn get_license(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    Ok(ok(state.app.license(r.org(), &r.id).await?))
}

/// The devices holding an activation, oldest first.
#[utoipa::path(get, path = "/licenses/{id}/activations", tag = "licenses", params(("id" = String, Path)),
    responses((status = 200, body = Data<Vec<Activation>>)))]
async fn list_activations(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    Ok(ok(state.app.license_activations(r.org(), &r.id).await?))
}

/// Suspend an active or expired license: devices are refused until it is reinstated.
#[utoipa::path(post, path = "/licenses/{id}/suspend", tag = "licenses", params(("id" = String, Path)),
    responses((status = 200, body = Data<License>), (status = 409, description = "Not active")))]
async fn suspend(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    Ok(ok(state.app.suspend_license(r.org(), &r.id).await?))
}

/// Reinstate a suspended license.
#[utoipa::path(post, path = "/licenses/{id}/reinstate", tag = "licenses", params(("id" = String, Path)),
    responses((status = 200, body = Data<License>), (status = 409, description = "Not suspended")))]
async fn reinstate(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    Ok(ok(state.app.reinstate_license(r.org(), &r.id).await?))
}

/// Revoke a license for good.
#[utoipa::path(post, path = "/licenses/{id}/revoke", tag = "licenses", params(("id" = String, Path)),
    responses((status = 200, body = Data<License>), (status = 409, description = "Already revoked")))]
async fn revoke(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    Ok(ok(state.app.revoke_license(r.org(), &r.id).await?))
}

/// Extend a subscription; its key is signed again with the new expiry (`license_key` changes).
#[utoipa::path(post, path = "/licenses/{id}/renew", tag = "licenses", params(("id" = String, Path)),
    request_body(content = Option<Renewal>, description = "Optional; default: the license's validity_days"),
    responses((status = 200, body = Data<License>), (status = 409, description = "Perpetual or revoked")))]
async fn renew(
    State(state): State<AppState>,
    r: ById,
    JsonBytes(body): JsonBytes,
) -> ApiResult<Response> {
    let renewal: Renewal = if body.iter().all(u8::is_ascii_whitespace) {
        Renewal::default()
    } else {
        parse_json(&body)?
    };
    Ok(ok(state.app.renew_license(r.org(), &r.id, renewal).await?))
}

/// Free an activation's slot.
#[utoipa::path(post, path = "/licenses/{id}/deactivate", tag = "licenses", params(("id" = String, Path)),
    request_body = Deactivation, responses((status = 200, body = Data<License>)))]
async fn deactivate(
    State(state): State<AppState>,
    r: ById,
    ValidJson(body): ValidJson<Deactivation>,
) -> ApiResult<Response> {
    Ok(ok(state
        .app
        .deactivate_license(r.org(), &r.id, body)
        .await?))
}

/// Activate a device with a license key (no API key). 201 for a new activation; 200 when the
/// device was already activated with this fingerprint.
#[utoipa::path(post, path = "/licenses/activate", tag = "licenses", request_body = ActivationRequest, security(()),
    responses((status = 201, body = Data<ActivationAnswer>), (status = 200, body = Data<ActivationAnswer>),
        (status = 404, description = "No license matches the key"),
        (status = 409, description = "too_many_activations, fingerprint_mismatch, license_expired, license_suspended or license_revoked")))]
async fn activate(
    State(state): State<AppState>,
    Extension(trail): Extension<AuditTrail>,
    ValidJson(body): ValidJson<ActivationRequest>,
) -> ApiResult<Response> {
    let a = state.app.activate_license(body, &trail).await?;
    let status = if a.existing {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((status, Json(Data { data: a })).into_response())
}

/// Check a license key (no API key): always 200 with `valid` and a `code` (docs/api.md).
#[utoipa::path(post, path = "/licenses/validate", tag = "licenses", request_body = ValidationRequest, security(()),
    responses((status = 200, body = Data<ValidationAnswer>)))]
async fn validate(
    State(state): State<AppState>,
    Extension(trail): Extension<AuditTrail>,
    ValidJson(body): ValidJson<ValidationRequest>,
) -> ApiResult<Response> {
    Ok(ok(state.app.validate_license(body, &trail).await?))
}

/// A device frees its own activation with its license key (no API key).
#[utoipa::path(post, path = "/licenses/deactivate", tag = "licenses", request_body = DeviceDeactivation, security(()),
    responses((status = 204, description = "Deactivated"), (status = 404, description = "No such license or activation")))]
async fn device_deactivate(
    State(state): State<AppState>,
    Extension(trail): Extension<AuditTrail>,
    ValidJson(body): ValidJson<DeviceDeactivation>,
) -> ApiResult<Response> {
    state.app.deactivate_with_key(body, &trail).await?;
    Ok(no_content())
}
