//! People and applications signing in (SPEC 5): login sessions, the scopes a role grants, and
//! OAuth 2.0 applications. Lifetimes are decided in docs/api.md ("Identity").

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

use crate::org::Role;
use crate::{Scope, Timestamp};

/// A session ends after this long without a request (12 hours: a shift).
pub const SESSION_IDLE_SECS: i64 = 12 * 3_600;
/// A session ends this long after login whatever happens (7 days).
pub const SESSION_ABSOLUTE_SECS: i64 = 7 * 86_400;
/// Invitation links work for 7 days, password-reset links for 1 hour; each once.
pub const INVITATION_SECS: i64 = 7 * 86_400;
pub const RESET_SECS: i64 = 3_600;
/// Access tokens live 1 hour (SPEC 5.3); authorization codes 10 minutes; refresh tokens 30
/// days (rotated at each use).
pub const ACCESS_TOKEN_SECS: i64 = 3_600;
pub const CODE_SECS: i64 = 600;
pub const REFRESH_TOKEN_SECS: i64 = 30 * 86_400;

/// The scopes a member's role grants to a session (docs/api.md has the table).
pub fn role_scopes(role: Role) -> Vec<Scope> {
    match role {
        Role::Owner | Role::Admin => Scope::ALL.to_vec(),
        Role::Member => vec![
            Scope::ReadAssets,
            Scope::WriteAssets,
            Scope::ReadTelemetry,
            Scope::ReadAlerts,
            Scope::WriteAlerts,
        ],
    }
}

/// A login session as its owner sees it (never its token).
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct Session {
    pub id: String,
    pub user_id: String,
    pub organization_id: String,
    pub created_at: Timestamp,
    pub last_seen_at: Timestamp,
    /// When it ends without further use: the earlier of idle and absolute expiry.
    pub expires_at: Timestamp,
    pub client_ip: Option<String>,
    pub user_agent: Option<String>,
    /// Whether this is the session the request was made with.
    pub current: bool,
}

/// A stored session with its lifetimes.
#[derive(Clone, Debug)]
pub struct SessionRecord {
    pub id: String,
    pub user_id: String,
    pub org_id: String,
    pub created_at: Timestamp,
    pub last_seen_at: Timestamp,
    /// The absolute end.
    pub expires_at: Timestamp,
    pub client_ip: Option<String>,
    pub user_agent: Option<String>,
}

impl SessionRecord {
    /// When the session ends if unused from now on.
    pub fn ends_at(&self) -> Timestamp {
        let idle_end = self.last_seen_at.millis() + SESSION_IDLE_SECS * 1000;
        Timestamp::from_millis(idle_end.min(self.expires_at.millis()))
    }

    pub fn view(&self, current: Option<&str>) -> Session {
        Session {
            id: self.id.clone(),
            user_id: self.user_id.clone(),
            organization_id: self.org_id.clone(),
            created_at: self.created_at,
            last_seen_at: self.last_seen_at,
            expires_at: self.ends_at(),
            client_ip: self.client_ip.clone(),
            user_agent: self.user_agent.clone(),
            current: current == Some(self.id.as_str()),
        }
    }
}

/// What an OAuth application is, which decides how it authenticates (RFC 6749 2.1): a web
/// application keeps a secret (confidential); mobile and single-page applications cannot, so
/// they use PKCE and no secret (public).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ApplicationType {
    Web,
    Mobile,
    Spa,
}

impl ApplicationType {
    pub fn as_str(self) -> &'static str {
        match self {
            ApplicationType::Web => "web",
            ApplicationType::Mobile => "mobile",
            ApplicationType::Spa => "spa",
        }
    }

    /// Whether it holds a client secret.
    pub fn is_confidential(self) -> bool {
        self == ApplicationType::Web
    }
}

impl fmt::Display for ApplicationType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ApplicationType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "web" => Ok(ApplicationType::Web),
            "mobile" => Ok(ApplicationType::Mobile),
            "spa" => Ok(ApplicationType::Spa),
            _ => Err(format!("unknown application type '{s}'")),
        }
    }
}

/// A registered OAuth 2.0 client of an organization.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct OAuthApplication {
    pub id: String,
    pub name: String,
    pub client_id: String,
    pub application_type: ApplicationType,
    pub redirect_uris: Vec<String>,
    /// The scopes the application may be granted.
    pub scopes: Vec<Scope>,
    pub organization_id: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}
