//! The OPC UA face of the simulation (async-opcua): one namespace `urn:plantd:sim`, a
//! `Simulation` folder under Objects, a folder per asset and a variable per simulated variable,
//! with string node ids `ns=<n>;s=<asset_id>.<Variable>`. Analog variables carry the `EURange`
//! and `EngineeringUnits` properties.

use opcua::crypto::SecurityPolicy;
use opcua::server::address_space::{AccessLevel, AddressSpace, ObjectBuilder, VariableBuilder};
use opcua::server::diagnostics::NamespaceMetadata;
use opcua::server::node_manager::memory::{SimpleNodeManager, simple_node_manager};
use opcua::server::{ANONYMOUS_USER_TOKEN_ID, Server, ServerBuilder, ServerHandle};
use opcua::types::{
    DataTypeId, DataValue, DateTime, EUInformation, LocalizedText, MessageSecurityMode, NodeId,
    QualifiedName, Range, UAString, VariableId, VariableTypeId, Variant,
};
use std::sync::Arc;

use crate::catalog::DataType;
use crate::config::{SecurityMode, SimConfig};
use crate::engine::{Value, VariableView};

/// The simulator's namespace URI; its index is 2 on this server (read `NamespaceArray` to be sure).
pub const NAMESPACE_URI: &str = "urn:plantd:sim";

/// Monitored items one subscription may hold.
pub const MAX_MONITORED_ITEMS_PER_SUBSCRIPTION: usize = 1_000_000;

/// Builds the server for `config` (endpoint security, session and subscription limits).
pub fn build(
    config: &SimConfig,
    host: &str,
    port: u16,
    pki_dir: &std::path::Path,
) -> Result<(Server, ServerHandle), String> {
    // Anonymous clients, or (when users are configured) those users only.
    let user_ids: Vec<String> = (0..config.users.len())
        .map(|i| format!("user-{i}"))
        .collect();
    let tokens: Vec<&str> = if config.users.is_empty() {
        vec![ANONYMOUS_USER_TOKEN_ID]
    } else {
        user_ids.iter().map(String::as_str).collect()
    };
    let tokens = tokens.as_slice();
    let (policy, mode) = match config.security_mode {
        SecurityMode::None => (SecurityPolicy::None, MessageSecurityMode::None),
        SecurityMode::Sign => (SecurityPolicy::Basic256Sha256, MessageSecurityMode::Sign),
        SecurityMode::SignAndEncrypt => (
            SecurityPolicy::Basic256Sha256,
            MessageSecurityMode::SignAndEncrypt,
        ),
    };
    let mut builder = ServerBuilder::new()
        .application_name("plantd simulation server")
        .application_uri("urn:plantd:sim:server")
        .product_uri("urn:plantd:sim")
        .host(host)
        .port(port)
        .pki_dir(pki_dir)
        .create_sample_keypair(true)
        // A simulator with security: clients' certificates are trusted as they come (without
        // security none are exchanged, and nothing needs trusting).
        .trust_client_certs(config.security_mode != SecurityMode::None)
        .diagnostics_enabled(true)
        .max_sessions(config.max_sessions as usize)
        // A publish response to a subscription of many thousand items is large (the library's
        // defaults, 1,000 array elements and 320 KiB messages, cut it off).
        .max_array_length(MAX_MONITORED_ITEMS_PER_SUBSCRIPTION)
        .max_message_size(64 * 1024 * 1024)
        .max_chunk_count(0)
        .discovery_urls(vec![format!("opc.tcp://{host}:{port}/")])
        .add_endpoint("sim", ("/", policy, mode, tokens))
        .default_endpoint("sim")
        .with_node_manager(simple_node_manager(
            NamespaceMetadata {
                namespace_uri: NAMESPACE_URI.to_owned(),
                ..Default::default()
            },
            "plantd-sim",
        ));
    for (id, u) in user_ids.iter().zip(&config.users) {
        builder = builder.add_user_token(
            id.clone(),
            opcua::server::ServerUserToken::user_pass(u.username.as_str(), u.password.as_str()),
        );
    }
    let limits = builder.limits_mut();
    limits.subscriptions.max_subscriptions_per_session = config.max_subscriptions as usize;
    // One subscription may watch every variable (the library's default is 1,000).
    limits.subscriptions.max_monitored_items_per_sub = MAX_MONITORED_ITEMS_PER_SUBSCRIPTION;
    // Variables may update every 10 ms (the smallest update_rate_ms), so clients may sample that
    // fast; the library's default floor of 100 ms would merge faster changes.
    limits.subscriptions.min_sampling_interval_ms = 10.0;
    builder.build()
}

