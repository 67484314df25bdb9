//! Telemetry points (SPEC 2.3, 4.2): validation of ingested points, qualities, aggregations and
//! intervals. Storage and queries live in `plantd-tsdb`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{FieldError, Timestamp};

/// The largest batch one `POST /v1/telemetry` may carry.
pub const MAX_BATCH: usize = 10_000;
/// Longest asset id or tag name.
pub const MAX_NAME_LEN: usize = 128;
/// Points may be at most this far in the future (clock skew of devices).
pub const MAX_FUTURE_MS: i64 = 24 * 3_600_000;
/// At most this many bad points are listed in one refusal.
pub const MAX_DETAILS: usize = 100;

/// How much a value can be trusted. API ingest is `good`; connectors map protocol status codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Quality {
    Good,
    Uncertain,
    Bad,
}

impl Quality {
    pub fn code(self) -> i16 {
        match self {
            Quality::Good => 0,
            Quality::Uncertain => 1,
            Quality::Bad => 2,
        }
    }
    pub fn from_code(code: i64) -> Self {
        match code {
            0 => Quality::Good,
            1 => Quality::Uncertain,
            _ => Quality::Bad,
        }
    }
}

/// A point that passed validation.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub asset_id: String,
    pub tag_name: String,
    pub value: f64,
    pub timestamp: Timestamp,
    pub quality: Quality,
    pub data_source_id: Option<String>,
}

/// Checks an asset id or tag name: 1..=128 characters, no control characters, no comma (tag lists
/// are comma-separated), no leading or trailing space.
pub fn check_name(text: &str) -> Result<(), &'static str> {
    if text.is_empty() {
        Err("must not be empty")
    } else if text.chars().count() > MAX_NAME_LEN {
        Err("must be at most 128 characters")
    } else if text.chars().any(|c| c.is_control() || c == ',') {
        Err("must not contain control characters or commas")
    } else if text.trim() != text {
        Err("must not start or end with whitespace")
    } else {
        Ok(())
    }
}

/// Validates raw ingest points, naming every bad field (`data[3].value`), at most
/// [`MAX_DETAILS`] of them. `oldest` is the oldest timestamp accepted (the raw retention).
pub fn validate_points(
    items: &[Value],
    batch_source: Option<&str>,
    now: Timestamp,
    oldest: Timestamp,
) -> Result<Vec<Point>, Vec<FieldError>> {
    let mut errors = Vec::new();
    let mut points = Vec::with_capacity(items.len());
    if items.is_empty() {
        errors.push(FieldError::new("data", "must contain at least one point"));
    }
    if items.len() > MAX_BATCH {
        errors.push(FieldError::new(
            "data",
            format!("must contain at most {MAX_BATCH} points per request"),
        ));
        return Err(errors);
    }
    for (i, item) in items.iter().enumerate() {
        if errors.len() >= MAX_DETAILS {
            break;
        }
        let at = |f: &str| format!("data[{i}].{f}");
        let Some(obj) = item.as_object() else {
            errors.push(FieldError::new(format!("data[{i}]"), "must be an object"));
            continue;
        };
        let before = errors.len();
        for key in obj.keys() {
            if ![
                "asset_id",
                "tag_name",
                "value",
                "timestamp",
                "data_source_id",
            ]
            .contains(&key.as_str())
            {
                errors.push(FieldError::new(at(key), "is not a known field"));
            }
        }
        let mut name = |field: &str| -> Option<String> {
            match obj.get(field) {
                Some(Value::String(s)) => match check_name(s) {
                    Ok(()) => Some(s.clone()),
                    Err(m) => {
                        errors.push(FieldError::new(at(field), m));
                        None
                    }
                },
                None | Some(Value::Null) => {
                    errors.push(FieldError::new(at(field), "is required"));
                    None
                }
                Some(_) => {
                    errors.push(FieldError::new(at(field), "must be a string"));
                    None
                }
            }
        };
        let asset_id = name("asset_id");
        let tag_name = name("tag_name");
        let value = match obj.get("value") {
            Some(Value::Number(n)) => n.as_f64().filter(|v| v.is_finite()),
            _ => None,
        };
        if value.is_none() {
            errors.push(FieldError::new(
                at("value"),
                "is required and must be a finite number",
            ));
        }
        let timestamp = match obj.get("timestamp") {
            Some(Value::String(s)) => match Timestamp::parse(s) {
                Ok(t) if t.millis() > now.millis() + MAX_FUTURE_MS => {
                    errors.push(FieldError::new(
                        at("timestamp"),
                        "must not be more than 24 hours in the future",
                    ));
                    None
                }
                Ok(t) if t < oldest => {
                    errors.push(FieldError::new(
                        at("timestamp"),
                        format!("is older than the raw data retention (oldest accepted: {oldest})"),
                    ));
                    None
                }
                Ok(t) => Some(t),
                Err(m) => {
                    errors.push(FieldError::new(at("timestamp"), m));
                    None
                }
            },
            None | Some(Value::Null) => {
                errors.push(FieldError::new(at("timestamp"), "is required"));
                None
            }
            Some(_) => {
                errors.push(FieldError::new(
                    at("timestamp"),
                    "must be an RFC 3339 string",
                ));
                None
            }
        };
        let data_source_id = match obj.get("data_source_id") {
            None | Some(Value::Null) => batch_source.map(str::to_string),
            Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
            Some(_) => {
                errors.push(FieldError::new(
                    at("data_source_id"),
                    "must be a data source id",
                ));
                None
            }
        };
        if errors.len() == before
            && let (Some(asset_id), Some(tag_name), Some(value), Some(timestamp)) =
                (asset_id, tag_name, value, timestamp)
        {
            points.push(Point {
                asset_id,
                tag_name,
                value,
                timestamp,
                quality: Quality::Good,
                data_source_id,
            });
        }
    }
    if errors.is_empty() {
        Ok(points)
    } else {
        Err(errors)
    }
}

