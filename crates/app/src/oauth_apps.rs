//! OAuth 2.0 applications of an organization: registration (client id, and a client secret
//! for web applications, shown once and stored as SHA-256), redirect URI rules after RFC 9700
//! and RFC 8252, the scopes an application may be granted, secret rotation and deletion (which
//! ends every token issued to it).

use plantd_model::Scope;
use plantd_model::data_source::parse_url;
use plantd_model::identity::{ApplicationType, OAuthApplication};
use plantd_model::page::{Page, Paged};
use plantd_model::validation::Validator;
use plantd_store::NewApplication;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::app::App;
use crate::caller::Caller;
use crate::error::{AppError, AppResult};

/// At most this many redirect URIs per application.
pub const MAX_REDIRECT_URIS: usize = 10;

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewOAuthApplication {
    pub name: String,
    /// Exact URIs the authorization server may redirect to (https, or http on a loopback
    /// address; mobile applications may use a private-use scheme such as `com.example.app:/cb`).
    pub redirect_uris: Vec<String>,
    pub application_type: ApplicationType,
    /// The scopes the application may be granted (default: every scope but `admin`).
    pub scopes: Option<Vec<Scope>>,
}

/// Changes `name`, `redirect_uris` and `scopes`; the type cannot change. Read-only fields of a
/// fetched application are accepted and ignored.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OAuthApplicationUpdate {
    pub name: Option<String>,
    pub redirect_uris: Option<Vec<String>>,
    pub scopes: Option<Vec<Scope>>,
    pub application_type: Option<ApplicationType>,
    #[schema(value_type = Option<String>, read_only)]
    pub id: Option<Value>,
    #[schema(value_type = Option<String>, read_only)]
    pub client_id: Option<Value>,
    #[schema(value_type = Option<String>, read_only)]
    pub organization_id: Option<Value>,
    #[schema(value_type = Option<String>, read_only)]
    pub created_at: Option<Value>,
    #[schema(value_type = Option<String>, read_only)]
    pub updated_at: Option<Value>,
}

/// An application with its secret: only in the answers of create and rotate-secret.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ApplicationWithSecret {
    #[serde(flatten)]
    pub application: OAuthApplication,
    /// Web applications only; shown this once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
}

fn is_loopback(host: &str) -> bool {
    matches!(host, "localhost" | "127.0.0.1" | "::1")
}

/// Checks one redirect URI for an application type.
fn check_redirect_uri(v: &mut Validator, field: &str, uri: &str, kind: ApplicationType) {
    if uri.len() > 2000 || uri.contains('#') || uri.chars().any(char::is_whitespace) {
        v.add(
            field,
            "must be an absolute URI of at most 2000 characters without a fragment or spaces",
        );
        return;
    }
    let scheme = uri
        .split(':')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    if scheme == "https" || scheme == "http" {
        match parse_url(uri) {
            Ok(u) if scheme == "https" || is_loopback(&u.host) => {}
            Ok(_) => v.add(
                field,
                "must use https (http only on a loopback address: localhost, 127.0.0.1, [::1])",
            ),
            Err(e) => v.add(field, e),
        }
        return;
    }
    // RFC 8252 7.1: private-use URI schemes (reverse domain names) for native applications.
    let private_use = scheme.contains('.')
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".+-".contains(c))
        && uri.len() > scheme.len() + 1;
    if kind == ApplicationType::Mobile && private_use {
        return;
    }
    v.add(
        field,
        match kind {
            ApplicationType::Mobile => {
                "must be an https URL, a loopback http URL or a private-use scheme such as com.example.app:/callback"
            }
            _ => "must be an https URL (or http on a loopback address)",
        },
    );
}

fn check_fields(
    v: &mut Validator,
    name: &str,
    uris: &[String],
    scopes: &[Scope],
    kind: ApplicationType,
) {
    v.text("name", name, 200);
    v.check(
        !uris.is_empty(),
        "redirect_uris",
        "must list at least one URI",
    );
    v.check(
        uris.len() <= MAX_REDIRECT_URIS,
        "redirect_uris",
        format!("must list at most {MAX_REDIRECT_URIS} URIs"),
    );
    for (i, uri) in uris.iter().enumerate() {
        check_redirect_uri(v, &format!("redirect_uris[{i}]"), uri, kind);
    }
    v.check(!scopes.is_empty(), "scopes", "must list at least one scope");
}

