//! OPC UA servers found by mDNS (DNS-SD, OPC UA Part 12: `_opcua-tcp._tcp`), through the
//! `mdns-sd` crate: one multicast question on the local link, and the servers' answers within a
//! wait; only those at the addresses the caller named are kept.

use mdns_sd::{ServiceDaemon, ServiceEvent};
use plantd_model::discovery::{OPCUA_MDNS_SERVICE, Protocol};
use serde_json::json;
use std::net::IpAddr;
use std::time::Duration;

use crate::discovery::Found;

/// The OPC UA servers that announce themselves at one of `hosts` within `wait`: each with its
/// endpoint (`opc.tcp://<address>:<port><path>`) and what it announced.
pub async fn opcua_announced(hosts: &[IpAddr], wait: Duration) -> Result<Vec<Found>, String> {
    let daemon = ServiceDaemon::new().map_err(|e| format!("cannot start mDNS: {e}"))?;
    let events = daemon
        .browse(OPCUA_MDNS_SERVICE)
        .map_err(|e| format!("cannot browse mDNS: {e}"))?;
    let mut found: Vec<Found> = Vec::new();
    let deadline = tokio::time::Instant::now() + wait;
    while let Ok(Ok(event)) = tokio::time::timeout_at(deadline, events.recv_async()).await {
        let ServiceEvent::ServiceResolved(service) = event else {
            continue;
        };
        let name = service
            .get_fullname()
            .strip_suffix(OPCUA_MDNS_SERVICE)
            .unwrap_or(service.get_fullname())
            .trim_end_matches('.')
            .to_string();
        let path = service.get_property_val_str("path").unwrap_or("/");
        let path = if path.starts_with('/') {
            path.to_string()
        } else {
            format!("/{path}")
        };
        let caps = service.get_property_val_str("caps").map(str::to_string);
        let mut addresses: Vec<IpAddr> = service
            .get_addresses()
            .iter()
            .map(|a| a.to_ip_addr())
            .filter(|a| hosts.contains(a))
            .collect();
        addresses.sort();
        for host in addresses {
            let port = service.get_port();
            if found.iter().any(|f| f.host == host && f.port == port) {
                continue;
            }
            let endpoint = match host {
                IpAddr::V6(v6) => format!("opc.tcp://[{v6}]:{port}{path}"),
                IpAddr::V4(v4) => format!("opc.tcp://{v4}:{port}{path}"),
            };
            found.push(Found {
                protocol: Protocol::Opcua,
                host,
                port,
                identity: json!({
                    "endpoint_url": endpoint,
                    "mdns_name": name,
                    "mdns_host": service.get_hostname(),
                    "caps": caps,
                }),
            });
        }
    }
    let _ = daemon.stop_browse(OPCUA_MDNS_SERVICE);
    let _ = daemon.shutdown();
    Ok(found)
}
