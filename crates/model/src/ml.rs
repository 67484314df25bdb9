//! ML datasets (SPEC 2.7, 4.5, 9): datasets with typed columns, their label classes and row
//! labels, versions, validation rules and results, and column profiles, as clients see them;
//! the rules that need no storage (names, colours, the version rule, a rule's config). The
//! computation over rows (CSV, chunks, profiles, validation) is `plantd-ml`'s. Decisions where
//! SPEC says "not shown" are in docs/api.md ("ML datasets").

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Timestamp;
use crate::telemetry::{Aggregation, Interval};
use crate::validation::Validator;

/// A column's type; every cell of the column is of it or empty (`null`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ColumnType {
    /// A finite double.
    Number,
    /// `true` or `false`.
    Boolean,
    /// RFC 3339, kept as written.
    Timestamp,
    String,
}

impl ColumnType {
    pub fn as_str(self) -> &'static str {
        match self {
            ColumnType::Number => "number",
            ColumnType::Boolean => "boolean",
            ColumnType::Timestamp => "timestamp",
            ColumnType::String => "string",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Number, Self::Boolean, Self::Timestamp, Self::String]
            .into_iter()
            .find(|t| t.as_str() == s)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Column {
    pub name: String,
    #[serde(rename = "type")]
    pub column_type: ColumnType,
}

/// The most columns a dataset has.
pub const MAX_COLUMNS: usize = 500;

/// Checks declared or uploaded columns: 1..500, names 1..100 characters, unique.
pub fn check_columns(v: &mut Validator, field: &str, columns: &[Column]) {
    v.check(
        !columns.is_empty() && columns.len() <= MAX_COLUMNS,
        field,
        format!("must hold 1 to {MAX_COLUMNS} columns"),
    );
    for (i, c) in columns.iter().enumerate() {
        let len = c.name.chars().count();
        v.check(
            (1..=100).contains(&len) && c.name.trim() == c.name,
            &format!("{field}[{i}].name"),
            "must be 1 to 100 characters without leading or trailing spaces",
        );
        v.check(
            !columns[..i].iter().any(|o| o.name == c.name),
            &format!("{field}[{i}].name"),
            format!("'{}' names two columns", c.name),
        );
    }
}

/// The bytes of a CSV header line naming `columns` (`a,b,c` and its newline): counted once in a
/// dataset's and a version's `file_size_bytes`, beside the bytes of the rows.
pub fn header_bytes(columns: &[Column]) -> u64 {
    columns.iter().map(|c| c.name.len() as u64 + 1).sum()
}

/// A dataset made from telemetry: one row per bucket, one column per asset and tag.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TelemetrySource {
    pub asset_ids: Vec<String>,
    pub tags: Vec<String>,
    pub start: Timestamp,
    pub end: Timestamp,
    pub interval: Interval,
    #[serde(default = "default_aggregation")]
    pub aggregation: Aggregation,
}

fn default_aggregation() -> Aggregation {
    Aggregation::Avg
}

/// The most rows a dataset made from telemetry has.
pub const MAX_TELEMETRY_ROWS: i64 = 1_000_000;

impl TelemetrySource {
    pub fn check(&self, v: &mut Validator) {
        v.check(
            (1..=20).contains(&self.asset_ids.len()),
            "telemetry.asset_ids",
            "must name 1 to 20 assets",
        );
        v.check(
            !self.tags.is_empty() && self.asset_ids.len() * self.tags.len() <= 100,
            "telemetry.tags",
            "must name at least one tag, and at most 100 series (assets x tags)",
        );
        for (i, a) in self.asset_ids.iter().enumerate() {
            v.check(
                !a.is_empty() && !self.asset_ids[..i].contains(a),
                &format!("telemetry.asset_ids[{i}]"),
                "must be a non-empty asset id, named once",
            );
        }
        for (i, t) in self.tags.iter().enumerate() {
            v.check(
                !t.is_empty() && !self.tags[..i].contains(t),
                &format!("telemetry.tags[{i}]"),
                "must be a non-empty tag name, named once",
            );
        }
        v.check(
            self.end.millis() > self.start.millis(),
            "telemetry.end",
            "must be after start",
        );
        let buckets = (self.end.millis() - self.start.millis()) / self.interval.millis();
        v.check(
            buckets <= MAX_TELEMETRY_ROWS,
            "telemetry.interval",
            format!(
                "the range holds {buckets} buckets of this interval; at most {MAX_TELEMETRY_ROWS}"
            ),
        );
    }

