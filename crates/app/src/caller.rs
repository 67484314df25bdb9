//! Who is calling a use case: the credential that authenticated (an API key, a login session or
//! an OAuth access token), its organization, user, scopes and tier. Every use case that reads
//! or changes an organization's data takes the caller's organization, so tenancy is decided
//! here and not by the caller's input.

use plantd_model::audit::ActorType;
use plantd_model::{Scope, Tier};

/// What authenticated a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Credential {
    ApiKey {
        id: String,
    },
    /// A login session (bearer token or cookie).
    Session {
        id: String,
        cookie: bool,
    },
    /// An OAuth 2.0 access token (JWT) issued to `client_id`.
    AccessToken {
        client_id: String,
    },
}

#[derive(Clone, Debug)]
pub struct Caller {
    pub credential: Credential,
    pub org_id: String,
    /// The user the credential acts for, when it has one.
    pub user_id: Option<String>,
    pub scopes: Vec<Scope>,
    pub tier: Tier,
}

impl Caller {
    /// Who did something, as recorded on the resource (`acknowledged_by`, ...): the user, else
    /// the key or client.
    pub fn actor(&self) -> &str {
        self.user_id.as_deref().unwrap_or(self.credential_id())
    }

    /// The credential's id as the audit trail records it: the key, the session, or the OAuth
    /// client of a token.
    pub fn credential_id(&self) -> &str {
        match &self.credential {
            Credential::ApiKey { id } | Credential::Session { id, .. } => id,
            Credential::AccessToken { client_id, .. } => client_id,
        }
    }

    /// What rate limits and request counts are kept per: the API key; for sessions and user
    /// tokens the user (all their sessions and applications share one budget); for
    /// client-credentials tokens the client.
    pub fn counter_id(&self) -> String {
        match (&self.credential, &self.user_id) {
            (Credential::ApiKey { id }, _) => id.clone(),
            (_, Some(user)) => format!("user:{user}"),
            (Credential::Session { id, .. }, None) => format!("session:{id}"),
            (Credential::AccessToken { client_id, .. }, None) => format!("client:{client_id}"),
        }
    }

    pub fn actor_type(&self) -> ActorType {
        match self.credential {
            Credential::ApiKey { .. } => ActorType::ApiKey,
            Credential::Session { .. } => ActorType::Session,
            Credential::AccessToken { .. } => ActorType::OAuthToken,
        }
    }

    /// The session the request came with, if any.
    pub fn session_id(&self) -> Option<&str> {
        match &self.credential {
            Credential::Session { id, .. } => Some(id),
            _ => None,
        }
    }

    /// Whether a session cookie authenticated the request (mutations then need the CSRF check).
    pub fn by_cookie(&self) -> bool {
        matches!(self.credential, Credential::Session { cookie: true, .. })
    }
}
