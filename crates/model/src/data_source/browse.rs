//! What a device offers, level by level (`GET /v1/data-sources/{id}/browse`): an OPC UA server's
//! address space, a Modbus source's register map, the topics an MQTT broker carries.

use serde::Serialize;

use crate::Timestamp;

/// One entry of a browsed level.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct BrowseEntry {
    /// What to browse next (`?node=`) or to collect: an OPC UA node id (`ns=2;s=Pump_01`), a
    /// Modbus register (`holding:100`), an MQTT topic.
    pub node_id: String,
    /// OPC UA: the browse name without its namespace; Modbus: the tag name; MQTT: the topic's
    /// last level.
    pub browse_name: String,
    pub display_name: String,
    /// `Object`, `Variable` (OPC UA), `Register` (Modbus), `Topic` (MQTT).
    pub node_class: String,
    /// OPC UA: the variable's data type (`Double`, `Boolean`, ...); Modbus: the register's
    /// type (`u16`, `f32`, ...); MQTT: `json`, `text` or `binary`; none for objects.
    pub data_type: Option<String>,
    /// Whether browsing this entry gives more (OPC UA objects).
    pub has_children: bool,
    /// Whether plantd stores this entry's values now.
    pub collected: bool,
    /// The asset and tag its values are stored as, when that is known (OPC UA variables: the
    /// browsed object's name and the variable's; Modbus registers).
    pub asset_id: Option<String>,
    pub tag_name: Option<String>,
    /// Whether the values are numbers plantd can store (OPC UA: numeric and boolean types).
    pub numeric: Option<bool>,
    /// MQTT: the latest payload seen (at most 256 characters; binary as a description).
    pub sample: Option<String>,
    /// MQTT: when the latest message arrived, and how many arrived while listening.
    pub seen_at: Option<Timestamp>,
    pub messages: Option<u64>,
}

impl BrowseEntry {
    /// An entry with its names and class, nothing else known yet.
    pub fn new(node_id: String, browse_name: String, display_name: String, class: &str) -> Self {
        Self {
            node_id,
            browse_name,
            display_name,
            node_class: class.to_string(),
            data_type: None,
            has_children: false,
            collected: false,
            asset_id: None,
            tag_name: None,
            numeric: None,
            sample: None,
            seen_at: None,
            messages: None,
        }
    }
}

/// Why a level could not be browsed.
#[derive(Debug, thiserror::Error)]
pub enum BrowseError {
    /// The `node` asked for cannot be one of this source's (its words say why).
    #[error("{0}")]
    BadNode(String),
    /// The server has no such node.
    #[error("{0}")]
    UnknownNode(String),
    /// The device could not be reached or asked.
    #[error("{0}")]
    Device(String),
}
