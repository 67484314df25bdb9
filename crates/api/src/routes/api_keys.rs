//! API keys (SPEC 2.12, 4.13): list, create (secret shown once), revoke, rotate, usage.

use axum::extract::State;
use axum::response::Response;
use plantd_app::api_keys::{KeyWithSecret, NewApiKey};
use plantd_model::Scope::Admin;
use plantd_model::api_key::{ApiKey, ApiKeyStatus, ApiKeyUsageRow};
use plantd_model::audit::AuditEvent;
use plantd_model::page::PageQuery;
use plantd_model::{Scope, Timestamp};
use serde::Serialize;

use crate::envelope::{Data, List, created, list, no_content, ok, page_of_query};
use crate::error::ApiResult;
use crate::extract::{Auth, ById, ValidJson, ValidQuery};
use crate::routing::{Policy, Route, route};
use crate::state::AppState;

pub(crate) fn routes() -> Vec<Route> {
    vec![
        route!(list_api_keys, Policy::scope(Admin, AuditEvent::ApiKeyList)).anywhere(),
        route!(
            create_api_key,
            Policy::scope(Admin, AuditEvent::ApiKeyCreate)
        )
        .anywhere(),
        route!(
            revoke_api_key,
            Policy::scope(Admin, AuditEvent::ApiKeyRevoke)
        )
        .anywhere(),
        route!(
            rotate_api_key,
            Policy::scope(Admin, AuditEvent::ApiKeyRotate)
        )
        .anywhere(),
        route!(api_key_usage, Policy::scope(Admin, AuditEvent::ApiKeyUsage)),
    ]
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ApiKeyView {
    pub id: String,
    pub name: String,
    /// The first characters of the secret (`pdk_` + 8): enough to recognise it, not to use it.
    pub prefix: String,
    pub scopes: Vec<Scope>,
    pub status: ApiKeyStatus,
    /// The user the key acts for (`/users/me`), when it has one.
    pub user_id: Option<String>,
    pub created_at: Timestamp,
    pub expires_at: Option<Timestamp>,
    pub last_used_at: Option<Timestamp>,
    pub revoked_at: Option<Timestamp>,
}

impl From<ApiKey> for ApiKeyView {
    fn from(k: ApiKey) -> Self {
        Self {
            status: k.status(Timestamp::now()),
            id: k.id,
            name: k.name,
            prefix: k.prefix,
            scopes: k.scopes,
            user_id: k.user_id,
            created_at: k.created_at,
            expires_at: k.expires_at,
            last_used_at: k.last_used_at,
            revoked_at: k.revoked_at,
        }
    }
}

/// A key with its secret: only in the answers of create and rotate.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ApiKeyWithSecret {
    #[serde(flatten)]
    pub key: ApiKeyView,
    /// The secret. It is shown this once; only its SHA-256 hash is stored.
    #[serde(rename = "key")]
    pub secret: String,
}

impl From<KeyWithSecret> for ApiKeyWithSecret {
    fn from(k: KeyWithSecret) -> Self {
        Self {
            key: k.key.into(),
            secret: k.secret,
        }
    }
}

#[utoipa::path(get, path = "/api-keys", tag = "api-keys", params(PageQuery),
    responses((status = 200, body = List<ApiKeyView>)))]
async fn list_api_keys(
    State(state): State<AppState>,
    caller: Auth,
    ValidQuery(q): ValidQuery<PageQuery>,
) -> ApiResult<Response> {
    let page = page_of_query(q)?;
    let paged = state.app.api_keys(&caller.org_id, page).await?;
    Ok(list(page, paged, ApiKeyView::from))
}

/// Create a key acting for the caller's user; the answer holds the secret, once.
#[utoipa::path(post, path = "/api-keys", tag = "api-keys", request_body = NewApiKey,
    responses((status = 201, body = Data<ApiKeyWithSecret>)))]
async fn create_api_key(
    State(state): State<AppState>,
    caller: Auth,
    ValidJson(body): ValidJson<NewApiKey>,
) -> ApiResult<Response> {
    let made = state.app.create_api_key(&caller, body).await?;
    let id = made.key.id.clone();
    Ok(created(&id, ApiKeyWithSecret::from(made)))
}

/// Revoke a key: it stops working at once. Revoking a revoked key changes nothing.
#[utoipa::path(delete, path = "/api-keys/{id}", tag = "api-keys", params(("id" = String, Path)),
    responses((status = 204, description = "Revoked")))]
async fn revoke_api_key(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    state.app.revoke_api_key(r.org(), &r.id).await?;
    Ok(no_content())
}

/// Give a key a new secret (returned once); the old secret stops working at once.
#[utoipa::path(post, path = "/api-keys/{id}/rotate", tag = "api-keys", params(("id" = String, Path)),
    responses((status = 200, body = Data<ApiKeyWithSecret>), (status = 409, description = "The key is revoked or expired")))]
async fn rotate_api_key(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    let rotated = state.app.rotate_api_key(r.org(), &r.id).await?;
    Ok(ok(ApiKeyWithSecret::from(rotated)))
}

/// Requests made with a key, per UTC day and endpoint, newest day first.
#[utoipa::path(get, path = "/api-keys/{id}/usage", tag = "api-keys", params(("id" = String, Path), PageQuery),
    responses((status = 200, body = List<ApiKeyUsageRow>)))]
async fn api_key_usage(
    State(state): State<AppState>,
    r: ById,
    ValidQuery(q): ValidQuery<PageQuery>,
) -> ApiResult<Response> {
    let page = page_of_query(q)?;
    let paged = state.app.api_key_usage(r.org(), &r.id, page).await?;
    Ok(list(page, paged, |r| r))
}
