//! The simulator's OPC UA server announced over mDNS (DNS-SD, OPC UA Part 12: service type
//! `_opcua-tcp._tcp`, TXT `path` and `caps`), as a real server with a local discovery server
//! does, through the `mdns-sd` crate; withdrawn at shutdown.

use mdns_sd::{ServiceDaemon, ServiceInfo};
use plantd_model::discovery::OPCUA_MDNS_SERVICE;

/// A running announcement; [`Announcement::withdraw`] ends it.
pub struct Announcement {
    /// The name it is announced under (`<instance>._opcua-tcp._tcp.local.`).
    pub fullname: String,
    daemon: ServiceDaemon,
}

/// Announces the OPC UA server listening on `host:port` (an unspecified `host`: at every
/// address of the machine, kept up to date as interfaces change).
pub fn announce(host: &str, port: u16) -> Result<Announcement, String> {
    let daemon = ServiceDaemon::new().map_err(|e| format!("cannot start mDNS: {e}"))?;
    let machine = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "plantd-sim".into());
    let instance = format!("plantd simulator on {machine} port {port}");
    let everywhere = host
        .parse::<std::net::IpAddr>()
        .is_ok_and(|a| a.is_unspecified());
    let info = ServiceInfo::new(
        OPCUA_MDNS_SERVICE,
        &instance,
        &format!("{machine}.local."),
        if everywhere { "" } else { host },
        port,
        &[("path", "/"), ("caps", "DA")][..],
    )
    .map_err(|e| format!("cannot describe the mDNS announcement: {e}"))?;
    let info = if everywhere {
        info.enable_addr_auto()
    } else {
        info
    };
    let fullname = info.get_fullname().to_string();
    daemon
        .register(info)
        .map_err(|e| format!("cannot announce over mDNS: {e}"))?;
    Ok(Announcement { fullname, daemon })
}

impl Announcement {
    /// Says goodbye (the announcement's records with a zero lifetime) and stops.
    pub async fn withdraw(self) {
        if let Ok(done) = self.daemon.unregister(&self.fullname) {
            let _ =
                tokio::time::timeout(std::time::Duration::from_secs(1), done.recv_async()).await;
        }
        let _ = self.daemon.shutdown();
    }
}
