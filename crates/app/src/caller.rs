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
    /// A connector of the platform writing what its data source collects (no request: its
    /// batches are not audited one by one; the source's changes and states are).
    Connector {
        data_source_id: String,
    },
    /// A device logged in on the MQTT device channel with its own credentials (its batches are
    /// not audited one by one either; its login is).
    Device {
        id: String,
    },
    /// The live scorer writing a deployed model's scores (the model's deployment is audited;
    /// its batches are not).
    Model,
    /// An edge agent's generated data (`plantd edge` in `demo` mode: no device connections).
    Generator,
}

impl Credential {
    /// How a refusal names the bucket of the caller's own limit.
    pub(crate) fn limit_label(&self, acts_for_user: bool) -> &'static str {
        match self {
            Credential::ApiKey { .. } => "API key",
            Credential::AccessToken { .. } if !acts_for_user => "OAuth client",
            Credential::Connector { .. } => "connector",
            Credential::Device { .. } => "device",
            _ => "user",
        }
    }

    /// What a refusal for a missing scope says.
    pub(crate) fn lacks_scope(&self, required: plantd_model::Scope) -> String {
        match self {
            Credential::AccessToken { .. } => {
                format!("this access token lacks the '{required}' scope this operation needs")
            }
            Credential::Session { .. } => {
                format!("your role does not grant the '{required}' scope this operation needs")
            }
            Credential::ApiKey { .. } => {
                format!("this API key lacks the '{required}' scope this operation needs")
            }
            Credential::Connector { .. } => {
                format!("a connector lacks the '{required}' scope this operation needs")
            }
            Credential::Device { .. } => {
                format!("a device lacks the '{required}' scope this operation needs")
            }
            Credential::Model => {
                format!("the live scorer lacks the '{required}' scope this operation needs")
            }
            Credential::Generator => {
                format!("the demo generator lacks the '{required}' scope this operation needs")
            }
        }
    }
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
            Credential::Connector { data_source_id } => data_source_id,
            Credential::Device { id } => id,
            Credential::Model => "live-scorer",
            Credential::Generator => "demo-generator",
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
            (Credential::Connector { data_source_id }, None) => format!("source:{data_source_id}"),
            (Credential::Device { id }, None) => format!("device:{id}"),
            (Credential::Model, None) => "live-scorer".into(),
            (Credential::Generator, None) => "demo-generator".into(),
        }
    }

    pub fn actor_type(&self) -> ActorType {
        match self.credential {
            Credential::ApiKey { .. } => ActorType::ApiKey,
            Credential::Session { .. } => ActorType::Session,
            Credential::AccessToken { .. } => ActorType::OAuthToken,
            Credential::Connector { .. } => ActorType::Connector,
            Credential::Device { .. } => ActorType::Device,
            Credential::Model | Credential::Generator => ActorType::Platform,
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
