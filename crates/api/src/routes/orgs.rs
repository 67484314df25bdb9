//! The caller's organization (SPEC 4.9): settings, members, invitations and usage (SPEC 2.9).

use axum::extract::{Path, State};
use axum::response::Response;
use plantd_model::Timestamp;
use plantd_model::org::{Member, MemberStatus, Organization, Role};
use plantd_model::page::PageQuery;
use plantd_model::validation::Validator;
use plantd_store::NewUser;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::envelope::{Data, List, created, list, no_content, ok};
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{ValidJson, ValidQuery};
use crate::routes::page_of;
use crate::state::{AppState, Caller};

#[utoipa::path(get, path = "/organizations/current", tag = "organizations", security(("api_key" = [])),
    responses((status = 200, body = Data<Organization>), (status = 401, body = ErrorBody)))]
pub async fn get_org(State(state): State<AppState>, caller: Caller) -> ApiResult<Response> {
    Ok(ok(state.store.org(&caller.org_id).await?))
}

/// Only `name` can change; `tier` is set by the operator. Read-only fields of a fetched
/// organization (`id`, `created_at`, `updated_at`) are accepted and ignored.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateOrg {
    pub name: Option<String>,
    #[schema(value_type = Option<String>, read_only)]
    pub tier: Option<Value>,
    #[schema(value_type = Option<String>, read_only)]
    pub id: Option<Value>,
    #[schema(value_type = Option<String>, read_only)]
    pub created_at: Option<Value>,
    #[schema(value_type = Option<String>, read_only)]
    pub updated_at: Option<Value>,
}

#[utoipa::path(put, path = "/organizations/current", tag = "organizations", security(("api_key" = [])), request_body = UpdateOrg,
    responses((status = 200, body = Data<Organization>), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn update_org(
    State(state): State<AppState>,
    caller: Caller,
    ValidJson(body): ValidJson<UpdateOrg>,
) -> ApiResult<Response> {
    let current = state.store.org(&caller.org_id).await?;
    let mut v = Validator::new();
    if let Some(name) = &body.name {
        v.text("name", name, 200);
    }
    if let Some(tier) = &body.tier
        && tier.as_str() != Some(current.tier.as_str())
    {
        v.add("tier", "is set by the operator (plantd orgs create --tier) and cannot be changed through the API");
    }
    v.finish().map_err(ApiError::Validation)?;
    let org = match body.name {
        Some(name) => {
            state
                .store
                .update_org_name(&caller.org_id, name.trim())
                .await?
        }
        None => current,
    };
    Ok(ok(org))
}

#[utoipa::path(get, path = "/organizations/current/members", tag = "organizations", security(("api_key" = [])), params(PageQuery),
    responses((status = 200, body = List<Member>), (status = 403, body = ErrorBody)))]
pub async fn list_members(
    State(state): State<AppState>,
    caller: Caller,
    ValidQuery(q): ValidQuery<PageQuery>,
) -> ApiResult<Response> {
    let page = page_of(q)?;
    let paged = state.store.members(&caller.org_id, page).await?;
    Ok(list(page, paged, |m| m))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InviteMember {
    pub email: String,
    /// owner, admin or member (default member).
    pub role: Option<Role>,
    /// Display name for a person new to plantd (default: the part of the email before `@`).
    pub name: Option<String>,
}

/// Invite a person by email. Someone new to plantd gets an account in state `invited` until a
/// password is set for it; an existing user joins at once (`active`).
#[utoipa::path(post, path = "/organizations/current/members/invite", tag = "organizations", security(("api_key" = [])), request_body = InviteMember,
    responses((status = 201, body = Data<Member>), (status = 400, body = ErrorBody), (status = 409, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub async fn invite_member(
    State(state): State<AppState>,
    caller: Caller,
    ValidJson(body): ValidJson<InviteMember>,
) -> ApiResult<Response> {
    let mut v = Validator::new();
    v.email("email", body.email.trim());
    if let Some(name) = &body.name {
        v.text("name", name, 200);
    }
    v.finish().map_err(ApiError::Validation)?;
    let email = body.email.trim().to_lowercase();
    let (user, status) = match state.store.user_by_email(&email).await? {
        Some(user) => {
            let has_password = state.store.password_hash(&user.id).await?.is_some();
            (
                user,
                if has_password {
                    MemberStatus::Active
                } else {
                    MemberStatus::Invited
                },
            )
        }
        None => {
            let default_name = email.split('@').next().unwrap_or_default().to_string();
            let name = body.name.as_deref().map(str::trim).unwrap_or(&default_name);
            let user = state
                .store
                .create_user(NewUser {
                    email: &email,
                    name,
                    password_hash: None,
                })
                .await?;
            (user, MemberStatus::Invited)
        }
    };
    let member = state
        .store
        .add_member(
            &caller.org_id,
            &user.id,
            body.role.unwrap_or(Role::Member),
            status,
        )
        .await?;
    Ok(created(&member.id.clone(), member))
}

/// Remove a member (the user id). The last owner cannot be removed (409).
#[utoipa::path(delete, path = "/organizations/current/members/{id}", tag = "organizations", security(("api_key" = [])), params(("id" = String, Path)),
    responses((status = 204, description = "Removed"), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn remove_member(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    state
        .store
        .remove_member(&caller.org_id, &id)
        .await
        .map_err(ApiError::missing("member"))?;
    Ok(no_content())
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct Usage {
    pub organization_id: String,
    pub tier: plantd_model::Tier,
    pub api_requests: UsageCounter,
    pub telemetry_points: UsageCounter,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct UsageCounter {
    pub current: u64,
    /// `null` when the tier has no limit (enterprise by default).
    pub limit: Option<u64>,
    /// `day` or `hour`: the window `current` counts.
    pub period: &'static str,
    pub resets_at: Timestamp,
}

/// Requests of the organization today (UTC) against its daily aggregate limit, and telemetry
/// points this hour against its hourly ingest limit (SPEC 2.9, 8.1, 8.3).
#[utoipa::path(get, path = "/organizations/current/usage", tag = "organizations", security(("api_key" = [])),
    responses((status = 200, body = Data<Usage>), (status = 403, body = ErrorBody)))]
pub async fn usage(State(state): State<AppState>, caller: Caller) -> ApiResult<Response> {
    if let Err(e) = state.usage.flush(&state.store).await {
        tracing::warn!(error = %e, "could not flush usage counts before reading them");
    }
    let now = Timestamp::now();
    let secs = now.unix_seconds();
    let requests = state
        .store
        .org_requests_on(&caller.org_id, &now.day())
        .await?;
    let points = state
        .limiter
        .current(&format!("points:{}", caller.org_id), 3_600, secs);
    let limits = &state.config.limits;
    Ok(ok(Usage {
        organization_id: caller.org_id.clone(),
        tier: caller.tier,
        api_requests: UsageCounter {
            current: requests,
            limit: limits.org_requests(caller.tier).per_day,
            period: "day",
            resets_at: Timestamp::from_millis((secs.div_euclid(86_400) + 1) * 86_400_000),
        },
        telemetry_points: UsageCounter {
            current: points,
            limit: limits.telemetry(caller.tier).points_per_hour,
            period: "hour",
            resets_at: Timestamp::from_millis((secs.div_euclid(3_600) + 1) * 3_600_000),
        },
    }))
}
