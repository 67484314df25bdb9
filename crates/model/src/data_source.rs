//! Data sources (SPEC 2.2, 4.1): protocol connections and the validation of their `config` per
//! type. The spec fixes modbus' `host`, `port`, `unit_id`; opcua and mqtt are decided in
//! docs/api.md.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{Timestamp, Validator};

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

/// Where a connection test or a connector dials.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetworkTarget {
    pub host: String,
    pub port: u16,
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
            c.optional_text("root_node", 500);
            let _ = url;
        }
        DataSourceType::Mqtt => {
            c.required_url("broker_url", &["mqtt", "mqtts", "tcp", "ssl"]);
            c.topics("topics");
            c.choice("payload_format", &["json"], "json");
            c.integer("qos", 0, 2, Some(1));
            c.optional_text("client_id", 23);
            c.credentials();
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

const OPCUA_POLICIES: &[&str] = &[
    "None",
    "Basic128Rsa15",
    "Basic256",
    "Basic256Sha256",
    "Aes128_Sha256_RsaOaep",
    "Aes256_Sha256_RsaPss",
];

fn known_keys(t: DataSourceType) -> &'static [&'static str] {
    match t {
        DataSourceType::Modbus => &["host", "port", "unit_id"],
        DataSourceType::Opcua => &[
            "endpoint",
            "security_mode",
            "security_policy",
            "username",
            "password",
            "root_node",
        ],
        DataSourceType::Mqtt => &[
            "broker_url",
            "topics",
            "payload_format",
            "qos",
            "client_id",
            "username",
            "password",
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

/// The host and port a validated config connects to.
pub fn network_target(t: DataSourceType, config: &Value) -> Option<NetworkTarget> {
    let s = |k: &str| config.get(k).and_then(Value::as_str);
    match t {
        DataSourceType::Modbus => Some(NetworkTarget {
            host: s("host")?.to_string(),
            port: u16::try_from(config.get("port").and_then(Value::as_i64).unwrap_or(502)).ok()?,
        }),
        DataSourceType::Opcua => parse_url(s("endpoint")?).ok().map(|u| NetworkTarget {
            host: u.host,
            port: u.port.unwrap_or(4840),
        }),
        DataSourceType::Mqtt => parse_url(s("broker_url")?).ok().map(|u| {
            let tls = u.scheme == "mqtts" || u.scheme == "ssl";
            NetworkTarget {
                host: u.host,
                port: u.port.unwrap_or(if tls { 8883 } else { 1883 }),
            }
        }),
    }
}

/// The parts of `scheme://host[:port][/path]` that connections need.
#[derive(Debug, PartialEq, Eq)]
pub struct ParsedUrl {
    pub scheme: String,
    pub host: String,
    pub port: Option<u16>,
}

pub fn parse_url(url: &str) -> Result<ParsedUrl, String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or("must be a URL such as scheme://host:port")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let (host, port) = if let Some(inner) = authority.strip_prefix('[') {
        let (h, after) = inner
            .split_once(']')
            .ok_or("has an unclosed IPv6 bracket")?;
        (h.to_string(), after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (authority.to_string(), None),
        }
    };
    if host.is_empty() {
        return Err("must name a host".into());
    }
    if !valid_host(&host) {
        return Err(format!("has an invalid host '{host}'"));
    }
    let port = match port {
        None => None,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 => Some(n),
            _ => return Err(format!("has an invalid port '{p}' (1-65535)")),
        },
    };
    Ok(ParsedUrl {
        scheme: scheme.to_ascii_lowercase(),
        host,
        port,
    })
}

fn valid_host(host: &str) -> bool {
    host.len() <= 253
        && (host.parse::<std::net::IpAddr>().is_ok()
            || host.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                    && !label.starts_with('-')
            }))
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

    fn topics(&mut self, key: &str) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(t: DataSourceType, config: Value) -> Result<Value, Vec<String>> {
        let mut v = Validator::new();
        let out = validate_config(t, &config, "config", &mut v);
        v.finish().map(|_| out).map_err(|e| {
            e.into_iter()
                .map(|e| format!("{}: {}", e.field, e.message))
                .collect()
        })
    }

    #[test]
    fn modbus_ranges_and_defaults() {
        let ok = check(DataSourceType::Modbus, json!({"host": "10.0.0.5"})).unwrap();
        assert_eq!(ok, json!({"host": "10.0.0.5", "port": 502, "unit_id": 1}));
        assert_eq!(
            derive_endpoint(DataSourceType::Modbus, &ok),
            "modbus://10.0.0.5:502/1"
        );
        let errs = check(
            DataSourceType::Modbus,
            json!({"port": 70000, "unit_id": 248, "hots": "x"}),
        )
        .unwrap_err();
        assert!(
            errs.iter()
                .any(|e| e.starts_with("config.host: is required")),
            "{errs:?}"
        );
        assert!(
            errs.iter()
                .any(|e| e.starts_with("config.port: must be an integer between 1 and 65535"))
        );
        assert!(errs.iter().any(|e| e.starts_with("config.unit_id:")));
        assert!(
            errs.iter()
                .any(|e| e.starts_with("config.hots: unknown key"))
        );
        assert!(check(DataSourceType::Modbus, json!({"host": "a", "port": 0})).is_err());
        assert!(check(DataSourceType::Modbus, json!("host")).is_err());
    }

    #[test]
    fn opcua_security_and_endpoint() {
        let ok = check(
            DataSourceType::Opcua,
            json!({"endpoint": "opc.tcp://localhost:4840"}),
        )
        .unwrap();
        assert_eq!(ok["security_mode"], "None");
        let target = network_target(DataSourceType::Opcua, &ok).unwrap();
        assert_eq!(
            target,
            NetworkTarget {
                host: "localhost".into(),
                port: 4840
            }
        );
        let signed = check(
            DataSourceType::Opcua,
            json!({"endpoint": "opc.tcp://plc1", "security_mode": "SignAndEncrypt"}),
        )
        .unwrap();
        assert_eq!(signed["security_policy"], "Basic256Sha256");
        assert!(
            check(DataSourceType::Opcua, json!({"endpoint": "http://plc1"})).unwrap_err()[0]
                .contains("opc.tcp://")
        );
        assert!(check(DataSourceType::Opcua, json!({"endpoint": "opc.tcp://plc1", "security_mode": "Sign", "security_policy": "None"})).is_err());
        assert!(
            check(
                DataSourceType::Opcua,
                json!({"endpoint": "opc.tcp://plc1", "password": "x"})
            )
            .is_err()
        );
    }

    #[test]
    fn mqtt_topics() {
        let ok = check(
            DataSourceType::Mqtt,
            json!({"broker_url": "mqtts://broker.local", "topics": ["plant/+/#"]}),
        )
        .unwrap();
        assert_eq!(
            network_target(DataSourceType::Mqtt, &ok).unwrap().port,
            8883
        );
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
            config: json!({"endpoint": "opc.tcp://a", "username": "u", "password": "p"}),
            created_at: Timestamp::now(),
            updated_at: Timestamp::now(),
        };
        assert_eq!(
            ds.public_config(),
            json!({"endpoint": "opc.tcp://a", "username": "u", "password_set": true})
        );
    }

    #[test]
    fn urls() {
        assert_eq!(
            parse_url("opc.tcp://[::1]:4841/x").unwrap().port,
            Some(4841)
        );
        assert!(parse_url("opc.tcp://host:99999").is_err());
        assert!(parse_url("opc.tcp://").is_err());
        assert!(parse_url("localhost:4840").is_err());
    }
}
