//! Data sources (SPEC 2.2, 4.1): protocol connections and the validation of their `config` per
//! type. The spec fixes modbus' `host`, `port`, `unit_id`; opcua and mqtt are decided in
//! docs/api.md.
//!
//! This file holds the record, the per-type dispatch of validation and the config reader the
//! protocols share; each protocol's config and checks live in their own file.

mod browse;
mod modbus;
mod mqtt;
mod opcua;
mod url;

pub use browse::{BrowseEntry, BrowseError};
pub use modbus::{ModbusConfig, RegisterKind, RegisterMap, RegisterType, WordOrder};
pub use mqtt::{MqttConfig, check_topic_filter};
pub use opcua::{NodeMap, OpcuaConfig, check_node_id};
pub use url::{ParsedUrl, check_post_url, parse_url};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{Timestamp, Validator};
use opcua::OPCUA_POLICIES;
use url::valid_host;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum DataSourceType {
    Opcua,
    Modbus,
    Mqtt,
}

impl DataSourceType {
    pub fn as_str(self) -> &'static str {
        match self {
            DataSourceType::Opcua => "opcua",
            DataSourceType::Modbus => "modbus",
            DataSourceType::Mqtt => "mqtt",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        [
            DataSourceType::Opcua,
            DataSourceType::Modbus,
            DataSourceType::Mqtt,
        ]
        .into_iter()
        .find(|t| t.as_str() == s)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum DataSourceStatus {
    Connected,
    Disconnected,
}

impl DataSourceStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DataSourceStatus::Connected => "connected",
            DataSourceStatus::Disconnected => "disconnected",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "connected" => Some(DataSourceStatus::Connected),
            "disconnected" => Some(DataSourceStatus::Disconnected),
            _ => None,
        }
    }
}

/// A data source as stored. `config` holds secrets (passwords); responses go through
/// [`DataSource::public_config`].
#[derive(Clone, Debug)]
pub struct DataSource {
    pub id: String,
    pub org_id: String,
    pub name: String,
    pub source_type: DataSourceType,
    pub endpoint: String,
    pub status: DataSourceStatus,
    pub tag_count: i64,
    /// A disabled source keeps its settings but runs no connector.
    pub enabled: bool,
    /// Why the connector is not connected, or the last problem it met while connected.
    pub last_error: Option<String>,
    pub config: Value,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// Config keys whose values are write-only: never returned by the API.
pub const SECRET_CONFIG_KEYS: [&str; 1] = ["password"];

impl DataSource {
    /// The config without secrets; `password_set: true` tells that one is stored.
    pub fn public_config(&self) -> Value {
        let mut config = self.config.clone();
        if let Some(obj) = config.as_object_mut() {
            for key in SECRET_CONFIG_KEYS {
                if obj.remove(key).is_some() {
                    obj.insert(format!("{key}_set"), Value::Bool(true));
                }
            }
        }
        config
    }
}

/// Maximum length of a data source name.
pub const MAX_NAME_LEN: usize = 200;

/// Validates `config` for `source_type`, reporting fields under `prefix` (`config.port`), and
/// returns it normalized with defaults filled in.
pub fn validate_config(
    source_type: DataSourceType,
    config: &Value,
    prefix: &str,
    v: &mut Validator,
) -> Value {
    let Some(obj) = config.as_object() else {
        v.add(prefix, "must be an object");
        return config.clone();
    };
    let mut c = ConfigReader {
        obj,
        prefix,
        v,
        out: Map::new(),
    };
    match source_type {
        DataSourceType::Modbus => {
            c.required_host("host");
            c.integer("port", 1, 65535, Some(502));
            c.integer("unit_id", 0, 247, Some(1));
            c.integer("poll_interval_ms", 10, 3_600_000, Some(1000));
            c.integer("timeout_ms", 100, 60_000, Some(3000));
            c.optional_name("asset_id");
            c.registers();
        }
        DataSourceType::Opcua => {
            let url = c.required_url("endpoint", &["opc.tcp"]);
            let mode = c.choice("security_mode", &["None", "Sign", "SignAndEncrypt"], "None");
            let policy_default = if mode == "None" {
                "None"
            } else {
                "Basic256Sha256"
            };
            let policy = c.choice("security_policy", OPCUA_POLICIES, policy_default);
            if mode == "None" && policy != "None" {
                c.err("security_policy", "must be None when security_mode is None");
            } else if mode != "None" && policy == "None" {
                c.err(
                    "security_policy",
                    "must name a policy (e.g. Basic256Sha256) when security_mode signs",
                );
            }
            c.credentials();
            c.optional_node_id("root_node");
            c.opcua_nodes();
            c.integer("publishing_interval_ms", 10, 60_000, Some(1000));
            c.integer("sampling_interval_ms", 0, 60_000, Some(0));
            let _ = url;
        }
        DataSourceType::Mqtt => {
            c.required_url("broker_url", &["mqtt", "mqtts", "tcp", "ssl"]);
            c.topics("topics");
            c.choice("payload_format", &["json", "sparkplug_b"], "json");
            c.integer("qos", 0, 2, Some(1));
            c.optional_text("client_id", 23);
            c.credentials();
            c.optional_text("ca_file", 4096);
            for key in [
                "asset_id_field",
                "tag_name_field",
                "value_field",
                "timestamp_field",
            ] {
                c.optional_text(key, 200);
            }
            c.optional_name("asset_id");
            c.integer_opt("asset_id_topic_level", 0, 64);
            c.integer_opt("tag_name_topic_level", 0, 64);
            c.integer("stale_after_seconds", 1, 86_400, Some(30));
        }
    }
    let known = known_keys(source_type);
    for key in obj.keys() {
        if !known.contains(&key.as_str()) {
            c.err(
                key,
                &format!(
                    "unknown key for a {} data source; known keys: {}",
                    source_type.as_str(),
                    known.join(", ")
                ),
            );
        }
    }
    Value::Object(c.out)
}

fn known_keys(t: DataSourceType) -> &'static [&'static str] {
    match t {
        DataSourceType::Modbus => &[
            "host",
            "port",
            "unit_id",
            "poll_interval_ms",
            "timeout_ms",
            "asset_id",
            "registers",
        ],
        DataSourceType::Opcua => &[
            "endpoint",
            "security_mode",
            "security_policy",
            "username",
            "password",
            "root_node",
            "nodes",
            "publishing_interval_ms",
            "sampling_interval_ms",
        ],
        DataSourceType::Mqtt => &[
            "broker_url",
            "topics",
            "payload_format",
            "qos",
            "client_id",
            "username",
            "password",
            "ca_file",
            "asset_id_field",
            "tag_name_field",
            "value_field",
            "timestamp_field",
            "asset_id",
            "asset_id_topic_level",
            "tag_name_topic_level",
            "stale_after_seconds",
        ],
    }
}

