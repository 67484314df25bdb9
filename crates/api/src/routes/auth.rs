//! People signing in (SPEC 5, "session tokens"): login and logout, one's sessions, accepting
//! an invitation, password reset.

use axum::Extension;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use plantd_app::access::AuditTrail;
use plantd_app::accounts::{AcceptInvitation, ResetConfirm, ResetRequest};
use plantd_app::sessions::Login;
use plantd_model::audit::AuditEvent;
use plantd_model::identity::{Session, role_scopes};
use plantd_model::org::Role;
use serde::Serialize;

use crate::csrf;
use crate::envelope::{Data, no_content, ok};
use crate::error::ApiResult;
use crate::extract::{Auth, ById, ValidJson};
use crate::routing::{Policy, Route, route};
use crate::state::AppState;

pub(crate) fn routes() -> Vec<Route> {
    vec![
        route!(login, Policy::public(AuditEvent::SessionLogin)),
        route!(logout, Policy::any_key(AuditEvent::SessionLogout)),
        route!(list_sessions, Policy::any_key(AuditEvent::SessionList)),
        route!(end_session, Policy::any_key(AuditEvent::SessionEnd)),
        route!(
            accept_invitation,
            Policy::public(AuditEvent::InvitationAccept)
        ),
        route!(
            request_reset,
            Policy::public(AuditEvent::PasswordResetRequest)
        ),
        route!(
            confirm_reset,
            Policy::public(AuditEvent::PasswordResetConfirm)
        ),
    ]
}

/// A new session.
#[derive(Serialize, utoipa::ToSchema)]
pub struct LoginAnswer {
    /// The session token (`pds_...`): send it as `Authorization: Bearer <token>`, or let the
    /// browser keep the `plantd_session` cookie set with this answer. Shown once.
    pub session_token: String,
    pub session: Session,
    pub user: SessionUser,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct SessionUser {
    pub id: String,
    pub email: String,
    pub name: String,
    pub organization_id: String,
    pub organization_name: String,
    pub role: Role,
    /// What the role grants (docs/api.md, "Roles").
    pub scopes: Vec<plantd_model::Scope>,
}

/// Log in with email and password. The answer carries the session token and sets the
/// `plantd_session` cookie (HttpOnly, SameSite=Lax, Secure over HTTPS). A wrong email and a
/// wrong password get the same answer; repeated failures per account or client address are
/// refused with 429 for up to 15 minutes.
#[utoipa::path(post, path = "/auth/login", tag = "auth", request_body = Login, security(()),
    responses((status = 200, body = Data<LoginAnswer>), (status = 401, description = "Invalid email or password"),
        (status = 429, description = "Too many failed logins")))]
async fn login(
    State(state): State<AppState>,
    Extension(trail): Extension<AuditTrail>,
    ValidJson(body): ValidJson<Login>,
) -> ApiResult<Response> {
    let new = state.app.login(body, &trail).await?;
    Ok(login_answer(&state, new))
}

/// A new session's answer: its token and user, the `plantd_session` cookie, never cached.
pub(crate) fn login_answer(state: &AppState, new: plantd_app::sessions::NewLogin) -> Response {
    let cookie = csrf::set_cookie(&new.token, state.app.issuer());
    let mut response = ok(LoginAnswer {
        session_token: new.token,
        session: new.session,
        user: SessionUser {
            id: new.user.id,
            email: new.user.email,
            name: new.user.name,
            organization_id: new.organization.id,
            organization_name: new.organization.name,
            role: new.role,
            scopes: role_scopes(new.role),
        },
    });
    response.headers_mut().insert(header::SET_COOKIE, cookie);
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, "no-store".parse().expect("static"));
    response
}

/// End the session the request was made with (and clear its cookie).
#[utoipa::path(post, path = "/auth/logout", tag = "auth",
    responses((status = 204, description = "Logged out"), (status = 409, description = "Not a session")))]
async fn logout(State(state): State<AppState>, caller: Auth) -> ApiResult<Response> {
    state.app.logout(&caller).await?;
    let mut response = no_content();
    response
        .headers_mut()
        .insert(header::SET_COOKIE, csrf::clear_cookie(state.app.issuer()));
    Ok(response)
}

/// The current user's sessions (every organization), newest first; `current` marks the one
/// the request was made with.
#[utoipa::path(get, path = "/users/me/sessions", tag = "auth",
    responses((status = 200, body = Data<Vec<Session>>)))]
async fn list_sessions(State(state): State<AppState>, caller: Auth) -> ApiResult<Response> {
    Ok(ok(state.app.sessions(&caller).await?))
}

/// End one of the current user's sessions.
#[utoipa::path(delete, path = "/users/me/sessions/{id}", tag = "auth", params(("id" = String, Path)),
    responses((status = 204, description = "Ended")))]
async fn end_session(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    state.app.end_session(&r.caller, &r.id).await?;
    Ok(no_content())
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct AcceptedInvitation {
    pub user_id: String,
    pub email: String,
    pub name: String,
    pub organization_id: String,
    pub role: Role,
}

/// Accept an invitation with the token of its link: a newcomer chooses a password (and
/// name); a person who already has an account confirms with its password (wrong ones count as
/// failed logins of the account: 429 once too many). Then log in.
#[utoipa::path(post, path = "/auth/invitations/accept", tag = "auth", request_body = AcceptInvitation, security(()),
    responses((status = 200, body = Data<AcceptedInvitation>), (status = 400, description = "Invalid, expired or used token; password rules")))]
async fn accept_invitation(
    State(state): State<AppState>,
    trail: Option<Extension<AuditTrail>>,
    ValidJson(body): ValidJson<AcceptInvitation>,
) -> ApiResult<Response> {
    let trail = trail.map(|Extension(t)| t);
    let (user, member, org_id) = state.app.accept_invitation(body, trail.as_ref()).await?;
    Ok(ok(AcceptedInvitation {
        user_id: user.id,
        email: user.email,
        name: user.name,
        organization_id: org_id,
        role: member.role,
    }))
}

/// Ask for a password-reset link by email. Always 202, whether or not the email has an
/// account (nobody learns which do); at most 5 emails per address and hour.
#[utoipa::path(post, path = "/auth/password-reset", tag = "auth", request_body = ResetRequest, security(()),
    responses((status = 202, description = "If the address has an account, a link is on its way")))]
async fn request_reset(
    State(state): State<AppState>,
    ValidJson(body): ValidJson<ResetRequest>,
) -> ApiResult<Response> {
    state.app.request_password_reset(body).await?;
    Ok(StatusCode::ACCEPTED.into_response())
}

/// Set a new password with the token of a reset link (single use, 1 hour). Every session of
/// the user ends.
#[utoipa::path(post, path = "/auth/password-reset/confirm", tag = "auth", request_body = ResetConfirm, security(()),
    responses((status = 204, description = "Password changed"), (status = 400, description = "Invalid, expired or used token; password rules")))]
async fn confirm_reset(
    State(state): State<AppState>,
    ValidJson(body): ValidJson<ResetConfirm>,
) -> ApiResult<Response> {
    state.app.confirm_password_reset(body).await?;
    Ok(no_content())
}
