//! Login sessions (SPEC 5, "session tokens"): logging in with email and password, throttled
//! per account and per client address; authenticating a session token; listing and ending
//! one's sessions. A session acts with its user's current role in its organization.

use plantd_model::Timestamp;
use plantd_model::audit::ActorType;
use plantd_model::identity::{
    SESSION_ABSOLUTE_SECS, SESSION_IDLE_SECS, Session, SessionRecord, role_scopes,
};
use plantd_model::org::{Organization, Role, User};
use plantd_model::validation::Validator;
use plantd_store::NewSession;
use serde::Deserialize;
use std::sync::OnceLock;

use crate::access::{Actor, AuditTrail};
use crate::app::App;
use crate::caller::{Caller, Credential};
use crate::error::{AppError, AppResult};
use crate::rate_limit::{Bucket, Decision, Window};
use crate::users::hash_password;

/// The window failed logins are counted in.
const LOGIN_WINDOW_SECS: i64 = 900;
/// A session's last use is written at most this often.
const TOUCH_EVERY_MS: i64 = 60_000;

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Login {
    pub email: String,
    pub password: String,
    /// Which of the user's organizations to sign in to (default: the oldest membership).
    pub organization_id: Option<String>,
}

/// A new session: its token (shown once), and whom it is for.
pub struct NewLogin {
    pub token: String,
    pub session: Session,
    pub user: User,
    pub role: Role,
    pub organization: Organization,
}

/// Refusal of a wrong email or password: the same words and about the same time for both.
const BAD_LOGIN: &str = "invalid email or password";

/// A hash to verify against when the email is unknown, so that the answer takes as long.
async fn dummy_hash() -> AppResult<&'static str> {
    static HASH: OnceLock<String> = OnceLock::new();
    if let Some(h) = HASH.get() {
        return Ok(h);
    }
    let h = hash_password("plantd-login-timing-equaliser").await?;
    Ok(HASH.get_or_init(|| h))
}

impl App {
    fn login_buckets(&self, email: &str, client_ip: Option<&str>) -> [Bucket<'static>; 2] {
        let window = |limit| {
            vec![Window {
                limit,
                window_secs: LOGIN_WINDOW_SECS,
            }]
        };
        [
            Bucket {
                name: format!("login-account:{email}"),
                label: "failed logins of this account",
                windows: window(self.config().login_failures_per_account),
            },
            Bucket {
                name: format!("login-client:{}", client_ip.unwrap_or("unknown")),
                label: "failed logins from this address",
                windows: window(self.config().login_failures_per_client),
            },
        ]
    }

    /// Refuses a password check while the account (`email`) or the client address has had too
    /// many failures within 15 minutes: the login's rule, also for every other place that checks
    /// an account's password (accepting an invitation with an existing account, changing one's
    /// password).
    pub(crate) fn check_password_attempts(
        &self,
        email: &str,
        client_ip: Option<&str>,
    ) -> AppResult<()> {
        let secs = Timestamp::now().unix_seconds();
        for b in &self.login_buckets(email, client_ip) {
            if let Decision::Refused { retry_after, .. } =
                self.limiter().peek(std::slice::from_ref(b), secs)
            {
                return Err(AppError::LimitReached {
                    message: format!("too many {}; try again in {retry_after} s", b.label),
                    retry_after,
                });
            }
        }
        Ok(())
    }

    /// Counts a wrong password against the account and the address (see
    /// [`App::check_password_attempts`]).
    pub(crate) fn count_password_failure(&self, email: &str, client_ip: Option<&str>) {
        let buckets = self.login_buckets(email, client_ip);
        self.limiter()
            .check(&buckets, Timestamp::now().unix_seconds());
    }