/// The connection address shown as `endpoint` when the client gives none.
pub fn derive_endpoint(t: DataSourceType, config: &Value) -> String {
    let s = |k: &str| {
        config
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    match t {
        DataSourceType::Opcua => s("endpoint"),
        DataSourceType::Mqtt => s("broker_url"),
        DataSourceType::Modbus => {
            let host = s("host");
            let host = if host.contains(':') {
                format!("[{host}]")
            } else {
                host
            };
            let port = config.get("port").and_then(Value::as_i64).unwrap_or(502);
            let unit = config.get("unit_id").and_then(Value::as_i64).unwrap_or(1);
            format!("modbus://{host}:{port}/{unit}")
        }
    }
}

struct ConfigReader<'a> {
    obj: &'a Map<String, Value>,
    prefix: &'a str,
    v: &'a mut Validator,
    out: Map<String, Value>,
}

impl ConfigReader<'_> {
    fn err(&mut self, key: &str, msg: &str) {
        self.v.add(format!("{}.{key}", self.prefix), msg);
    }

    fn required_str(&mut self, key: &str) -> Option<String> {
        match self.obj.get(key) {
            None | Some(Value::Null) => {
                self.err(key, "is required");
                None
            }
            Some(Value::String(s)) if s.trim().is_empty() => {
                self.err(key, "must not be empty");
                None
            }
            Some(Value::String(s)) => Some(s.trim().to_string()),
            Some(_) => {
                self.err(key, "must be a string");
                None
            }
        }
    }

    fn required_host(&mut self, key: &str) {
        if let Some(host) = self.required_str(key) {
            if valid_host(&host) {
                self.out.insert(key.into(), Value::String(host));
            } else {
                self.err(key, "must be a host name or IP address");
            }
        }
    }

    fn required_url(&mut self, key: &str, schemes: &[&str]) -> Option<ParsedUrl> {
        let url = self.required_str(key)?;
        match parse_url(&url) {
            Ok(parsed) if schemes.contains(&parsed.scheme.as_str()) => {
                self.out.insert(key.into(), Value::String(url));
                Some(parsed)
            }
            Ok(parsed) => {
                let list = schemes
                    .iter()
                    .map(|s| format!("{s}://"))
                    .collect::<Vec<_>>()
                    .join(", ");
                self.err(
                    key,
                    &format!("has scheme '{}://'; expected {list}", parsed.scheme),
                );
                None
            }
            Err(e) => {
                self.err(key, &e);
                None
            }
        }
    }

    fn integer(&mut self, key: &str, min: i64, max: i64, default: Option<i64>) {
        match self.obj.get(key) {
            None | Some(Value::Null) => match default {
                Some(d) => {
                    self.out.insert(key.into(), d.into());
                }
                None => self.err(key, "is required"),
            },
            Some(Value::Number(n)) if n.as_i64().is_some_and(|x| (min..=max).contains(&x)) => {
                self.out.insert(key.into(), Value::Number(n.clone()));
            }
            Some(_) => self.err(key, &format!("must be an integer between {min} and {max}")),
        }
    }

    fn choice(&mut self, key: &str, allowed: &[&str], default: &str) -> String {
        let value = match self.obj.get(key) {
            None | Some(Value::Null) => default.to_string(),
            Some(Value::String(s)) if allowed.contains(&s.as_str()) => s.clone(),
            Some(_) => {
                self.err(key, &format!("must be one of {}", allowed.join(", ")));
                return default.to_string();
            }
        };
        self.out.insert(key.into(), Value::String(value.clone()));
        value
    }

    fn optional_text(&mut self, key: &str, max: usize) {
        match self.obj.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if !s.is_empty() && s.chars().count() <= max => {
                self.out.insert(key.into(), Value::String(s.clone()));
            }
            Some(_) => self.err(
                key,
                &format!("must be a non-empty string of at most {max} characters"),
            ),
        }
    }

    /// Optional `username` and `password`, given together or not at all.
    fn credentials(&mut self) {
        self.optional_text("username", 200);
        self.optional_text("password", 500);
        let has = |k: &str| self.obj.get(k).is_some_and(|v| !v.is_null());
        if has("password") && !has("username") {
            self.err("username", "is required when a password is given");
        }
    }

    fn integer_opt(&mut self, key: &str, min: i64, max: i64) {
        if self.obj.get(key).is_some_and(|v| !v.is_null()) {
            self.integer(key, min, max, None);
        }
    }

    /// An optional asset id or tag name (the telemetry naming rules).
    fn optional_name(&mut self, key: &str) {
        match self.obj.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => match crate::telemetry::check_name(s) {
                Ok(()) => {
                    self.out.insert(key.into(), Value::String(s.clone()));
                }
                Err(e) => self.err(key, e),
            },
            Some(_) => self.err(key, "must be a string"),
        }
    }

    fn number(&mut self, key: &str, default: f64) {
        match self.obj.get(key) {
            None | Some(Value::Null) => {
                self.out.insert(key.into(), default.into());
            }
            Some(Value::Number(n)) if n.as_f64().is_some_and(f64::is_finite) => {
                self.out.insert(key.into(), Value::Number(n.clone()));
            }
            Some(_) => self.err(key, "must be a number"),
        }
    }
}

/// The most tags one register map or node list may name.
pub const MAX_MAPPED_TAGS: usize = 100_000;

fn one_u8() -> u8 {
    1
}
fn default_interval_ms() -> u64 {
    1000
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    pub(super) fn check(t: DataSourceType, config: Value) -> Result<Value, Vec<String>> {
        let mut v = Validator::new();
        let out = validate_config(t, &config, "config", &mut v);
        v.finish().map(|_| out).map_err(|e| {
            e.into_iter()
                .map(|e| format!("{}: {}", e.field, e.message))
                .collect()
        })
    }

    #[test]
    fn secrets_are_hidden() {
        let ds = DataSource {
            id: "1".into(),
            org_id: "o".into(),
            name: "n".into(),
            source_type: DataSourceType::Opcua,
            endpoint: "e".into(),
            status: DataSourceStatus::Disconnected,
            tag_count: 0,
            enabled: true,
            last_error: None,
            config: json!({"endpoint": "opc.tcp://a", "username": "u", "password": "p"}),
            created_at: Timestamp::now(),
            updated_at: Timestamp::now(),
        };
        assert_eq!(
            ds.public_config(),
            json!({"endpoint": "opc.tcp://a", "username": "u", "password_set": true})
        );
    }
}
