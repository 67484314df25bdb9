//! Audit records (SPEC 4.13; record fields "not shown" there, decided in docs/api.md).

use serde::{Deserialize, Serialize};

use crate::Timestamp;

#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Critical,
}

impl Severity {
    pub const ALL: [Severity; 3] = [Severity::Info, Severity::Warning, Severity::Critical];
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Severity::ALL.into_iter().find(|x| x.as_str() == s)
    }
}

#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct AuditRecord {
    pub id: String,
    pub timestamp: Timestamp,
    /// `api_key`, `user` or `anonymous`.
    pub actor_type: String,
    /// The API key id (or user id) that made the request, when known.
    pub actor_id: Option<String>,
    /// The user the key acts for, when known.
    pub user_id: Option<String>,
    /// Area of the product: `data_sources`, `api_keys`, `organization`, `members`, `users`, ...
    pub category: String,
    /// What was attempted: `data_source.create`, `api_key.rotate`, ...
    pub event_type: String,
    pub severity: Severity,
    /// `success` or `failure`.
    pub outcome: String,
    pub resource_type: String,
    pub resource_id: Option<String>,
    pub method: String,
    pub path: String,
    pub status_code: u16,
    /// The error code of a refused request (`validation_error`, `authorization_error`, ...).
    pub error_code: Option<String>,
    pub client_ip: Option<String>,
    pub user_agent: Option<String>,
    pub request_id: String,
}
