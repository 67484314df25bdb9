//! What a tag of an asset measures (its unit, description and engineering range), read from
//! the device where it offers them (OPC UA `EngineeringUnits` and `EURange`) or set by a person.

use serde::{Deserialize, Serialize};

use crate::Timestamp;

/// Where a tag's description came from. A person's word is kept: the device's values never
/// overwrite it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TagSource {
    /// Read from the data source (OPC UA properties).
    Device,
    /// Set through the API or the console.
    User,
}

impl TagSource {
    pub fn as_str(self) -> &'static str {
        match self {
            TagSource::Device => "device",
            TagSource::User => "user",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "device" => Some(TagSource::Device),
            "user" => Some(TagSource::User),
            _ => None,
        }
    }
}

/// A tag's engineering range: the values the instrument spans (`low` < `high`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EuRange {
    pub low: f64,
    pub high: f64,
}

/// What a tag measures, as stored.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct TagDescription {
    pub unit: Option<String>,
    pub description: Option<String>,
    pub eu_range: Option<EuRange>,
}

/// A tag of an asset with what it measures (`GET /v1/assets/{asset_id}/tags`).
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Tag {
    pub asset_id: String,
    pub tag_name: String,
    /// `mm/s`, `°C`, ... (null: not known).
    pub unit: Option<String>,
    pub description: Option<String>,
    pub eu_range: Option<EuRange>,
    /// `device` (read from the source), `user` (set by a person) or null (nothing known).
    pub source: Option<TagSource>,
    /// Whether the asset has points of this tag.
    pub has_data: bool,
    pub updated_at: Option<Timestamp>,
}

/// Largest unit text.
pub const MAX_UNIT: usize = 32;
/// Largest description.
pub const MAX_DESCRIPTION: usize = 500;
