//! The user an API key acts for (SPEC 4.9): profile and password.

use plantd_model::org::{Role, User};
use plantd_model::validation::Validator;
use serde::Deserialize;
use serde_json::Value;

use crate::access::AuditTrail;
use crate::app::App;
use crate::caller::Caller;
use crate::error::{AppError, AppResult};

/// Only `name` can change. Read-only fields of a fetched profile are accepted and ignored.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProfileUpdate {
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

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PasswordChange {
    /// Required when the user has a password.
    pub current_password: Option<String>,
    pub new_password: String,
}

/// Argon2id work off the async threads, for the operator's commands (requests go through
/// [`App::hash_password`], which bounds how many run at once).
pub(crate) async fn hash_password(password: &str) -> AppResult<String> {
    let pw = password.to_string();
    tokio::task::spawn_blocking(move || plantd_auth::hash_password(&pw))
        .await
        .map_err(|e| AppError::internal("password hashing stopped", e))?
        .map_err(|e| AppError::internal("cannot hash the password", e))
}

impl App {
    /// Hashes a new password (Argon2id), within the bound on password work
    /// (`password_work.rs`).
    pub(crate) async fn hash_password(&self, password: &str) -> AppResult<String> {
        let pw = password.to_string();
        self.password_work()
            .run(move || plantd_auth::hash_password(&pw))
            .await?
            .map_err(|e| AppError::internal("cannot hash the password", e))
    }

    /// Checks a password against its stored hash, within the bound on password work.
    pub(crate) async fn verify_password(&self, given: &str, stored: &str) -> AppResult<bool> {
        let (given, stored) = (given.to_string(), stored.to_string());
        self.password_work()
            .run(move || plantd_auth::verify_password(&given, &stored))
            .await
    }

    /// The caller's user and role in the caller's organization.
    pub async fn me(&self, caller: &Caller) -> AppResult<(User, Role)> {
        let user_id = caller.user_id.as_deref().ok_or(AppError::NoUser)?;
        let user = self
            .store()
            .user(user_id)
            .await
            .map_err(|_| AppError::NotFound("user"))?;
        let member = self
            .store()
            .member(&caller.org_id, user_id)
            .await
            .map_err(|_| AppError::NotFound("user"))?;
        Ok((user, member.role))
    }

    pub async fn update_me(
        &self,
        caller: &Caller,
        update: ProfileUpdate,
    ) -> AppResult<(User, Role)> {
        let (user, role) = self.me(caller).await?;
        if let Some(email) = update.email.as_ref().and_then(Value::as_str)
            && email.trim().to_lowercase() != user.email
        {
            return Err(AppError::invalid(
                "email",
                "cannot be changed through the API",
            ));
        }
        let user = match update.name {
            Some(name) => {
                let mut v = Validator::new();
                v.text("name", &name, 200);
                v.finish()?;
                self.store().update_user_name(&user.id, name.trim()).await?
            }
            None => user,
        };
        Ok((user, role))
    }

    /// Changes the password; the current one must be given (unless none is set yet). Every
    /// other session of the user ends.
    /// Changes the caller's password. A wrong `current_password` counts as a failed login of the
    /// account (the login's throttle). Every other session of the user ends, and so do the
    /// refresh tokens of their OAuth grants (RFC 9700 4.14: a password change revokes them).
    pub async fn change_password(
        &self,
        caller: &Caller,
        change: PasswordChange,
        trail: Option<&AuditTrail>,
    ) -> AppResult<()> {
        let (user, _) = self.me(caller).await?;
        let ip = trail.and_then(|t| t.facts().client_ip.clone());
        self.check_password_attempts(&user.email, ip.as_deref())?;
        let mut v = Validator::new();
        if let Some(problem) = plantd_auth::password_problem(&change.new_password, &user.email) {
            v.add("new_password", problem);
        }
        if let Some(stored) = self.store().password_hash(&user.id).await? {
            match &change.current_password {
                None => v.add("current_password", "is required"),
                Some(given) => {
                    let matches = self.verify_password(given, &stored).await?;
                    if !matches {
                        self.count_password_failure(&user.email, ip.as_deref());
                    }
                    v.check(matches, "current_password", "is incorrect");
                }
            }
        }
        v.finish()?;
        let hash = self.hash_password(&change.new_password).await?;
        self.store().set_password(&user.id, &hash).await?;
        // Whoever else was signed in as this user is signed out, and their applications' grants
        // end.
        self.store()
            .delete_user_sessions(&user.id, caller.session_id())
            .await?;
        self.store().revoke_user_grants(&user.id).await?;
        self.forget_token_states();
        Ok(())
    }
}
