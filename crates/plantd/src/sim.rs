//! `plantd sim ...`: runs the simulation server, or talks to a running one's control API.

use anyhow::{Context, bail};
use clap::Subcommand;
use std::path::PathBuf;

const DEFAULT_API_URL: &str = "http://127.0.0.1:8080";

#[derive(Subcommand)]
pub enum SimCommand {
    /// Run the simulation server in the foreground: OPC UA server and control API.
    Start {
        /// OPC UA port [default: the configuration's server.port, else 4840].
        #[arg(long)]
        port: Option<u16>,
        /// Control API port.
        #[arg(long, default_value_t = 8080)]
        api_port: u16,
        /// Modbus TCP port (register map printed at start).
        #[arg(long, default_value_t = 5020)]
        modbus_port: u16,
        /// Address both servers listen on.
        #[arg(long, default_value = "127.0.0.1")]
        host: String,
        /// YAML configuration (assets, variables, server keys); without it, the default plant.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Seed of the value streams: the same seed gives the same values.
        #[arg(long)]
        seed: Option<u64>,
        /// Where the server's certificate and trusted client certificates live
        /// [default: ./pki-sim].
        #[arg(long)]
        pki_dir: Option<PathBuf>,
        /// Do not announce the OPC UA server over mDNS (`_opcua-tcp._tcp`; announced by default,
        /// as discovery finds OPC UA servers).
        #[arg(long)]
        no_mdns: bool,
    },
    /// Replace a running server's configuration with a YAML file.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Enable or disable a scenario of a running server.
    Scenario {
        #[command(subcommand)]
        command: ScenarioCommand,
    },
    /// Show a running server's status.
    Status {
        #[arg(long, default_value = DEFAULT_API_URL)]
        api_url: String,
    },
    /// Shut a running server down.
    Stop {
        #[arg(long, default_value = DEFAULT_API_URL)]
        api_url: String,
    },
}

#[derive(Subcommand)]
pub enum ConfigCommand {
    /// Load FILE into the running server (a bad file is refused; the running configuration stays).
    Load {
        file: PathBuf,
        #[arg(long, default_value = DEFAULT_API_URL)]
        api_url: String,
    },
}

#[derive(Subcommand)]
pub enum ScenarioCommand {
    /// Enable a scenario (normal, bearing_failure, cavitation, motor_overload, high_temp, maintenance).
    Enable {
        id: String,
        #[arg(long, default_value = DEFAULT_API_URL)]
        api_url: String,
    },
    /// Disable a scenario.
    Disable {
        id: String,
        #[arg(long, default_value = DEFAULT_API_URL)]
        api_url: String,
    },
}

/// Sends a control request and returns the `data` of the answer, or the server's error message.
async fn control(
    method: reqwest::Method,
    api_url: &str,
    path: &str,
    body: Option<String>,
) -> anyhow::Result<serde_json::Value> {
    let url = format!("{}{path}", api_url.trim_end_matches('/'));
    let mut req = reqwest::Client::new().request(method, &url);
    if let Some(b) = body {
        req = req.body(b);
    }
    let resp = req.send().await.with_context(|| {
        format!("cannot reach the simulation server's control API at {api_url} (is `plantd sim start` running?)")
    })?;
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap_or(serde_json::Value::Null);
    if !status.is_success() {
        let message = json["error"]["message"].as_str().unwrap_or(text.trim());
        bail!("{message} ({status})");
    }
    Ok(json["data"].clone())
}

pub async fn run(command: SimCommand) -> anyhow::Result<()> {
    use reqwest::Method;
    match command {
        SimCommand::Start {
            port,
            api_port,
            modbus_port,
            host,
            config,
            seed,
            pki_dir,
            no_mdns,
        } => {
            let config = match &config {
                Some(path) => plantd_sim::SimConfig::load(path)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?,
                None => plantd_sim::SimConfig::default_plant(),
            };
            let options = plantd_sim::server::Options {
                host,
                opcua_port: port.unwrap_or(config.port),
                api_port,
                modbus_port: Some(modbus_port),
                mdns: !no_mdns,
                seed: seed.unwrap_or_else(rand_seed),
                pki_dir: pki_dir.unwrap_or_else(|| PathBuf::from("pki-sim")),
                ready: None,
            };
            plantd_sim::server::run(config, options, crate::signals::shutdown())
                .await
                .map_err(anyhow::Error::msg)
        }
        SimCommand::Config {
            command: ConfigCommand::Load { file, api_url },
        } => {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            let data = control(Method::POST, &api_url, "/api/config", Some(text))
                .await
                .with_context(|| format!("{} was refused", file.display()))?;
            println!(
                "loaded {}: {} assets, {} variables",
                file.display(),
                data["assets"],
                data["variables"]
            );
            Ok(())
        }
        SimCommand::Scenario { command } => {
            let (id, api_url, action) = match command {
                ScenarioCommand::Enable { id, api_url } => (id, api_url, "enable"),
                ScenarioCommand::Disable { id, api_url } => (id, api_url, "disable"),
            };
            let path = format!("/api/scenarios/{id}/{action}");
            let data = control(Method::POST, &api_url, &path, None).await?;
            let active: Vec<&str> = data
                .as_array()
                .map(|list| {
                    list.iter()
                        .filter(|s| s["enabled"] == true)
                        .filter_map(|s| s["id"].as_str())
                        .collect()
                })
                .unwrap_or_default();
            println!("{action}d {id}; active scenarios: {}", active.join(", "));
            Ok(())
        }
        SimCommand::Status { api_url } => {
            let data = control(Method::GET, &api_url, "/api/status", None).await?;
            println!("{}", serde_json::to_string_pretty(&data)?);
            Ok(())
        }
        SimCommand::Stop { api_url } => {
            control(Method::POST, &api_url, "/api/shutdown", None).await?;
            println!("the simulation server at {api_url} is shutting down");
            Ok(())
        }
    }
}

fn rand_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
