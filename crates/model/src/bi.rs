//! BI (SPEC 2.10, 4.11): an organization's BI configuration, saved queries, the history of
//! executions and row-level-security rules (fields "not shown" in the SPEC decided in
//! docs/api.md, "BI").

use serde::{Deserialize, Serialize};

use crate::Timestamp;
use crate::org::Role;

/// The only database BI SQL runs against.
pub const DATABASE: &str = "plantd";

/// An organization's BI configuration (SPEC 2.10; defaults of SPEC 8.6).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct BiConfig {
    /// Dashboards may be embedded with guest tokens (off until an administrator turns it on).
    pub bi_embed_enabled: bool,
    /// `POST /v1/bi/query/execute` answers (false: 403).
    pub sql_lab_enabled: bool,
    pub chart_builder_enabled: bool,
    /// Queries of the organization running at once, 1 to 50.
    pub max_concurrent_queries: u32,
    /// A query running longer is cancelled, 1 to 3,600.
    pub query_timeout_seconds: u32,
    /// Rows an answer holds at most, 1 to 1,000,000.
    pub row_limit: u32,
    /// The origins (`https://portal.example.com`) whose pages may frame embedded dashboards
    /// (CSP `frame-ancestors`); empty: only this server's own pages. At most 20.
    pub embed_allowed_origins: Vec<String>,
}

impl Default for BiConfig {
    fn default() -> Self {
        Self {
            bi_embed_enabled: false,
            sql_lab_enabled: true,
            chart_builder_enabled: true,
            max_concurrent_queries: 5,
            query_timeout_seconds: 300,
            row_limit: 10_000,
            embed_allowed_origins: Vec::new(),
        }
    }
}

/// A saved query.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct SavedQuery {
    pub id: String,
    pub name: String,
    pub sql: String,
    pub database: String,
    pub description: String,
    /// The user (else the API key) that saved it.
    pub created_by: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// How an execution ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Success,
    /// The SQL was refused or failed (`error` says why).
    Error,
    /// Cancelled at the organization's `query_timeout_seconds`.
    Timeout,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Success => "success",
            RunStatus::Error => "error",
            RunStatus::Timeout => "timeout",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "success" => Some(RunStatus::Success),
            "error" => Some(RunStatus::Error),
            "timeout" => Some(RunStatus::Timeout),
            _ => None,
        }
    }
}

/// One execution of SQL (the history).
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct QueryRun {
    pub id: String,
    /// Who ran it: the user, else the API key.
    pub executed_by: String,
    pub sql: String,
    pub database: String,
    pub status: RunStatus,
    pub error: Option<String>,
    /// Rows answered (after the row limit).
    pub row_count: u64,
    pub execution_time_ms: u64,
    pub executed_at: Timestamp,
}

/// A row-level-security rule: rows of `table` that callers whose role is in `roles` see are
/// those where `clause` holds.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct RlsRule {
    pub id: String,
    pub name: String,
    pub table: String,
    /// A SQL condition over the table's columns.
    pub clause: String,
    /// The member roles it applies to.
    pub roles: Vec<Role>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}
