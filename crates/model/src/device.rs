//! Fleet (SPEC 2.8, 4.7): devices, groups, enrollment tokens, commands and heartbeats, with
//! the rules that need no storage: a device's MQTT topics, the heartbeat's figures, command
//! states. Decisions where SPEC says "not shown" are in docs/api.md ("Fleet").

use serde::{Deserialize, Serialize};

use crate::Timestamp;
use crate::validation::Validator;

/// A device's connection state: `unknown` until its first contact, `online` from a heartbeat
/// or message, `offline` once none came for the offline delay (180 s by default).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum DeviceStatus {
    Online,
    Offline,
    Unknown,
}

impl DeviceStatus {
    pub const ALL: [DeviceStatus; 3] = [
        DeviceStatus::Online,
        DeviceStatus::Offline,
        DeviceStatus::Unknown,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceStatus::Online => "online",
            DeviceStatus::Offline => "offline",
            DeviceStatus::Unknown => "unknown",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        DeviceStatus::ALL.into_iter().find(|x| x.as_str() == s)
    }
}

/// A registered device as clients see it (read back by the region's other nodes from a node
/// event; `org_id` travels beside it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Device {
    pub id: String,
    #[serde(skip)]
    pub org_id: String,
    pub name: String,
    pub serial_number: String,
    pub status: DeviceStatus,
    pub last_seen_at: Option<Timestamp>,
    pub firmware_version: Option<String>,
    pub group_ids: Vec<String>,
    pub tags: Vec<String>,
    #[schema(value_type = Object)]
    pub metadata: serde_json::Value,
    /// The asset the device's telemetry belongs to (by default the device id).
    pub asset_id: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A group of devices.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct DeviceGroup {
    pub id: String,
    pub name: String,
    pub description: String,
    pub device_count: u64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// An enrollment token as listed: never its secret.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct EnrollmentToken {
    pub id: String,
    /// The secret's first characters, to tell tokens apart.
    pub prefix: String,
    pub group_id: Option<String>,
    pub tags: Vec<String>,
    pub expires_at: Option<Timestamp>,
    /// Absent: unlimited until expiry.
    pub max_uses: Option<u64>,
    pub uses: u64,
    pub revoked_at: Option<Timestamp>,
    pub created_at: Timestamp,
}

impl EnrollmentToken {
    /// Why the token cannot enroll a device now, if it cannot: the error code a client acts
    /// on and the message.
    pub fn refusal(&self, now: Timestamp) -> Option<(&'static str, &'static str)> {
        if self.revoked_at.is_some() {
            return Some((
                "enrollment_token_revoked",
                "the enrollment token was revoked",
            ));
        }
        if self.expires_at.is_some_and(|e| e <= now) {
            return Some((
                "enrollment_token_expired",
                "the enrollment token has expired",
            ));
        }
        if self.max_uses.is_some_and(|m| self.uses >= m) {
            return Some((
                "enrollment_token_used_up",
                "the enrollment token has been used its maximum number of times",
            ));
        }
        None
    }
}

/// Where a command is: `queued` until the device has it, `sent` once delivered, then
/// `succeeded` or `failed` as the device answers, or `expired` when its time to live ran out
/// first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum CommandStatus {
    Queued,
    Sent,
    Succeeded,
    Failed,
    Expired,
}

impl CommandStatus {
    pub const ALL: [CommandStatus; 5] = [
        CommandStatus::Queued,
        CommandStatus::Sent,
        CommandStatus::Succeeded,
        CommandStatus::Failed,
        CommandStatus::Expired,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            CommandStatus::Queued => "queued",
            CommandStatus::Sent => "sent",
            CommandStatus::Succeeded => "succeeded",
            CommandStatus::Failed => "failed",
            CommandStatus::Expired => "expired",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        CommandStatus::ALL.into_iter().find(|x| x.as_str() == s)
    }
    /// Whether the command still waits for the device.
    pub fn is_open(self) -> bool {
        matches!(self, CommandStatus::Queued | CommandStatus::Sent)
    }
}

/// A command for a device, exactly as delivered on its command topic.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Command {
    pub id: String,
    pub device_id: String,
    pub command: String,
    #[schema(value_type = Object)]
    pub params: serde_json::Value,
    pub status: CommandStatus,
    #[schema(value_type = Option<Object>)]
    pub result: Option<serde_json::Value>,
    pub created_at: Timestamp,
    pub sent_at: Option<Timestamp>,
    pub completed_at: Option<Timestamp>,
    pub expires_at: Timestamp,
}