/// The node id of a variable: its configured id (identifier part), else `<asset>.<name>`.
pub fn node_id(ns: u16, v: &VariableView) -> NodeId {
    let identifier = match &v.node_id {
        Some(id) => id
            .rsplit_once("s=")
            .map_or(id.as_str(), |(_, s)| s)
            .to_string(),
        None => format!("{}.{}", v.asset_id, v.name),
    };
    NodeId::new(ns, identifier)
}

/// OPC UA unit id of a UNECE code (OPC UA Part 8, 5.6.3).
fn unece(code: &str) -> i32 {
    code.bytes().fold(0i32, |acc, b| (acc << 8) | i32::from(b))
}

fn units(unit: &str) -> EUInformation {
    let (code, description) = match unit {
        "mm/s" => ("C16", "millimetre per second"),
        "degC" => ("CEL", "degree Celsius"),
        "bar" => ("BAR", "bar"),
        "L/min" => ("L2", "litre per minute"),
        "A" => ("AMP", "ampere"),
        "RPM" => ("RPM", "revolutions per minute"),
        "V" => ("VLT", "volt"),
        "kW" => ("KWT", "kilowatt"),
        "%" => ("P1", "percent"),
        "ppm" => ("59", "part per million"),
        "m3/h" => ("MQH", "cubic metre per hour"),
        _ => ("", ""),
    };
    EUInformation {
        namespace_uri: UAString::from("http://www.opcfoundation.org/UA/units/un/cefact"),
        unit_id: if code.is_empty() { -1 } else { unece(code) },
        display_name: LocalizedText::new("en", unit),
        description: LocalizedText::new("en", description),
    }
}

pub fn variant(v: &Value, data_type: DataType) -> Variant {
    match (v, data_type) {
        (Value::Number(x), DataType::Int) => Variant::Int32(*x as i32),
        (Value::Number(x), _) => Variant::Double(*x),
        (Value::Flag(b), _) => Variant::Boolean(*b),
        (Value::Text(t), _) => Variant::String(t.as_str().into()),
    }
}

/// The address space the server serves, and how to update it.
pub struct Face {
    pub handle: ServerHandle,
    manager: Arc<SimpleNodeManager>,
    pub ns: u16,
    /// Nodes this face added (deleted again when the configuration changes).
    added: Vec<NodeId>,
    /// Variables in snapshot order: node id, type, last value served, position in the
    /// simulation.
    pub nodes: Vec<(NodeId, DataType, Value, (usize, usize))>,
}

impl Face {
    pub fn new(handle: ServerHandle) -> Result<Self, String> {
        let manager = handle
            .node_managers()
            .get_of_type::<SimpleNodeManager>()
            .ok_or("the OPC UA node manager is missing")?;
        let ns = handle
            .get_namespace_index(NAMESPACE_URI)
            .ok_or("the simulator's namespace is not registered")?;
        Ok(Self {
            handle,
            manager,
            ns,
            added: Vec::new(),
            nodes: Vec::new(),
        })
    }

