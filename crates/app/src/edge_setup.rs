//! The edge agent's setup wizard (issue 34): on its first start the agent's owner
//! (`admin@localhost`) has no password; a one-time setup code, printed by the agent and kept in
//! its data directory, lets the person at the gateway set it (an invitation of the owner, so the
//! password rules and the single use are the invitations'). Then the wizard shows the host's
//! network (and applies a change through NetworkManager where the host has it), enrolls with a
//! cloud and provisions assets from templates through the ordinary import.

use plantd_model::Timestamp;
use plantd_model::org::Role;
use plantd_model::org::User;
use plantd_model::provisioning::AssetTemplate;
use plantd_model::validation::Validator;
use plantd_store::AccountTokenKind;
use serde::{Deserialize, Serialize};
use std::net::IpAddr;

use crate::access::AuditTrail;
use crate::accounts::AcceptInvitation;
use crate::app::App;
use crate::error::{AppError, AppResult};
use crate::operator::FIRST_ADMIN_EMAIL;
use crate::sessions::{Login, NewLogin};

/// How long a setup code works (a new one is made at each start while setup is pending).
const SETUP_CODE_DAYS: i64 = 30;
/// The NetworkManager client the wizard applies network changes with (`PLANTD_NMCLI` names
/// another path).
const NMCLI: &str = "nmcli";

/// `POST /v1/edge/setup`: the setup code and the owner's new password.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetupPassword {
    /// The code the agent printed at its start (also in `<data dir>/setup-code`).
    pub setup_code: String,
    pub password: String,
}

/// Whether the wizard's first step is still to be done.
#[derive(Serialize, utoipa::ToSchema)]
pub struct SetupState {
    /// True until the owner's password is set.
    pub pending: bool,
    /// The owner's login.
    pub email: String,
}

/// The host's network as the agent sees it.
#[derive(Serialize, utoipa::ToSchema)]
pub struct HostNetwork {
    pub hostname: String,
    pub interfaces: Vec<HostInterface>,
    /// Default routes' gateways (`/proc/net/route`, IPv4).
    pub gateways: Vec<String>,
    /// Name servers of `/etc/resolv.conf`.
    pub dns: Vec<String>,
    /// Whether `PUT /v1/edge/network` can change this host's network (NetworkManager's
    /// `nmcli` is here).
    pub can_apply: bool,
    /// Why it cannot, when it cannot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cannot_apply: Option<String>,
}

/// One network interface of the host.
#[derive(Serialize, utoipa::ToSchema)]
pub struct HostInterface {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    /// `up`, `down`, `unknown` (the kernel's operstate).
    pub state: String,
    pub loopback: bool,
    /// Its addresses with their prefix length (`192.168.1.20/24`).
    pub addresses: Vec<String>,
}

/// `PUT /v1/edge/network`: an interface's IPv4 settings.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NetworkChange {
    pub interface: String,
    /// `dhcp` or `static`.
    pub method: String,
    /// With `static`: `192.168.1.20/24`.
    pub address: Option<String>,
    /// With `static`: the default gateway.
    pub gateway: Option<String>,
    /// With `static`: name servers.
    #[serde(default)]
    pub dns: Vec<String>,
}

impl App {
    /// Whether this edge agent waits for its owner's password (the wizard's first step).
    pub async fn edge_setup_state(&self) -> AppResult<Option<SetupState>> {
        if self.config().edge.is_none() {
            return Ok(None);
        }
        Ok(Some(SetupState {
            pending: self.pending_owner().await?.is_some(),
            email: FIRST_ADMIN_EMAIL.into(),
        }))
    }

    /// The edge agent's owner while it has no password (the wizard's first step to do).
    async fn pending_owner(&self) -> AppResult<Option<User>> {
        if self.config().edge.is_none() {
            return Ok(None);
        }
        let Some(owner) = self.store().user_by_email(FIRST_ADMIN_EMAIL).await? else {
            return Ok(None);
        };
        let pending = self.store().password_hash(&owner.id).await?.is_none();
        Ok(pending.then_some(owner))
    }

    /// A new setup code while setup is pending (former codes stop working): what the agent
    /// prints at its start. `None` when there is nothing to set up.
    pub async fn issue_setup_code(&self, org_id: &str) -> AppResult<Option<String>> {
        let Some(owner) = self.pending_owner().await? else {
            return Ok(None);
        };
        self.store()
            .void_account_tokens(AccountTokenKind::Invitation, &owner.email)
            .await?;
        let expires_at =
            Timestamp::from_millis(Timestamp::now().millis() + SETUP_CODE_DAYS * 86_400_000);
        let secret = self
            .invitation_token(
                org_id,
                &owner.id,
                &owner.email,
                Role::Owner,
                None,
                expires_at,
            )
            .await?;
        Ok(Some(secret))
    }

