//! OAuth 2.0 applications of the organization (SPEC 5.2 registration): list, register
//! (client id, and a client secret shown once for web applications), read, update, delete,
//! rotate the secret. Admin only.

use axum::extract::State;
use axum::response::Response;
use plantd_app::oauth_apps::{ApplicationWithSecret, NewOAuthApplication, OAuthApplicationUpdate};
use plantd_model::Scope::Admin;
use plantd_model::audit::AuditEvent;
use plantd_model::identity::OAuthApplication;
use plantd_model::page::PageQuery;

use crate::envelope::{Data, List, created, list, no_content, ok, page_of_query};
use crate::error::ApiResult;
use crate::extract::{Auth, ById, ValidJson, ValidQuery};
use crate::routing::{Policy, Route, route};
use crate::state::AppState;

pub(crate) fn routes() -> Vec<Route> {
    vec![
        route!(
            list_applications,
            Policy::scope(Admin, AuditEvent::OAuthApplicationList)
        ),
        route!(
            create_application,
            Policy::scope(Admin, AuditEvent::OAuthApplicationCreate)
        ),
        route!(
            get_application,
            Policy::scope(Admin, AuditEvent::OAuthApplicationRead)
        ),
        route!(
            update_application,
            Policy::scope(Admin, AuditEvent::OAuthApplicationUpdate)
        ),
        route!(
            delete_application,
            Policy::scope(Admin, AuditEvent::OAuthApplicationDelete)
        ),
        route!(
            rotate_secret,
            Policy::scope(Admin, AuditEvent::OAuthApplicationRotateSecret)
        ),
    ]
}

#[utoipa::path(get, path = "/oauth/applications", tag = "oauth", params(PageQuery),
    responses((status = 200, body = List<OAuthApplication>)))]
async fn list_applications(
    State(state): State<AppState>,
    caller: Auth,
    ValidQuery(q): ValidQuery<PageQuery>,
) -> ApiResult<Response> {
    let page = page_of_query(q)?;
    let paged = state.app.oauth_applications(&caller.org_id, page).await?;
    Ok(list(page, paged, |a| a))
}

/// Register an application. Web applications get a `client_secret`, shown in this answer
/// only; mobile and single-page applications get none and must use PKCE.
#[utoipa::path(post, path = "/oauth/applications", tag = "oauth", request_body = NewOAuthApplication,
    responses((status = 201, body = Data<ApplicationWithSecret>)))]
async fn create_application(
    State(state): State<AppState>,
    caller: Auth,
    ValidJson(body): ValidJson<NewOAuthApplication>,
) -> ApiResult<Response> {
    let app = state.app.create_oauth_application(&caller, body).await?;
    Ok(created(&app.application.id.clone(), app))
}

#[utoipa::path(get, path = "/oauth/applications/{id}", tag = "oauth", params(("id" = String, Path)),
    responses((status = 200, body = Data<OAuthApplication>)))]
async fn get_application(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    Ok(ok(state.app.oauth_application(r.org(), &r.id).await?))
}

/// Change the name, redirect URIs or allowed scopes (the type cannot change).
#[utoipa::path(put, path = "/oauth/applications/{id}", tag = "oauth", params(("id" = String, Path)),
    request_body = OAuthApplicationUpdate, responses((status = 200, body = Data<OAuthApplication>)))]
async fn update_application(
    State(state): State<AppState>,
    r: ById,
    ValidJson(body): ValidJson<OAuthApplicationUpdate>,
) -> ApiResult<Response> {
    Ok(ok(state
        .app
        .update_oauth_application(r.org(), &r.id, body)
        .await?))
}

/// Delete an application: every token issued to it stops working.
#[utoipa::path(delete, path = "/oauth/applications/{id}", tag = "oauth", params(("id" = String, Path)),
    responses((status = 204, description = "Deleted")))]
async fn delete_application(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    state.app.delete_oauth_application(r.org(), &r.id).await?;
    Ok(no_content())
}

/// Give a web application a new client secret (shown once); the old one stops working.
#[utoipa::path(post, path = "/oauth/applications/{id}/rotate-secret", tag = "oauth", params(("id" = String, Path)),
    responses((status = 200, body = Data<ApplicationWithSecret>), (status = 409, description = "A public application has no secret")))]
async fn rotate_secret(State(state): State<AppState>, r: ById) -> ApiResult<Response> {
    Ok(ok(state.app.rotate_client_secret(r.org(), &r.id).await?))
}
