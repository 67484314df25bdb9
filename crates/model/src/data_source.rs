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
            if c.obj.get("payload_format").and_then(Value::as_str) == Some("sparkplug_b") {
                c.err(
                    "payload_format",
                    "Sparkplug B is not supported yet; use json (see docs/api.md)",
                );
            }
            c.choice("payload_format", &["json"], "json");
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

    fn optional_node_id(&mut self, key: &str) {
        match self.obj.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => match check_node_id(s) {
                Ok(()) => {
                    self.out.insert(key.into(), Value::String(s.clone()));
                }
                Err(e) => self.err(key, &e),
            },
            Some(_) => self.err(key, "must be a node id string such as ns=2;s=Simulation"),
        }
    }

    /// The Modbus register map: `registers[i]` objects.
    fn registers(&mut self) {
        let default_asset = self.obj.get("asset_id").is_some_and(|v| v.is_string());
        let items = match self.obj.get("registers") {
            None | Some(Value::Null) => {
                self.out
                    .insert("registers".into(), Value::Array(Vec::new()));
                return;
            }
            Some(Value::Array(items)) if items.len() <= MAX_MAPPED_TAGS => items,
            Some(Value::Array(_)) => {
                self.err(
                    "registers",
                    &format!("may map at most {MAX_MAPPED_TAGS} registers"),
                );
                return;
            }
            Some(_) => {
                self.err("registers", "must be an array of register mappings");
                return;
            }
        };
        let mut out = Vec::with_capacity(items.len());
        let mut seen = std::collections::HashSet::new();
        for (i, item) in items.iter().enumerate() {
            let prefix = format!("{}.registers[{i}]", self.prefix);
            let Some(obj) = item.as_object() else {
                self.v.add(prefix, "must be an object");
                continue;
            };
            let mut r = ConfigReader {
                obj,
                prefix: &prefix,
                v: &mut *self.v,
                out: Map::new(),
            };
            match obj.get("tag_name") {
                Some(Value::String(_)) => r.optional_name("tag_name"),
                _ => r.err(
                    "tag_name",
                    "is required: the tag this register is stored as",
                ),
            }
            r.optional_name("asset_id");
            if !default_asset && !obj.get("asset_id").is_some_and(|v| v.is_string()) {
                r.err(
                    "asset_id",
                    "is required (here or as config.asset_id for every register)",
                );
            }
            let kind = r.choice("kind", &["holding", "input", "coil", "discrete"], "holding");
            r.integer("address", 0, 65535, None);
            let bits = kind == "coil" || kind == "discrete";
            let data_type = if bits {
                r.choice("data_type", &["bool"], "bool")
            } else {
                r.choice("data_type", &["u16", "i16", "u32", "i32", "f32"], "u16")
            };
            r.choice("word_order", &["big", "little"], "big");
            r.number("scale", 1.0);
            r.number("offset", 0.0);
            for key in obj.keys() {
                if !REGISTER_KEYS.contains(&key.as_str()) {
                    r.err(
                        key,
                        &format!("unknown key; known keys: {}", REGISTER_KEYS.join(", ")),
                    );
                }
            }
            let width = if matches!(data_type.as_str(), "u32" | "i32" | "f32") {
                2
            } else {
                1
            };
            if let Some(addr) = obj.get("address").and_then(Value::as_i64)
                && addr + width > 65536
            {
                r.err("address", "the value runs past register 65535");
            }
            let key = (
                obj.get("asset_id")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                obj.get("tag_name")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            );
            if key.1.is_some() && !seen.insert(key) {
                r.err("tag_name", "is mapped twice for the same asset");
            }
            out.push(Value::Object(r.out));
        }
        self.out.insert("registers".into(), Value::Array(out));
    }

    /// An explicit OPC UA node list: `nodes[i]` = {node_id, asset_id, tag_name}.
    fn opcua_nodes(&mut self) {
        let items = match self.obj.get("nodes") {
            None | Some(Value::Null) => return,
            Some(Value::Array(items)) if !items.is_empty() && items.len() <= MAX_MAPPED_TAGS => {
                items
            }
            Some(_) => {
                self.err(
                    "nodes",
                    &format!(
                        "must be an array of 1 to {MAX_MAPPED_TAGS} objects {{node_id, asset_id, tag_name}}"
                    ),
                );
                return;
            }
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let prefix = format!("{}.nodes[{i}]", self.prefix);
            let Some(obj) = item.as_object() else {
                self.v
                    .add(prefix, "must be an object {node_id, asset_id, tag_name}");
                continue;
            };
            let mut r = ConfigReader {
                obj,
                prefix: &prefix,
                v: &mut *self.v,
                out: Map::new(),
            };
            for key in ["node_id", "asset_id", "tag_name"] {
                if !obj.get(key).is_some_and(|v| v.is_string()) {
                    r.err(key, "is required (a string)");
                }
            }
            r.optional_node_id("node_id");
            r.optional_name("asset_id");
            r.optional_name("tag_name");
            for key in obj.keys() {
                if !["node_id", "asset_id", "tag_name"].contains(&key.as_str()) {
                    r.err(key, "unknown key; known keys: node_id, asset_id, tag_name");
                }
            }
            out.push(Value::Object(r.out));
        }
        self.out.insert("nodes".into(), Value::Array(out));
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

/// The most tags one register map or node list may name.
pub const MAX_MAPPED_TAGS: usize = 100_000;

const REGISTER_KEYS: &[&str] = &[
    "tag_name",
    "asset_id",
    "kind",
    "address",
    "data_type",
    "word_order",
    "scale",
    "offset",
];

/// OPC UA node id text: `[ns=<n>;](i=<n>|s=<text>|g=<guid>|b=<base64>)`.
pub fn check_node_id(text: &str) -> Result<(), String> {
    let bad = || {
        format!(
            "'{text}' is not an OPC UA node id; expected e.g. i=85, ns=2;s=Simulation or ns=2;i=1001"
        )
    };
    let rest = match text.strip_prefix("ns=") {
        Some(r) => {
            let (ns, rest) = r.split_once(';').ok_or_else(bad)?;
            ns.parse::<u16>().map_err(|_| bad())?;
            rest
        }
        None => text,
    };
    let (kind, id) = rest.split_once('=').ok_or_else(bad)?;
    let ok = match kind {
        "i" => id.parse::<u32>().is_ok(),
        "s" | "b" => !id.is_empty() && id.len() <= 4096,
        "g" => id.len() == 36,
        _ => false,
    };
    if ok { Ok(()) } else { Err(bad()) }
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

/// A validated modbus `config`, as connectors read it (defaults cover configs stored before a
/// key existed).
#[derive(Clone, Debug, Deserialize)]
pub struct ModbusConfig {
    pub host: String,
    #[serde(default = "default_modbus_port")]
    pub port: u16,
    #[serde(default = "one_u8")]
    pub unit_id: u8,
    #[serde(default = "default_interval_ms")]
    pub poll_interval_ms: u64,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    #[serde(default)]
    pub asset_id: Option<String>,
    #[serde(default)]
    pub registers: Vec<RegisterMap>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct RegisterMap {
    pub tag_name: String,
    #[serde(default)]
    pub asset_id: Option<String>,
    #[serde(default)]
    pub kind: RegisterKind,
    pub address: u16,
    #[serde(default)]
    pub data_type: RegisterType,
    #[serde(default)]
    pub word_order: WordOrder,
    #[serde(default = "one_f64")]
    pub scale: f64,
    #[serde(default)]
    pub offset: f64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RegisterKind {
    #[default]
    Holding,
    Input,
    Coil,
    Discrete,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RegisterType {
    #[default]
    U16,
    I16,
    U32,
    I32,
    F32,
    Bool,
}

impl RegisterType {
    /// 16-bit registers (or bits) the value occupies.
    pub fn width(self) -> u16 {
        match self {
            RegisterType::U32 | RegisterType::I32 | RegisterType::F32 => 2,
            _ => 1,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WordOrder {
    /// High word first (the Modbus convention).
    #[default]
    Big,
    Little,
}

/// A validated opcua `config`.
#[derive(Clone, Debug, Deserialize)]
pub struct OpcuaConfig {
    pub endpoint: String,
    #[serde(default = "none_text")]
    pub security_mode: String,
    #[serde(default = "none_text")]
    pub security_policy: String,
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub password: Option<String>,
    #[serde(default)]
    pub root_node: Option<String>,
    #[serde(default)]
    pub nodes: Vec<NodeMap>,
    #[serde(default = "default_interval_ms")]
    pub publishing_interval_ms: u64,
    #[serde(default)]
    pub sampling_interval_ms: u64,
}

#[derive(Clone, Debug, Deserialize)]
pub struct NodeMap {
    pub node_id: String,
    pub asset_id: String,
    pub tag_name: String,
}

/// A validated mqtt `config`.
#[derive(Clone, Debug, Deserialize)]
pub struct MqttConfig {
    pub broker_url: String,
    pub topics: Vec<String>,
    #[serde(default = "one_u8")]
    pub qos: u8,
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
}

fn default_modbus_port() -> u16 {
    502
}
fn one_u8() -> u8 {
    1
}
fn one_f64() -> f64 {
    1.0
}
fn default_interval_ms() -> u64 {
    1000
}
fn default_timeout_ms() -> u64 {
    3000
}
fn none_text() -> String {
    "None".into()
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
        assert_eq!(
            ok,
            json!({"host": "10.0.0.5", "port": 502, "unit_id": 1, "poll_interval_ms": 1000,
                   "timeout_ms": 3000, "registers": []})
        );
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
    fn modbus_register_maps() {
        let ok = check(
            DataSourceType::Modbus,
            json!({"host": "plc", "asset_id": "P1", "registers": [
                {"tag_name": "flow", "address": 0, "data_type": "f32", "word_order": "little", "scale": 0.1},
                {"tag_name": "run", "kind": "coil", "address": 3, "asset_id": "P2"}
            ]}),
        )
        .unwrap();
        let parsed: ModbusConfig = serde_json::from_value(ok).unwrap();
        assert_eq!(parsed.registers[0].data_type, RegisterType::F32);
        assert_eq!(parsed.registers[0].word_order, WordOrder::Little);
        assert_eq!(parsed.registers[0].kind, RegisterKind::Holding);
        assert_eq!(parsed.registers[1].data_type, RegisterType::Bool);
        let errs = check(
            DataSourceType::Modbus,
            json!({"host": "plc", "registers": [
                {"tag_name": "a", "address": 70000},
                {"address": 1, "asset_id": "x"},
                {"tag_name": "c", "asset_id": "x", "kind": "coil", "address": 1, "data_type": "f32"},
                {"tag_name": "d", "asset_id": "x", "address": 65535, "data_type": "u32"},
                {"tag_name": "e", "asset_id": "x", "address": 1, "colour": 1}
            ]}),
        )
        .unwrap_err();
        for expected in [
            "config.registers[0].asset_id: is required",
            "config.registers[0].address: must be an integer",
            "config.registers[1].tag_name: is required",
            "config.registers[2].data_type: must be one of bool",
            "config.registers[3].address: the value runs past register 65535",
            "config.registers[4].colour: unknown key",
        ] {
            assert!(
                errs.iter().any(|e| e.starts_with(expected)),
                "{expected}: {errs:?}"
            );
        }
    }

    #[test]
    fn opcua_node_lists_and_mqtt_mapping() {
        let ok = check(
            DataSourceType::Opcua,
            json!({"endpoint": "opc.tcp://plc", "root_node": "ns=2;s=Simulation",
                   "nodes": [{"node_id": "ns=2;i=7", "asset_id": "P1", "tag_name": "t"}]}),
        )
        .unwrap();
        let parsed: OpcuaConfig = serde_json::from_value(ok).unwrap();
        assert_eq!(parsed.nodes[0].node_id, "ns=2;i=7");
        assert_eq!(parsed.publishing_interval_ms, 1000);
        let errs = check(
            DataSourceType::Opcua,
            json!({"endpoint": "opc.tcp://plc", "root_node": "Simulation",
                   "nodes": [{"node_id": "ns=x;i=1", "tag_name": "t"}]}),
        )
        .unwrap_err();
        assert!(
            errs.iter()
                .any(|e| e.starts_with("config.root_node: 'Simulation' is not an OPC UA node id")),
            "{errs:?}"
        );
        assert!(
            errs.iter()
                .any(|e| e.starts_with("config.nodes[0].node_id:")),
            "{errs:?}"
        );
        assert!(
            errs.iter()
                .any(|e| e.starts_with("config.nodes[0].asset_id: is required")),
            "{errs:?}"
        );
        let sparkplug = check(
            DataSourceType::Mqtt,
            json!({"broker_url": "mqtt://b", "topics": ["spBv1.0/#"], "payload_format": "sparkplug_b"}),
        )
        .unwrap_err();
        assert!(
            sparkplug[0].contains("Sparkplug B is not supported"),
            "{sparkplug:?}"
        );
        let mapped = check(
            DataSourceType::Mqtt,
            json!({"broker_url": "mqtt://b", "topics": ["p/+/+"], "asset_id_topic_level": 1, "tag_name_topic_level": 2}),
        )
        .unwrap();
        let parsed: MqttConfig = serde_json::from_value(mapped).unwrap();
        assert_eq!(parsed.tag_name_topic_level, Some(2));
    }

    #[test]
    fn opcua_security_and_endpoint() {
        let ok = check(
            DataSourceType::Opcua,
            json!({"endpoint": "opc.tcp://localhost:4840"}),
        )
        .unwrap();
        assert_eq!(ok["security_mode"], "None");
        assert_eq!(ok["endpoint"], "opc.tcp://localhost:4840");
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