    /// The wizard's first step: the setup code sets the owner's password (the password rules
    /// apply; the code works once), and the owner is logged in.
    pub async fn finish_edge_setup(
        &self,
        body: SetupPassword,
        trail: &AuditTrail,
    ) -> AppResult<NewLogin> {
        if self.pending_owner().await?.is_none() {
            return Err(AppError::Refused {
                code: "setup_done",
                message: "the admin password is set already: log in".into(),
            });
        }
        let mut v = Validator::new();
        v.check(
            !body.setup_code.trim().is_empty(),
            "setup_code",
            "is required",
        );
        v.check(!body.password.is_empty(), "password", "is required");
        v.finish()?;
        let accepted = self
            .accept_invitation(
                AcceptInvitation {
                    token: body.setup_code,
                    password: body.password.clone(),
                    name: None,
                },
                Some(trail),
            )
            .await
            .map_err(|e| match e {
                AppError::Invalid(errors) => AppError::Invalid(
                    errors
                        .into_iter()
                        .map(|mut f| {
                            if f.field == "token" {
                                f.field = "setup_code".into();
                                f.message = "is not this agent's setup code (it is printed at the agent's start and kept in <data dir>/setup-code), or was used".into();
                            }
                            f
                        })
                        .collect(),
                ),
                other => other,
            })?;
        self.login(
            Login {
                email: accepted.0.email,
                password: body.password,
                organization_id: Some(accepted.2),
            },
            trail,
        )
        .await
    }

    /// The kinds of asset the wizard offers.
    pub fn edge_templates(&self) -> AppResult<Vec<AssetTemplate>> {
        let edge = self.config().edge.as_ref().ok_or(AppError::NotFound(
            "asset templates (this instance is not an edge agent: `plantd edge`)",
        ))?;
        Ok(edge.templates.clone())
    }

    /// The host's network: interfaces and their addresses, gateways, name servers, and
    /// whether the wizard can change it here.
    pub async fn host_network(&self) -> AppResult<HostNetwork> {
        if self.config().edge.is_none() {
            return Err(AppError::NotFound(
                "the host's network (this instance is not an edge agent: `plantd edge`)",
            ));
        }
        let nmcli = nmcli();
        let found = tokio::process::Command::new(&nmcli)
            .arg("--version")
            .output()
            .await
            .is_ok_and(|o| o.status.success());
        tokio::task::spawn_blocking(move || read_network(found, &nmcli))
            .await
            .map_err(|e| AppError::internal("reading the network", e))
    }

    /// Changes an interface's IPv4 settings through NetworkManager (`nmcli connection modify`
    /// of the interface's connection, then `up`). Refused where the host has no `nmcli`.
    pub async fn apply_network(&self, change: NetworkChange) -> AppResult<HostNetwork> {
        let now = self.host_network().await?;
        let mut v = Validator::new();
        v.check(
            now.interfaces.iter().any(|i| i.name == change.interface),
            "interface",
            "is not an interface of this host",
        );
        let args = match change.method.as_str() {
            "dhcp" => {
                v.check(
                    change.address.is_none() && change.gateway.is_none() && change.dns.is_empty(),
                    "method",
                    "dhcp takes no address, gateway or dns",
                );
                vec![
                    "ipv4.method".to_string(),
                    "auto".into(),
                    "ipv4.addresses".into(),
                    String::new(),
                    "ipv4.gateway".into(),
                    String::new(),
                    "ipv4.dns".into(),
                    String::new(),
                ]
            }
            "static" => {
                let address = change.address.clone().unwrap_or_default();
                v.check(
                    cidr_v4(&address),
                    "address",
                    "must be an IPv4 address with its prefix length (192.168.1.20/24)",
                );
                let gateway = change.gateway.clone().unwrap_or_default();
                v.check(
                    gateway.is_empty() || gateway.parse::<std::net::Ipv4Addr>().is_ok(),
                    "gateway",
                    "must be an IPv4 address",
                );
                for (i, d) in change.dns.iter().enumerate() {
                    if d.parse::<IpAddr>().is_err() {
                        v.add(format!("dns[{i}]"), "must be an IP address");
                    }
                }
                vec![
                    "ipv4.method".to_string(),
                    "manual".into(),
                    "ipv4.addresses".into(),
                    address,
                    "ipv4.gateway".into(),
                    gateway,
                    "ipv4.dns".into(),
                    change.dns.join(" "),
                ]
            }
            _ => {
                v.add("method", "must be dhcp or static");
                Vec::new()
            }
        };
        v.finish()?;
        if let Some(reason) = now.cannot_apply {
            return Err(AppError::Refused {
                code: "network_not_applicable",
                message: reason,
            });
        }
        let nmcli = nmcli();
        let connection = run(
            &nmcli,
            &[
                "-g",
                "GENERAL.CONNECTION",
                "device",
                "show",
                &change.interface,
            ],
        )
        .await?;
        let connection = connection.trim().to_string();
        if connection.is_empty() {
            return Err(AppError::Refused {
                code: "network_not_applicable",
                message: format!(
                    "NetworkManager manages no connection on {}",
                    change.interface
                ),
            });
        }
        let mut modify = vec!["connection", "modify", connection.as_str()];
        modify.extend(args.iter().map(String::as_str));
        run(&nmcli, &modify).await?;
        run(&nmcli, &["connection", "up", connection.as_str()]).await?;
        self.host_network().await
    }
}

