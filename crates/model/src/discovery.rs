//! Network discovery's request (issue 34, SPEC 4.15 `POST /api/discover/scan`): which
//! addresses, ports and protocols a scan may probe, checked and expanded. A scan touches only
//! the addresses the caller names.

use crate::validation::{FieldError, Validator};
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, Ipv4Addr};

/// Addresses one scan probes at most (a /22).
pub const MAX_ADDRESSES: usize = 1024;
/// TCP probes (addresses x ports) one scan makes at most.
pub const MAX_TCP_PROBES: usize = 4096;

/// The DNS-SD service type OPC UA servers announce over mDNS (OPC UA Part 12, 4.3.4; its TXT
/// record's `path` is the endpoint's path, `caps` the server's capabilities).
pub const OPCUA_MDNS_SERVICE: &str = "_opcua-tcp._tcp.local.";

/// A protocol discovery knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    Modbus,
    Opcua,
    Bacnet,
    EthernetIp,
}

impl Protocol {
    pub const ALL: [Protocol; 4] = [
        Protocol::Modbus,
        Protocol::Opcua,
        Protocol::Bacnet,
        Protocol::EthernetIp,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Modbus => "modbus",
            Protocol::Opcua => "opcua",
            Protocol::Bacnet => "bacnet",
            Protocol::EthernetIp => "ethernet_ip",
        }
    }
    /// The TCP port probed when the request names none.
    pub fn default_port(self) -> u16 {
        match self {
            Protocol::Modbus => 502,
            Protocol::Opcua => 4840,
            Protocol::Bacnet => 47808,
            Protocol::EthernetIp => 44818,
        }
    }
}

/// The body of `POST /v1/api/discover/scan`.
#[derive(Clone, Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScanRequest {
    /// Addresses (`10.0.0.5`), IPv4 subnets (`10.0.0.0/24`, at most /22) or host names; 1,024
    /// addresses in all at most.
    pub hosts: Vec<String>,
    /// TCP ports for Modbus TCP and OPC UA: numbers or ranges (`"5020-5030"`); default 502
    /// for Modbus and 4840 for OPC UA. BACnet (UDP 47808) and EtherNet/IP (UDP 44818) use
    /// their own ports.
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub ports: Option<Vec<serde_json::Value>>,
    /// Default: all four.
    #[serde(default)]
    pub protocols: Option<Vec<String>>,
}

/// A checked scan: the literal addresses, the names to resolve, the TCP ports (none: each
/// protocol's default) and the protocols.
#[derive(Clone, Debug, PartialEq)]
pub struct ScanPlan {
    pub addresses: Vec<IpAddr>,
    pub names: Vec<String>,
    pub ports: Option<Vec<u16>>,
    pub protocols: Vec<Protocol>,
}

impl ScanPlan {
    /// The TCP ports probed for `p`.
    pub fn ports_of(&self, p: Protocol) -> Vec<u16> {
        self.ports.clone().unwrap_or_else(|| vec![p.default_port()])
    }
}

/// An IPv4 subnet's addresses (its network and broadcast addresses left out beyond /31).
fn subnet(text: &str) -> Result<Vec<IpAddr>, String> {
    let (ip, prefix) = text.split_once('/').ok_or("not a subnet")?;
    let ip: Ipv4Addr = ip
        .parse()
        .map_err(|_| "a subnet must be an IPv4 address/prefix".to_string())?;
    let prefix: u32 = prefix
        .parse()
        .ok()
        .filter(|p| *p <= 32)
        .ok_or("the prefix must be from 0 to 32")?;
    if prefix < 22 {
        return Err(format!(
            "at most {MAX_ADDRESSES} addresses: the prefix must be /22 or longer"
        ));
    }
    let size = 1u32 << (32 - prefix);
    let base = u32::from(ip) & !(size - 1);
    let (first, last) = if size > 2 {
        (base + 1, base + size - 2)
    } else {
        (base, base + size - 1)
    };
    Ok((first..=last)
        .map(|a| IpAddr::V4(Ipv4Addr::from(a)))
        .collect())
}

fn port_entry(v: &serde_json::Value) -> Result<Vec<u16>, String> {
    let one = |n: u64| -> Result<u16, String> {
        u16::try_from(n)
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| format!("{n} is not a port (1 to 65535)"))
    };
    match v {
        serde_json::Value::Number(n) => Ok(vec![one(n.as_u64().unwrap_or(0))?]),
        serde_json::Value::String(s) => {
            let (a, b) = s
                .split_once('-')
                .ok_or_else(|| format!("'{s}' is not a port range (5020-5030)"))?;
            let (a, b) = (
                one(a
                    .trim()
                    .parse()
                    .map_err(|_| format!("'{s}' is not a port range"))?)?,
                one(b
                    .trim()
                    .parse()
                    .map_err(|_| format!("'{s}' is not a port range"))?)?,
            );
            if a > b {
                return Err(format!("'{s}': the range's first port is above its last"));
            }
            Ok((a..=b).collect())
        }
        _ => Err("must be a port number or a range such as \"5020-5030\"".into()),
    }
}

