//! The tables a BI query can name, with their columns: the contract documented in
//! `docs/api.md` ("BI tables"). No secret is a column (key hashes, passwords, tokens, a data
//! source's config).

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use std::sync::Arc;

/// A column's kind as a record table's source fills it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Text,
    /// An asset or tag name of telemetry (text; stored as string views, cheap to repeat).
    Name,
    Int,
    Float,
    Bool,
    /// A timestamp (UTC, milliseconds); sources give RFC 3339 text.
    Time,
    /// The quality of a point: `good`, `uncertain` or `bad`.
    Quality,
}

impl Kind {
    fn data_type(self) -> DataType {
        match self {
            Kind::Text => DataType::Utf8,
            Kind::Name => DataType::Utf8View,
            Kind::Int => DataType::Int64,
            Kind::Float => DataType::Float64,
            Kind::Bool => DataType::Boolean,
            Kind::Time => DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            Kind::Quality => {
                DataType::Dictionary(Box::new(DataType::Int8), Box::new(DataType::Utf8))
            }
        }
    }

    /// The name `docs/api.md` and the console show.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Text | Kind::Name | Kind::Quality => "text",
            Kind::Int => "integer",
            Kind::Float => "double",
            Kind::Bool => "boolean",
            Kind::Time => "timestamp",
        }
    }
}

/// A table of the database `plantd`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Table {
    Telemetry,
    Telemetry1m,
    Telemetry1h,
    Telemetry1d,
    Alerts,
    AlertRules,
    DataSources,
    Devices,
}

/// Every table, in the order the console lists them.
pub const TABLES: [Table; 8] = [
    Table::Telemetry,
    Table::Telemetry1m,
    Table::Telemetry1h,
    Table::Telemetry1d,
    Table::Alerts,
    Table::AlertRules,
    Table::DataSources,
    Table::Devices,
];

const TELEMETRY: &[(&str, Kind)] = &[
    ("timestamp", Kind::Time),
    ("asset_id", Kind::Name),
    ("tag_name", Kind::Name),
    ("value", Kind::Float),
    ("quality", Kind::Quality),
];

const ROLLUP: &[(&str, Kind)] = &[
    ("bucket", Kind::Time),
    ("asset_id", Kind::Name),
    ("tag_name", Kind::Name),
    ("count", Kind::Int),
    ("sum", Kind::Float),
    ("min", Kind::Float),
    ("max", Kind::Float),
    ("avg", Kind::Float),
];

const ALERTS: &[(&str, Kind)] = &[
    ("id", Kind::Text),
    ("rule_id", Kind::Text),
    ("rule_name", Kind::Text),
    ("severity", Kind::Text),
    ("status", Kind::Text),
    ("data_source_id", Kind::Text),
    ("asset_id", Kind::Text),
    ("tag_name", Kind::Text),
    ("value", Kind::Float),
    ("threshold", Kind::Float),
    ("operator", Kind::Text),
    ("title", Kind::Text),
    ("message", Kind::Text),
    ("source", Kind::Text),
    ("triggered_at", Kind::Time),
    ("acknowledged_at", Kind::Time),
    ("acknowledged_by", Kind::Text),
    ("resolved_at", Kind::Time),
    ("resolved_by", Kind::Text),
];

const ALERT_RULES: &[(&str, Kind)] = &[
    ("id", Kind::Text),
    ("name", Kind::Text),
    ("severity", Kind::Text),
    ("data_source_id", Kind::Text),
    ("asset_id", Kind::Text),
    ("condition", Kind::Text),
    ("enabled", Kind::Bool),
    ("auto_resolve", Kind::Bool),
    ("created_at", Kind::Time),
    ("updated_at", Kind::Time),
];

const DATA_SOURCES: &[(&str, Kind)] = &[
    ("id", Kind::Text),
    ("name", Kind::Text),
    ("type", Kind::Text),
    ("endpoint", Kind::Text),
    ("status", Kind::Text),
    ("tag_count", Kind::Int),
    ("enabled", Kind::Bool),
    ("last_error", Kind::Text),
    ("created_at", Kind::Time),
    ("updated_at", Kind::Time),
];

const DEVICES: &[(&str, Kind)] = &[
    ("id", Kind::Text),
    ("name", Kind::Text),
    ("serial_number", Kind::Text),
    ("status", Kind::Text),
    ("last_seen_at", Kind::Time),
    ("firmware_version", Kind::Text),
    ("asset_id", Kind::Text),
    ("tags", Kind::Text),
    ("created_at", Kind::Time),
    ("updated_at", Kind::Time),
];

/// A table's name and columns as clients see them (the console's table list).
#[derive(Clone, Debug, serde::Serialize)]
pub struct TableInfo {
    pub name: &'static str,
    pub columns: Vec<ColumnInfo>,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct ColumnInfo {
    pub name: &'static str,
    #[serde(rename = "type")]
    pub kind: &'static str,
}

impl Table {
    pub fn name(self) -> &'static str {
        match self {
            Table::Telemetry => "telemetry",
            Table::Telemetry1m => "telemetry_1m",
            Table::Telemetry1h => "telemetry_1h",
            Table::Telemetry1d => "telemetry_1d",
            Table::Alerts => "alerts",
            Table::AlertRules => "alert_rules",
            Table::DataSources => "data_sources",
            Table::Devices => "devices",
        }
    }

    pub fn parse(name: &str) -> Option<Table> {
        TABLES.into_iter().find(|t| t.name() == name)
    }

    pub fn columns(self) -> &'static [(&'static str, Kind)] {
        match self {
            Table::Telemetry => TELEMETRY,
            Table::Telemetry1m | Table::Telemetry1h | Table::Telemetry1d => ROLLUP,
            Table::Alerts => ALERTS,
            Table::AlertRules => ALERT_RULES,
            Table::DataSources => DATA_SOURCES,
            Table::Devices => DEVICES,
        }
    }

    /// The rollup width in milliseconds of a rollup table.
    pub(crate) fn rollup_width(self) -> Option<i64> {
        match self {
            Table::Telemetry1m => Some(60_000),
            Table::Telemetry1h => Some(3_600_000),
            Table::Telemetry1d => Some(86_400_000),
            _ => None,
        }
    }

    pub fn schema(self) -> SchemaRef {
        let fields: Vec<Field> = self
            .columns()
            .iter()
            .map(|(name, kind)| {
                // Telemetry's own columns are never null; records' optional fields may be.
                let nullable = !matches!(
                    self,
                    Table::Telemetry | Table::Telemetry1m | Table::Telemetry1h | Table::Telemetry1d
                );
                Field::new(*name, kind.data_type(), nullable)
            })
            .collect();
        Arc::new(Schema::new(fields))
    }

    pub fn info(self) -> TableInfo {
        TableInfo {
            name: self.name(),
            columns: self
                .columns()
                .iter()
                .map(|(name, k)| ColumnInfo {
                    name,
                    kind: k.name(),
                })
                .collect(),
        }
    }
}
