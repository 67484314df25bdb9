//! API keys (SPEC 2.12, 4.13): list, create (secret shown once), revoke, rotate, usage.

use axum::extract::{Path, State};
use axum::response::Response;
use plantd_model::api_key::{ApiKey, ApiKeyStatus, ApiKeyUsageRow};
use plantd_model::page::PageQuery;
use plantd_model::validation::Validator;
use plantd_model::{Scope, Timestamp};
use plantd_store::NewApiKey;
use serde::{Deserialize, Serialize};

use crate::envelope::{Data, List, created, list, no_content, ok};
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{ValidJson, ValidQuery};
use crate::routes::page_of;
use crate::state::{AppState, Caller};

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

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateApiKey {
    pub name: String,
    pub scopes: Vec<Scope>,
    pub expires_at: Option<Timestamp>,
}

/// Largest name of a key.
pub const MAX_KEY_NAME: usize = 200;

#[utoipa::path(get, path = "/api-keys", tag = "api-keys", security(("api_key" = [])), params(PageQuery),
    responses((status = 200, body = List<ApiKeyView>), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn list_api_keys(
    State(state): State<AppState>,
    caller: Caller,
    ValidQuery(q): ValidQuery<PageQuery>,
) -> ApiResult<Response> {
    let page = page_of(q)?;
    let paged = state.store.api_keys(&caller.org_id, page).await?;
    Ok(list(page, paged, ApiKeyView::from))
}

/// Validates a new key's fields (shared with the operator command).
pub fn validate_new_key(
    name: &str,
    scopes: &[Scope],
    expires_at: Option<Timestamp>,
) -> Result<(), ApiError> {
    let mut v = Validator::new();
    v.text("name", name, MAX_KEY_NAME);
    v.check(!scopes.is_empty(), "scopes", "must list at least one scope");
    if let Some(e) = expires_at {
        v.check(e > Timestamp::now(), "expires_at", "must be in the future");
    }
    v.finish().map_err(ApiError::Validation)
}

/// Create a key acting for the caller's user; the answer holds the secret, once.
#[utoipa::path(post, path = "/api-keys", tag = "api-keys", security(("api_key" = [])), request_body = CreateApiKey,
    responses((status = 201, body = Data<ApiKeyWithSecret>), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn create_api_key(
    State(state): State<AppState>,
    caller: Caller,
    ValidJson(body): ValidJson<CreateApiKey>,
) -> ApiResult<Response> {
    validate_new_key(&body.name, &body.scopes, body.expires_at)?;
    let mut scopes = body.scopes.clone();
    scopes.sort();
    scopes.dedup();
    let secret = plantd_auth::generate_key();
    let key = state
        .store
        .create_api_key(NewApiKey {
            org_id: &caller.org_id,
            user_id: caller.user_id.as_deref(),
            name: body.name.trim(),
            scopes: &scopes,
            expires_at: body.expires_at,
            prefix: &secret.display_prefix,
            key_hash: &secret.hash,
        })
        .await?;
    let id = key.id.clone();
    Ok(created(
        &id,
        ApiKeyWithSecret {
            key: key.into(),
            secret: secret.secret,
        },
    ))
}

/// Revoke a key: it stops working at once. Revoking a revoked key changes nothing.
#[utoipa::path(delete, path = "/api-keys/{id}", tag = "api-keys", security(("api_key" = [])), params(("id" = String, Path)),
    responses((status = 204, description = "Revoked"), (status = 404, body = ErrorBody)))]
pub async fn revoke_api_key(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    state
        .store
        .revoke_api_key(&caller.org_id, &id)
        .await
        .map_err(ApiError::missing("API key"))?;
    state.keys.forget_key(&id);
    Ok(no_content())
}

/// Give a key a new secret (returned once); the old secret stops working at once.
#[utoipa::path(post, path = "/api-keys/{id}/rotate", tag = "api-keys", security(("api_key" = [])), params(("id" = String, Path)),
    responses((status = 200, body = Data<ApiKeyWithSecret>), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn rotate_api_key(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let current = state
        .store
        .api_key(&caller.org_id, &id)
        .await
        .map_err(ApiError::missing("API key"))?;
    match current.status(Timestamp::now()) {
        ApiKeyStatus::Revoked => {
            return Err(ApiError::Conflict("a revoked key cannot be rotated".into()));
        }
        ApiKeyStatus::Expired => {
            return Err(ApiError::Conflict(
                "an expired key cannot be rotated; create a new key".into(),
            ));
        }
        ApiKeyStatus::Active => {}
    }
    let secret = plantd_auth::generate_key();
    let key = state
        .store
        .rotate_api_key(&caller.org_id, &id, &secret.display_prefix, &secret.hash)
        .await
        .map_err(ApiError::missing("API key"))?;
    state.keys.forget_key(&id);
    Ok(ok(ApiKeyWithSecret {
        key: key.into(),
        secret: secret.secret,
    }))
}

/// Requests made with a key, per UTC day and endpoint, newest day first.
#[utoipa::path(get, path = "/api-keys/{id}/usage", tag = "api-keys", security(("api_key" = [])), params(("id" = String, Path), PageQuery),
    responses((status = 200, body = List<ApiKeyUsageRow>), (status = 404, body = ErrorBody)))]
pub async fn api_key_usage(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ValidQuery(q): ValidQuery<PageQuery>,
) -> ApiResult<Response> {
    let page = page_of(q)?;
    state
        .store
        .api_key(&caller.org_id, &id)
        .await
        .map_err(ApiError::missing("API key"))?;
    if let Err(e) = state.usage.flush(&state.store).await {
        tracing::warn!(error = %e, "could not flush usage counts before reading them");
    }
    let paged = state.store.api_key_usage(&caller.org_id, &id, page).await?;
    Ok(list(page, paged, |r| r))
}
