//! The caller's organization (SPEC 4.9): its settings, members and invitations, and its usage
//! against the tier's limits (SPEC 2.9, 8.1, 8.3).

use plantd_model::org::{Member, MemberStatus, Organization, Role};
use plantd_model::page::{Page, Paged};
use plantd_model::tier::UNLIMITED;
use plantd_model::validation::Validator;
use plantd_model::{Tier, Timestamp};
use plantd_store::NewUser;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::app::App;
use crate::caller::Caller;
use crate::error::{AppError, AppResult};
use crate::telemetry::points_bucket;

/// Only `name` can change; `tier` is set by the operator. Read-only fields of a fetched
/// organization (`id`, `created_at`, `updated_at`) are accepted and ignored.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OrganizationUpdate {
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

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Invitation {
    pub email: String,
    /// owner, admin or member (default member).
    pub role: Option<Role>,
    /// Display name for a person new to plantd (default: the part of the email before `@`).
    pub name: Option<String>,
}

/// Usage against the tier's limits, each for the period it names.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Usage {
    pub organization_id: String,
    pub tier: Tier,
    /// Requests made today (UTC) with the calling API key, against the tier's daily limit per
    /// key (SPEC 8.1: trial 10,000).
    pub api_requests: UsageCounter,
    /// Requests of every key of the organization today, against the organization's aggregate
    /// daily limit (an extension; SPEC 8.1 gives no figure, see docs/api.md).
    pub organization_api_requests: UsageCounter,
    /// Telemetry points of the organization this hour, against the tier's hourly ingestion
    /// limit (SPEC 8.3: trial 10,000).
    pub telemetry_points: UsageCounter,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct UsageCounter {
    pub current: u64,
    /// The limit of the period; 2147483647 where the tier sets none (enterprise by default).
    pub limit: u64,
    /// `day` or `hour`: the window `current` counts.
    pub period: &'static str,
    pub resets_at: Timestamp,
}

impl App {
    pub async fn organization(&self, org_id: &str) -> AppResult<Organization> {
        Ok(self.store().org(org_id).await?)
    }

    pub async fn update_organization(
        &self,
        org_id: &str,
        update: OrganizationUpdate,
    ) -> AppResult<Organization> {
        let current = self.store().org(org_id).await?;
        let mut v = Validator::new();
        if let Some(name) = &update.name {
            v.text("name", name, 200);
        }
        if let Some(tier) = &update.tier
            && tier.as_str() != Some(current.tier.as_str())
        {
            v.add("tier", "is set by the operator (plantd orgs create --tier) and cannot be changed through the API");
        }
        v.finish()?;
        Ok(match update.name {
            Some(name) => self.store().update_org_name(org_id, name.trim()).await?,
            None => current,
        })
    }

    pub async fn members(&self, org_id: &str, page: Page) -> AppResult<Paged<Member>> {
        Ok(self.store().members(org_id, page).await?)
    }

    /// Invites a person by email. Someone new to plantd gets an account in state `invited`
    /// until a password is set for it; an existing user joins at once (`active`).
    pub async fn invite_member(&self, org_id: &str, invitation: Invitation) -> AppResult<Member> {
        let mut v = Validator::new();
        v.email("email", invitation.email.trim());
        if let Some(name) = &invitation.name {
            v.text("name", name, 200);
        }
        v.finish()?;
        let email = invitation.email.trim().to_lowercase();
        let (user, status) = match self.store().user_by_email(&email).await? {
            Some(user) => {
                let has_password = self.store().password_hash(&user.id).await?.is_some();
                let status = if has_password {
                    MemberStatus::Active
                } else {
                    MemberStatus::Invited
                };
                (user, status)
            }
            None => {
                let default_name = email.split('@').next().unwrap_or_default().to_string();
                let name = invitation
                    .name
                    .as_deref()
                    .map(str::trim)
                    .unwrap_or(&default_name);
                let user = self
                    .store()
                    .create_user(NewUser {
                        email: &email,
                        name,
                        password_hash: None,
                    })
                    .await?;
                (user, MemberStatus::Invited)
            }
        };
        let role = invitation.role.unwrap_or(Role::Member);
        Ok(self
            .store()
            .add_member(org_id, &user.id, role, status)
            .await?)
    }

    /// Removes a member (the user id). The last owner cannot be removed (a conflict).
    pub async fn remove_member(&self, org_id: &str, user_id: &str) -> AppResult<()> {
        self.store()
            .remove_member(org_id, user_id)
            .await
            .map_err(AppError::missing("member"))
    }

    /// Requests today and telemetry points this hour against the tier's limits.
    pub async fn organization_usage(&self, caller: &Caller) -> AppResult<Usage> {
        self.flush_usage().await;
        let now = Timestamp::now();
        let secs = now.unix_seconds();
        let day = now.day();
        let org = &caller.org_id;
        let key_requests = self
            .store()
            .requests_on(org, Some(&caller.key_id), &day)
            .await?;
        let org_requests = self.store().requests_on(org, None, &day).await?;
        let points = self.limiter().current(&points_bucket(org), 3_600, secs);
        let limits = &self.config().limits;
        let day_ends = Timestamp::from_millis((secs.div_euclid(86_400) + 1) * 86_400_000);
        let counter = |current, limit: Option<u64>, period, resets_at| UsageCounter {
            current,
            limit: limit.unwrap_or(UNLIMITED),
            period,
            resets_at,
        };
        Ok(Usage {
            organization_id: org.clone(),
            tier: caller.tier,
            api_requests: counter(
                key_requests,
                limits.key_requests(caller.tier).per_day,
                "day",
                day_ends,
            ),
            organization_api_requests: counter(
                org_requests,
                limits.org_requests(caller.tier).per_day,
                "day",
                day_ends,
            ),
            telemetry_points: counter(
                points,
                limits.telemetry(caller.tier).points_per_hour,
                "hour",
                Timestamp::from_millis((secs.div_euclid(3_600) + 1) * 3_600_000),
            ),
        })
    }
}