/// One entry of a device's status history.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct StatusChange {
    pub status: DeviceStatus,
    pub at: Timestamp,
}

/// The figures of a heartbeat, all optional (`{}` is a valid heartbeat). Each number is also
/// stored as a telemetry point of the device's asset under its field name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Heartbeat {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_percent: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_percent: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk_percent: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature_c: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uptime_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub firmware_version: Option<String>,
}

impl Heartbeat {
    /// The numbers with their tag names, as stored in telemetry.
    pub fn figures(&self) -> Vec<(&'static str, f64)> {
        [
            ("cpu_percent", self.cpu_percent),
            ("memory_percent", self.memory_percent),
            ("disk_percent", self.disk_percent),
            ("temperature_c", self.temperature_c),
            ("uptime_seconds", self.uptime_seconds),
        ]
        .into_iter()
        .filter_map(|(n, v)| v.map(|v| (n, v)))
        .collect()
    }

    /// Percentages within 0..=100, finite numbers, uptime at least 0, a firmware version of
    /// at most 64 characters.
    pub fn check(&self, v: &mut Validator) {
        for (name, value) in self.figures() {
            v.check(value.is_finite(), name, "must be a finite number");
            if name.ends_with("_percent") {
                v.check(
                    (0.0..=100.0).contains(&value),
                    name,
                    "must be between 0 and 100",
                );
            }
        }
        if let Some(u) = self.uptime_seconds {
            v.check(u >= 0.0, "uptime_seconds", "must be at least 0");
        }
        if let Some(f) = &self.firmware_version {
            v.text("firmware_version", f, 64);
        }
    }
}

/// The MQTT topics of one device (docs/api.md, "The MQTT device channel"): it publishes
/// telemetry, heartbeats, command results and OTA step reports, and subscribes to its commands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct DeviceTopics {
    pub telemetry: String,
    pub heartbeat: String,
    pub commands: String,
    pub command_results: String,
    /// Where the device reports the steps of an OTA update.
    pub ota: String,
    /// Where the device says what its tags measure (an edge agent: units, ranges, descriptions).
    pub tags: String,
}

/// The topic prefix of every device topic.
pub const TOPIC_ROOT: &str = "plantd/devices";

impl DeviceTopics {
    pub fn of(device_id: &str) -> Self {
        Self {
            telemetry: format!("{TOPIC_ROOT}/{device_id}/telemetry"),
            heartbeat: format!("{TOPIC_ROOT}/{device_id}/heartbeat"),
            commands: format!("{TOPIC_ROOT}/{device_id}/commands"),
            command_results: format!("{TOPIC_ROOT}/{device_id}/command-results"),
            ota: format!("{TOPIC_ROOT}/{device_id}/ota"),
            tags: format!("{TOPIC_ROOT}/{device_id}/tags"),
        }
    }
}

/// What a device's message on one of its topics is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceTopic {
    Telemetry,
    Heartbeat,
    Commands,
    CommandResults,
    Ota,
    Tags,
}

/// The device and kind of a device topic (`plantd/devices/{id}/{kind}`), or `None` for any
/// other topic (wildcards included).
pub fn parse_topic(topic: &str) -> Option<(&str, DeviceTopic)> {
    let rest = topic.strip_prefix(TOPIC_ROOT)?.strip_prefix('/')?;
    let (device, kind) = rest.split_once('/')?;
    if device.is_empty() || device.contains(['+', '#']) {
        return None;
    }
    let kind = match kind {
        "telemetry" => DeviceTopic::Telemetry,
        "heartbeat" => DeviceTopic::Heartbeat,
        "commands" => DeviceTopic::Commands,
        "command-results" => DeviceTopic::CommandResults,
        "ota" => DeviceTopic::Ota,
        "tags" => DeviceTopic::Tags,
        _ => return None,
    };
    Some((device, kind))
}

/// What a device says its tags measure, on its tags topic: `{"tags": [{asset_id, tag_name,
/// unit, description, eu_range}]}`, at most [`MAX_DESCRIBED_TAGS`] a message.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DescribedTags {
    pub tags: Vec<DescribedTag>,
}

/// One tag of a [`DescribedTags`] message.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DescribedTag {
    pub asset_id: String,
    pub tag_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eu_range: Option<crate::tag::EuRange>,
}

