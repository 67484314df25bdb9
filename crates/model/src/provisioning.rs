//! Edge provisioning (SPEC 2.16, 4.15; issue 34): the assets a CSV, YAML or QR import describes,
//! checked field by field (each bad line or entry named), and the data source each becomes.
//!
//! Every import reaches [`asset_rows`] as JSON objects, one per line or entry, whatever its
//! format: the CSV's cells as strings, the YAML's entries as parsed, the QR label's compact keys
//! renamed. docs/api.md ("Edge provisioning") documents the fields.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::{HashMap, HashSet};

use crate::Validator;
use crate::data_source::{DataSourceType, validate_config};
use crate::telemetry::check_name;

/// Assets one import may describe.
pub const MAX_ASSETS: usize = 1000;
/// Sensors one asset may list.
pub const MAX_SENSORS: usize = 500;
/// The CSV's columns (SPEC 2.16), in order.
pub const CSV_COLUMNS: [&str; 6] = [
    "asset_id",
    "asset_type",
    "protocol",
    "host",
    "port",
    "sensors",
];
/// What the YAML (and the JSON of a cloud sync or clone) may say of an asset besides the CSV's
/// columns: SPEC 2.17's asset configuration keys (`id` and `type` stand for `asset_id` and
/// `asset_type`).
pub const EXTRA_KEYS: [&str; 7] = [
    "id",
    "type",
    "enabled",
    "update_rate_ms",
    "initial_state",
    "linked_to",
    "unit_id",
];
/// The OPC UA namespace of a node given by a bare name or number (the simulator's, and the
/// first namespace of a server's own nodes).
pub const OPCUA_NAMESPACE: u16 = 2;

/// A kind of asset the setup wizard offers (the simulator's catalog): its sensors, each with
/// its unit and the register the simulator's Modbus map holds it at (a float in two
/// registers, in order), to become one import line once given an asset id, a host and a port.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AssetTemplate {
    /// The asset type (`centrifugal_pump`), also the template's name.
    pub asset_type: String,
    /// What a person reads (`Centrifugal pump`).
    pub title: String,
    pub sensors: Vec<TemplateSensor>,
}

/// One sensor of an [`AssetTemplate`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TemplateSensor {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// Its first Modbus register (holding registers, a 32-bit float).
    pub modbus_address: u16,
}

/// One sensor of an asset: a tag name, and where the protocol reads it (a Modbus register
/// address, an OPC UA node id or index).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Sensor {
    pub name: String,
    pub address: Option<String>,
}

/// An asset to provision: it becomes the data source named by its id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AssetRow {
    pub asset_id: String,
    pub asset_type: String,
    pub protocol: DataSourceType,
    pub host: String,
    pub port: u16,
    pub sensors: Vec<Sensor>,
    /// A disabled asset keeps its settings and runs no connector.
    pub enabled: bool,
    /// How often its sensors are read (Modbus poll, OPC UA publishing interval).
    pub update_rate_ms: u64,
    /// Modbus unit id (1 unless given).
    pub unit_id: u8,
    /// SPEC 2.17: the state a simulated asset starts in (`running` or `stopped`); kept with the
    /// asset, it does not change what the edge reads.
    pub initial_state: Option<String>,
    /// SPEC 2.17: another asset this one drives or is driven by (a pump's motor); it must be an
    /// asset of the same import or one provisioned before.
    pub linked_to: Option<String>,
}

impl AssetRow {
    /// The data source's `config`: Modbus reads each sensor as a 32-bit float (high word first)
    /// from two holding registers at its address; OPC UA subscribes to each sensor's node.
    pub fn data_source_config(&self) -> Value {
        match self.protocol {
            DataSourceType::Modbus => {
                let registers: Vec<Value> = self
                    .sensors
                    .iter()
                    .map(|s| {
                        let address = s
                            .address
                            .as_deref()
                            .and_then(|a| a.parse::<u64>().ok())
                            .unwrap_or_default();
                        json!({"tag_name": s.name, "kind": "holding", "address": address,
                               "data_type": "f32"})
                    })
                    .collect();
                json!({"host": self.host, "port": self.port, "unit_id": self.unit_id,
                       "asset_id": self.asset_id, "poll_interval_ms": self.update_rate_ms,
                       "registers": registers})
            }
            DataSourceType::Opcua | DataSourceType::Mqtt => {
                let nodes: Vec<Value> = self
                    .sensors
                    .iter()
                    .map(|s| {
                        json!({"node_id": opcua_node_id(&self.asset_id, s), "asset_id": self.asset_id,
                               "tag_name": s.name})
                    })
                    .collect();
                json!({"endpoint": format!("opc.tcp://{}:{}", host_in_url(&self.host), self.port),
                       "nodes": nodes, "publishing_interval_ms": self.update_rate_ms})
            }
        }
    }

