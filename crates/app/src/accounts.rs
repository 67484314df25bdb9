//! How people get into their accounts: invitations sent by email with a single-use, expiring
//! link (accepting one sets the newcomer's password, or adds an existing user), and password
//! resets (always answered the same way, so that nobody learns which emails have accounts).

use plantd_alerts::channels::Mailer;
use plantd_model::Timestamp;
use plantd_model::identity::{INVITATION_SECS, RESET_SECS};
use plantd_model::org::{Member, Role, User};
use plantd_model::validation::Validator;
use plantd_store::{AccountTokenKind, NewAccountToken, UsedAccountToken};
use serde::{Deserialize, Serialize};

use crate::access::AuditTrail;
use crate::app::App;
use crate::error::{AppError, AppResult};
use crate::rate_limit::{Bucket, Window};

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AcceptInvitation {
    pub token: String,
    /// The new account's password; for a person who already has an account, its password.
    pub password: String,
    /// Display name of a new account (default: the name given at invitation).
    pub name: Option<String>,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResetRequest {
    pub email: String,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResetConfirm {
    pub token: String,
    pub password: String,
}

/// What became of an invitation's email.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct InvitationDelivery {
    pub expires_at: Timestamp,
    /// Whether the email went out through the `[smtp]` relay.
    pub email_sent: bool,
    /// Why it did not (no relay configured, or the relay's refusal).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email_error: Option<String>,
    /// The acceptance link, shown to the inviting admin when no email went out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// Reset requests per email address and hour beyond which no more emails are sent.
const RESETS_PER_HOUR: u64 = 5;

impl App {
    /// The mailer of `[smtp]`, or why there is none.
    pub(crate) fn mailer(&self) -> Result<Mailer, String> {
        match &self.config().smtp {
            Some(c) => Mailer::new(c),
            None => Err("no [smtp] relay is configured on this server".into()),
        }
    }

    /// A new single-use invitation of `user_id` (`email`) into `org_id` as `role`, until
    /// `expires_at`: its secret (`pdi_...`), stored hashed.
    pub(crate) async fn invitation_token(
        &self,
        org_id: &str,
        user_id: &str,
        email: &str,
        role: Role,
        invited_by: Option<&str>,
        expires_at: Timestamp,
    ) -> AppResult<String> {
        let secret = plantd_auth::generate_secret(plantd_auth::INVITATION_PREFIX);
        self.store()
            .create_account_token(NewAccountToken {
                token_hash: &secret.hash,
                kind: AccountTokenKind::Invitation,
                email,
                user_id: Some(user_id),
                org_id: Some(org_id),
                role: Some(role),
                created_by: invited_by,
                expires_at,
            })
            .await?;
        Ok(secret.secret)
    }

    /// Creates an invitation link for `member` of `org_id` and emails it.
    pub(crate) async fn send_invitation(
        &self,
        org_id: &str,
        org_name: &str,
        member: &Member,
        role: Role,
        invited_by: Option<&str>,
    ) -> AppResult<InvitationDelivery> {
        let expires_at = Timestamp::from_millis(Timestamp::now().millis() + INVITATION_SECS * 1000);
        let secret = self
            .invitation_token(
                org_id,
                &member.id,
                &member.email,
                role,
                invited_by,
                expires_at,
            )
            .await?;
        let url = format!("{}/invitations/accept?token={secret}", self.issuer());
        let body = format!(
            "You have been invited to join {org_name} on plantd as {role}.\n\n\
             Open this link to accept and choose your password (it works once, until {expires_at}):\n\n{url}\n\n\
             If you did not expect this invitation, ignore this email."
        );
        let subject = format!("Invitation to {org_name} on plantd");
        // Whoever holds the link of a person who has an account can try that account's
        // password there: such a link goes by email only, never to the inviting admin.
        let has_account = self.store().password_hash(&member.id).await?.is_some();
        let sent = match self.mailer() {
            Ok(m) => m
                .send_plain(&member.email, &subject, &body)
                .await
                .map_err(|e| e.message),
            Err(e) => Err(e),
        };
        Ok(match sent {
            Ok(()) => InvitationDelivery {
                expires_at,
                email_sent: true,
                email_error: None,
                url: None,
            },
            Err(error) if has_account => InvitationDelivery {
                expires_at,
                email_sent: false,
                email_error: Some(format!(
                    "{error}; {} has an account already, so the link goes by email only: configure the relay and invite again",
                    member.email
                )),
                url: None,
            },
            Err(error) => InvitationDelivery {
                expires_at,
                email_sent: false,
                email_error: Some(error),
                url: Some(url),
            },
        })
    }

    /// What an invitation link is for, to show before it is accepted: the email, the
    /// organization's name and whether the person has an account already. `None` when the
    /// token is invalid, expired or used.
    pub async fn invitation_preview(
        &self,
        token: &str,
    ) -> AppResult<Option<(String, String, bool)>> {
        let hash = plantd_auth::hash_key(token.trim());
        let Some(t) = self
            .store()
            .peek_account_token(AccountTokenKind::Invitation, &hash, Timestamp::now())
            .await?
        else {
            return Ok(None);
        };
        let (Some(user), Some(org)) = (t.user_id, t.org_id) else {
            return Ok(None);
        };
        let org = self.store().org(&org).await?;
        let has_account = self.store().password_hash(&user).await?.is_some();
        Ok(Some((t.email, org.name, has_account)))
    }

    /// Accepts an invitation: a newcomer's password is set (the rules apply); an existing
    /// account proves itself with its password. The membership becomes active. The token
    /// works once. Returns the user, the membership and its organization.
    /// A person with an account confirms with its password: a wrong one counts as a failed
    /// login of the account (the login's throttle; `trail` gives the client's address).
    pub async fn accept_invitation(
        &self,
        accept: AcceptInvitation,
        trail: Option<&AuditTrail>,
    ) -> AppResult<(User, Member, String)> {
        let ip = trail.and_then(|t| t.facts().client_ip.clone());
        let hash = plantd_auth::hash_key(accept.token.trim());
        let now = Timestamp::now();
        let invalid_token = || AppError::invalid("token", "is invalid, expired or already used");
        let token = self
            .store()
            .peek_account_token(AccountTokenKind::Invitation, &hash, now)
            .await?
            .ok_or_else(invalid_token)?;
        let (Some(user_id), Some(org_id)) = (token.user_id.clone(), token.org_id.clone()) else {
            return Err(invalid_token());
        };
        let user = self
            .store()
            .user(&user_id)
            .await
            .map_err(|_| invalid_token())?;
        let stored = self.store().password_hash(&user.id).await?;
        let mut v = Validator::new();
        if let Some(name) = &accept.name {
            v.text("name", name, 200);
        }
        let new_hash = match &stored {
            Some(existing) => {
                self.check_password_attempts(&user.email, ip.as_deref())?;
                let ok = self.verify_password(&accept.password, existing).await?;
                if !ok {
                    self.count_password_failure(&user.email, ip.as_deref());
                }
                v.check(
                    ok,
                    "password",
                    "is not the password of your existing account",
                );
                None
            }
            None => {
                if let Some(problem) = plantd_auth::password_problem(&accept.password, &user.email)
                {
                    v.add("password", problem);
                }
                Some(self.hash_password(&accept.password).await?)
            }
        };
        v.finish()?;
        self.store()
            .use_account_token(AccountTokenKind::Invitation, &hash, now)
            .await?
            .ok_or_else(invalid_token)?;
        if let Some(h) = new_hash {
            self.store().set_password(&user.id, &h).await?;
        }
        let user = match accept.name.as_deref().map(str::trim) {
            Some(name) if stored.is_none() => self.store().update_user_name(&user.id, name).await?,
            _ => user,
        };
        let member = self
            .store()
            .activate_member(&org_id, &user.id)
            .await
            .map_err(|_| {
                AppError::Conflict("this invitation was withdrawn (the member was removed)".into())
            })?;
        Ok((user, member, org_id))
    }

    /// Emails a password-reset link if the address has an account; says nothing either way.
    pub async fn request_password_reset(&self, request: ResetRequest) -> AppResult<()> {
        let email = request.email.trim().to_lowercase();
        let mut v = Validator::new();
        v.email("email", &email);
        v.finish()?;
        // The link is made and mailed in the background, so the answer takes the same time
        // whether or not the address has an account (nobody learns which do from the timing).
        let app = self.clone();
        tokio::spawn(async move {
            if let Err(e) = app.send_password_reset(&email).await {
                tracing::warn!(email, error = %plantd_model::error_chain(&e), "could not send a password reset link");
            }
        });
        Ok(())
    }

    /// Makes a reset link for the account of `email`, if there is one, and mails it (at most
    /// five an hour per address).
    async fn send_password_reset(&self, email: &str) -> AppResult<()> {
        let Some(user) = self.store().user_by_email(email).await? else {
            return Ok(());
        };
        let bucket = Bucket {
            name: format!("password-reset:{email}"),
            label: "password resets",
            windows: vec![Window {
                limit: RESETS_PER_HOUR,
                window_secs: 3_600,
            }],
        };
        if matches!(
            self.limiter()
                .check(&[bucket], Timestamp::now().unix_seconds()),
            crate::rate_limit::Decision::Refused { .. }
        ) {
            tracing::warn!(email, "password reset requested too often; no email sent");
            return Ok(());
        }
        let mailer = match self.mailer() {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(
                    email,
                    error = e,
                    "password reset requested but no email can be sent"
                );
                return Ok(());
            }
        };
        // A new link replaces any earlier one.
        self.store()
            .void_account_tokens(AccountTokenKind::PasswordReset, email)
            .await?;
        let secret = plantd_auth::generate_secret(plantd_auth::RESET_PREFIX);
        let expires_at = Timestamp::from_millis(Timestamp::now().millis() + RESET_SECS * 1000);
        self.store()
            .create_account_token(NewAccountToken {
                token_hash: &secret.hash,
                kind: AccountTokenKind::PasswordReset,
                email,
                user_id: Some(&user.id),
                org_id: None,
                role: None,
                created_by: None,
                expires_at,
            })
            .await?;
        let url = format!("{}/password-reset?token={}", self.issuer(), secret.secret);
        let body = format!(
            "Someone asked to reset the password of your plantd account ({email}).\n\n\
             Open this link to choose a new password (it works once, for one hour):\n\n{url}\n\n\
             If it was not you, ignore this email: your password stays as it is."
        );
        if let Err(e) = mailer
            .send_plain(email, "Reset your plantd password", &body)
            .await
        {
            tracing::warn!(
                email,
                error = e.message,
                "could not send the password reset email"
            );
        }
        Ok(())
    }

    /// Sets a new password with a reset link; every session of the user ends.
    pub async fn confirm_password_reset(&self, confirm: ResetConfirm) -> AppResult<()> {
        let hash = plantd_auth::hash_key(confirm.token.trim());
        let now = Timestamp::now();
        let invalid_token = || AppError::invalid("token", "is invalid, expired or already used");
        let token: UsedAccountToken = self
            .store()
            .peek_account_token(AccountTokenKind::PasswordReset, &hash, now)
            .await?
            .ok_or_else(invalid_token)?;
        let mut v = Validator::new();
        if let Some(problem) = plantd_auth::password_problem(&confirm.password, &token.email) {
            v.add("password", problem);
        }
        v.finish()?;
        let user_id = token.user_id.ok_or_else(invalid_token)?;
        let new_hash = self.hash_password(&confirm.password).await?;
        self.store()
            .use_account_token(AccountTokenKind::PasswordReset, &hash, now)
            .await?
            .ok_or_else(invalid_token)?;
        self.store().set_password(&user_id, &new_hash).await?;
        self.store().delete_user_sessions(&user_id, None).await?;
        Ok(())
    }
}
