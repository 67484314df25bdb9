//! The RS256 signing keys of access tokens (SPEC 5.3): kept in the database, so that every
//! node of a cluster signs and verifies with the same keys; created at first use; rotated by
//! the operator (`plantd keys rotate-signing`), the old key staying in the JWKS until the last
//! token it signed has expired. Verifying a token (signature, issuer, audience, expiry, and
//! whether its grant or the token itself was revoked) makes the access token's [`Caller`].

use plantd_auth::jwt::{AccessClaims, GuestClaims, SigningKey};
use plantd_model::identity::ACCESS_TOKEN_SECS;
use plantd_model::{Scope, Tier, Timestamp, new_id, scope};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::app::App;
use crate::caller::{Caller, Credential};
use crate::error::{AppError, AppResult};
use crate::key_ring::{KnownToken, Standing};

/// How often an unknown `kid` may make a node read the keys again (another node rotated).
const RELOAD_AFTER: Duration = Duration::from_secs(5);
/// How long loaded keys are used before they are read again, so that every node signs with
/// a rotated key within this time.
const REFRESH_AFTER: Duration = Duration::from_secs(60);
/// A retired key stays published this long after retirement: a token lifetime, plus the time
/// nodes may go on signing with it.
const PUBLISHED_AFTER_RETIREMENT_SECS: i64 = ACCESS_TOKEN_SECS + 2 * 60;
/// Verified tokens a node remembers; beyond this it forgets them all and verifies again.
const MAX_KNOWN_TOKENS: usize = 100_000;

impl App {
    /// The issuer and audience of access tokens: the server's public origin.
    pub fn issuer(&self) -> &str {
        self.config()
            .public_url
            .as_deref()
            .unwrap_or("http://127.0.0.1:8000")
            .trim_end_matches('/')
    }

