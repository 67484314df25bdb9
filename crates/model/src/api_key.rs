//! API keys (SPEC 2.12, 5.1): the record kept for a key. The secret itself is never stored.

use serde::Serialize;

use crate::{Scope, Timestamp};

#[derive(Clone, Debug)]
pub struct ApiKey {
    pub id: String,
    pub org_id: String,
    pub user_id: Option<String>,
    pub name: String,
    /// The first characters of the secret, safe to show (`pdk_AbCd1234`).
    pub prefix: String,
    pub scopes: Vec<Scope>,
    pub created_at: Timestamp,
    pub expires_at: Option<Timestamp>,
    pub last_used_at: Option<Timestamp>,
    pub revoked_at: Option<Timestamp>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ApiKeyStatus {
    Active,
    Expired,
    Revoked,
}

impl ApiKey {
    pub fn status(&self, now: Timestamp) -> ApiKeyStatus {
        if self.revoked_at.is_some() {
            ApiKeyStatus::Revoked
        } else if self.expires_at.is_some_and(|e| e <= now) {
            ApiKeyStatus::Expired
        } else {
            ApiKeyStatus::Active
        }
    }
}

/// Requests made with one key on one UTC day to one endpoint (`GET /v1/data-sources/{id}`).
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct ApiKeyUsageRow {
    pub day: String,
    pub endpoint: String,
    pub requests: u64,
}