/// Checks a scan request, naming each bad entry (`hosts[2]`, `ports[0]`, `protocols[1]`).
pub fn plan(req: &ScanRequest) -> Result<ScanPlan, Vec<FieldError>> {
    let mut v = Validator::new();
    let mut addresses: Vec<IpAddr> = Vec::new();
    let mut names = Vec::new();
    if req.hosts.is_empty() {
        v.add("hosts", "name at least one address, subnet or host name");
    }
    for (i, h) in req.hosts.iter().enumerate() {
        let h = h.trim();
        let field = format!("hosts[{i}]");
        if let Ok(ip) = h.parse::<IpAddr>() {
            addresses.push(ip);
        } else if h.contains('/') {
            match subnet(h) {
                Ok(all) => addresses.extend(all),
                Err(e) => v.add(field, e),
            }
        } else if !h.is_empty()
            && h.len() <= 253
            && h.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
        {
            names.push(h.to_string());
        } else {
            v.add(
                field,
                "must be an IP address, an IPv4 subnet or a host name",
            );
        }
    }
    addresses.sort();
    addresses.dedup();
    if addresses.len() + names.len() > MAX_ADDRESSES {
        v.add(
            "hosts",
            format!("at most {MAX_ADDRESSES} addresses in one scan"),
        );
    }
    let ports = req.ports.as_ref().map(|list| {
        let mut out = Vec::new();
        if list.is_empty() {
            v.add("ports", "name at least one port, or leave ports out");
        }
        for (i, p) in list.iter().enumerate() {
            match port_entry(p) {
                Ok(ps) => out.extend(ps),
                Err(e) => v.add(format!("ports[{i}]"), e),
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    });
    let mut protocols = Vec::new();
    match &req.protocols {
        None => protocols.extend(Protocol::ALL),
        Some(list) => {
            if list.is_empty() {
                v.add("protocols", "name at least one, or leave protocols out");
            }
            for (i, p) in list.iter().enumerate() {
                match Protocol::ALL.into_iter().find(|x| x.as_str() == p) {
                    Some(x) if !protocols.contains(&x) => protocols.push(x),
                    Some(_) => {}
                    None => v.add(
                        format!("protocols[{i}]"),
                        "must be modbus, opcua, bacnet or ethernet_ip",
                    ),
                }
            }
        }
    }
    let tcp = protocols
        .iter()
        .filter(|p| matches!(p, Protocol::Modbus | Protocol::Opcua))
        .count();
    let per_host = ports.as_ref().map_or(1, Vec::len) * tcp;
    if (addresses.len() + names.len()) * per_host > MAX_TCP_PROBES {
        v.add(
            "ports",
            format!(
                "at most {MAX_TCP_PROBES} TCP probes (addresses x ports x protocols) in one scan"
            ),
        );
    }
    v.finish()?;
    Ok(ScanPlan {
        addresses,
        names,
        ports,
        protocols,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn req(v: serde_json::Value) -> ScanRequest {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_scan_names_its_addresses_ports_and_protocols() {
        let p = plan(&req(
            json!({"hosts": ["10.0.0.0/30", "10.0.0.1", "plc-7.local"],
                                  "ports": [502, "5020-5022"], "protocols": ["modbus", "bacnet"]}),
        ))
        .unwrap();
        assert_eq!(
            p.addresses,
            ["10.0.0.1", "10.0.0.2"]
                .map(|a| a.parse::<IpAddr>().unwrap())
                .to_vec()
        );
        assert_eq!(p.names, ["plc-7.local"]);
        assert_eq!(p.ports_of(Protocol::Modbus), [502, 5020, 5021, 5022]);
        assert_eq!(p.protocols, [Protocol::Modbus, Protocol::Bacnet]);
        let all = plan(&req(json!({"hosts": ["127.0.0.1"]}))).unwrap();
        assert_eq!(all.protocols.len(), 4);
        assert_eq!(all.ports_of(Protocol::Opcua), [4840]);
        assert_eq!(subnet("192.168.1.7/24").unwrap().len(), 254);

        let fields = |v: serde_json::Value| -> Vec<String> {
            plan(&req(v))
                .unwrap_err()
                .into_iter()
                .map(|e| e.field)
                .collect()
        };
        assert_eq!(fields(json!({"hosts": []})), ["hosts"]);
        assert_eq!(fields(json!({"hosts": ["10.0.0.0/16"]})), ["hosts[0]"]);
        assert_eq!(fields(json!({"hosts": ["a b"]})), ["hosts[0]"]);
        assert_eq!(
            fields(json!({"hosts": ["h"], "ports": [0, "9-1", true], "protocols": ["snmp"]})),
            ["ports[0]", "ports[1]", "ports[2]", "protocols[0]"]
        );
        assert_eq!(
            fields(json!({"hosts": ["10.0.0.0/22"], "ports": ["1-10"]})),
            ["ports"]
        );
    }
}
