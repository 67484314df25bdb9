//! One level of an OPC UA server's address space: the objects and variables a node refers to
//! hierarchically (not properties), each variable with its data type's name and whether plantd
//! can store it (numbers and booleans), named as the connector would store it (asset = the
//! browsed node's browse name, tag = the variable's).

use ::opcua::types::{
    AttributeId, BrowseDescription, BrowseDirection, BrowseResultMask, ByteString, NodeClass,
    NodeClassMask, NodeId, ObjectId, ReadValueId, ReferenceTypeId, StatusCode, TimestampsToReturn,
    Variant,
};
use plantd_model::data_source::{BrowseEntry, BrowseError, OpcuaConfig};
use std::collections::HashMap;
use std::path::Path;
use std::str::FromStr;

use crate::opcua::{connect, describe, numeric_type};

/// Entries of one level, at most (a larger level is cut here).
const MAX_ENTRIES: usize = 10_000;

pub(crate) async fn level(
    c: &OpcuaConfig,
    pki_dir: &Path,
    node: Option<&str>,
) -> Result<Vec<BrowseEntry>, BrowseError> {
    let node: NodeId = match node.or(c.root_node.as_deref()) {
        Some(text) => NodeId::from_str(text).map_err(|_| {
            BrowseError::BadNode(format!(
                "'{text}' is not an OPC UA node id (for example ns=2;s=Pump_01 or i=85)"
            ))
        })?,
        None => ObjectId::ObjectsFolder.into(),
    };
    let work = async {
        let conn = connect(c, pki_dir).await.map_err(BrowseError::Device)?;
        let session = &conn.session;
        let failed = |what: &str, code: StatusCode| {
            BrowseError::Device(format!("{what} failed: {}", describe(code)))
        };
        // The node's own name: the asset of the variables under it.
        let name = session
            .read(
                &[ReadValueId::new(node.clone(), AttributeId::BrowseName)],
                TimestampsToReturn::Neither,
                0.0,
            )
            .await
            .map_err(|e| failed("reading the node", e.status()))?
            .into_iter()
            .next()
            .and_then(|dv| match dv.value {
                Some(Variant::QualifiedName(q)) => Some(q.name.to_string()),
                _ => None,
            })
            .ok_or_else(|| BrowseError::UnknownNode(format!("the server has no node {node}")))?;
        let description = BrowseDescription {
            node_id: node.clone(),
            browse_direction: BrowseDirection::Forward,
            reference_type_id: ReferenceTypeId::HierarchicalReferences.into(),
            include_subtypes: true,
            node_class_mask: (NodeClassMask::OBJECT | NodeClassMask::VARIABLE).bits(),
            result_mask: BrowseResultMask::All as u32,
        };
        let mut results = session
            .browse(&[description], 1000, None)
            .await
            .map_err(|e| failed("browsing", e.status()))?;
        let mut entries: Vec<(NodeId, BrowseEntry)> = Vec::new();
        while let Some(result) = results.pop() {
            if result.status_code == StatusCode::BadNodeIdUnknown {
                return Err(BrowseError::UnknownNode(format!(
                    "the server has no node {node}"
                )));
            }
            if result.status_code.is_bad() {
                return Err(failed("browsing", result.status_code));
            }
            for r in result.references.unwrap_or_default() {
                if r.reference_type_id == ReferenceTypeId::HasProperty
                    || r.node_id.server_index != 0
                    || entries.len() >= MAX_ENTRIES
                {
                    continue;
                }
                let class = match r.node_class {
                    NodeClass::Object => "Object",
                    NodeClass::Variable => "Variable",
                    _ => continue,
                };
                let id = r.node_id.node_id.clone();
                let mut e = BrowseEntry::new(
                    id.to_string(),
                    r.browse_name.name.to_string(),
                    r.display_name.text.to_string(),
                    class,
                );
                e.has_children = r.node_class == NodeClass::Object;
                if r.node_class == NodeClass::Variable {
                    e.asset_id = Some(name.clone());
                    e.tag_name = Some(e.browse_name.clone());
                }
                entries.push((id, e));
            }
            let point: ByteString = result.continuation_point;
            if point.is_null() || entries.len() >= MAX_ENTRIES {
                if !point.is_null() {
                    let _ = session.browse_next(true, &[point]).await;
                }
                break;
            }
            results = session
                .browse_next(false, &[point])
                .await
                .map_err(|e| failed("browsing", e.status()))?;
        }
        // Variables' data types, by name.
        let variables: Vec<usize> = (0..entries.len())
            .filter(|&i| entries[i].1.node_class == "Variable")
            .collect();
        let mut types: Vec<Option<NodeId>> = Vec::with_capacity(variables.len());
        for chunk in variables.chunks(1000) {
            let reads: Vec<ReadValueId> = chunk
                .iter()
                .map(|&i| ReadValueId::new(entries[i].0.clone(), AttributeId::DataType))
                .collect();
            let values = session
                .read(&reads, TimestampsToReturn::Neither, 0.0)
                .await
                .map_err(|e| failed("reading data types", e.status()))?;
            types.extend(values.into_iter().map(|dv| match dv.value {
                Some(Variant::NodeId(t)) => Some(*t),
                _ => None,
            }));
        }
        let mut distinct: Vec<NodeId> = types.iter().flatten().cloned().collect();
        distinct.sort_by_key(|t| t.to_string());
        distinct.dedup();
        let mut type_names: HashMap<NodeId, String> = HashMap::new();
        for chunk in distinct.chunks(1000) {
            let reads: Vec<ReadValueId> = chunk
                .iter()
                .map(|t| ReadValueId::new(t.clone(), AttributeId::BrowseName))
                .collect();
            if let Ok(values) = session.read(&reads, TimestampsToReturn::Neither, 0.0).await {
                for (t, dv) in chunk.iter().zip(values) {
                    if let Some(Variant::QualifiedName(q)) = dv.value {
                        type_names.insert(t.clone(), q.name.to_string());
                    }
                }
            }
        }
        for (&i, t) in variables.iter().zip(types) {
            let e = &mut entries[i].1;
            e.numeric = Some(t.as_ref().is_some_and(numeric_type));
            e.data_type = t.map(|t| type_names.get(&t).cloned().unwrap_or_else(|| t.to_string()));
        }
        drop(conn);
        Ok(entries.into_iter().map(|(_, e)| e).collect())
    };
    tokio::time::timeout(crate::net::PROBE_TIMEOUT * 3, work)
        .await
        .unwrap_or_else(|_| Err(BrowseError::Device(crate::net::timed_out(&c.endpoint))))
}