fn default_scopes() -> Vec<Scope> {
    Scope::ALL
        .into_iter()
        .filter(|s| *s != Scope::Admin)
        .collect()
}

fn normalized(mut scopes: Vec<Scope>) -> Vec<Scope> {
    scopes.sort();
    scopes.dedup();
    scopes
}

impl App {
    pub async fn oauth_applications(
        &self,
        org_id: &str,
        page: Page,
    ) -> AppResult<Paged<OAuthApplication>> {
        Ok(self.store().applications(org_id, page).await?)
    }

    pub async fn oauth_application(&self, org_id: &str, id: &str) -> AppResult<OAuthApplication> {
        Ok(self
            .store()
            .application(org_id, id)
            .await
            .map_err(AppError::missing("OAuth application"))?
            .app)
    }

    pub async fn create_oauth_application(
        &self,
        caller: &Caller,
        new: NewOAuthApplication,
    ) -> AppResult<ApplicationWithSecret> {
        let scopes = normalized(new.scopes.unwrap_or_else(default_scopes));
        let mut v = Validator::new();
        check_fields(
            &mut v,
            &new.name,
            &new.redirect_uris,
            &scopes,
            new.application_type,
        );
        v.finish()?;
        let client_id = format!("pdc-{}", uuid::Uuid::new_v4().simple());
        let secret = new
            .application_type
            .is_confidential()
            .then(|| plantd_auth::generate_secret(plantd_auth::CLIENT_SECRET_PREFIX));
        let application = self
            .store()
            .create_application(NewApplication {
                org_id: &caller.org_id,
                name: new.name.trim(),
                application_type: new.application_type,
                redirect_uris: &new.redirect_uris,
                scopes: &scopes,
                client_id: &client_id,
                secret_hash: secret.as_ref().map(|s| s.hash.as_str()),
                created_by: caller.user_id.as_deref(),
            })
            .await?;
        Ok(ApplicationWithSecret {
            application,
            client_secret: secret.map(|s| s.secret),
        })
    }

    pub async fn update_oauth_application(
        &self,
        org_id: &str,
        id: &str,
        update: OAuthApplicationUpdate,
    ) -> AppResult<OAuthApplication> {
        let current = self.oauth_application(org_id, id).await?;
        let name = update.name.unwrap_or(current.name);
        let uris = update.redirect_uris.unwrap_or(current.redirect_uris);
        let scopes = normalized(update.scopes.unwrap_or(current.scopes));
        let mut v = Validator::new();
        if let Some(kind) = update.application_type {
            v.check(
                kind == current.application_type,
                "application_type",
                "cannot change; register a new application",
            );
        }
        check_fields(&mut v, &name, &uris, &scopes, current.application_type);
        v.finish()?;
        let app = self
            .store()
            .update_application(org_id, id, name.trim(), &uris, &scopes)
            .await
            .map_err(AppError::missing("OAuth application"))?;
        // Tokens already issued keep their scope until they expire (1 hour); refreshes are
        // narrowed to the new scopes.
        Ok(app)
    }

    /// Deletes an application: its codes, grants and refresh tokens go, and its access tokens
    /// stop working.
    pub async fn delete_oauth_application(&self, org_id: &str, id: &str) -> AppResult<()> {
        self.store()
            .delete_application(org_id, id)
            .await
            .map_err(AppError::missing("OAuth application"))?;
        self.forget_token_states();
        Ok(())
    }

    /// Gives a web application a new client secret (returned once); the old one stops working
    /// at once. Public applications have no secret (a conflict).
    pub async fn rotate_client_secret(
        &self,
        org_id: &str,
        id: &str,
    ) -> AppResult<ApplicationWithSecret> {
        let application = self.oauth_application(org_id, id).await?;
        if !application.application_type.is_confidential() {
            return Err(AppError::Conflict(format!(
                "a {} application has no client secret (it uses PKCE)",
                application.application_type
            )));
        }
        let secret = plantd_auth::generate_secret(plantd_auth::CLIENT_SECRET_PREFIX);
        let application = self
            .store()
            .set_client_secret(org_id, id, &secret.hash)
            .await
            .map_err(AppError::missing("OAuth application"))?;
        Ok(ApplicationWithSecret {
            application,
            client_secret: Some(secret.secret),
        })
    }
}
