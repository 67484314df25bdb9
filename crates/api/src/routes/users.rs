//! The user an API key acts for (SPEC 4.9): profile and password.

use axum::Extension;
use axum::extract::State;
use axum::response::Response;
use plantd_app::access::AuditTrail;
use plantd_app::users::{PasswordChange, ProfileUpdate};
use plantd_model::Timestamp;
use plantd_model::audit::AuditEvent;
use plantd_model::org::{Role, User};
use serde::Serialize;

use crate::envelope::{Data, no_content, ok};
use crate::error::ApiResult;
use crate::extract::{Auth, ValidJson};
use crate::routing::{Policy, Route, route};
use crate::state::AppState;

pub(crate) fn routes() -> Vec<Route> {
    vec![
        route!(get_me, Policy::any_key(AuditEvent::UserRead)),
        route!(update_me, Policy::any_key(AuditEvent::UserUpdate)),
        route!(
            change_password,
            Policy::any_key(AuditEvent::UserPasswordChange)
        ),
    ]
}

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

#[utoipa::path(get, path = "/users/me", tag = "users",
    responses((status = 200, body = Data<Me>), (status = 404, description = "The key acts for no user")))]
async fn get_me(State(state): State<AppState>, caller: Auth) -> ApiResult<Response> {
    let (user, role) = state.app.me(&caller).await?;
    Ok(ok(view(user, role, &caller.org_id)))
}

#[utoipa::path(put, path = "/users/me", tag = "users", request_body = ProfileUpdate,
    responses((status = 200, body = Data<Me>), (status = 404, description = "The key acts for no user")))]
async fn update_me(
    State(state): State<AppState>,
    caller: Auth,
    ValidJson(body): ValidJson<ProfileUpdate>,
) -> ApiResult<Response> {
    let (user, role) = state.app.update_me(&caller, body).await?;
    Ok(ok(view(user, role, &caller.org_id)))
}

/// Change the password; the current one must be given (unless none is set yet; wrong ones count
/// as failed logins of the account). Every other session of the user ends, and the grants of
/// their OAuth applications are revoked.
#[utoipa::path(post, path = "/users/me/password", tag = "users", request_body = PasswordChange,
    responses((status = 204, description = "Changed"), (status = 404, description = "The key acts for no user")))]
async fn change_password(
    State(state): State<AppState>,
    caller: Auth,
    trail: Option<Extension<AuditTrail>>,
    ValidJson(body): ValidJson<PasswordChange>,
) -> ApiResult<Response> {
    let trail = trail.map(|Extension(t)| t);
    state
        .app
        .change_password(&caller, body, trail.as_ref())
        .await?;
    Ok(no_content())
}
