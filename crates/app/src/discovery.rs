//! Network discovery (issue 34, SPEC 4.15 `POST /v1/api/discover/scan`): the addresses a caller
//! names probed for Modbus TCP, OPC UA, BACnet/IP and EtherNet/IP devices at once (the probes
//! are `plantd_connectors::discovery`; OPC UA servers are also browsed for by mDNS,
//! `plantd_connectors::mdns`), each answer with what it said of itself and, for the protocols
//! the edge reads, the fields of an import row.

use futures_util::StreamExt;
use plantd_connectors::discovery::{self as probe, Found};
use plantd_model::discovery::{Protocol, ScanRequest, plan};
use serde::Serialize;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::app::App;
use crate::error::AppResult;

/// How long a TCP probe may take.
const TCP_TIMEOUT: Duration = Duration::from_millis(1500);
/// How long the UDP answers are waited for.
const UDP_WAIT: Duration = Duration::from_secs(2);
/// TCP probes at once.
const AT_ONCE: usize = 64;

/// A device that answered.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct Discovered {
    pub protocol: Protocol,
    pub host: String,
    pub port: u16,
    /// What the device said of itself (per protocol; docs/api.md).
    #[schema(value_type = Object)]
    pub identity: Value,
    /// For Modbus TCP and OPC UA: `{protocol, host, port}`, the fields of an import row
    /// (`POST /v1/provisioning/import/yaml`) beside the asset's id, type and sensors; null for
    /// protocols the edge does not read.
    #[schema(value_type = Option<Object>)]
    pub provision: Option<Value>,
}

/// `POST /v1/api/discover/scan`'s answer.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct ScanReport {
    pub found: Vec<Discovered>,
    /// Addresses probed (subnets expanded, names resolved).
    pub scanned_addresses: usize,
    /// Host names that did not resolve.
    pub unresolved: Vec<String>,
    pub duration_ms: u64,
}

impl From<Found> for Discovered {
    fn from(f: Found) -> Self {
        let host = f.host.to_string();
        let provision = matches!(f.protocol, Protocol::Modbus | Protocol::Opcua)
            .then(|| json!({"protocol": f.protocol.as_str(), "host": host, "port": f.port}));
        Self {
            protocol: f.protocol,
            host,
            port: f.port,
            identity: f.identity,
            provision,
        }
    }
}

impl App {
    /// Probes what the request names, every protocol at once.
    pub async fn discover(&self, req: ScanRequest) -> AppResult<ScanReport> {
        let plan = plan(&req)?;
        let started = Instant::now();
        let mut addresses = plan.addresses.clone();
        let mut unresolved = Vec::new();
        for name in &plan.names {
            match tokio::net::lookup_host((name.as_str(), 0)).await {
                Ok(mut found) => match found.next() {
                    Some(a) => addresses.push(a.ip()),
                    None => unresolved.push(name.clone()),
                },
                Err(_) => unresolved.push(name.clone()),
            }
        }
        addresses.sort();
        addresses.dedup();
        let mut tcp: Vec<(Protocol, SocketAddr)> = Vec::new();
        for p in [Protocol::Modbus, Protocol::Opcua] {
            if plan.protocols.contains(&p) {
                for port in plan.ports_of(p) {
                    tcp.extend(addresses.iter().map(|a| (p, SocketAddr::new(*a, port))));
                }
            }
        }
        let tcp_found = futures_util::stream::iter(tcp)
            .map(|(p, addr)| async move {
                match p {
                    Protocol::Modbus => probe::modbus(addr, TCP_TIMEOUT).await,
                    _ => probe::opcua(addr, TCP_TIMEOUT).await,
                }
            })
            .buffer_unordered(AT_ONCE)
            .filter_map(|f| async move { f })
            .collect::<Vec<Found>>();
        let udp = |p: Protocol| {
            let wanted = plan.protocols.contains(&p);
            let addresses = &addresses;
            async move {
                if wanted {
                    probe::udp_probe(addresses, p, UDP_WAIT).await
                } else {
                    Ok(Vec::new())
                }
            }
        };
        let announced = async {
            if plan.protocols.contains(&Protocol::Opcua) {
                plantd_connectors::mdns::opcua_announced(&addresses, UDP_WAIT).await
            } else {
                Ok(Vec::new())
            }
        };
        let (mut found, bacnet, enip, announced) = tokio::join!(
            tcp_found,
            udp(Protocol::Bacnet),
            udp(Protocol::EthernetIp),
            announced
        );
        for answers in [bacnet, enip] {
            found.extend(answers.map_err(|e| crate::error::AppError::internal("discovery", e))?);
        }
        // An OPC UA server that announced itself: what it said joins what its port answered
        // (or it is found by its announcement alone, at a port no probe named). mDNS needs
        // multicast on the local link: without it, the probes' answers stand.
        match announced {
            Ok(servers) => {
                for a in servers {
                    if let Some(mut alone) = join_probed(&mut found, a) {
                        // Found by its announcement alone: does it answer OPC UA there?
                        let answered =
                            probe::opcua(SocketAddr::new(alone.host, alone.port), TCP_TIMEOUT)
                                .await;
                        if let Some(o) = alone.identity.as_object_mut() {
                            o.insert("acknowledged".into(), json!(answered.is_some()));
                        }
                        found.push(alone);
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "discovery: mDNS browsing is not available here"),
        }
        found.sort_by_key(|f| (f.host, f.protocol.as_str(), f.port));
        Ok(ScanReport {
            found: found.into_iter().map(Discovered::from).collect(),
            scanned_addresses: addresses.len(),
            unresolved,
            duration_ms: started.elapsed().as_millis() as u64,
        })
    }
}

/// An announced OPC UA server joined to what its port answered (its identity's fields added to
/// the probe's); the announcement back when no probe found it there.
fn join_probed(found: &mut [Found], announced: Found) -> Option<Found> {
    let Some(probed) = found.iter_mut().find(|f| {
        f.protocol == Protocol::Opcua && f.host == announced.host && f.port == announced.port
    }) else {
        return Some(announced);
    };
    if let (Some(have), Some(said)) = (
        probed.identity.as_object_mut(),
        announced.identity.as_object(),
    ) {
        for (k, v) in said {
            have.entry(k.clone()).or_insert(v.clone());
        }
    }
    None
}