/// Aggregation functions of `GET /v1/telemetry`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Aggregation {
    Avg,
    Min,
    Max,
    Sum,
    Count,
}

/// Bucket widths of `GET /v1/telemetry`, aligned to UTC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, utoipa::ToSchema)]
pub enum Interval {
    #[serde(rename = "1m")]
    Minute,
    #[serde(rename = "5m")]
    FiveMinutes,
    #[serde(rename = "1h")]
    Hour,
    #[serde(rename = "1d")]
    Day,
}

impl Interval {
    pub fn millis(self) -> i64 {
        match self {
            Interval::Minute => 60_000,
            Interval::FiveMinutes => 300_000,
            Interval::Hour => 3_600_000,
            Interval::Day => 86_400_000,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_every_bad_point() {
        let now = Timestamp::parse("2026-06-01T00:00:00Z").unwrap();
        let oldest = Timestamp::from_millis(now.millis() - 7 * 86_400_000);
        let items = vec![
            json!({"asset_id": "P1", "tag_name": "T", "value": 1.5, "timestamp": "2026-05-31T23:00:00Z"}),
            json!({"asset_id": "", "tag_name": "T", "value": 1, "timestamp": "2026-05-31T23:00:00Z"}),
            json!({"asset_id": "P1", "tag_name": "a,b", "value": "x", "timestamp": "yesterday"}),
            json!({"asset_id": "P1", "tag_name": "T", "value": 1, "timestamp": "2020-01-01T00:00:00Z", "extra": 1}),
            json!(5),
        ];
        let errors = validate_points(&items, None, now, oldest).unwrap_err();
        let fields: Vec<_> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "data[1].asset_id",
                "data[2].tag_name",
                "data[2].value",
                "data[2].timestamp",
                "data[3].extra",
                "data[3].timestamp",
                "data[4]"
            ]
        );
        let ok = validate_points(&items[..1], Some("ds"), now, oldest).unwrap();
        assert_eq!(ok[0].data_source_id.as_deref(), Some("ds"));
        assert!(validate_points(&[], None, now, oldest).is_err());
    }
}
