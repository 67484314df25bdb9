//! The OAuth 2.0 authorization server (SPEC 5.2; RFC 6749, 7636, 7009, 7662, 8414, with the
//! practices of RFC 9700): the authorization request and its approval (codes bound to client,
//! redirect URI and PKCE challenge), the token endpoint's three grants (authorization code,
//! client credentials, rotating refresh tokens with replay detection), revocation,
//! introspection and the server's metadata. Errors are [`OAuthError`]s, answered in the second
//! shape of SPEC 7.

use plantd_model::audit::ActorType;
use plantd_model::identity::{
    ACCESS_TOKEN_SECS, ApplicationType, CODE_SECS, OAuthApplication, REFRESH_TOKEN_SECS,
    role_scopes,
};
use plantd_model::{Scope, Timestamp, scope};
use plantd_store::{ClientRecord, GrantRecord, NewCode, RefreshUse};
use serde::{Deserialize, Serialize};

use crate::access::{Actor, AuditTrail};
use crate::app::App;
use crate::caller::Caller;
use crate::error::{AppError, AppResult};
pub use crate::oauth_error::OAuthError;

type OAuthResult<T> = Result<T, AppError>;

/// The parameters of `GET /oauth/authorize` (serialized again, the given ones only, when the
/// login and consent forms carry them on).
#[derive(Clone, Debug, Default, Deserialize, Serialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AuthorizeQuery {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redirect_uri: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code_challenge: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code_challenge_method: Option<String>,
}

/// Why an authorization request is refused.
#[derive(Debug)]
pub enum AuthorizeRefusal {
    /// The client or redirect URI cannot be trusted: an error page, never a redirect.
    Page(String),
    /// The client and redirect URI are good: the refusal goes back to the client.
    Redirect(String),
}

/// A checked authorization request, ready for the consent page.
#[derive(Clone, Debug)]
pub struct Authorization {
    pub application: OAuthApplication,
    pub redirect_uri: String,
    /// The scopes asked for (the application's when none are named).
    pub scopes: Vec<Scope>,
    pub state: Option<String>,
    pub code_challenge: Option<String>,
}

/// Appends query parameters to a redirect URI (which may have a query of its own).
pub fn redirect_with(uri: &str, params: &[(&str, &str)]) -> String {
    if params.is_empty() {
        return uri.to_string();
    }
    let query = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(params)
        .finish();
    let separator = if uri.contains('?') { '&' } else { '?' };
    format!("{uri}{separator}{query}")
}

/// The parameters of `POST /oauth/token` (form encoded).
#[derive(Clone, Debug, Default, Deserialize, utoipa::ToSchema)]
pub struct TokenRequest {
    /// authorization_code, client_credentials or refresh_token.
    pub grant_type: Option<String>,
    pub code: Option<String>,
    pub redirect_uri: Option<String>,
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    pub code_verifier: Option<String>,
    pub refresh_token: Option<String>,
    pub scope: Option<String>,
}

/// SPEC 5.2's token response.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct TokenResponse {
    pub access_token: String,
    /// Always `Bearer`.
    pub token_type: &'static str,
    /// Seconds: 3600.
    pub expires_in: i64,
    /// Not for client credentials.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// The granted scopes, space separated.
    pub scope: String,
}

/// The parameters of revocation and introspection.
#[derive(Clone, Debug, Default, Deserialize, utoipa::ToSchema)]
pub struct TokenQuery {
    pub token: Option<String>,
    pub token_type_hint: Option<String>,
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
}

fn intersect(a: &[Scope], b: &[Scope]) -> Vec<Scope> {
    a.iter().copied().filter(|s| b.contains(s)).collect()
}

