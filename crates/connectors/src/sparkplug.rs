//! Sparkplug B (Eclipse Sparkplug 3.0) for MQTT data sources with `payload_format:
//! sparkplug_b`: NBIRTH, DBIRTH, NDATA, DDATA, NDEATH and DDEATH decoded into points (the tag is
//! the metric name), with aliases from the births, `seq` and `bdSeq` tracking, and a rebirth
//! request (NCMD `Node Control/Rebirth`) on a gap, an unknown alias or data from a node without
//! a birth. After a death the node's (device's) tags are written once more with quality `bad`,
//! so the latest values say so until the next birth.
//!
//! Assets: a node's metrics belong to `{group}:{node}`, a device's to `{group}:{node}:{device}`.
//! Integers arrive sign-extended (Eclipse Tahu) or zero-extended (pysparkplug): masked to the
//! declared width, then cast.

use plantd_model::Timestamp;
use plantd_model::telemetry::Quality;
use prost::Message;
use std::collections::HashMap;

use crate::sink::Mapped;
use crate::sparkplug_proto::payload::{Metric, metric};
use crate::sparkplug_proto::{DataType, Payload};

/// The namespace of Sparkplug B topics.
pub const NAMESPACE: &str = "spBv1.0";
/// The metric a rebirth request sets.
pub const REBIRTH: &str = "Node Control/Rebirth";

/// What one message came to: points, and whether the node must be asked to be born again.
#[derive(Debug, Default, PartialEq)]
pub struct Decoded {
    pub points: Vec<Mapped>,
    /// `(group, node)` to send an NCMD rebirth request to, and why.
    pub rebirth: Option<(String, String, String)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    NBirth,
    NData,
    NDeath,
    DBirth,
    DData,
    DDeath,
}

/// What a birth said of one node or device: metric names by alias, the declared type and the
/// last value of each metric.
#[derive(Default)]
struct Born {
    aliases: HashMap<u64, String>,
    types: HashMap<String, u32>,
    last: HashMap<String, f64>,
}

impl Born {
    /// A metric's value as a good point, kept as the metric's last value; `None` when it is
    /// not a number.
    fn record(
        &mut self,
        m: &Metric,
        name: String,
        datatype: u32,
        asset: &str,
        at: Timestamp,
    ) -> Option<Mapped> {
        let v = number(m, datatype)?;
        self.last.insert(name.clone(), v);
        Some(point(
            asset,
            name,
            v,
            millis(m.timestamp, at),
            Quality::Good,
        ))
    }
}

#[derive(Default)]
struct Node {
    born: bool,
    bd_seq: Option<u64>,
    /// The `seq` the next message must carry.
    next_seq: u64,
    metrics: Born,
    devices: HashMap<String, Born>,
}

/// Sparkplug state of one subscription: what each node and device said at birth.
#[derive(Default)]
pub struct Decoder {
    nodes: HashMap<(String, String), Node>,
}

/// The parts of a Sparkplug topic: `spBv1.0/{group}/{kind}/{node}[/{device}]`; `None` for any
/// other topic (STATE and NCMD/DCMD included: they carry no data).
fn parse_topic(topic: &str) -> Option<(Kind, &str, &str, Option<&str>)> {
    let mut parts = topic.split('/');
    if parts.next()? != NAMESPACE {
        return None;
    }
    let group = parts.next()?;
    let kind = match parts.next()? {
        "NBIRTH" => Kind::NBirth,
        "NDATA" => Kind::NData,
        "NDEATH" => Kind::NDeath,
        "DBIRTH" => Kind::DBirth,
        "DDATA" => Kind::DData,
        "DDEATH" => Kind::DDeath,
        _ => return None,
    };
    let node = parts.next()?;
    let device = parts.next();
    if parts.next().is_some()
        || device.is_some() != matches!(kind, Kind::DBirth | Kind::DData | Kind::DDeath)
    {
        return None;
    }
    Some((kind, group, node, device))
}