impl DescribedTag {
    /// The tag `tag_name` of `asset_id` as `d` describes it.
    pub fn new(asset_id: String, tag_name: String, d: crate::tag::TagDescription) -> Self {
        Self {
            asset_id,
            tag_name,
            unit: d.unit,
            description: d.description,
            eu_range: d.eu_range,
        }
    }

    /// Its asset, its name and what it measures, as a description is stored.
    pub fn into_parts(self) -> (String, String, crate::tag::TagDescription) {
        (
            self.asset_id,
            self.tag_name,
            crate::tag::TagDescription {
                unit: self.unit,
                description: self.description,
                eu_range: self.eu_range,
            },
        )
    }
}

/// Tags a [`DescribedTags`] message may hold.
pub const MAX_DESCRIBED_TAGS: usize = 5_000;

impl DescribedTags {
    /// Each tag's names, unit, description and range checked (field paths `tags[i].unit`).
    pub fn check(&self, v: &mut Validator) {
        v.check(
            self.tags.len() <= MAX_DESCRIBED_TAGS,
            "tags",
            "must hold at most 5000 tags a message",
        );
        for (i, t) in self.tags.iter().enumerate() {
            if let Err(e) = crate::telemetry::check_name(&t.asset_id) {
                v.add(format!("tags[{i}].asset_id"), e);
            }
            if let Err(e) = crate::telemetry::check_name(&t.tag_name) {
                v.add(format!("tags[{i}].tag_name"), e);
            }
            if let Some(u) = &t.unit {
                v.text(&format!("tags[{i}].unit"), u, crate::tag::MAX_UNIT);
            }
            if let Some(d) = &t.description {
                v.text(
                    &format!("tags[{i}].description"),
                    d,
                    crate::tag::MAX_DESCRIPTION,
                );
            }
            if let Some(r) = t.eu_range {
                v.check(
                    r.low.is_finite() && r.high.is_finite() && r.low < r.high,
                    &format!("tags[{i}].eu_range"),
                    "must have finite low < high",
                );
            }
        }
    }
}

/// A device's answer on its command-results topic.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandResult {
    pub id: String,
    pub status: CommandOutcome,
    #[serde(default)]
    pub result: Option<serde_json::Value>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CommandOutcome {
    Succeeded,
    Failed,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_round_trip() {
        let t = DeviceTopics::of("d1");
        assert_eq!(
            parse_topic(&t.telemetry),
            Some(("d1", DeviceTopic::Telemetry))
        );
        assert_eq!(
            parse_topic(&t.heartbeat),
            Some(("d1", DeviceTopic::Heartbeat))
        );
        assert_eq!(
            parse_topic(&t.commands),
            Some(("d1", DeviceTopic::Commands))
        );
        assert_eq!(
            parse_topic(&t.command_results),
            Some(("d1", DeviceTopic::CommandResults))
        );
        assert_eq!(parse_topic(&t.ota), Some(("d1", DeviceTopic::Ota)));
        assert_eq!(parse_topic(&t.tags), Some(("d1", DeviceTopic::Tags)));
        assert_eq!(parse_topic("plantd/devices/+/telemetry"), None);
        assert_eq!(parse_topic("plantd/devices/#"), None);
        assert_eq!(parse_topic("plantd/devices/d1/other"), None);
        assert_eq!(parse_topic("other/d1/telemetry"), None);
    }

    #[test]
    fn heartbeat_checks() {
        let hb: Heartbeat = serde_json::from_str("{}").unwrap();
        assert!(hb.figures().is_empty());
        let hb = Heartbeat {
            cpu_percent: Some(120.0),
            ..Default::default()
        };
        let mut v = Validator::new();
        hb.check(&mut v);
        assert!(v.finish().is_err());
    }

    #[test]
    fn token_refusals() {
        let now = Timestamp::from_millis(1_000_000);
        let mut t = EnrollmentToken {
            id: "t".into(),
            prefix: "pde_".into(),
            group_id: None,
            tags: vec![],
            expires_at: Some(Timestamp::from_millis(2_000_000)),
            max_uses: Some(1),
            uses: 0,
            revoked_at: None,
            created_at: now,
        };
        assert_eq!(t.refusal(now), None);
        t.uses = 1;
        assert_eq!(t.refusal(now).unwrap().0, "enrollment_token_used_up");
        assert!(t.refusal(now).unwrap().1.contains("maximum"));
        t.uses = 0;
        assert_eq!(
            t.refusal(Timestamp::from_millis(2_000_000)).unwrap().0,
            "enrollment_token_expired"
        );
    }
}