fn nmcli() -> String {
    std::env::var("PLANTD_NMCLI").unwrap_or_else(|_| NMCLI.to_string())
}

/// Runs `nmcli` with `args`: its output, or its refusal as a 409.
async fn run(nmcli: &str, args: &[&str]) -> AppResult<String> {
    let out = tokio::process::Command::new(nmcli)
        .args(args)
        .output()
        .await
        .map_err(|e| AppError::Refused {
            code: "network_not_applicable",
            message: format!("cannot run {nmcli}: {e}"),
        })?;
    if !out.status.success() {
        return Err(AppError::Refused {
            code: "network_change_failed",
            message: format!(
                "{nmcli} {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn cidr_v4(s: &str) -> bool {
    let Some((ip, prefix)) = s.split_once('/') else {
        return false;
    };
    ip.parse::<std::net::Ipv4Addr>().is_ok() && prefix.parse::<u8>().is_ok_and(|p| p <= 32)
}

/// The host's network, from the kernel (`getifaddrs`, `/sys/class/net`, `/proc/net/route`)
/// and `/etc/resolv.conf`.
fn read_network(nmcli_found: bool, nmcli: &str) -> HostNetwork {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let hostname = read("/proc/sys/kernel/hostname").trim().to_string();
    let mut interfaces: Vec<HostInterface> = Vec::new();
    let mut names: Vec<String> = std::fs::read_dir("/sys/class/net")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    let addrs = if_addrs::get_if_addrs().unwrap_or_default();
    for a in &addrs {
        if !names.contains(&a.name) {
            names.push(a.name.clone());
        }
    }
    names.sort();
    for name in names {
        let sys = format!("/sys/class/net/{name}");
        let mac = read(&format!("{sys}/address")).trim().to_string();
        let state = read(&format!("{sys}/operstate")).trim().to_string();
        let loopback = addrs.iter().any(|a| a.name == name && a.is_loopback()) || name == "lo";
        let addresses = addrs
            .iter()
            .filter(|a| a.name == name)
            .map(|a| format!("{}/{}", a.ip(), prefix_of(&a.addr)))
            .collect();
        interfaces.push(HostInterface {
            name,
            mac: (!mac.is_empty() && mac != "00:00:00:00:00:00").then_some(mac),
            state: if state.is_empty() {
                "unknown".into()
            } else {
                state
            },
            loopback,
            addresses,
        });
    }
    HostNetwork {
        hostname,
        interfaces,
        gateways: gateways(&read("/proc/net/route")),
        dns: read("/etc/resolv.conf")
            .lines()
            .filter_map(|l| l.trim().strip_prefix("nameserver"))
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
        can_apply: nmcli_found,
        cannot_apply: (!nmcli_found).then(|| {
            format!(
                "this host has no NetworkManager client ({nmcli}): the network is shown here and set with the host's own tools"
            )
        }),
    }
}

fn prefix_of(addr: &if_addrs::IfAddr) -> u32 {
    match addr {
        if_addrs::IfAddr::V4(v4) => v4.prefixlen as u32,
        if_addrs::IfAddr::V6(v6) => v6.prefixlen as u32,
    }
}

/// The gateways of `/proc/net/route`'s default routes (destination 0, the gateway in the
/// kernel's byte order, hexadecimal).
fn gateways(route: &str) -> Vec<String> {
    route
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 3 || f[1] != "00000000" {
                return None;
            }
            let g = u32::from_str_radix(f[2], 16).ok()?;
            (g != 0).then(|| std::net::Ipv4Addr::from(g.to_le_bytes()).to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_gateways_are_read_from_the_route_table() {
        let table = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\n\
                     eth0\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\n\
                     eth0\t0001A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\n";
        assert_eq!(gateways(table), ["192.168.1.1"]);
        assert!(cidr_v4("10.0.0.5/24"));
        assert!(!cidr_v4("10.0.0.5"));
        assert!(!cidr_v4("10.0.0.5/40"));
    }
}