impl App {
    /// Checks an authorization request (RFC 6749 4.1.1, RFC 7636 4.3).
    pub async fn check_authorization(
        &self,
        q: &AuthorizeQuery,
    ) -> Result<Authorization, AuthorizeRefusal> {
        let page = |m: &str| AuthorizeRefusal::Page(m.to_string());
        let client_id = q
            .client_id
            .as_deref()
            .ok_or_else(|| page("the request names no client_id"))?;
        let client = self
            .store()
            .client(client_id)
            .await
            .map_err(|e| {
                tracing::error!(error = %plantd_model::error_chain(&e), "cannot read an OAuth client");
                page("the server could not check the application; try again")
            })?
            .ok_or_else(|| page("no application has this client_id"))?;
        let app = client.app;
        let redirect_uri = match &q.redirect_uri {
            Some(uri) if app.redirect_uris.contains(uri) => uri.clone(),
            Some(_) => {
                return Err(page(
                    "the redirect_uri is not one registered for this application",
                ));
            }
            None if app.redirect_uris.len() == 1 => app.redirect_uris[0].clone(),
            None => {
                return Err(page(
                    "the request names no redirect_uri and the application has several",
                ));
            }
        };
        let state = q.state.clone();
        let issuer = self.issuer();
        let back = |error: &str, description: &str| {
            let mut params = vec![("error", error), ("error_description", description)];
            if let Some(s) = &state {
                params.push(("state", s));
            }
            // RFC 9207: every authorization response names the issuer, errors too.
            params.push(("iss", issuer));
            AuthorizeRefusal::Redirect(redirect_with(&redirect_uri, &params))
        };
        match q.response_type.as_deref() {
            Some("code") => {}
            None => return Err(back("invalid_request", "response_type is required")),
            Some(_) => {
                return Err(back(
                    "unsupported_response_type",
                    "only response_type=code is supported",
                ));
            }
        }
        let scopes = match q.scope.as_deref().map(scope::parse_spaced) {
            None => app.scopes.clone(),
            Some(Err(e)) => return Err(back("invalid_scope", &e)),
            Some(Ok(s)) if s.is_empty() => app.scopes.clone(),
            Some(Ok(s)) => s,
        };
        if let Some(extra) = scopes.iter().find(|s| !app.scopes.contains(s)) {
            return Err(back(
                "invalid_scope",
                &format!("the application may not be granted {extra}"),
            ));
        }
        let code_challenge = match (
            q.code_challenge.as_deref(),
            q.code_challenge_method.as_deref(),
        ) {
            (None, _) if app.application_type != ApplicationType::Web => {
                return Err(back(
                    "invalid_request",
                    "PKCE is required for mobile and single-page applications: send code_challenge with code_challenge_method=S256",
                ));
            }
            (None, Some(_)) => {
                return Err(back(
                    "invalid_request",
                    "code_challenge_method without code_challenge",
                ));
            }
            (None, None) => None,
            (Some(_), Some("S256")) => q.code_challenge.clone(),
            (Some(_), None | Some("plain")) => {
                return Err(back(
                    "invalid_request",
                    "code_challenge_method must be S256 (plain is refused)",
                ));
            }
            (Some(_), Some(_)) => {
                return Err(back(
                    "invalid_request",
                    "code_challenge_method must be S256",
                ));
            }
        };
        if let Some(c) = &code_challenge
            && (c.len() != 43
                || !c
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
        {
            return Err(back(
                "invalid_request",
                "code_challenge must be the base64url SHA-256 of the verifier (43 characters)",
            ));
        }
        Ok(Authorization {
            application: app,
            redirect_uri,
            scopes,
            state,
            code_challenge,
        })
    }

    /// What the user would grant: the scopes asked for that their role has.
    pub fn consented_scopes(auth: &Authorization, caller: &Caller) -> Vec<Scope> {
        intersect(&auth.scopes, &caller.scopes)
    }

    /// The user approved: a code (single use, 10 minutes) bound to the client, redirect URI
    /// and PKCE challenge. Returns where to send the browser. A user of another organization
    /// than the application's cannot approve it.
    pub async fn approve_authorization(
        &self,
        auth: &Authorization,
        caller: &Caller,
    ) -> AppResult<String> {
        let user = caller.user_id.as_deref().ok_or(AppError::NoUser)?;
        if caller.org_id != auth.application.organization_id {
            return Err(AppError::Forbidden(
                "this application belongs to another organization".into(),
            ));
        }
        let scopes = Self::consented_scopes(auth, caller);
        if scopes.is_empty() {
            return Ok(
                self.deny_authorization(auth, "your role grants none of the scopes asked for")
            );
        }
        let secret = plantd_auth::generate_secret(plantd_auth::CODE_PREFIX);
        self.store()
            .create_code(NewCode {
                code_hash: &secret.hash,
                client_id: &auth.application.client_id,
                org_id: &caller.org_id,
                user_id: user,
                redirect_uri: &auth.redirect_uri,
                scope: &scope::join_spaced(&scopes),
                code_challenge: auth.code_challenge.as_deref(),
                expires_at: Timestamp::from_millis(Timestamp::now().millis() + CODE_SECS * 1000),
            })
            .await?;
        let mut params = vec![("code", secret.secret.as_str())];
        if let Some(s) = &auth.state {
            params.push(("state", s));
        }
        params.push(("iss", self.issuer()));
        Ok(redirect_with(&auth.redirect_uri, &params))
    }

    /// The user denied (or could grant nothing): `error=access_denied` back to the client.
    pub fn deny_authorization(&self, auth: &Authorization, why: &str) -> String {
        let mut params = vec![("error", "access_denied"), ("error_description", why)];
        if let Some(s) = &auth.state {
            params.push(("state", s));
        }
        params.push(("iss", self.issuer()));
        redirect_with(&auth.redirect_uri, &params)
    }

    /// Authenticates the client of a token, revocation or introspection request: HTTP Basic
    /// credentials (`client_secret_basic`) or the form's `client_id` and `client_secret`.
    /// The client then acts in the call's audit record (`trail`).
    async fn authenticate_client(
        &self,
        basic_credentials: Option<(String, String)>,
        form_client_id: &Option<String>,
        form_secret: &Option<String>,
        trail: &AuditTrail,
    ) -> OAuthResult<ClientRecord> {
        let basic = basic_credentials.is_some();
        if basic && form_secret.is_some() {
            return Err(OAuthError::invalid_request(
                "use one client authentication method: HTTP Basic or client_secret in the body",
            )
            .into());
        }
        let (client_id, secret) = match basic_credentials {
            Some((id, secret)) => {
                if form_client_id.as_ref().is_some_and(|form| *form != id) {
                    return Err(OAuthError::invalid_request(
                        "client_id differs from the Basic credentials",
                    )
                    .into());
                }
                (id, Some(secret))
            }
            None => (
                form_client_id.clone().ok_or_else(|| {
                    OAuthError::invalid_client(
                        "client authentication is required: send client_id",
                        false,
                    )
                })?,
                form_secret.clone(),
            ),
        };
        let unknown = || OAuthError::invalid_client("unknown client or wrong client secret", basic);
        let client = self.store().client(&client_id).await?.ok_or_else(unknown)?;
        match (&client.secret_hash, secret) {
            (Some(stored), Some(given)) => {
                let given = plantd_auth::hash_key(&given);
                if !plantd_auth::equal_in_constant_time(stored.as_bytes(), given.as_bytes()) {
                    return Err(unknown().into());
                }
            }
            (Some(_), None) => {
                return Err(OAuthError::invalid_client(
                    "this client must authenticate with its client secret",
                    basic,
                )
                .into());
            }
            (None, Some(_)) => {
                return Err(OAuthError::invalid_client(
                    "this public client has no secret; send client_id and PKCE only",
                    basic,
                )
                .into());
            }
            (None, None) => {}
        }
        trail.act_as(Actor {
            org_id: Some(client.app.organization_id.clone()),
            actor_type: ActorType::OAuthClient,
            actor_id: Some(client.app.client_id.clone()),
            user_id: None,
        });
        trail.resource(&client.app.client_id);
        Ok(client)
    }

    /// The token endpoint (RFC 6749 3.2).
    pub async fn token(
        &self,
        req: TokenRequest,
        basic: Option<(String, String)>,
        trail: &AuditTrail,
    ) -> OAuthResult<TokenResponse> {
        let grant_type = req
            .grant_type
            .clone()
            .ok_or_else(|| OAuthError::invalid_request("grant_type is required"))?;
        if !matches!(
            grant_type.as_str(),
            "authorization_code" | "client_credentials" | "refresh_token"
        ) {
            return Err(OAuthError::unsupported_grant_type(format!(
                "grant_type {grant_type} is not supported; use authorization_code, client_credentials or refresh_token"
            ))
            .into());
        }
        let client = self
            .authenticate_client(basic, &req.client_id, &req.client_secret, trail)
            .await?;
        match grant_type.as_str() {
            "authorization_code" => self.exchange_code(&client.app, &req).await,
            "client_credentials" => self.client_credentials(&client.app, &req).await,
            _ => self.refresh(&client.app, &req).await,
        }
    }

    async fn exchange_code(
        &self,
        app: &OAuthApplication,
        req: &TokenRequest,
    ) -> OAuthResult<TokenResponse> {
        let code = req
            .code
            .as_deref()
            .ok_or_else(|| OAuthError::invalid_request("code is required"))?;
        let redirect_uri = req
            .redirect_uri
            .as_deref()
            .ok_or_else(|| OAuthError::invalid_request("redirect_uri is required"))?;
        let hash = plantd_auth::hash_key(code);
        let now = Timestamp::now();
        let bad = |d: &str| AppError::from(OAuthError::invalid_grant(d));
        let record = self
            .store()
            .use_code(&hash, now)
            .await?
            .ok_or_else(|| bad("unknown authorization code"))?;
        if record.used_at.is_some() {
            // RFC 6749 4.1.2: a code used twice revokes what it gave.
            if let Some(grant) = &record.grant_id {
                self.store().revoke_grant(grant).await?;
                self.forget_token_states();
            }
            return Err(bad(
                "the authorization code was already used; the tokens issued from it are revoked",
            ));
        }
        if record.expires_at <= now {
            return Err(bad("the authorization code has expired"));
        }
        if record.client_id != app.client_id {
            return Err(bad("the authorization code was issued to another client"));
        }
        if record.redirect_uri != redirect_uri {
            return Err(bad(
                "redirect_uri differs from the one of the authorization request",
            ));
        }
        match (&record.code_challenge, req.code_verifier.as_deref()) {
            (Some(challenge), Some(verifier)) if plantd_auth::pkce_matches(verifier, challenge) => {
            }
            (Some(_), Some(_)) => {
                return Err(bad("the code_verifier does not match the code_challenge"));
            }
            (Some(_), None) => return Err(bad("code_verifier is required (PKCE)")),
            (None, Some(_)) => return Err(bad("the authorization request had no code_challenge")),
            (None, None) => {}
        }
        let scopes = self
            .current_user_scopes(&record.org_id, &record.user_id, &record.scope, app)
            .await?;
        let grant = self
            .store()
            .create_grant(
                &app.client_id,
                &record.org_id,
                Some(&record.user_id),
                &scope::join_spaced(&scopes),
            )
            .await?;
        self.store().set_code_grant(&hash, &grant.id).await?;
        self.issue(&grant, &scopes, true).await
    }

    /// The scopes a user's grant may carry now: what was granted, within the application's
    /// scopes and the user's current role. A user who left the organization gets none.
    async fn current_user_scopes(
        &self,
        org_id: &str,
        user_id: &str,
        granted: &str,
        app: &OAuthApplication,
    ) -> OAuthResult<Vec<Scope>> {
        let member = self.store().member(org_id, user_id).await.map_err(|_| {
            OAuthError::invalid_grant("the user is no longer a member of the organization")
        })?;
        let granted = scope::parse_spaced(granted)
            .map_err(|e| AppError::internal("a stored grant's scope is unreadable", e))?;
        let scopes = intersect(&intersect(&granted, &app.scopes), &role_scopes(member.role));
        if scopes.is_empty() {
            return Err(OAuthError::invalid_grant("nothing of the granted scope is left").into());
        }
        Ok(scopes)
    }

    async fn client_credentials(
        &self,
        app: &OAuthApplication,
        req: &TokenRequest,
    ) -> OAuthResult<TokenResponse> {
        if !app.application_type.is_confidential() {
            return Err(OAuthError::unauthorized_client(
                "client credentials are for web applications (confidential clients) only",
            )
            .into());
        }
        let scopes = self.requested_scopes(req.scope.as_deref(), &app.scopes)?;
        let grant = self
            .store()
            .create_grant(
                &app.client_id,
                &app.organization_id,
                None,
                &scope::join_spaced(&scopes),
            )
            .await?;
        self.issue(&grant, &scopes, false).await
    }

    /// The scopes asked for (all of `allowed` when none), which must lie within `allowed`.
    fn requested_scopes(&self, asked: Option<&str>, allowed: &[Scope]) -> OAuthResult<Vec<Scope>> {
        let asked = match asked.map(scope::parse_spaced) {
            None => return Ok(allowed.to_vec()),
            Some(Err(e)) => return Err(OAuthError::invalid_scope(e).into()),
            Some(Ok(s)) if s.is_empty() => return Ok(allowed.to_vec()),
            Some(Ok(s)) => s,
        };
        if let Some(extra) = asked.iter().find(|s| !allowed.contains(s)) {
            return Err(OAuthError::invalid_scope(format!(
                "{extra} is beyond what this client may be granted"
            ))
            .into());
        }
        Ok(asked)
    }

    async fn refresh(
        &self,
        app: &OAuthApplication,
        req: &TokenRequest,
    ) -> OAuthResult<TokenResponse> {
        let token = req
            .refresh_token
            .as_deref()
            .ok_or_else(|| OAuthError::invalid_request("refresh_token is required"))?;
        let hash = plantd_auth::hash_key(token);
        let now = Timestamp::now();
        let bad = |d: &str| AppError::from(OAuthError::invalid_grant(d));
        // The client is checked before the token is spent, so another client cannot burn it.
        if let Some(g) = self.store().refresh_token_grant(&hash, now).await?
            && g.client_id != app.client_id
        {
            return Err(bad("the refresh token was issued to another client"));
        }
        let grant = match self.store().use_refresh_token(&hash, now).await? {
            RefreshUse::Rotated(grant) => grant,
            RefreshUse::Replayed { .. } => {
                self.forget_token_states();
                return Err(bad(
                    "the refresh token was already used; every token of its grant is revoked",
                ));
            }
            RefreshUse::Invalid => return Err(bad("unknown, expired or revoked refresh token")),
        };
        if grant.client_id != app.client_id {
            return Err(bad("the refresh token was issued to another client"));
        }
        let user = grant
            .user_id
            .as_deref()
            .ok_or_else(|| bad("this grant has no refresh tokens"))?;
        let current = self
            .current_user_scopes(&grant.org_id, user, &grant.scope, app)
            .await?;
        let scopes = self.requested_scopes(req.scope.as_deref(), &current)?;
        self.issue(&grant, &scopes, true).await
    }

    /// Signs an access token for a grant, with a new refresh token when asked.
    async fn issue(
        &self,
        grant: &GrantRecord,
        scopes: &[Scope],
        refresh: bool,
    ) -> OAuthResult<TokenResponse> {
        let subject = grant.user_id.as_deref().unwrap_or(&grant.client_id);
        let access_token = self
            .sign_access_token(subject, &grant.org_id, scopes, &grant.client_id, &grant.id)
            .await?;
        let refresh_token = if refresh {
            let secret = plantd_auth::generate_secret(plantd_auth::REFRESH_PREFIX);
            let expires =
                Timestamp::from_millis(Timestamp::now().millis() + REFRESH_TOKEN_SECS * 1000);
            self.store()
                .create_refresh_token(&secret.hash, &grant.id, expires)
                .await?;
            Some(secret.secret)
        } else {
            None
        };
        Ok(TokenResponse {
            access_token,
            token_type: "Bearer",
            expires_in: ACCESS_TOKEN_SECS,
            refresh_token,
            scope: scope::join_spaced(scopes),
        })
    }

    /// RFC 7009: revokes a refresh token (its whole grant) or an access token, if the client
    /// owns it. Unknown tokens are answered the same way (nothing to do).
    pub async fn revoke(
        &self,
        q: TokenQuery,
        basic: Option<(String, String)>,
        trail: &AuditTrail,
    ) -> OAuthResult<()> {
        let client = self
            .authenticate_client(basic, &q.client_id, &q.client_secret, trail)
            .await?;
        let token = q
            .token
            .as_deref()
            .ok_or_else(|| OAuthError::invalid_request("token is required"))?;
        if plantd_auth::jwt::looks_like_jwt(token) {
            if let Ok(claims) = self.verify_access_token(token).await
                && claims.client_id == client.app.client_id
            {
                self.store()
                    .revoke_access_token(&claims.jti, Timestamp::from_millis(claims.exp * 1000))
                    .await?;
                self.forget_token_states();
            }
        } else if let Some(grant) = self
            .store()
            .refresh_token_grant(&plantd_auth::hash_key(token), Timestamp::now())
            .await?
            && grant.client_id == client.app.client_id
        {
            self.store().revoke_grant(&grant.id).await?;
            self.forget_token_states();
        }
        Ok(())
    }

    /// RFC 7662: whether a token is active, for a resource server authenticated as a client.
    /// Tokens of another organization than the client's are reported inactive.
    pub async fn introspect(
        &self,
        q: TokenQuery,
        basic: Option<(String, String)>,
        trail: &AuditTrail,
    ) -> OAuthResult<serde_json::Value> {
        let client = self
            .authenticate_client(basic, &q.client_id, &q.client_secret, trail)
            .await?;
        if !client.app.application_type.is_confidential() {
            return Err(OAuthError::invalid_client(
                "introspection is for confidential clients (resource servers)",
                false,
            )
            .into());
        }
        let token = q
            .token
            .as_deref()
            .ok_or_else(|| OAuthError::invalid_request("token is required"))?;
        let inactive = serde_json::json!({ "active": false });
        let org = &client.app.organization_id;
        if plantd_auth::jwt::looks_like_jwt(token) {
            let Ok((claims, _)) = self.checked_claims(token).await else {
                return Ok(inactive);
            };
            if &claims.org != org {
                return Ok(inactive);
            }
            return Ok(serde_json::json!({
                "active": true,
                "token_type": "Bearer",
                "scope": claims.scope,
                "client_id": claims.client_id,
                "sub": claims.sub,
                "org": claims.org,
                "aud": claims.aud,
                "iss": claims.iss,
                "exp": claims.exp,
                "iat": claims.iat,
                "jti": claims.jti,
            }));
        }
        match self
            .store()
            .refresh_token_grant(&plantd_auth::hash_key(token), Timestamp::now())
            .await?
        {
            Some(g) if &g.org_id == org && g.revoked_at.is_none() => Ok(serde_json::json!({
                "active": true,
                "token_type": "refresh_token",
                "scope": g.scope,
                "client_id": g.client_id,
                "sub": g.user_id,
                "org": g.org_id,
                "iss": self.issuer(),
            })),
            _ => Ok(inactive),
        }
    }

    /// RFC 8414 metadata.
    pub fn authorization_server_metadata(&self) -> serde_json::Value {
        let base = self.issuer();
        serde_json::json!({
            "issuer": base,
            "authorization_endpoint": format!("{base}/oauth/authorize"),
            "token_endpoint": format!("{base}/oauth/token"),
            "jwks_uri": format!("{base}/.well-known/jwks.json"),
            "revocation_endpoint": format!("{base}/oauth/revoke"),
            "introspection_endpoint": format!("{base}/oauth/introspect"),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "client_credentials", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "none"],
            "revocation_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "none"],
            "introspection_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
            "scopes_supported": Scope::ALL.map(Scope::as_str),
            "authorization_response_iss_parameter_supported": true,
            "service_documentation": format!("{base}/v1/docs"),
        })
    }
}
