//! BI (SPEC 2.10, 4.11): an organization's BI configuration, saved queries, the history of
//! executions and row-level-security rules (fields "not shown" in the SPEC decided in
//! docs/api.md, "BI").

use serde::{Deserialize, Serialize};

use crate::Timestamp;
use crate::dashboard::{DisplayOptions, WidgetType};
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

// ---------- a dashboard's data at one moment (embedded dashboards and reports) ----------

/// What a dashboard shows at one moment.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct DashboardData {
    pub dashboard_id: String,
    pub name: String,
    pub description: String,
    /// Grid columns of the layout.
    pub columns: u32,
    pub generated_at: Timestamp,
    /// The dashboard's variables with the value read (`?var-<name>=`, else the default).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub variables: Vec<VariableValue>,
    pub widgets: Vec<WidgetData>,
}

/// A dashboard variable as a view read it.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct VariableValue {
    pub name: String,
    pub label: Option<String>,
    pub value: String,
    /// The values offered (empty: any asset).
    pub options: Vec<String>,
}

/// One widget with what it shows.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct WidgetData {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: WidgetType,
    pub title: String,
    pub x: u32,
    pub y: u32,
    pub w: u32,
    pub h: u32,
    /// The asset read (a variable replaced by its default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub asset_id: Option<String>,
    /// The range shown: `[start, end)`.
    pub start: Timestamp,
    pub end: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub options: Option<DisplayOptions>,
    /// Line charts: one series per tag, `[epoch milliseconds, value]` pairs, oldest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub series: Vec<SeriesData>,
    /// Stats, gauges and tables: the newest value of each tag within the range.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub latest: Vec<LatestValue>,
    /// Alert lists: open (active or acknowledged) alerts, newest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub alerts: Vec<AlertRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Why the widget has no data, when its query failed (the others still show).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct SeriesData {
    pub tag: String,
    /// The bucket width in seconds the points were combined over (0: raw points).
    pub step_secs: i64,
    #[schema(value_type = Vec<Vec<f64>>)]
    pub points: Vec<(i64, f64)>,
}

#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct LatestValue {
    pub tag: String,
    pub value: Option<f64>,
    pub timestamp: Option<Timestamp>,
    pub quality: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct AlertRow {
    pub rule_name: Option<String>,
    pub severity: Option<String>,
    pub status: Option<String>,
    pub asset_id: Option<String>,
    pub tag_name: Option<String>,
    pub value: Option<f64>,
    pub title: Option<String>,
    pub triggered_at: Option<Timestamp>,
}

// ---------- reports ----------

/// What a report is sent as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReportFormat {
    /// A4 pages: title, time range, generation time, each widget (charts as vector graphics,
    /// values and alerts as tables).
    Pdf,
    /// One row per value shown: widget, tag, time, value.
    Csv,
}

impl ReportFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            ReportFormat::Pdf => "pdf",
            ReportFormat::Csv => "csv",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pdf" => Some(ReportFormat::Pdf),
            "csv" => Some(ReportFormat::Csv),
            _ => None,
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            ReportFormat::Pdf => "application/pdf",
            ReportFormat::Csv => "text/csv",
        }
    }
}

/// A scheduled report: a console dashboard mailed on a cron schedule (UTC).
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Report {
    pub id: String,
    pub name: String,
    pub dashboard_id: String,
    /// Five cron fields (minute hour day-of-month month day-of-week), UTC.
    pub schedule: String,
    pub format: ReportFormat,
    pub recipients: Vec<String>,
    pub enabled: bool,
    /// The user (else the API key) that created it: the report reads under that user's
    /// row-level-security rules, as the user's role is when it runs.
    pub created_by: String,
    /// The user whose rules it reads under (none: created with an API key without a user,
    /// under no role's rules).
    #[serde(skip)]
    pub run_as: Option<String>,
    /// The next scheduled run (none while disabled).
    pub next_run_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// What started a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReportTrigger {
    Schedule,
    Manual,
}

impl ReportTrigger {
    pub fn as_str(self) -> &'static str {
        match self {
            ReportTrigger::Schedule => "schedule",
            ReportTrigger::Manual => "manual",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "schedule" => Some(ReportTrigger::Schedule),
            "manual" => Some(ReportTrigger::Manual),
            _ => None,
        }
    }
}

/// How a run ended (or that it is under way).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReportRunStatus {
    Running,
    /// Rendered and accepted by the SMTP relay for every recipient.
    Success,
    /// Not rendered or not sent (`error` says why).
    Error,
}

impl ReportRunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ReportRunStatus::Running => "running",
            ReportRunStatus::Success => "success",
            ReportRunStatus::Error => "error",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "running" => Some(ReportRunStatus::Running),
            "success" => Some(ReportRunStatus::Success),
            "error" => Some(ReportRunStatus::Error),
            _ => None,
        }
    }
}

/// One run of a report.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ReportRun {
    pub id: String,
    pub report_id: String,
    pub trigger: ReportTrigger,
    /// The scheduled time a scheduled run is for.
    pub scheduled_for: Option<Timestamp>,
    pub status: ReportRunStatus,
    pub error: Option<String>,
    pub format: ReportFormat,
    /// Bytes of the file sent.
    pub size_bytes: Option<u64>,
    pub recipients: Vec<String>,
    pub started_at: Timestamp,
    pub finished_at: Option<Timestamp>,
}