    /// Replaces the served variables with `variables` (a snapshot of the simulation).
    pub fn populate(&mut self, variables: &[VariableView]) {
        let ns = self.ns;
        let mut space = self.manager.address_space().write();
        for id in self.added.drain(..).rev() {
            space.delete(&id, true);
        }
        self.nodes.clear();
        let root = NodeId::new(ns, "Simulation");
        space.add_folder(
            &root,
            QualifiedName::new(ns, "Simulation"),
            "Simulation",
            &NodeId::objects_folder_id(),
        );
        self.added.push(root.clone());
        let mut assets: Vec<&str> = Vec::new();
        for v in variables {
            if !assets.contains(&v.asset_id.as_str()) {
                assets.push(&v.asset_id);
                let asset = NodeId::new(ns, v.asset_id.clone());
                ObjectBuilder::new(
                    &asset,
                    QualifiedName::new(ns, v.asset_id.as_str()),
                    v.asset_id.as_str(),
                )
                .is_folder()
                .organized_by(&root)
                .insert(&mut *space);
                self.added.push(asset);
            }
            let parent = NodeId::new(ns, v.asset_id.clone());
            let id = node_id(ns, v);
            let data_type = match v.data_type {
                DataType::Float => DataTypeId::Double,
                DataType::Int => DataTypeId::Int32,
                DataType::Bool => DataTypeId::Boolean,
                DataType::Text => DataTypeId::String,
            };
            let analog =
                v.range.is_some() && matches!(v.data_type, DataType::Float | DataType::Int);
            VariableBuilder::new(
                &id,
                QualifiedName::new(ns, v.name.as_str()),
                v.name.as_str(),
            )
            .data_type(data_type)
            .value(variant(&v.value, v.data_type))
            .access_level(AccessLevel::CURRENT_READ)
            .user_access_level(AccessLevel::CURRENT_READ)
            .has_type_definition(if analog {
                VariableTypeId::AnalogItemType
            } else {
                VariableTypeId::BaseDataVariableType
            })
            .organized_by(&parent)
            .insert(&mut *space);
            self.added.push(id.clone());
            if let (true, Some((low, high))) = (analog, v.range) {
                add_property(
                    &mut space,
                    ns,
                    &id,
                    "EURange",
                    DataTypeId::Range,
                    Range { low, high }.into(),
                );
                let unit = v.unit.as_deref().unwrap_or("");
                add_property(
                    &mut space,
                    ns,
                    &id,
                    "EngineeringUnits",
                    DataTypeId::EUInformation,
                    units(unit).into(),
                );
                self.added
                    .push(NodeId::new(ns, format!("{}.EURange", identifier(&id))));
                self.added.push(NodeId::new(
                    ns,
                    format!("{}.EngineeringUnits", identifier(&id)),
                ));
            }
            self.nodes
                .push((id, v.data_type, v.value.clone(), v.position));
        }
    }

    /// Serves the values that changed since the last call; returns how many. Values are
    /// compared under the simulation's lock, which is released before clients are notified.
    pub fn publish(&mut self, state: &crate::control::SimState) -> u64 {
        let now = DateTime::now();
        let mut changed: Vec<(usize, DataValue)> = Vec::new();
        {
            let sim = state.lock();
            for (i, (_, data_type, last, position)) in self.nodes.iter_mut().enumerate() {
                if let Some(v) = sim.value_at(*position)
                    && v != last
                {
                    changed.push((i, DataValue::new_at(variant(v, *data_type), now)));
                    *last = v.clone();
                }
            }
        }
        if changed.is_empty() {
            return 0;
        }
        let n = changed.len() as u64;
        let nodes = &self.nodes;
        let _ = self.manager.set_values(
            self.handle.subscriptions(),
            changed.into_iter().map(|(i, dv)| (&nodes[i].0, None, dv)),
        );
        n
    }

    /// Open sessions (from the server's diagnostics).
    pub fn sessions(&self) -> u64 {
        match self
            .handle
            .info()
            .summary()
            .get(VariableId::Server_ServerDiagnostics_ServerDiagnosticsSummary_CurrentSessionCount)
            .and_then(|dv| dv.value)
        {
            Some(Variant::UInt32(n)) => u64::from(n),
            _ => 0,
        }
    }
}

fn identifier(id: &NodeId) -> String {
    match &id.identifier {
        opcua::types::Identifier::String(s) => s.as_ref().to_string(),
        other => other.to_string(),
    }
}

fn add_property(
    space: &mut AddressSpace,
    ns: u16,
    of: &NodeId,
    name: &str,
    data_type: DataTypeId,
    value: Variant,
) {
    VariableBuilder::new(
        &NodeId::new(ns, format!("{}.{name}", identifier(of))),
        name,
        name,
    )
    .data_type(data_type)
    .value(value)
    .has_type_definition(VariableTypeId::PropertyType)
    .property_of(of.clone())
    .insert(space);
}