    /// Checks email and password and opens a session. Too many failures for the account or
    /// from the address within 15 minutes refuse further attempts until the window ends.
    /// Logs in: the call's `trail` gives the client's address and agent (kept on the session)
    /// and, on success, records the new session as the actor.
    pub async fn login(&self, login: Login, trail: &AuditTrail) -> AppResult<NewLogin> {
        let client = trail.facts();
        let mut v = Validator::new();
        v.check(!login.email.trim().is_empty(), "email", "is required");
        v.check(!login.password.is_empty(), "password", "is required");
        v.check(
            login.password.len() <= 1024,
            "password",
            "must have at most 1024 bytes",
        );
        v.finish()?;
        let email = login.email.trim().to_lowercase();
        let now = Timestamp::now();
        let ip = client.client_ip.as_deref();
        self.check_password_attempts(&email, ip)?;
        let user = self.store().user_by_email(&email).await?;
        let stored = match &user {
            Some(u) => self.store().password_hash(&u.id).await?,
            None => None,
        };
        let matches = match &stored {
            Some(hash) => self.verify_password(&login.password, hash).await?,
            None => {
                self.verify_password(&login.password, dummy_hash().await?)
                    .await?;
                false
            }
        };
        let (Some(user), true) = (&user, matches) else {
            self.count_password_failure(&email, ip);
            if let Some(u) = &user {
                // A failed login of an account is recorded where its admins look: in its
                // (first) organization, naming the user (never the password).
                let org = self
                    .store()
                    .active_memberships(&u.id)
                    .await?
                    .first()
                    .cloned();
                trail.act_as(Actor {
                    org_id: org.map(|(org_id, _)| org_id),
                    actor_type: ActorType::Anonymous,
                    actor_id: None,
                    user_id: Some(u.id.clone()),
                });
            }
            return Err(AppError::Unauthenticated(BAD_LOGIN.into()));
        };
        let user = user.clone();
        let memberships = self.store().active_memberships(&user.id).await?;
        let chosen = match &login.organization_id {
            Some(org) => memberships.iter().find(|(o, _)| o == org),
            None => memberships.first(),
        };
        let Some((org_id, role)) = chosen.cloned() else {
            return Err(AppError::Forbidden(match login.organization_id {
                Some(_) => "you are not a member of this organization".into(),
                None => "this account is not an active member of any organization".into(),
            }));
        };
        let organization = self.store().org(&org_id).await?;
        let secret = plantd_auth::generate_secret(plantd_auth::SESSION_PREFIX);
        let record = self
            .store()
            .create_session(NewSession {
                token_hash: &secret.hash,
                user_id: &user.id,
                org_id: &org_id,
                expires_at: Timestamp::from_millis(now.millis() + SESSION_ABSOLUTE_SECS * 1000),
                client_ip: client.client_ip.as_deref(),
                user_agent: client.user_agent.as_deref(),
            })
            .await?;
        trail.act_as(Actor {
            org_id: Some(org_id),
            actor_type: ActorType::Session,
            actor_id: Some(record.id.clone()),
            user_id: Some(user.id.clone()),
        });
        trail.resource(&record.id);
        Ok(NewLogin {
            token: secret.secret,
            session: record.view(Some(&record.id)),
            user,
            role,
            organization,
        })
    }

    /// The caller a session token stands for, if the session is current; its use moves its
    /// idle expiry on.
    pub async fn session_caller(
        &self,
        token: &str,
        cookie: bool,
        now: Timestamp,
    ) -> AppResult<Caller> {
        let hash = plantd_auth::hash_key(token);
        let Some((session, role, tier)) = self.store().session_principal(&hash).await? else {
            return Err(AppError::Unauthenticated(
                "unknown or ended session; log in again".into(),
            ));
        };
        if session.ends_at() <= now {
            return Err(AppError::Unauthenticated(
                "the session has expired; log in again".into(),
            ));
        }
        if now.millis() - session.last_seen_at.millis() > TOUCH_EVERY_MS {
            self.store().touch_session(&session.id, now).await?;
        }
        Ok(session_caller(session, role, tier, cookie))
    }

    /// Ends the caller's session (logging out).
    pub async fn logout(&self, caller: &Caller) -> AppResult<()> {
        let (Some(id), Some(user)) = (caller.session_id(), caller.user_id.as_deref()) else {
            return Err(AppError::Conflict(
                "logout ends a login session; this request was not made with one".into(),
            ));
        };
        self.store()
            .delete_session(user, id)
            .await
            .map_err(AppError::missing("session"))
    }

    /// The caller's user's current sessions, newest first.
    pub async fn sessions(&self, caller: &Caller) -> AppResult<Vec<Session>> {
        let user = caller.user_id.as_deref().ok_or(AppError::NoUser)?;
        let now = Timestamp::now();
        Ok(self
            .store()
            .user_sessions(user)
            .await?
            .iter()
            .filter(|s| s.ends_at() > now)
            .map(|s| s.view(caller.session_id()))
            .collect())
    }

    /// Ends one of the caller's user's sessions.
    pub async fn end_session(&self, caller: &Caller, id: &str) -> AppResult<()> {
        let user = caller.user_id.as_deref().ok_or(AppError::NoUser)?;
        self.store()
            .delete_session(user, id)
            .await
            .map_err(AppError::missing("session"))
    }

    /// Drops ended sessions and expired account tokens and OAuth codes (the retention worker).
    pub(crate) async fn delete_expired_identity(&self) -> AppResult<()> {
        let now = Timestamp::now();
        self.store()
            .delete_expired_identity(now, SESSION_IDLE_SECS * 1000)
            .await?;
        self.store().delete_expired_oauth(now).await?;
        Ok(())
    }
}

fn session_caller(
    session: SessionRecord,
    role: Role,
    tier: plantd_model::Tier,
    cookie: bool,
) -> Caller {
    Caller {
        credential: Credential::Session {
            id: session.id,
            cookie,
        },
        org_id: session.org_id,
        user_id: Some(session.user_id),
        scopes: role_scopes(role),
        tier,
    }
}
