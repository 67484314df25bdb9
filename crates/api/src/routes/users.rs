//! The user an API key acts for (SPEC 4.9): profile and password.

use axum::extract::State;
use axum::response::Response;
use plantd_model::Timestamp;
use plantd_model::org::{Role, User};
use plantd_model::validation::{MIN_PASSWORD_LEN, Validator};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::envelope::{Data, no_content, ok};
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::ValidJson;
use crate::state::{AppState, Caller};

#[derive(Serialize, utoipa::ToSchema)]
pub struct Me {
    pub id: String,
    pub email: String,
    pub name: String,
    pub organization_id: String,
    /// The user's role in the key's organization.
    pub role: Role,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

async fn me(state: &AppState, caller: &Caller) -> ApiResult<(User, Role)> {
    let user_id = caller.user_id.as_deref().ok_or_else(|| {
        ApiError::NotFound(
            "this API key does not act for a user (it was created for the organization)".into(),
        )
    })?;
    let user = state
        .store
        .user(user_id)
        .await
        .map_err(|_| ApiError::not_found("user"))?;
    let member = state
        .store
        .member(&caller.org_id, user_id)
        .await
        .map_err(|_| ApiError::not_found("user"))?;
    Ok((user, member.role))
}

fn view(user: User, role: Role, org_id: &str) -> Me {
    Me {
        id: user.id,
        email: user.email,
        name: user.name,
        organization_id: org_id.to_string(),
        role,
        created_at: user.created_at,
        updated_at: user.updated_at,
    }
}

#[utoipa::path(get, path = "/users/me", tag = "users", security(("api_key" = [])),
    responses((status = 200, body = Data<Me>), (status = 404, body = ErrorBody)))]
pub async fn get_me(State(state): State<AppState>, caller: Caller) -> ApiResult<Response> {
    let (user, role) = me(&state, &caller).await?;
    Ok(ok(view(user, role, &caller.org_id)))
}

/// Only `name` can change. Read-only fields of a fetched profile are accepted and ignored.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateMe {
    pub name: Option<String>,
    #[schema(value_type = Option<String>, read_only)]
    pub id: Option<Value>,
    #[schema(value_type = Option<String>, read_only)]
    pub email: Option<Value>,
    #[schema(value_type = Option<String>, read_only)]
    pub organization_id: Option<Value>,
    #[schema(value_type = Option<String>, read_only)]
    pub role: Option<Value>,
    #[schema(value_type = Option<String>, read_only)]
    pub created_at: Option<Value>,
    #[schema(value_type = Option<String>, read_only)]
    pub updated_at: Option<Value>,
}

#[utoipa::path(put, path = "/users/me", tag = "users", security(("api_key" = [])), request_body = UpdateMe,
    responses((status = 200, body = Data<Me>), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn update_me(
    State(state): State<AppState>,
    caller: Caller,
    ValidJson(body): ValidJson<UpdateMe>,
) -> ApiResult<Response> {
    let (user, role) = me(&state, &caller).await?;
    if let Some(email) = body.email.as_ref().and_then(Value::as_str)
        && email.trim().to_lowercase() != user.email
    {
        return Err(ApiError::validation(
            "email",
            "cannot be changed through the API",
        ));
    }
    let user = match body.name {
        Some(name) => {
            let mut v = Validator::new();
            v.text("name", &name, 200);
            v.finish().map_err(ApiError::Validation)?;
            state.store.update_user_name(&user.id, name.trim()).await?
        }
        None => user,
    };
    Ok(ok(view(user, role, &caller.org_id)))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangePassword {
    /// Required when the user has a password.
    pub current_password: Option<String>,
    pub new_password: String,
}

/// Change the password; the current one must be given (unless none is set yet).
#[utoipa::path(post, path = "/users/me/password", tag = "users", security(("api_key" = [])), request_body = ChangePassword,
    responses((status = 204, description = "Changed"), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn change_password(
    State(state): State<AppState>,
    caller: Caller,
    ValidJson(body): ValidJson<ChangePassword>,
) -> ApiResult<Response> {
    let (user, _) = me(&state, &caller).await?;
    let mut v = Validator::new();
    v.check(
        body.new_password.chars().count() >= MIN_PASSWORD_LEN,
        "new_password",
        format!("must have at least {MIN_PASSWORD_LEN} characters"),
    );
    v.check(
        body.new_password.len() <= 1024,
        "new_password",
        "must have at most 1024 bytes",
    );
    if let Some(stored) = state.store.password_hash(&user.id).await? {
        match &body.current_password {
            None => v.add("current_password", "is required"),
            Some(given) => {
                let (given, stored) = (given.clone(), stored.clone());
                let matches = tokio::task::spawn_blocking(move || {
                    plantd_auth::verify_password(&given, &stored)
                })
                .await
                .map_err(|e| ApiError::Internal(e.to_string()))?;
                v.check(matches, "current_password", "is incorrect");
            }
        }
    }
    v.finish().map_err(ApiError::Validation)?;
    let new = body.new_password;
    let hash = tokio::task::spawn_blocking(move || plantd_auth::hash_password(&new))
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    state.store.set_password(&user.id, &hash).await?;
    Ok(no_content())
}
