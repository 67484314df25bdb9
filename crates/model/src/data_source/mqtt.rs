//! MQTT data sources: the validated config connectors read, and the topic filter rules.

use serde::Deserialize;
use serde_json::Value;

use super::{ConfigReader, one_u8};

impl ConfigReader<'_> {
    pub(super) fn topics(&mut self, key: &str) {
        let Some(Value::Array(items)) = self.obj.get(key) else {
            self.err(
                key,
                "is required: an array of MQTT topic filters such as [\"plant/+/telemetry\"]",
            );
            return;
        };
        if items.is_empty() {
            self.err(key, "must list at least one topic filter");
            return;
        }
        for (i, item) in items.iter().enumerate() {
            let field = format!("{key}[{i}]");
            match item.as_str() {
                Some(t) => {
                    if let Err(e) = check_topic_filter(t) {
                        self.err(&field, &e);
                    }
                }
                None => self.err(&field, "must be a string"),
            }
        }
        self.out.insert(key.into(), Value::Array(items.clone()));
    }
}

/// MQTT topic filter rules: non-empty, `+` fills a whole level, `#` only as the whole last level.
pub fn check_topic_filter(filter: &str) -> Result<(), String> {
    if filter.is_empty() || filter.len() > 65535 {
        return Err("must be a non-empty topic filter".into());
    }
    let levels: Vec<&str> = filter.split('/').collect();
    for (i, level) in levels.iter().enumerate() {
        if level.contains('#') && (*level != "#" || i != levels.len() - 1) {
            return Err("'#' may only stand alone as the last level".into());
        }
        if level.contains('+') && *level != "+" {
            return Err("'+' must fill a whole level".into());
        }
    }
    Ok(())
}

/// A validated mqtt `config`.
#[derive(Clone, Debug, Deserialize)]
pub struct MqttConfig {
    pub broker_url: String,
    pub topics: Vec<String>,
    #[serde(default = "one_u8")]
    pub qos: u8,
    /// `json` (mapped by the fields below) or `sparkplug_b` (Sparkplug B protobuf).
    #[serde(default = "json_format")]
    pub payload_format: String,
    #[serde(default)]
    pub client_id: Option<String>,
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub password: Option<String>,
    #[serde(default)]
    pub ca_file: Option<String>,
    #[serde(default)]
    pub asset_id_field: Option<String>,
    #[serde(default)]
    pub tag_name_field: Option<String>,
    #[serde(default)]
    pub value_field: Option<String>,
    #[serde(default)]
    pub timestamp_field: Option<String>,
    #[serde(default)]
    pub asset_id: Option<String>,
    #[serde(default)]
    pub asset_id_topic_level: Option<usize>,
    #[serde(default)]
    pub tag_name_topic_level: Option<usize>,
    /// A topic's value turns stale when no message confirmed it for this long (MQTT has no
    /// keep-alive per publisher: a message is the only confirmation).
    #[serde(default = "thirty")]
    pub stale_after_seconds: u64,
}

fn json_format() -> String {
    "json".into()
}

impl MqttConfig {
    pub fn is_sparkplug(&self) -> bool {
        self.payload_format == "sparkplug_b"
    }
}

fn thirty() -> u64 {
    30
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data_source::DataSourceType;
    use crate::data_source::tests::check;
    use serde_json::json;

    #[test]
    fn mqtt_topics() {
        let ok = check(
            DataSourceType::Mqtt,
            json!({"broker_url": "mqtts://broker.local", "topics": ["plant/+/#"]}),
        )
        .unwrap();
        let parsed: MqttConfig = serde_json::from_value(ok).unwrap();
        assert_eq!(parsed.topics, vec!["plant/+/#".to_string()]);
        let errs = check(
            DataSourceType::Mqtt,
            json!({"broker_url": "mqtt://b:1883", "topics": ["a/#/b", "x+"]}),
        )
        .unwrap_err();
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(
            check(
                DataSourceType::Mqtt,
                json!({"broker_url": "mqtt://b", "topics": []})
            )
            .is_err()
        );
    }
}
