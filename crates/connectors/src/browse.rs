//! What a source offers, a level at a time: an OPC UA server's address space (`opcua_browse`),
//! a Modbus source's register map (its config: Modbus devices do not describe themselves), the
//! topics an MQTT broker carries while we listen (`mqtt::listen`). Whether an entry is collected
//! now is the caller's to say: it knows what was stored.

use plantd_model::data_source::{BrowseEntry, BrowseError, RegisterKind, RegisterType};
use std::time::Duration;

use crate::Protocol;
use crate::{modbus, mqtt, opcua_browse};

/// How long an MQTT browse listens, at most.
pub const MAX_LISTEN: Duration = Duration::from_secs(30);

/// The entries under `node` (OPC UA: default the configured root node, else the Objects
/// folder; MQTT: a topic filter, default `#`, listened to for `listen`; Modbus: the register
/// map, `node` must be absent).
pub async fn browse(
    protocol: &Protocol,
    node: Option<&str>,
    listen: Duration,
) -> Result<Vec<BrowseEntry>, BrowseError> {
    match protocol {
        Protocol::Opcua(c, pki) => opcua_browse::level(c, pki, node).await,
        Protocol::Modbus(c) => {
            if node.is_some() {
                return Err(BrowseError::BadNode(
                    "a Modbus source has one level, its register map: leave node out".into(),
                ));
            }
            Ok(c.registers
                .iter()
                .map(|r| {
                    let mut e = BrowseEntry::new(
                        format!("{}:{}", kind(r.kind), r.address),
                        r.tag_name.clone(),
                        format!("{} {} ({})", kind(r.kind), r.address, r.tag_name),
                        "Register",
                    );
                    e.data_type = Some(register_type(r.data_type).into());
                    e.asset_id = Some(modbus::asset_of(c, r).to_string());
                    e.tag_name = Some(r.tag_name.clone());
                    e.numeric = Some(true);
                    e
                })
                .collect())
        }
        Protocol::Mqtt(c) => mqtt::listen(c, node.unwrap_or("#"), listen.min(MAX_LISTEN)).await,
    }
}

fn kind(k: RegisterKind) -> &'static str {
    match k {
        RegisterKind::Holding => "holding",
        RegisterKind::Input => "input",
        RegisterKind::Coil => "coil",
        RegisterKind::Discrete => "discrete",
    }
}

fn register_type(t: RegisterType) -> &'static str {
    match t {
        RegisterType::U16 => "u16",
        RegisterType::I16 => "i16",
        RegisterType::U32 => "u32",
        RegisterType::I32 => "i32",
        RegisterType::F32 => "f32",
        RegisterType::Bool => "bool",
    }
}
