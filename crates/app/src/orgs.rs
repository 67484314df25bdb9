//! The caller's organization (SPEC 4.9): its settings, members and invitations, and its usage
//! against the tier's limits (SPEC 2.9, 8.1, 8.3).

use plantd_model::audit::AuditEvent;
use plantd_model::org::{Member, MemberStatus, Organization, Role};
use plantd_model::page::{Page, Paged};
use plantd_model::tier::UNLIMITED;
use plantd_model::validation::Validator;
use plantd_model::{Tier, Timestamp};
use plantd_store::NewUser;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::access::AuditTrail;
use crate::accounts::InvitationDelivery;
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
    /// Strict data residency (Enterprise): the organization's resident data never leaves its
    /// primary region (no secondary copy; SPEC 3 rule 5). Shown by the region view.
    pub data_residency_enabled: Option<bool>,
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

/// The answer of an invitation: the member (state `invited`) and what became of the email.
#[derive(Serialize, utoipa::ToSchema)]
pub struct InvitedMember {
    #[serde(flatten)]
    pub member: Member,
    pub invitation: InvitationDelivery,
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
        if let Some(strict) = update.data_residency_enabled {
            if current.tier != plantd_model::Tier::Enterprise {
                return Err(AppError::Forbidden(format!(
                    "data residency is part of the Enterprise plan; this organization is on the {} plan",
                    current.tier
                )));
            }
            self.store().set_org_residency(org_id, strict).await?;
        }
        Ok(match update.name {
            Some(name) => self.store().update_org_name(org_id, name.trim()).await?,
            None => self.store().org(org_id).await?,
        })
    }

    pub async fn members(&self, org_id: &str, page: Page) -> AppResult<Paged<Member>> {
        Ok(self.store().members(org_id, page).await?)
    }

    /// Invites a person by email: the membership is `invited` until they accept the link
    /// emailed to them (a person new to plantd gets an account without a password until then).
    /// Only an owner may invite an owner.
    pub async fn invite_member(
        &self,
        caller: &Caller,
        invitation: Invitation,
    ) -> AppResult<InvitedMember> {
        let org_id = &caller.org_id;
        let mut v = Validator::new();
        v.email("email", invitation.email.trim());
        if let Some(name) = &invitation.name {
            v.text("name", name, 200);
        }
        v.finish()?;
        let role = invitation.role.unwrap_or(Role::Member);
        if role == Role::Owner && !self.is_owner(caller).await? {
            return Err(AppError::Forbidden(
                "only an owner of the organization may invite an owner".into(),
            ));
        }
        let email = invitation.email.trim().to_lowercase();
        let user = match self.store().user_by_email(&email).await? {
            Some(user) => user,
            None => {
                let default_name = email.split('@').next().unwrap_or_default().to_string();
                let name = invitation
                    .name
                    .as_deref()
                    .map(str::trim)
                    .unwrap_or(&default_name);
                self.store()
                    .create_user(NewUser {
                        email: &email,
                        name,
                        password_hash: None,
                    })
                    .await?
            }
        };
        let member = self
            .store()
            .add_member(org_id, &user.id, role, MemberStatus::Invited)
            .await?;
        let org = self.store().org(org_id).await?;
        let delivery = self
            .send_invitation(org_id, &org.name, &member, role, caller.user_id.as_deref())
            .await?;
        Ok(InvitedMember {
            member,
            invitation: delivery,
        })
    }

    /// Whether the caller's user owns the caller's organization.
    pub(crate) async fn is_owner(&self, caller: &Caller) -> AppResult<bool> {
        let Some(user) = caller.user_id.as_deref() else {
            return Ok(false);
        };
        Ok(self
            .store()
            .member(&caller.org_id, user)
            .await
            .is_ok_and(|m| m.role == Role::Owner))
    }

    /// Removes a member (the user id). The last owner cannot be removed (a conflict).
    /// Removes a member; the API keys they created in the organization are revoked with them
    /// (on this node at once, on others within the key cache's time), each revocation audited
    /// as `api_key.revoke` by whoever removed them (`trail`: the removal's record).
    pub async fn remove_member(
        &self,
        org_id: &str,
        user_id: &str,
        trail: Option<&AuditTrail>,
    ) -> AppResult<()> {
        let revoked = self
            .store()
            .remove_member(org_id, user_id)
            .await
            .map_err(AppError::missing("member"))?;
        self.forget_keys(&revoked);
        if let Some(trail) = trail {
            for id in &revoked {
                let record = trail.derived(AuditEvent::ApiKeyRevoke, id);
                self.store().insert_audit(&record).await?;
            }
        }
        Ok(())
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
            .requests_on(org, Some(&caller.counter_id()), &day)
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
