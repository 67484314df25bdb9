//! Alerts (SPEC 2.5, 2.6): severities, condition operators, alert states.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Critical,
    Warning,
    Info,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Critical => "critical",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        [Severity::Critical, Severity::Warning, Severity::Info]
            .into_iter()
            .find(|v| v.as_str() == s)
    }
}

/// How a value is compared with a rule's threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Operator {
    Gt,
    Gte,
    Lt,
    Lte,
    Eq,
    Neq,
}

impl Operator {
    pub fn as_str(self) -> &'static str {
        match self {
            Operator::Gt => "gt",
            Operator::Gte => "gte",
            Operator::Lt => "lt",
            Operator::Lte => "lte",
            Operator::Eq => "eq",
            Operator::Neq => "neq",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        [
            Operator::Gt,
            Operator::Gte,
            Operator::Lt,
            Operator::Lte,
            Operator::Eq,
            Operator::Neq,
        ]
        .into_iter()
        .find(|v| v.as_str() == s)
    }
    /// Whether `value` meets the condition against `threshold` (exact comparison for eq/neq:
    /// values are stored as given).
    pub fn holds(self, value: f64, threshold: f64) -> bool {
        match self {
            Operator::Gt => value > threshold,
            Operator::Gte => value >= threshold,
            Operator::Lt => value < threshold,
            Operator::Lte => value <= threshold,
            Operator::Eq => value == threshold,
            Operator::Neq => value != threshold,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AlertStatus {
    Active,
    Acknowledged,
    Resolved,
}

impl AlertStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            AlertStatus::Active => "active",
            AlertStatus::Acknowledged => "acknowledged",
            AlertStatus::Resolved => "resolved",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        [
            AlertStatus::Active,
            AlertStatus::Acknowledged,
            AlertStatus::Resolved,
        ]
        .into_iter()
        .find(|v| v.as_str() == s)
    }
    /// Active or acknowledged: at most one such alert per rule and asset.
    pub fn is_open(self) -> bool {
        self != AlertStatus::Resolved
    }
}

/// The condition of a rule (SPEC 2.5), with `max_gap_seconds` as an extension.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Condition {
    pub tag_name: String,
    pub operator: Operator,
    pub value: f64,
    pub duration_seconds: i64,
    /// A longer silence between two points restarts the timing.
    pub max_gap_seconds: i64,
}

/// An alert rule as stored, and as the API answers it (without its organization).
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct AlertRule {
    pub id: String,
    #[serde(skip)]
    #[schema(ignore)]
    pub org_id: String,
    pub name: String,
    pub severity: Severity,
    pub data_source_id: String,
    /// Only this asset of the data source; null: every asset.
    pub asset_id: Option<String>,
    pub condition: Condition,
    pub notifications: Vec<String>,
    pub enabled: bool,
    pub auto_resolve: bool,
    pub created_at: crate::Timestamp,
    pub updated_at: crate::Timestamp,
}

/// An alert as stored and returned: raised by a rule (`source` = `rule`, with the rule, data
/// source, tag, value and condition that fired) or created through `POST /v1/alerts` by a script,
/// an edge device or another system (no rule; `source` says who).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Alert {
    pub id: String,
    #[serde(skip)]
    pub org_id: String,
    /// The rule that raised the alert; null for alerts created through the API.
    pub rule_id: Option<String>,
    pub rule_name: Option<String>,
    pub severity: Severity,
    pub status: AlertStatus,
    pub data_source_id: Option<String>,
    pub asset_id: String,
    pub tag_name: Option<String>,
    /// The value of the point that raised the alert (or the value its creator gave).
    pub value: Option<f64>,
    pub threshold: Option<f64>,
    pub operator: Option<Operator>,
    /// What the alert is about: the rule's name, or the title its creator gave.
    #[serde(default)]
    pub title: String,
    /// A longer text from the alert's creator.
    #[serde(default)]
    pub message: Option<String>,
    /// Who raised it: `rule`, or what its creator said (`api` by default).
    #[serde(default = "rule_source")]
    pub source: String,
    /// Labels from the alert's creator.
    #[serde(default)]
    pub tags: Vec<String>,
    /// The channels an alert created through the API is announced on (email, slack, webhook);
    /// a rule's alerts follow their rule's channels and do not list them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notifications: Vec<String>,
    /// While an alert with this key is open, creating one with the same key returns it.
    #[serde(default)]
    pub dedup_key: Option<String>,
    /// When the condition started to hold (the point's timestamp), or the creator's time.
    pub triggered_at: crate::Timestamp,
    pub acknowledged_at: Option<crate::Timestamp>,
    pub acknowledged_by: Option<String>,
    pub note: Option<String>,
    pub resolved_at: Option<crate::Timestamp>,
    /// A user id, or `auto` (the condition cleared) or `rule_deleted`.
    pub resolved_by: Option<String>,
}

/// The `source` of alerts raised by rules.
pub const RULE_SOURCE: &str = "rule";

fn rule_source() -> String {
    RULE_SOURCE.to_string()
}

impl Alert {
    /// What the alert is about, for messages: its title (an alert stored before titles existed
    /// has its rule's name).
    pub fn headline(&self) -> &str {
        if self.title.is_empty() {
            self.rule_name.as_deref().unwrap_or_default()
        } else {
            &self.title
        }
    }
}

/// Notification channels a rule may name.
pub const CHANNELS: [&str; 3] = ["email", "slack", "webhook"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operators_compare_as_named() {
        assert!(Operator::Gt.holds(2.0, 1.0) && !Operator::Gt.holds(1.0, 1.0));
        assert!(Operator::Gte.holds(1.0, 1.0) && !Operator::Gte.holds(0.5, 1.0));
        assert!(Operator::Lt.holds(0.5, 1.0) && !Operator::Lt.holds(1.0, 1.0));
        assert!(Operator::Lte.holds(1.0, 1.0) && !Operator::Lte.holds(1.5, 1.0));
        assert!(Operator::Eq.holds(1.0, 1.0) && !Operator::Eq.holds(1.5, 1.0));
        assert!(Operator::Neq.holds(1.5, 1.0) && !Operator::Neq.holds(1.0, 1.0));
        for op in ["gt", "gte", "lt", "lte", "eq", "neq"] {
            assert_eq!(Operator::parse(op).unwrap().as_str(), op);
        }
        assert!(Operator::parse(">").is_none());
        assert_eq!(Severity::parse("warning"), Some(Severity::Warning));
        assert!(AlertStatus::Acknowledged.is_open() && !AlertStatus::Resolved.is_open());
    }
}