    /// The dataset's columns: `timestamp`, then per asset and tag a number column named by the
    /// tag (one asset) or `asset_id/tag`.
    pub fn columns(&self) -> Vec<Column> {
        let mut out = vec![Column {
            name: "timestamp".into(),
            column_type: ColumnType::Timestamp,
        }];
        for a in &self.asset_ids {
            for t in &self.tags {
                let name = if self.asset_ids.len() == 1 {
                    t.clone()
                } else {
                    format!("{a}/{t}")
                };
                out.push(Column {
                    name,
                    column_type: ColumnType::Number,
                });
            }
        }
        out
    }
}

/// Where a dataset's rows came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum DatasetSource {
    Upload,
    Telemetry(TelemetrySource),
}

/// Rows of the working copy by label state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct LabelCounts {
    pub labeled: u64,
    pub skipped: u64,
    pub flagged: u64,
}

/// A dataset as clients see it.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Dataset {
    pub id: String,
    #[serde(skip)]
    pub org_id: String,
    pub name: String,
    pub description: String,
    pub columns: Vec<Column>,
    pub row_count: u64,
    /// What the working copy takes in storage (its compressed chunks).
    pub size_bytes: u64,
    /// The size of the working copy as CSV: a header line and each row as it was uploaded.
    pub file_size_bytes: u64,
    /// The newest version, `null` before the first.
    pub current_version: Option<String>,
    pub source: DatasetSource,
    pub labels: LabelCounts,
    pub created_at: Timestamp,
    pub created_by: String,
    pub updated_at: Timestamp,
}

/// A label class of a dataset.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct LabelClass {
    pub id: String,
    #[serde(skip)]
    pub dataset_id: String,
    pub name: String,
    /// `#rrggbb`.
    pub color: String,
    pub description: String,
    /// Rows of the working copy labelled with the class.
    pub count: u64,
    pub created_at: Timestamp,
}

/// The most label classes of a dataset.
pub const MAX_LABEL_CLASSES: u64 = 50;

/// The colours a class gets when none is given, in turn.
pub const CLASS_COLORS: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

pub fn check_label_class(v: &mut Validator, name: &str, color: &str, description: &str) {
    let len = name.chars().count();
    v.check(
        (1..=64).contains(&len) && name.trim() == name,
        "name",
        "must be 1 to 64 characters without leading or trailing spaces",
    );
    v.check(
        color.len() == 7
            && color.starts_with('#')
            && color[1..].chars().all(|c| c.is_ascii_hexdigit()),
        "color",
        "must be a colour #rrggbb",
    );
    v.check(
        description.chars().count() <= 500,
        "description",
        "must be at most 500 characters",
    );
}

/// A row's label state in the working copy.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct RowLabel {
    pub row_id: u64,
    pub label_class_id: Option<String>,
    pub skipped: bool,
    pub flagged: bool,
}

/// An immutable snapshot of a dataset's rows and labels.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct DatasetVersion {
    /// `major.minor` (docs/api.md, "Versions").
    pub version: String,
    #[serde(skip)]
    pub generation: i64,
    pub created_at: Timestamp,
    pub created_by: String,
    pub row_count: u64,
    pub file_size_bytes: u64,
    /// Rows labelled in the version.
    pub label_count: u64,
    pub notes: String,
}

/// The version after `previous`: `1.0` first; the next major when rows changed since, else the
/// next minor.
pub fn next_version(previous: Option<&str>, rows_changed: bool) -> String {
    let Some((major, minor)) = previous.and_then(|p| {
        let (a, b) = p.split_once('.')?;
        Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?))
    }) else {
        return "1.0".into();
    };
    if rows_changed {
        format!("{}.0", major + 1)
    } else {
        format!("{major}.{}", minor + 1)
    }
}

/// What a validation rule checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RuleType {
    Range,
    NotNull,
    Unique,
    AllowedValues,
    Regex,
}

