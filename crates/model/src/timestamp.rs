//! Timestamps: stored as Unix milliseconds, written as RFC 3339 UTC with milliseconds, read from
//! any RFC 3339 offset.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use time::{OffsetDateTime, format_description::well_known::Rfc3339};

/// A point in time with millisecond precision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    pub fn now() -> Self {
        Self((OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64)
    }
    pub const fn from_millis(ms: i64) -> Self {
        Self(ms)
    }
    pub const fn millis(self) -> i64 {
        self.0
    }
    pub fn unix_seconds(self) -> i64 {
        self.0.div_euclid(1000)
    }
    /// Parses any RFC 3339 timestamp (any offset); sub-millisecond digits are truncated.
    pub fn parse(text: &str) -> Result<Self, String> {
        let t = OffsetDateTime::parse(text.trim(), &Rfc3339)
            .map_err(|_| "must be an RFC 3339 timestamp, e.g. 2026-01-02T03:04:05Z".to_string())?;
        Ok(Self(
            (t.unix_timestamp_nanos().div_euclid(1_000_000)) as i64,
        ))
    }
    pub fn to_rfc3339(self) -> String {
        if let Some(bytes) = self.rfc3339_bytes() {
            return String::from_utf8_lossy(&bytes).into_owned();
        }
        let ms = self.0.rem_euclid(1000);
        let secs = self.0.div_euclid(1000);
        let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
        let sod = secs.rem_euclid(86_400);
        format!(
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
            sod / 3600,
            sod % 3600 / 60,
            sod % 60
        )
    }

    /// The RFC 3339 text as bytes without formatting machinery (years 0 to 9999; `None`
    /// otherwise), for writers of many timestamps such as the raw export.
    pub fn rfc3339_bytes(self) -> Option<[u8; 24]> {
        let ms = self.0.rem_euclid(1000);
        let secs = self.0.div_euclid(1000);
        let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
        if !(0..=9999).contains(&y) {
            return None;
        }
        let sod = secs.rem_euclid(86_400);
        let mut out = *b"0000-00-00T00:00:00.000Z";
        let mut put = |at: usize, width: usize, mut v: i64| {
            for i in (at..at + width).rev() {
                out[i] = b'0' + (v % 10) as u8;
                v /= 10;
            }
        };
        put(0, 4, y);
        put(5, 2, i64::from(m));
        put(8, 2, i64::from(d));
        put(11, 2, sod / 3600);
        put(14, 2, sod % 3600 / 60);
        put(17, 2, sod % 60);
        put(20, 3, ms);
        Some(out)
    }
    /// The UTC calendar day, as `YYYY-MM-DD`.
    pub fn day(self) -> String {
        let (y, m, d) = civil_from_days(self.0.div_euclid(86_400_000));
        format!("{y:04}-{m:02}-{d:02}")
    }
}

/// Proleptic Gregorian date of a count of days since 1970-01-01 (H. Hinnant's algorithm): integer
/// math only, because timestamps are formatted on every response.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_rfc3339())
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Timestamp::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl utoipa::PartialSchema for Timestamp {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
            .description(Some(
                "RFC 3339 timestamp; UTC with milliseconds in responses",
            ))
            .examples(["2026-01-02T03:04:05.678Z"])
            .into()
    }
}
impl utoipa::ToSchema for Timestamp {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_offsets_and_writes_utc_millis() {
        let t = Timestamp::parse("2026-01-02T05:04:05.678912+02:00").unwrap();
        assert_eq!(t.to_rfc3339(), "2026-01-02T03:04:05.678Z");
        assert_eq!(t.day(), "2026-01-02");
        assert!(Timestamp::parse("2026-01-02").is_err());
        assert!(Timestamp::parse("yesterday").is_err());
    }

    #[test]
    fn formatting_matches_the_time_crate_across_centuries() {
        use time::format_description::well_known::Rfc3339;
        for ms in [
            0_i64,
            951_782_400_000,
            1_709_164_799_999,
            4_107_542_400_123,
            -86_400_001,
            253_402_300_799_999,
        ] {
            let t = OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).unwrap();
            let expected = t.format(&Rfc3339).unwrap();
            let ours = Timestamp::from_millis(ms).to_rfc3339();
            assert_eq!(&ours[..19], &expected[..19], "{ms}");
            assert_eq!(Timestamp::parse(&ours).unwrap().millis(), ms);
        }
        assert_eq!(
            Timestamp::from_millis(1_709_164_800_000).day(),
            "2024-02-29"
        );
        // Past year 9999 the text is longer than the fast path writes.
        assert_eq!(
            Timestamp::from_millis(253_402_300_800_000).to_rfc3339(),
            "10000-01-01T00:00:00.000Z"
        );
    }

    #[test]
    fn round_trips_through_json() {
        let t = Timestamp::from_millis(1_767_225_600_000);
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(json, "\"2026-01-01T00:00:00.000Z\"");
        assert_eq!(serde_json::from_str::<Timestamp>(&json).unwrap(), t);
    }
}
