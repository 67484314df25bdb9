//! What an OPC UA server says its variables measure: the variable's `Description`, and the
//! `EngineeringUnits` (its unit) and `EURange` properties of analog items (OPC UA Part 8,
//! AnalogItemType), read once a session has chosen its tags.

use ::opcua::client::Session;
use ::opcua::types::{
    AttributeId, BrowsePath, EUInformation, NodeId, QualifiedName, Range, ReadValueId,
    ReferenceTypeId, RelativePath, RelativePathElement, TimestampsToReturn, Variant,
};
use plantd_model::tag::{EuRange, TagDescription};

/// Variables asked about per request.
const PER_REQUEST: usize = 500;

/// The properties read of each variable, in this order.
const PROPERTIES: [&str; 2] = ["EngineeringUnits", "EURange"];

/// What the server says of each variable (`node`, asset, tag), for those it says anything of.
/// A server that refuses the questions is no error: telemetry goes on without descriptions.
pub(crate) async fn descriptions(
    session: &Session,
    tags: &[(NodeId, String, String)],
) -> Vec<(String, String, TagDescription)> {
    let mut out = Vec::new();
    for chunk in tags.chunks(PER_REQUEST) {
        let mut found = vec![TagDescription::default(); chunk.len()];
        // Each variable's description attribute.
        let reads: Vec<ReadValueId> = chunk
            .iter()
            .map(|(node, _, _)| ReadValueId::new(node.clone(), AttributeId::Description))
            .collect();
        if let Ok(values) = session.read(&reads, TimestampsToReturn::Neither, 0.0).await {
            for (d, dv) in found.iter_mut().zip(values) {
                if let Some(Variant::LocalizedText(t)) = dv.value {
                    d.description = text(t.text.as_ref());
                }
            }
        }
        // Its properties: found by name, then read.
        let paths: Vec<BrowsePath> = chunk
            .iter()
            .flat_map(|(node, _, _)| {
                PROPERTIES.map(|name| BrowsePath {
                    starting_node: node.clone(),
                    relative_path: RelativePath {
                        elements: Some(vec![RelativePathElement {
                            reference_type_id: ReferenceTypeId::HasProperty.into(),
                            is_inverse: false,
                            include_subtypes: true,
                            target_name: QualifiedName::new(0, name),
                        }]),
                    },
                })
            })
            .collect();
        if let Ok(results) = session.translate_browse_paths_to_node_ids(&paths).await {
            let mut reads = Vec::new();
            let mut which = Vec::new();
            for (i, r) in results.iter().enumerate() {
                if let Some(target) = r.targets.as_ref().and_then(|t| t.first())
                    && r.status_code.is_good()
                {
                    reads.push(ReadValueId::new(
                        target.target_id.node_id.clone(),
                        AttributeId::Value,
                    ));
                    which.push(i);
                }
            }
            if !reads.is_empty()
                && let Ok(values) = session.read(&reads, TimestampsToReturn::Neither, 0.0).await
            {
                for (i, dv) in which.into_iter().zip(values) {
                    let Some(Variant::ExtensionObject(eo)) = dv.value else {
                        continue;
                    };
                    let d = &mut found[i / PROPERTIES.len()];
                    if let Some(eu) = eo.inner_as::<EUInformation>() {
                        d.unit = text(eu.display_name.text.as_ref());
                    } else if let Some(r) = eo.inner_as::<Range>()
                        && r.low.is_finite()
                        && r.high.is_finite()
                        && r.low < r.high
                    {
                        d.eu_range = Some(EuRange {
                            low: r.low,
                            high: r.high,
                        });
                    }
                }
            }
        }
        for ((_, asset, tag), d) in chunk.iter().zip(found) {
            if d != TagDescription::default() {
                out.push((asset.clone(), tag.clone(), d));
            }
        }
    }
    out
}

/// A text worth keeping: trimmed, not empty, at most 500 characters.
fn text(t: &str) -> Option<String> {
    let t = t.trim();
    (!t.is_empty()).then(|| t.chars().take(500).collect())
}