/// A metric's number: integers masked to their declared width (then read signed or unsigned),
/// floats, booleans as 1/0; `None` for null, text and the other types.
fn number(m: &Metric, datatype: u32) -> Option<f64> {
    if m.is_null == Some(true) {
        return None;
    }
    let int = |v: u64| -> Option<f64> {
        let dt = DataType::try_from(datatype as i32).ok()?;
        Some(match dt {
            DataType::Int8 => (v as u8) as i8 as f64,
            DataType::Int16 => (v as u16) as i16 as f64,
            DataType::Int32 => (v as u32) as i32 as f64,
            DataType::Int64 => v as i64 as f64,
            DataType::UInt8 => (v as u8) as f64,
            DataType::UInt16 => (v as u16) as f64,
            DataType::UInt32 => (v as u32) as f64,
            DataType::UInt64 | DataType::DateTime => v as f64,
            DataType::Boolean => f64::from(u8::from(v != 0)),
            // An integer value under a declared float (some encoders): read as is.
            DataType::Float | DataType::Double => v as f64,
            _ => return None,
        })
    };
    match m.value.as_ref()? {
        metric::Value::IntValue(v) => int(u64::from(*v)),
        metric::Value::LongValue(v) => int(*v),
        metric::Value::FloatValue(v) => Some(f64::from(*v)),
        metric::Value::DoubleValue(v) => Some(*v),
        metric::Value::BooleanValue(b) => Some(f64::from(u8::from(*b))),
        _ => None,
    }
    .filter(|v| v.is_finite())
}

fn millis(ms: Option<u64>, fallback: Timestamp) -> Timestamp {
    ms.and_then(|m| i64::try_from(m).ok())
        .map_or(fallback, Timestamp::from_millis)
}

impl Decoder {
    /// Decodes one message of `topic`; an error says why it cannot be read at all.
    pub fn decode(
        &mut self,
        topic: &str,
        payload: &[u8],
        now: Timestamp,
    ) -> Result<Decoded, String> {
        let Some((kind, group, node, device)) = parse_topic(topic) else {
            return Ok(Decoded::default());
        };
        let p = Payload::decode(payload).map_err(|e| format!("not a Sparkplug B payload: {e}"))?;
        let at = millis(p.timestamp, now);
        let key = (group.to_string(), node.to_string());
        let asset = match device {
            Some(d) => format!("{group}:{node}:{d}"),
            None => format!("{group}:{node}"),
        };
        let rebirth = |why: &str| Some((group.to_string(), node.to_string(), why.to_string()));
        let mut out = Decoded::default();
        match kind {
            Kind::NBirth => {
                let bd_seq = bd_seq(&p.metrics);
                let n = self.nodes.entry(key).or_default();
                *n = Node {
                    born: true,
                    bd_seq,
                    next_seq: (p.seq.unwrap_or(0) + 1) % 256,
                    metrics: Born::default(),
                    devices: HashMap::new(),
                };
                out.points = birth(&mut n.metrics, &p.metrics, &asset, at);
            }
            Kind::DBirth => {
                let Some(n) = self.nodes.get_mut(&key).filter(|n| n.born) else {
                    out.rebirth = rebirth("a device was born before its node");
                    return Ok(out);
                };
                if !in_sequence(n, p.seq) {
                    out.rebirth = rebirth("a gap in seq");
                    return Ok(out);
                }
                let born = n
                    .devices
                    .entry(device.unwrap_or_default().to_string())
                    .or_default();
                *born = Born::default();
                out.points = birth(born, &p.metrics, &asset, at);
            }
            Kind::NData | Kind::DData => {
                let Some(n) = self.nodes.get_mut(&key).filter(|n| n.born) else {
                    out.rebirth = rebirth("data from a node without a birth");
                    return Ok(out);
                };
                if !in_sequence(n, p.seq) {
                    n.born = false;
                    out.rebirth = rebirth("a gap in seq");
                    return Ok(out);
                }
                let born = match device {
                    None => Some(&mut n.metrics),
                    Some(d) => n.devices.get_mut(d),
                };
                let result = match born {
                    Some(born) => data(born, &p.metrics, &asset, at),
                    None => Err("data from a device without a birth"),
                };
                match result {
                    Ok(points) => out.points = points,
                    Err(why) => {
                        n.born = false;
                        out.rebirth = rebirth(why);
                    }
                }
            }
            Kind::NDeath => {
                let Some(n) = self.nodes.get_mut(&key) else {
                    return Ok(out);
                };
                let bd_seq = bd_seq(&p.metrics);
                // A death of an earlier session (its bdSeq differs) is not this session's.
                if bd_seq.is_some() && n.bd_seq.is_some() && bd_seq != n.bd_seq {
                    return Ok(out);
                }
                n.born = false;
                out.points = dead(&n.metrics, &asset, at);
                for (d, born) in &n.devices {
                    out.points.extend(dead(born, &format!("{asset}:{d}"), at));
                }
            }
            Kind::DDeath => {
                if let Some(born) = self
                    .nodes
                    .get_mut(&key)
                    .and_then(|n| n.devices.remove(device.unwrap_or_default()))
                {
                    out.points = dead(&born, &asset, at);
                }
            }
        }
        Ok(out)
    }
}