impl RuleType {
    pub fn as_str(self) -> &'static str {
        match self {
            RuleType::Range => "range",
            RuleType::NotNull => "not_null",
            RuleType::Unique => "unique",
            RuleType::AllowedValues => "allowed_values",
            RuleType::Regex => "regex",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Range,
            Self::NotNull,
            Self::Unique,
            Self::AllowedValues,
            Self::Regex,
        ]
        .into_iter()
        .find(|t| t.as_str() == s)
    }
}

/// A validation rule of a dataset.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ValidationRule {
    pub id: String,
    #[serde(skip)]
    pub dataset_id: String,
    pub name: String,
    pub rule_type: RuleType,
    pub column: String,
    #[schema(value_type = Object)]
    pub config: Value,
    pub created_at: Timestamp,
}

/// The most validation rules of a dataset.
pub const MAX_RULES: u64 = 100;

/// A rule's violations in a validation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ValidationIssue {
    pub rule_id: String,
    pub rule_name: String,
    pub column: String,
    pub rule_type: RuleType,
    pub violations: u64,
    /// The first violating row ids (at most [`MAX_ISSUE_ROWS`]).
    pub rows: Vec<u64>,
    /// There are more violating rows than `rows` names.
    pub rows_truncated: bool,
}

/// The most row ids an issue names.
pub const MAX_ISSUE_ROWS: usize = 100;

/// The result of `POST /v1/ml/datasets/{id}/validate`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ValidationResult {
    pub valid: bool,
    pub issues: Vec<ValidationIssue>,
    /// 100 x the share of rows that violate no rule, one decimal.
    pub quality_score: f64,
    /// A >= 95, B >= 85, C >= 70, D >= 50, else F.
    pub grade: String,
    pub row_count: u64,
    pub validated_at: Timestamp,
}

/// The grade of a quality score.
pub fn grade(score: f64) -> &'static str {
    match score {
        s if s >= 95.0 => "A",
        s if s >= 85.0 => "B",
        s if s >= 70.0 => "C",
        s if s >= 50.0 => "D",
        _ => "F",
    }
}

/// A bin of a number column's histogram: `[start, end)`, the last one closed.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Bin {
    pub start: f64,
    pub end: f64,
    pub count: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct TopValue {
    pub value: String,
    pub count: u64,
}

/// A column's profile.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ColumnProfile {
    pub name: String,
    #[serde(rename = "type")]
    pub column_type: ColumnType,
    /// Non-empty cells.
    pub count: u64,
    pub nulls: u64,
    pub distinct: u64,
    #[schema(value_type = Option<Object>)]
    pub min: Option<Value>,
    #[schema(value_type = Option<Object>)]
    pub max: Option<Value>,
    pub mean: Option<f64>,
    /// Sample standard deviation (n - 1), as pandas.
    pub std: Option<f64>,
    /// Number columns: ten equal-width bins between min and max.
    pub histogram: Vec<Bin>,
    /// Other columns: the ten most frequent values.
    pub top_values: Vec<TopValue>,
}

/// `GET /v1/ml/datasets/{id}/quality`.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Quality {
    pub row_count: u64,
    pub columns: Vec<ColumnProfile>,
    pub last_validation: Option<ValidationResult>,
}

/// `GET /v1/ml/datasets/{id}/versions/compare`.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Comparison {
    pub v1: String,
    pub v2: String,
    pub rows_added: u64,
    pub rows_removed: u64,
    /// Rows of both sides (by row id) whose values differ.
    pub rows_changed: u64,
    /// Rows whose label, skip or flag differs.
    pub labels_changed: u64,
    pub columns: Vec<ColumnChange>,
}

#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ColumnChange {
    pub name: String,
    #[serde(rename = "type")]
    pub column_type: ColumnType,
    pub before: ColumnProfile,
    pub after: ColumnProfile,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_count_up_by_what_changed() {
        assert_eq!(next_version(None, false), "1.0");
        assert_eq!(next_version(None, true), "1.0");
        assert_eq!(next_version(Some("1.0"), false), "1.1");
        assert_eq!(next_version(Some("1.1"), true), "2.0");
        assert_eq!(next_version(Some("9.12"), false), "9.13");
    }

    #[test]
    fn grades_by_score() {
        assert_eq!(grade(100.0), "A");
        assert_eq!(grade(95.0), "A");
        assert_eq!(grade(94.9), "B");
        assert_eq!(grade(70.0), "C");
        assert_eq!(grade(50.0), "D");
        assert_eq!(grade(49.9), "F");
    }
}