    /// The asset as the CSV's columns and the extra keys, for a clone export or a cloud sync.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

fn host_in_url(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

/// An OPC UA sensor's node: a full node id (`ns=3;s=Line1.Flow`) as given, a number as
/// `ns=2;i=N`, a bare identifier as `ns=2;s=ID`, and no address as `ns=2;s=<asset>.<sensor>`
/// (the simulator's naming).
pub fn opcua_node_id(asset_id: &str, s: &Sensor) -> String {
    match s.address.as_deref() {
        Some(a) if a.contains('=') => a.to_string(),
        Some(a) if !a.is_empty() && a.bytes().all(|b| b.is_ascii_digit()) => {
            format!("ns={OPCUA_NAMESPACE};i={a}")
        }
        Some(a) => format!("ns={OPCUA_NAMESPACE};s={a}"),
        None => format!("ns={OPCUA_NAMESPACE};s={asset_id}.{}", s.name),
    }
}

/// An asset as checked, with its data source's `config` as the data source's own checks
/// normalized it (defaults filled in).
#[derive(Clone, Debug, PartialEq)]
pub struct CheckedAsset {
    pub row: AssetRow,
    pub config: Value,
}

/// Checks each `(where, entry)` (where names the line or entry in messages: `line 3`,
/// `assets[2]`) and returns the assets, in order. `known` holds the asset ids provisioned
/// before (for `linked_to`). Any problem is added to `v`, under `<where>.<field>`.
pub fn asset_rows(
    entries: &[(String, Value)],
    known: &HashSet<String>,
    v: &mut Validator,
) -> Vec<CheckedAsset> {
    if entries.is_empty() {
        v.add("file", "describes no asset");
    } else if entries.len() > MAX_ASSETS {
        v.add(
            "file",
            format!(
                "describes {} assets; at most {MAX_ASSETS} per import",
                entries.len()
            ),
        );
        return Vec::new();
    }
    let mut checked = Vec::with_capacity(entries.len());
    let mut first_line: HashMap<String, String> = HashMap::new();
    for (at, entry) in entries {
        let Some(asset) = asset_row(at, entry, v) else {
            continue;
        };
        let id = &asset.row.asset_id;
        if let Some(first) = first_line.get(id) {
            v.add(
                format!("{at}.asset_id"),
                format!("'{id}' is described twice (also by {first})"),
            );
            continue;
        }
        first_line.insert(id.clone(), at.clone());
        checked.push(asset);
    }
    // Links are checked on every entry, also one with other problems.
    let ids: HashSet<String> = entries
        .iter()
        .filter_map(|(_, e)| e.get("asset_id").or_else(|| e.get("id")).and_then(text_of))
        .collect();
    for (at, entry) in entries {
        if let Some(link) = entry.get("linked_to").and_then(text_of)
            && !ids.contains(&link)
            && !known.contains(&link)
        {
            v.add(
                format!("{at}.linked_to"),
                format!("names '{link}', which is neither in this import nor provisioned here"),
            );
        }
    }
    checked
}

/// A string, or a number written as one (CSV cells are text, YAML numbers are numbers).
fn text_of(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.trim().to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn asset_row(at: &str, entry: &Value, v: &mut Validator) -> Option<CheckedAsset> {
    let Some(obj) = entry.as_object() else {
        v.add(at, "must be an object with the asset's fields");
        return None;
    };
    let before = v.len();
    let err = |v: &mut Validator, field: &str, message: String| {
        v.add(format!("{at}.{field}"), message);
    };
    for key in obj.keys() {
        if !CSV_COLUMNS.contains(&key.as_str()) && !EXTRA_KEYS.contains(&key.as_str()) {
            err(
                v,
                key,
                format!(
                    "unknown field; known: {}, {}",
                    CSV_COLUMNS.join(", "),
                    EXTRA_KEYS.join(", ")
                ),
            );
        }
    }
    // `id` and `type` (SPEC 2.17) stand for `asset_id` and `asset_type`.
    let field = |a: &str, b: &str| obj.get(a).or_else(|| obj.get(b)).filter(|x| !x.is_null());
    let text = |v: &mut Validator, name: &str, value: Option<&Value>| -> Option<String> {
        match value.map(text_of) {
            None => {
                err(v, name, "is required".into());
                None
            }
            Some(None) => {
                err(v, name, "must be text".into());
                None
            }
            Some(Some(s)) if s.is_empty() => {
                err(v, name, "is required".into());
                None
            }
            Some(Some(s)) => Some(s),
        }
    };
    let asset_id = text(v, "asset_id", field("asset_id", "id"));
    if let Some(id) = &asset_id
        && let Err(e) = check_name(id)
    {
        err(v, "asset_id", e.into());
    }
    let asset_type = text(v, "asset_type", field("asset_type", "type"));
    if let Some(t) = &asset_type
        && (t.len() > 100
            || !t
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'))
    {
        err(
            v,
            "asset_type",
            "must be up to 100 letters, digits, '_' or '-' (e.g. centrifugal_pump)".into(),
        );
    }
    let protocol = match text(v, "protocol", field("protocol", "protocol")) {
        Some(p) => match p.to_ascii_lowercase().as_str() {
            "modbus" | "modbus_tcp" | "modbus-tcp" => Some(DataSourceType::Modbus),
            "opcua" | "opc_ua" | "opc-ua" => Some(DataSourceType::Opcua),
            _ => {
                err(
                    v,
                    "protocol",
                    format!(
                        "'{p}' is not a protocol assets are provisioned with; use modbus or opcua (MQTT sources are created with POST /v1/data-sources)"
                    ),
                );
                None
            }
        },
        None => None,
    };
    let host = text(v, "host", field("host", "host"));
    let port = match field("port", "port").map(text_of) {
        None => protocol.map(|p| match p {
            DataSourceType::Modbus => 502,
            _ => 4840,
        }),
        Some(Some(p)) => match p.parse::<u16>() {
            Ok(n) if n > 0 => Some(n),
            _ => {
                err(v, "port", format!("'{p}' is not a port (1 to 65535)"));
                None
            }
        },
        Some(None) => {
            err(v, "port", "must be a number".into());
            None
        }
    };
    let sensors = sensors(at, field("sensors", "sensors"), protocol, v);
    let enabled = match field("enabled", "enabled").map(text_of) {
        None => true,
        Some(Some(b)) if b == "true" => true,
        Some(Some(b)) if b == "false" => false,
        Some(_) => {
            err(v, "enabled", "must be true or false".into());
            true
        }
    };
    let number = |v: &mut Validator, name: &str, min: u64, max: u64, default: u64| -> u64 {
        match field(name, name).map(text_of) {
            None => default,
            Some(Some(n)) => match n.parse::<u64>() {
                Ok(n) if (min..=max).contains(&n) => n,
                _ => {
                    err(
                        v,
                        name,
                        format!("must be a whole number from {min} to {max}"),
                    );
                    default
                }
            },
            Some(None) => {
                err(v, name, "must be a number".into());
                default
            }
        }
    };
    let update_rate_ms = number(v, "update_rate_ms", 10, 3_600_000, 1000);
    let unit_id = number(v, "unit_id", 0, 247, 1) as u8;
    let initial_state = match field("initial_state", "initial_state").map(text_of) {
        None => None,
        Some(Some(s)) if s == "running" || s == "stopped" => Some(s),
        Some(_) => {
            err(v, "initial_state", "must be running or stopped".into());
            None
        }
    };
    let linked_to = match field("linked_to", "linked_to").map(text_of) {
        None => None,
        Some(Some(s)) if check_name(&s).is_ok() => Some(s),
        Some(_) => {
            err(v, "linked_to", "must be an asset id".into());
            None
        }
    };
    let row = AssetRow {
        asset_id: asset_id?,
        asset_type: asset_type?,
        protocol: protocol?,
        host: host?,
        port: port?,
        sensors: sensors?,
        enabled,
        update_rate_ms,
        unit_id,
        initial_state,
        linked_to,
    };
    if v.len() > before {
        return None;
    }
    // What the data source itself would refuse (a host that is no host name or address, a node
    // id that does not parse, registers that overlap), named on this line.
    let mut inner = Validator::new();
    let config = validate_config(row.protocol, &row.data_source_config(), at, &mut inner);
    if !inner.is_empty() {
        v.extend(inner);
        return None;
    }
    Some(CheckedAsset { row, config })
}

/// The `sensors` field: the CSV's cell (`name` or `name:address`, separated by `;`), a list of
/// such strings, or a list of `{name, address}` objects.
fn sensors(
    at: &str,
    value: Option<&Value>,
    protocol: Option<DataSourceType>,
    v: &mut Validator,
) -> Option<Vec<Sensor>> {
    let field = format!("{at}.sensors");
    let items: Vec<(String, Option<String>)> = match value {
        None => {
            v.add(
                field,
                "is required: at least one sensor (name or name:address)",
            );
            return None;
        }
        Some(Value::String(cell)) => cell
            .split(';')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(split_sensor)
            .collect(),
        Some(Value::Array(list)) => {
            let mut out = Vec::with_capacity(list.len());
            for (i, item) in list.iter().enumerate() {
                match item {
                    Value::String(s) => out.push(split_sensor(s.trim())),
                    Value::Object(o) => {
                        let known = ["name", "address", "n", "a"];
                        if let Some(k) = o.keys().find(|k| !known.contains(&k.as_str())) {
                            v.add(
                                format!("{field}[{i}].{k}"),
                                "unknown field; known: name, address",
                            );
                            return None;
                        }
                        let name = o.get("name").or_else(|| o.get("n")).and_then(text_of);
                        let address = o
                            .get("address")
                            .or_else(|| o.get("a"))
                            .filter(|a| !a.is_null())
                            .map(text_of);
                        match (name, address) {
                            (Some(n), None) => out.push((n, None)),
                            (Some(n), Some(Some(a))) => out.push((n, Some(a))),
                            (None, _) => {
                                v.add(format!("{field}[{i}].name"), "is required");
                                return None;
                            }
                            (_, Some(None)) => {
                                v.add(format!("{field}[{i}].address"), "must be a number or text");
                                return None;
                            }
                        }
                    }
                    _ => {
                        v.add(
                            format!("{field}[{i}]"),
                            "must be a name, name:address, or {name, address}",
                        );
                        return None;
                    }
                }
            }
            out
        }
        Some(_) => {
            v.add(field, "must be text (name;name:address) or a list");
            return None;
        }
    };
    if items.is_empty() {
        v.add(
            field,
            "lists no sensor; write name or name:address, separated by ';'",
        );
        return None;
    }
    if items.len() > MAX_SENSORS {
        v.add(
            field,
            format!("lists {} sensors; at most {MAX_SENSORS}", items.len()),
        );
        return None;
    }
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(items.len());
    for (name, address) in items {
        if let Err(e) = check_name(&name) {
            v.add(field.clone(), format!("sensor '{name}': name {e}"));
            continue;
        }
        if !seen.insert(name.clone()) {
            v.add(field.clone(), format!("sensor '{name}' is listed twice"));
            continue;
        }
        if protocol == Some(DataSourceType::Modbus) {
            match address.as_deref().map(str::parse::<u16>) {
                Some(Ok(a)) if a < u16::MAX => {}
                Some(_) => {
                    v.add(
                        field.clone(),
                        format!(
                            "sensor '{name}': the register address must be a number from 0 to 65534"
                        ),
                    );
                    continue;
                }
                None => {
                    v.add(
                        field.clone(),
                        format!("sensor '{name}' needs its register address (name:address)"),
                    );
                    continue;
                }
            }
        }
        out.push(Sensor { name, address });
    }
    (out.len() == seen.len() && !out.is_empty()).then_some(out)
}

/// `name` or `name:address` (split at the first `:`).
fn split_sensor(s: &str) -> (String, Option<String>) {
    match s.split_once(':') {
        Some((n, a)) => (n.trim().to_string(), Some(a.trim().to_string())),
        None => (s.to_string(), None),
    }
}

/// A QR label's compact payload (SPEC 2.16: `{id, t, h, s: [{n, a}]}`, plus the optional `p`
/// protocol and `o` port of docs/api.md) as an asset entry.
pub fn qr_entry(payload: &Value, v: &mut Validator) -> Option<Value> {
    let Some(obj) = payload.as_object() else {
        v.add(
            "body",
            "must be the label's JSON object {id, t, h, s: [{n, a}]}",
        );
        return None;
    };
    let names = [
        ("id", "asset_id"),
        ("t", "asset_type"),
        ("h", "host"),
        ("s", "sensors"),
        ("p", "protocol"),
        ("o", "port"),
    ];
    let mut out = Map::new();
    for (key, value) in obj {
        match names.iter().find(|(short, _)| short == key) {
            Some((_, long)) => {
                out.insert((*long).to_string(), value.clone());
            }
            None => v.add(
                key.clone(),
                "unknown key of a label; known: id, t (type), h (host), s (sensors [{n, a}]), p (protocol), o (port)",
            ),
        }
    }
    out.entry("protocol")
        .or_insert_with(|| Value::String("modbus".into()));
    Some(Value::Object(out))
}

/// SPEC 2.16's `DEPLOYMENT_MODE` of an edge agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum DeploymentMode {
    /// No preloaded assets: provisioned by USB, QR, CSV, YAML or cloud sync.
    Production,
    /// Preloaded demo assets read from the protocol simulators (`plantd sim`).
    Development,
    /// Generated data, no device connections.
    Demo,
}

impl DeploymentMode {
    pub const ALL: [DeploymentMode; 3] = [
        DeploymentMode::Production,
        DeploymentMode::Development,
        DeploymentMode::Demo,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            DeploymentMode::Production => "production",
            DeploymentMode::Development => "development",
            DeploymentMode::Demo => "demo",
        }
    }
    /// A mode by name, or a message listing the modes.
    pub fn parse(s: &str) -> Result<Self, String> {
        let s = s.trim();
        Self::ALL
            .into_iter()
            .find(|m| m.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                format!(
                    "unknown DEPLOYMENT_MODE '{s}'; the modes are {}",
                    Self::ALL.map(Self::as_str).join(", ")
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(entries: &[(String, Value)]) -> Vec<(String, String)> {
        let mut v = Validator::new();
        let rows = asset_rows(entries, &HashSet::new(), &mut v);
        match v.finish() {
            Ok(()) => {
                assert_eq!(rows.len(), entries.len());
                Vec::new()
            }
            Err(e) => e.into_iter().map(|f| (f.field, f.message)).collect(),
        }
    }

    #[test]
    fn a_label_without_addresses_is_refused_on_its_sensors() {
        let mut v = Validator::new();
        let entry = qr_entry(
            &json!({"id": "T", "t": "tank", "h": "10.1.2.3", "s": [{"n": "Level"}], "x": 1}),
            &mut v,
        )
        .unwrap();
        assert_eq!(v.len(), 1);
        let p = problems(&[("label".into(), entry)]);
        assert!(p.iter().any(|(f, _)| f == "label.sensors"), "{p:?}");
    }

    #[test]
    fn rows_become_data_source_configs() {
        let p = problems(&[(
            "line 2".into(),
            json!({"asset_id": "P", "asset_type": "pump", "protocol": "opcua", "host": "plc",
                   "sensors": "Flow;Speed:7;Temp:Line1.T"}),
        )]);
        assert!(p.is_empty(), "{p:?}");
        let row = AssetRow {
            asset_id: "P".into(),
            asset_type: "pump".into(),
            protocol: DataSourceType::Opcua,
            host: "plc".into(),
            port: 4840,
            sensors: vec![
                Sensor {
                    name: "Flow".into(),
                    address: None,
                },
                Sensor {
                    name: "Speed".into(),
                    address: Some("7".into()),
                },
                Sensor {
                    name: "Temp".into(),
                    address: Some("Line1.T".into()),
                },
            ],
            enabled: true,
            update_rate_ms: 1000,
            unit_id: 1,
            initial_state: None,
            linked_to: None,
        };
        let c = row.data_source_config();
        assert_eq!(c["endpoint"], "opc.tcp://plc:4840");
        let nodes: Vec<&str> = c["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["node_id"].as_str().unwrap())
            .collect();
        assert_eq!(nodes, ["ns=2;s=P.Flow", "ns=2;i=7", "ns=2;s=Line1.T"]);
    }
}
