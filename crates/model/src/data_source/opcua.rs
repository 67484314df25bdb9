//! OPC UA data sources: the validated config connectors read, security policies, node ids and
//! explicit node lists.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{ConfigReader, MAX_MAPPED_TAGS, default_interval_ms};

pub(super) const OPCUA_POLICIES: &[&str] = &[
    "None",
    "Basic128Rsa15",
    "Basic256",
    "Basic256Sha256",
    "Aes128_Sha256_RsaOaep",
    "Aes256_Sha256_RsaPss",
];

impl ConfigReader<'_> {
    pub(super) fn optional_node_id(&mut self, key: &str) {
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

    /// An explicit OPC UA node list: `nodes[i]` = {node_id, asset_id, tag_name}.
    pub(super) fn opcua_nodes(&mut self) {
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
}

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

fn none_text() -> String {
    "None".into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data_source::tests::check;
    use crate::data_source::{DataSourceType, MqttConfig};
    use serde_json::json;

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
        .unwrap();
        assert_eq!(sparkplug["payload_format"], "sparkplug_b");
        let unknown = check(
            DataSourceType::Mqtt,
            json!({"broker_url": "mqtt://b", "topics": ["x/#"], "payload_format": "xml"}),
        )
        .unwrap_err();
        assert!(unknown[0].contains("payload_format"), "{unknown:?}");
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
}
