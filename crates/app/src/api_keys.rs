//! API keys (SPEC 2.12, 4.13, 5.1): authenticating a secret (through the key cache), and the
//! keys' lifecycle: create (the secret is shown once), revoke, rotate, usage.

use plantd_model::api_key::{ApiKey, ApiKeyStatus, ApiKeyUsageRow};
use plantd_model::identity::role_scopes;
use plantd_model::page::{Page, Paged};
use plantd_model::scope::allows;
use plantd_model::validation::Validator;
use plantd_model::{Scope, Tier, Timestamp};
use serde::Deserialize;

use crate::app::App;
use crate::caller::{Caller, Credential};
use crate::error::{AppError, AppResult};
use crate::key_cache::Lookup;

/// Largest name of a key.
pub const MAX_KEY_NAME: usize = 200;

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewApiKey {
    pub name: String,
    pub scopes: Vec<Scope>,
    pub expires_at: Option<Timestamp>,
}

/// A key's record and its secret (only in the answers of create and rotate).
pub struct KeyWithSecret {
    pub key: ApiKey,
    pub secret: String,
}

/// Validates a new key's fields (the API and the operator command alike).
pub(crate) fn validate_new_key(
    name: &str,
    scopes: &[Scope],
    expires_at: Option<Timestamp>,
) -> AppResult<()> {
    let mut v = Validator::new();
    v.text("name", name, MAX_KEY_NAME);
    v.check(!scopes.is_empty(), "scopes", "must list at least one scope");
    if let Some(e) = expires_at {
        v.check(e > Timestamp::now(), "expires_at", "must be in the future");
    }
    Ok(v.finish()?)
}

impl App {
    /// The caller a key's secret stands for: from the key cache, else from the store.
    pub async fn authenticate(&self, secret: &str, now: Timestamp) -> AppResult<Caller> {
        let hash = plantd_auth::hash_key(secret);
        let ttl = self.config().key_cache_ttl;
        let (key, tier) = match self.keys().get(&hash, ttl) {
            Ok(hit) => hit,
            Err(lookup) => self.look_up_key(lookup, &hash).await?,
        };
        match key.status(now) {
            ApiKeyStatus::Active => Ok(Caller {
                credential: Credential::ApiKey { id: key.id },
                org_id: key.org_id,
                user_id: key.user_id,
                scopes: key.scopes,
                tier,
            }),
            ApiKeyStatus::Revoked => Err(AppError::Unauthenticated(
                "this API key has been revoked".into(),
            )),
            ApiKeyStatus::Expired => {
                Err(AppError::Unauthenticated("this API key has expired".into()))
            }
        }
    }

    /// Reads a key and its organization's tier from the store and caches them. A key a person
    /// created acts for them: only while they are an active member, with at most the scopes
    /// their role grants now (docs/api.md, "API keys").
    async fn look_up_key(&self, lookup: Lookup, hash: &str) -> AppResult<(ApiKey, Tier)> {
        let (mut key, role) = self
            .store()
            .key_holder(hash)
            .await?
            .ok_or_else(|| AppError::Unauthenticated("unknown API key".into()))?;
        if key.user_id.is_some() && key.revoked_at.is_none() {
            let Some(role) = role else {
                return Err(AppError::Unauthenticated(
                    "this API key's creator is no longer a member of the organization; the key acts for nobody".into(),
                ));
            };
            let granted = role_scopes(role);
            key.scopes.retain(|s| allows(&granted, *s));
        }
        let tier = self.store().org(&key.org_id).await?.tier;
        self.keys()
            .put(lookup, hash.to_string(), (key.clone(), tier));
        Ok((key, tier))
    }

    pub async fn api_keys(&self, org_id: &str, page: Page) -> AppResult<Paged<ApiKey>> {
        Ok(self.store().api_keys(org_id, page).await?)
    }

    /// Creates a key acting for the caller's user; the answer holds the secret, once.
    pub async fn create_api_key(
        &self,
        caller: &Caller,
        new: NewApiKey,
    ) -> AppResult<KeyWithSecret> {
        validate_new_key(&new.name, &new.scopes, new.expires_at)?;
        let mut scopes = new.scopes;
        scopes.sort();
        scopes.dedup();
        self.insert_key(
            &caller.org_id,
            caller.user_id.as_deref(),
            new.name.trim(),
            &scopes,
            new.expires_at,
        )
        .await
    }

    /// Stores a new key with a fresh secret.
    pub(crate) async fn insert_key(
        &self,
        org_id: &str,
        user_id: Option<&str>,
        name: &str,
        scopes: &[Scope],
        expires_at: Option<Timestamp>,
    ) -> AppResult<KeyWithSecret> {
        let secret = plantd_auth::generate_key();
        let key = self
            .store()
            .create_api_key(plantd_store::NewApiKey {
                org_id,
                user_id,
                name,
                scopes,
                expires_at,
                prefix: &secret.display_prefix,
                key_hash: &secret.hash,
            })
            .await?;
        Ok(KeyWithSecret {
            key,
            secret: secret.secret,
        })
    }

    /// Revokes a key: it stops working at once. Revoking a revoked key changes nothing.
    pub async fn revoke_api_key(&self, org_id: &str, id: &str) -> AppResult<()> {
        self.store()
            .revoke_api_key(org_id, id)
            .await
            .map_err(AppError::missing("API key"))?;
        self.forget_keys(&[id.to_string()]);
        Ok(())
    }

    /// Gives a key a new secret (returned once); the old secret stops working at once.
    pub async fn rotate_api_key(&self, org_id: &str, id: &str) -> AppResult<KeyWithSecret> {
        let current = self
            .store()
            .api_key(org_id, id)
            .await
            .map_err(AppError::missing("API key"))?;
        match current.status(Timestamp::now()) {
            ApiKeyStatus::Revoked => {
                return Err(AppError::Conflict("a revoked key cannot be rotated".into()));
            }
            ApiKeyStatus::Expired => {
                return Err(AppError::Conflict(
                    "an expired key cannot be rotated; create a new key".into(),
                ));
            }
            ApiKeyStatus::Active => {}
        }
        let secret = plantd_auth::generate_key();
        let key = self
            .store()
            .rotate_api_key(org_id, id, &secret.display_prefix, &secret.hash)
            .await
            .map_err(AppError::missing("API key"))?;
        self.forget_keys(&[id.to_string()]);
        Ok(KeyWithSecret {
            key,
            secret: secret.secret,
        })
    }

    /// Requests made with a key, per UTC day and endpoint, newest day first.
    pub async fn api_key_usage(
        &self,
        org_id: &str,
        id: &str,
        page: Page,
    ) -> AppResult<Paged<ApiKeyUsageRow>> {
        self.store()
            .api_key(org_id, id)
            .await
            .map_err(AppError::missing("API key"))?;
        self.flush_usage().await;
        Ok(self.store().api_key_usage(org_id, id, page).await?)
    }
}
