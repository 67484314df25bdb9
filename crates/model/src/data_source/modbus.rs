//! Modbus data sources: the validated config connectors read, and the validation of its
//! register map.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{ConfigReader, MAX_MAPPED_TAGS, default_interval_ms, one_u8};

impl ConfigReader<'_> {
    /// The Modbus register map: `registers[i]` objects.
    pub(super) fn registers(&mut self) {
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
}

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

fn default_modbus_port() -> u16 {
    502
}
fn one_f64() -> f64 {
    1.0
}
fn default_timeout_ms() -> u64 {
    3000
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data_source::tests::check;
    use crate::data_source::{DataSourceType, derive_endpoint};
    use serde_json::json;

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
}