    /// The current keys, loading them (and creating the first) when needed. Shared, not
    /// copied: every authenticated request with an access token asks for them.
    async fn signing_keys(&self, reload: bool) -> AppResult<Arc<Vec<SigningKey>>> {
        let fresh = |loaded: &Option<(Arc<Vec<SigningKey>>, Instant)>| {
            loaded
                .as_ref()
                .filter(|(_, at)| {
                    !(reload && at.elapsed() > RELOAD_AFTER) && at.elapsed() < REFRESH_AFTER
                })
                .map(|(keys, _)| keys.clone())
        };
        if let Some(keys) = fresh(&*self.key_ring().keys.read().await) {
            return Ok(keys);
        }
        let mut guard = self.key_ring().keys.write().await;
        // Another request may have loaded them while this one waited.
        if let Some(keys) = fresh(&guard) {
            return Ok(keys);
        }
        let since = Timestamp::from_millis(
            Timestamp::now().millis() - PUBLISHED_AFTER_RETIREMENT_SECS * 1000,
        );
        let mut rows = self.store().signing_keys(since).await?;
        if rows.is_empty() {
            let pem = generate_pem().await?;
            self.store().add_first_signing_key(&new_id(), &pem).await?;
            rows = self.store().signing_keys(since).await?;
        }
        let keys = rows
            .iter()
            .map(|(kid, pem, _)| SigningKey::from_pem(kid, pem))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| AppError::internal("a stored signing key is unusable", e))?;
        let keys = Arc::new(keys);
        *guard = Some((keys.clone(), Instant::now()));
        Ok(keys)
    }

    /// The public keys (RFC 7517 set): the signing key and those retired less than a token
    /// lifetime ago.
    pub async fn jwks(&self) -> AppResult<serde_json::Value> {
        let keys = self.signing_keys(false).await?;
        Ok(serde_json::json!({ "keys": keys.iter().map(SigningKey::jwk).collect::<Vec<_>>() }))
    }

    /// The key that signs now.
    async fn current_key(&self) -> AppResult<SigningKey> {
        let keys = self.signing_keys(false).await?;
        keys.first()
            .cloned()
            .ok_or_else(|| AppError::internal("no signing key", "none stored"))
    }

    /// The key a token's header names (reading the keys again once when it is unknown: another
    /// node may have rotated them).
    async fn key_named(&self, kid: &str, what: &str) -> AppResult<SigningKey> {
        let mut keys = self.signing_keys(false).await?;
        if !keys.iter().any(|k| k.kid == kid) {
            keys = self.signing_keys(true).await?;
        }
        keys.iter().find(|k| k.kid == kid).cloned().ok_or_else(|| {
            AppError::InvalidToken(format!("the {what}'s signing key is unknown or retired"))
        })
    }

    /// Signs an access token.
    pub(crate) async fn sign_access_token(
        &self,
        subject: &str,
        org_id: &str,
        scopes: &[Scope],
        client_id: &str,
        grant_id: &str,
    ) -> AppResult<String> {
        let key = self.current_key().await?;
        let now = Timestamp::now().unix_seconds();
        let claims = AccessClaims {
            iss: self.issuer().to_string(),
            sub: subject.to_string(),
            aud: self.issuer().to_string(),
            exp: now + ACCESS_TOKEN_SECS,
            iat: now,
            jti: new_id(),
            org: org_id.to_string(),
            scope: scope::join_spaced(scopes),
            client_id: client_id.to_string(),
            gid: grant_id.to_string(),
        };
        key.sign(&claims)
            .map_err(|e| AppError::internal("cannot sign an access token", e))
    }

    /// The claims of an access token this server signed, if it is valid now (signature, issuer,
    /// audience, expiry) and neither it nor its grant was revoked.
    pub(crate) async fn verify_access_token(&self, token: &str) -> AppResult<AccessClaims> {
        let kid = plantd_auth::jwt::key_id_of(token).map_err(AppError::InvalidToken)?;
        let key = self.key_named(&kid, "access token").await?;
        key.verify(token, self.issuer(), self.issuer())
            .map_err(AppError::InvalidToken)
    }

    /// The audience of BI guest tokens: the embed API, never the API itself.
    pub(crate) fn guest_audience(&self) -> String {
        format!("{}/v1/bi-embed", self.issuer())
    }

    /// Signs a BI guest token (its issuer and audience set here).
    pub(crate) async fn sign_guest_token(&self, mut claims: GuestClaims) -> AppResult<String> {
        let key = self.current_key().await?;
        claims.iss = self.issuer().to_string();
        claims.aud = self.guest_audience();
        key.sign_guest(&claims)
            .map_err(|e| AppError::internal("cannot sign a guest token", e))
    }

    /// The claims of a guest token this server signed, if it is valid now (a refusal is a 401
    /// in the API's envelope: a guest token is no OAuth token).
    pub(crate) async fn verify_guest_token(&self, token: &str) -> AppResult<GuestClaims> {
        let kid = plantd_auth::jwt::key_id_of_guest(token).map_err(AppError::Unauthenticated)?;
        let key = match self.key_named(&kid, "guest token").await {
            Err(AppError::InvalidToken(m)) => return Err(AppError::Unauthenticated(m)),
            other => other?,
        };
        key.verify_guest(token, self.issuer(), &self.guest_audience())
            .map_err(AppError::Unauthenticated)
    }

    /// Forgets what is cached of tokens (after a revocation on this node, which then takes
    /// effect at once; other nodes see it within the key cache's time).
    pub(crate) fn forget_token_states(&self) {
        self.known_tokens().clear();
    }

    fn known_tokens(&self) -> std::sync::MutexGuard<'_, HashMap<String, KnownToken>> {
        self.key_ring()
            .known
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a signed token still stands, and its organization's tier: neither the token
    /// nor its grant was revoked, its application and organization exist, and a user's token
    /// stops when the user leaves the organization.
    async fn standing(&self, claims: &AccessClaims) -> AppResult<Standing> {
        if !self
            .store()
            .access_token_stands(&claims.gid, &claims.jti)
            .await?
        {
            return Ok(Err("the access token has been revoked".to_string()));
        }
        Ok(match self.store().org(&claims.org).await {
            Err(_) => Err("the token's organization no longer exists".to_string()),
            Ok(org) => {
                let left = claims.sub != claims.client_id
                    && self.store().member(&claims.org, &claims.sub).await.is_err();
                if left {
                    Err("the token's user is no longer a member of its organization".into())
                } else {
                    Ok(org.tier)
                }
            }
        })
    }

    /// The claims of a token that is valid and stands now, with its organization's tier. A
    /// token seen before skips the signature check until it expires, and the standing check
    /// for the key cache's time.
    pub(crate) async fn checked_claims(&self, token: &str) -> AppResult<(Arc<AccessClaims>, Tier)> {
        let hash = plantd_auth::hash_key(token);
        let known = self.known_tokens().get(&hash).cloned();
        let claims = match known {
            Some(k)
                if k.claims.exp + plantd_auth::jwt::LEEWAY_SECS
                    <= Timestamp::now().unix_seconds() =>
            {
                self.known_tokens().remove(&hash);
                return Err(AppError::InvalidToken(
                    "the access token has expired".into(),
                ));
            }
            Some(k) if k.checked.elapsed() < self.config().key_cache_ttl => {
                return Ok((k.claims, k.standing.map_err(AppError::InvalidToken)?));
            }
            Some(k) => k.claims,
            None => Arc::new(self.verify_access_token(token).await?),
        };
        let standing = self.standing(&claims).await?;
        let mut known = self.known_tokens();
        if known.len() >= MAX_KNOWN_TOKENS {
            known.clear();
        }
        known.insert(
            hash,
            KnownToken {
                claims: claims.clone(),
                standing: standing.clone(),
                checked: Instant::now(),
            },
        );
        drop(known);
        Ok((claims, standing.map_err(AppError::InvalidToken)?))
    }

    /// The caller an access token stands for.
    pub async fn access_token_caller(&self, token: &str) -> AppResult<Caller> {
        let (claims, tier) = self.checked_claims(token).await?;
        let user_id = (claims.sub != claims.client_id).then(|| claims.sub.clone());
        let scopes = scope::parse_spaced(&claims.scope)
            .map_err(|e| AppError::InvalidToken(format!("the token's scope is invalid: {e}")))?;
        Ok(Caller {
            credential: Credential::AccessToken {
                client_id: claims.client_id.clone(),
            },
            org_id: claims.org.clone(),
            user_id,
            scopes,
            tier,
        })
    }
}

pub(crate) async fn generate_pem() -> AppResult<String> {
    tokio::task::spawn_blocking(plantd_auth::jwt::generate_rsa_pem)
        .await
        .map_err(|e| AppError::internal("key generation stopped", e))?
        .map_err(|e| AppError::internal("cannot create a signing key", e))
}
