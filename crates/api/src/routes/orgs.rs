//! The caller's organization (SPEC 4.9): settings, members, invitations and usage (SPEC 2.9).

use axum::Extension;
use axum::extract::State;
use axum::response::Response;
use plantd_app::access::AuditTrail;
use plantd_app::orgs::{Invitation, InvitedMember, OrganizationUpdate, Usage};
use plantd_model::Scope::Admin;
use plantd_model::audit::AuditEvent;
use plantd_model::org::{Member, Organization};
use plantd_model::page::PageQuery;

use crate::envelope::{Data, List, created, list, no_content, ok, page_of_query};
use crate::error::ApiResult;
use crate::extract::{Auth, ById, ValidJson, ValidQuery};
use crate::routing::{Policy, Route, route};
use crate::state::AppState;

pub(crate) fn routes() -> Vec<Route> {
    vec![
        route!(get_org, Policy::any_key(AuditEvent::OrganizationRead)).anywhere(),
        route!(
            update_org,
            Policy::scope(Admin, AuditEvent::OrganizationUpdate)
        )
        .anywhere(),
        route!(list_members, Policy::scope(Admin, AuditEvent::MemberList)).anywhere(),
        route!(
            invite_member,
            Policy::scope(Admin, AuditEvent::MemberInvite).limit(50, 86_400)
        )
        .anywhere(),
        route!(
            remove_member,
            Policy::scope(Admin, AuditEvent::MemberRemove)
        )
        .anywhere(),
        route!(usage, Policy::scope(Admin, AuditEvent::OrganizationUsage)),
    ]
}

#[utoipa::path(get, path = "/organizations/current", tag = "organizations",
    responses((status = 200, body = Data<Organization>)))]
async fn get_org(State(state): State<AppState>, caller: Auth) -> ApiResult<Response> {
    Ok(ok(state.app.organization(&caller.org_id).await?))
}

#[utoipa::path(put, path = "/organizations/current", tag = "organizations", request_body = OrganizationUpdate,
    responses((status = 200, body = Data<Organization>)))]
async fn update_org(
    State(state): State<AppState>,
    caller: Auth,
    ValidJson(body): ValidJson<OrganizationUpdate>,
) -> ApiResult<Response> {
    Ok(ok(state
        .app
        .update_organization(&caller.org_id, body)
        .await?))
}

#[utoipa::path(get, path = "/organizations/current/members", tag = "organizations", params(PageQuery),
    responses((status = 200, body = List<Member>)))]
async fn list_members(
    State(state): State<AppState>,
    caller: Auth,
    ValidQuery(q): ValidQuery<PageQuery>,
) -> ApiResult<Response> {
    let page = page_of_query(q)?;
    let paged = state.app.members(&caller.org_id, page).await?;
    Ok(list(page, paged, |m| m))
}

/// Invite a person by email. The membership is `invited` until they accept the emailed link
/// (`POST /v1/auth/invitations/accept`); without an `[smtp]` relay the link is in the answer.
/// Only an owner may invite an owner.
#[utoipa::path(post, path = "/organizations/current/members/invite", tag = "organizations", request_body = Invitation,
    responses((status = 201, body = Data<InvitedMember>), (status = 409, description = "The person is a member already")))]
async fn invite_member(
    State(state): State<AppState>,
    caller: Auth,
    ValidJson(body): ValidJson<Invitation>,
) -> ApiResult<Response> {
    let invited = state.app.invite_member(&caller, body).await?;
    Ok(created(&invited.member.id.clone(), invited))
}

/// Remove a member (the user id). The last owner cannot be removed (409).
#[utoipa::path(delete, path = "/organizations/current/members/{id}", tag = "organizations", params(("id" = String, Path)),
    responses((status = 204, description = "Removed"), (status = 409, description = "The last owner cannot be removed")))]
async fn remove_member(
    State(state): State<AppState>,
    trail: Option<Extension<AuditTrail>>,
    r: ById,
) -> ApiResult<Response> {
    let trail = trail.map(|Extension(t)| t);
    state
        .app
        .remove_member(r.org(), &r.id, trail.as_ref())
        .await?;
    Ok(no_content())
}

/// Usage against the tier's limits for the period each figure names (SPEC 2.9, 8.1, 8.3):
/// requests of the calling key today against the per-key daily limit, requests of the whole
/// organization today against its aggregate, telemetry points this hour.
#[utoipa::path(get, path = "/organizations/current/usage", tag = "organizations",
    responses((status = 200, body = Data<Usage>)))]
async fn usage(State(state): State<AppState>, caller: Auth) -> ApiResult<Response> {
    Ok(ok(state.app.organization_usage(&caller).await?))
}