/// The `bdSeq` metric of a birth or death certificate.
fn bd_seq(metrics: &[Metric]) -> Option<u64> {
    metrics
        .iter()
        .find(|m| m.name.as_deref() == Some("bdSeq"))
        .and_then(|m| number(m, m.datatype.unwrap_or(DataType::UInt64 as u32)))
        .map(|v| v as u64)
}

/// Whether `seq` is the one expected next (and expects the one after it).
fn in_sequence(n: &mut Node, seq: Option<u64>) -> bool {
    let Some(seq) = seq else { return true };
    if seq % 256 != n.next_seq {
        return false;
    }
    n.next_seq = (seq + 1) % 256;
    true
}

fn point(asset: &str, tag: String, value: f64, timestamp: Timestamp, quality: Quality) -> Mapped {
    Mapped {
        asset_id: asset.to_string(),
        tag_name: tag,
        value,
        timestamp,
        quality,
    }
}

/// A DATA message's points, names from the metric or its alias; an unknown alias refuses the
/// whole message (the node is asked to be born again).
fn data(
    born: &mut Born,
    metrics: &[Metric],
    asset: &str,
    at: Timestamp,
) -> Result<Vec<Mapped>, &'static str> {
    let mut points = Vec::new();
    for m in metrics {
        let name = match (&m.name, m.alias) {
            (Some(n), _) if !n.is_empty() => n.clone(),
            (_, Some(a)) => born.aliases.get(&a).cloned().ok_or("an unknown alias")?,
            _ => continue,
        };
        let datatype = m
            .datatype
            .or_else(|| born.types.get(&name).copied())
            .unwrap_or(DataType::Double as u32);
        points.extend(born.record(m, name, datatype, asset, at));
    }
    Ok(points)
}

/// Records a birth's aliases, types and values; its points.
fn birth(born: &mut Born, metrics: &[Metric], asset: &str, at: Timestamp) -> Vec<Mapped> {
    let mut points = Vec::new();
    for m in metrics {
        let Some(name) = m.name.clone().filter(|n| !n.is_empty()) else {
            continue;
        };
        if let Some(a) = m.alias {
            born.aliases.insert(a, name.clone());
        }
        let datatype = m.datatype.unwrap_or(DataType::Double as u32);
        born.types.insert(name.clone(), datatype);
        if name == "bdSeq" || name.starts_with("Node Control/") {
            continue;
        }
        points.extend(born.record(m, name, datatype, asset, at));
    }
    points
}

/// The last value of every metric of a dead node or device, with quality bad.
fn dead(born: &Born, asset: &str, at: Timestamp) -> Vec<Mapped> {
    born.last
        .iter()
        .map(|(name, v)| point(asset, name.clone(), *v, at, Quality::Bad))
        .collect()
}

/// The NCMD that asks `node` of `group` to publish its births again.
pub fn rebirth_request(group: &str, node: &str, now: Timestamp) -> (String, Vec<u8>) {
    let payload = Payload {
        timestamp: Some(now.millis() as u64),
        metrics: vec![Metric {
            name: Some(REBIRTH.into()),
            timestamp: Some(now.millis() as u64),
            datatype: Some(DataType::Boolean as u32),
            value: Some(metric::Value::BooleanValue(true)),
            ..Default::default()
        }],
        ..Default::default()
    };
    (
        format!("{NAMESPACE}/{group}/NCMD/{node}"),
        payload.encode_to_vec(),
    )
}

#[cfg(test)]
mod tests;
