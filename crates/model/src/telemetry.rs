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
    /// The name as the API writes it (`good`, `uncertain`, `bad`).
    pub fn as_str(self) -> &'static str {
        match self {
            Quality::Good => "good",
            Quality::Uncertain => "uncertain",
            Quality::Bad => "bad",
        }
    }
    pub fn code(self) -> i16 {
        match self {
            Quality::Good => 0,
            Quality::Uncertain => 1,
            Quality::Bad => 2,
        }
    }
    /// A quality by its API name.
    pub fn parse(s: &str) -> Option<Self> {
        [Quality::Good, Quality::Uncertain, Quality::Bad]
            .into_iter()
            .find(|q| q.as_str() == s)
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

/// What a point that names no asset or data source belongs to: nothing for `POST /v1/telemetry`
/// (a point must name its asset); a device's asset and the device for the MQTT device channel.
/// A batch's own `data_source_id` wins over the door's.
#[derive(Clone, Copy, Debug, Default)]
pub struct PointDefaults<'a> {
    pub asset_id: Option<&'a str>,
    pub data_source_id: Option<&'a str>,
}

/// Validates raw ingest points, naming every bad field (`data[3].value`), at most
/// [`MAX_DETAILS`] of them. `oldest` is the oldest timestamp accepted (the raw retention).
/// `batch_source` is the batch's `data_source_id` or the door's default.
pub fn validate_points(
    items: &[Value],
    batch_source: Option<&str>,
    default_asset: Option<&str>,
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
                "quality",
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
        let asset_id = match (obj.get("asset_id"), default_asset) {
            (None | Some(Value::Null), Some(a)) => Some(a.to_string()),
            _ => name("asset_id"),
        };
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
            Some(Value::String(s)) => match check_timestamp(s, now, oldest) {
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
        let quality = match obj.get("quality") {
            None | Some(Value::Null) => Some(Quality::Good),
            Some(Value::String(s)) => Quality::parse(s),
            Some(_) => None,
        };
        if quality.is_none() {
            errors.push(FieldError::new(
                at("quality"),
                "must be good, uncertain or bad",
            ));
        }
        if errors.len() == before
            && let (Some(asset_id), Some(tag_name), Some(value), Some(timestamp), Some(quality)) =
                (asset_id, tag_name, value, timestamp, quality)
        {
            points.push(Point {
                asset_id,
                tag_name,
                // -0 is stored as 0: SQLite cannot keep the sign of zero.
                value: value + 0.0,
                timestamp,
                quality,
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

/// A point as sent, borrowed from the request body (the fast path of ingest).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PointRef<'a> {
    #[serde(default, borrow)]
    asset_id: Option<&'a str>,
    tag_name: &'a str,
    value: f64,
    timestamp: &'a str,
    #[serde(default, borrow)]
    data_source_id: Option<&'a str>,
    /// Optional: `good` (the default), `uncertain` or `bad` (an edge agent forwards its
    /// connectors' quality).
    #[serde(default, borrow)]
    quality: Option<&'a str>,
}

/// An ingest body as sent, borrowed from the request.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchRef<'a> {
    #[serde(borrow)]
    data: Vec<PointRef<'a>>,
    #[serde(default, borrow)]
    data_source_id: Option<&'a str>,
}

/// A valid ingest body read straight from its bytes: the points and the batch's data source.
pub type ParsedBatch = (Vec<Point>, Option<String>);

/// The fast path of ingest: parses a body that is well-formed and entirely valid straight into
/// points, with the same checks as [`validate_points`]. Returns `None` at the first thing that
/// is off (malformed JSON, an escaped string, a missing or unknown field, a bad value): the
/// caller then goes the detailed way, which names every bad field. Strings borrowed from the
/// body cannot hold U+0000 (JSON allows it only escaped).
pub fn parse_batch(
    bytes: &[u8],
    defaults: PointDefaults<'_>,
    now: Timestamp,
    oldest: Timestamp,
) -> Option<ParsedBatch> {
    let batch: BatchRef<'_> = serde_json::from_slice(bytes).ok()?;
    if batch.data.is_empty() || batch.data.len() > MAX_BATCH {
        return None;
    }
    let batch_source = batch
        .data_source_id
        .or(defaults.data_source_id)
        .map(str::to_string);
    let mut points = Vec::with_capacity(batch.data.len());
    // Consecutive points usually share names: their checks are not repeated.
    let mut last_names: (&str, &str) = ("", "");
    for p in &batch.data {
        let asset_id = p.asset_id.or(defaults.asset_id)?;
        if (asset_id, p.tag_name) != last_names {
            check_name(asset_id).ok()?;
            check_name(p.tag_name).ok()?;
            last_names = (asset_id, p.tag_name);
        }
        if !p.value.is_finite() {
            return None;
        }
        let timestamp = check_timestamp(p.timestamp, now, oldest).ok()?;
        let data_source_id = match p.data_source_id {
            None => batch_source.clone(),
            Some("") => return None,
            Some(ds) => Some(ds.to_string()),
        };
        let quality = match p.quality {
            None => Quality::Good,
            Some(q) => Quality::parse(q)?,
        };
        points.push(Point {
            asset_id: asset_id.to_string(),
            tag_name: p.tag_name.to_string(),
            value: p.value + 0.0,
            timestamp,
            quality,
            data_source_id,
        });
    }
    Some((points, batch_source))
}

/// Checks an ingested timestamp: RFC 3339, at most [`MAX_FUTURE_MS`] ahead of `now`, not older
/// than `oldest` (the raw retention).
pub fn check_timestamp(text: &str, now: Timestamp, oldest: Timestamp) -> Result<Timestamp, String> {
    let t = Timestamp::parse(text)?;
    check_time(t, now, oldest).map(|()| t)
}

/// Checks a point's time: at most [`MAX_FUTURE_MS`] ahead of `now`, not older than `oldest`.
pub fn check_time(t: Timestamp, now: Timestamp, oldest: Timestamp) -> Result<(), String> {
    if t.millis() > now.millis() + MAX_FUTURE_MS {
        Err("must not be more than 24 hours in the future".to_string())
    } else if t < oldest {
        Err(format!(
            "is older than the raw data retention (oldest accepted: {oldest})"
        ))
    } else {
        Ok(())
    }
}

/// Checks a point that did not come through a request body (connectors) with the rules of
/// [`validate_points`]: names, a finite value, a timestamp within the accepted range. The
/// message names the point.
pub fn check_point(p: &Point, now: Timestamp, oldest: Timestamp) -> Result<(), String> {
    check_name(&p.asset_id).map_err(|e| format!("asset_id '{}' {e}", p.asset_id))?;
    check_name(&p.tag_name).map_err(|e| format!("tag_name '{}' {e}", p.tag_name))?;
    if !p.value.is_finite() {
        return Err(format!(
            "{}/{} is not a finite number",
            p.asset_id, p.tag_name
        ));
    }
    check_time(p.timestamp, now, oldest).map_err(|e| {
        format!(
            "{}/{} stamped {}: {e}",
            p.asset_id,
            p.tag_name,
            p.timestamp.to_rfc3339()
        )
    })
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
        let errors = validate_points(&items, None, None, now, oldest).unwrap_err();
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
        let ok = validate_points(&items[..1], Some("ds"), None, now, oldest).unwrap();
        assert_eq!(ok[0].data_source_id.as_deref(), Some("ds"));
        assert!(validate_points(&[], None, None, now, oldest).is_err());
    }

    #[test]
    fn fast_path_agrees_with_the_detailed_one() {
        let now = Timestamp::parse("2026-06-01T00:00:00Z").unwrap();
        let oldest = Timestamp::from_millis(now.millis() - 7 * 86_400_000);
        let good = json!({"data_source_id": "ds", "data": [
            {"asset_id": "P1", "tag_name": "T", "value": 1.5, "timestamp": "2026-05-31T23:00:00Z"},
            {"asset_id": "P1", "tag_name": "T", "value": -3, "timestamp": "2026-05-31T23:00:01+02:00", "data_source_id": "other"},
            {"asset_id": "P2", "tag_name": "Vib X", "value": 1e300, "timestamp": "2026-05-31T22:00:00.123Z"}
        ]});
        let bytes = serde_json::to_vec(&good).unwrap();
        let (fast, source) = parse_batch(&bytes, PointDefaults::default(), now, oldest).unwrap();
        let items = good["data"].as_array().unwrap();
        assert_eq!(
            fast,
            validate_points(items, Some("ds"), None, now, oldest).unwrap()
        );
        assert_eq!(source.as_deref(), Some("ds"));
        // Anything off goes the detailed way (None), which names the field.
        for bad in [
            r#"{"data": []}"#,
            r#"{"data": [{"asset_id": "P\u0000", "tag_name": "T", "value": 1, "timestamp": "2026-05-31T23:00:00Z"}]}"#,
            r#"{"data": [{"asset_id": "P\u0041", "tag_name": "T", "value": 1, "timestamp": "2026-05-31T23:00:00Z"}]}"#,
            r#"{"data": [{"asset_id": "P", "tag_name": "T", "value": "1", "timestamp": "2026-05-31T23:00:00Z"}]}"#,
            r#"{"data": [{"asset_id": "P", "tag_name": "T", "value": 1e999, "timestamp": "2026-05-31T23:00:00Z"}]}"#,
            r#"{"data": [{"asset_id": "P", "tag_name": "T", "value": 1, "timestamp": "2026-06-03T00:00:00Z"}]}"#,
            r#"{"data": [{"asset_id": "P", "tag_name": "T", "value": 1, "timestamp": "2020-01-01T00:00:00Z"}]}"#,
            r#"{"data": [{"asset_id": "P", "tag_name": "a,b", "value": 1, "timestamp": "2026-05-31T23:00:00Z"}]}"#,
            r#"{"data": [{"asset_id": "P", "tag_name": "T", "value": 1, "timestamp": "2026-05-31T23:00:00Z", "x": 1}]}"#,
            r#"{"data": [{"asset_id": "P", "tag_name": "T", "value": 1, "timestamp": "2026-05-31T23:00:00Z", "data_source_id": ""}]}"#,
            r#"{"data": [{"asset_id": "P", "tag_name": "T", "value": 1, "timestamp": "2026-05-31T23:00:00Z"}], "y": 2}"#,
            r#"[1]"#,
            " ",
        ] {
            assert!(
                parse_batch(bad.as_bytes(), PointDefaults::default(), now, oldest).is_none(),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_door_names_the_asset_and_source_of_points_that_do_not() {
        let now = Timestamp::parse("2026-06-01T00:00:00Z").unwrap();
        let oldest = Timestamp::from_millis(now.millis() - 7 * 86_400_000);
        let body = json!({"data": [
            {"tag_name": "T", "value": 1, "timestamp": "2026-05-31T23:00:00Z"},
            {"asset_id": "P2", "tag_name": "T", "value": 2, "timestamp": "2026-05-31T23:00:00Z", "data_source_id": "ds"}
        ]});
        let bytes = serde_json::to_vec(&body).unwrap();
        let device = PointDefaults {
            asset_id: Some("dev-asset"),
            data_source_id: Some("dev"),
        };
        let (fast, source) = parse_batch(&bytes, device, now, oldest).unwrap();
        assert_eq!(source.as_deref(), Some("dev"));
        let named: Vec<_> = fast
            .iter()
            .map(|p| (p.asset_id.as_str(), p.data_source_id.as_deref()))
            .collect();
        assert_eq!(named, [("dev-asset", Some("dev")), ("P2", Some("ds"))]);
        let items = body["data"].as_array().unwrap();
        assert_eq!(
            fast,
            validate_points(items, Some("dev"), Some("dev-asset"), now, oldest).unwrap()
        );
        // Without a default a point must name its asset, both ways.
        assert!(parse_batch(&bytes, PointDefaults::default(), now, oldest).is_none());
        let errors = validate_points(items, None, None, now, oldest).unwrap_err();
        assert_eq!(errors[0].field, "data[0].asset_id");
    }
}
