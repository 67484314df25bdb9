//! The `plantd` command: `up` runs the platform with a simulated plant for a first look, `serve`
//! runs the cloud service; `keys`, `orgs` and `users` are operator commands that work beside a
//! running server on the same database.

mod config;
mod edge;
mod license;
mod lock;
mod restart;
mod server;
mod signals;
mod sim;
mod up_edge;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use plantd_app::operator;
use plantd_model::org::Role;
use plantd_model::{Scope, Tier, Timestamp, scope};
use std::path::PathBuf;
use std::process::ExitCode;

use config::{FileConfig, ServeConfig, StorageConfig};

/// jemalloc rather than the C library's allocator (Cargo.toml says why).
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(
    name = "plantd",
    version,
    about = "Open industrial monitoring platform"
)]
struct Cli {
    /// Log level of the server's log on stderr (error, warn, info, debug, trace, or a filter
    /// such as `info,opcua_client=off`) [default: warn; RUST_LOG and PLANTD_LOG win].
    #[arg(long, global = true, value_name = "LEVEL")]
    log_level: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Clone)]
struct StorageArgs {
    /// TOML configuration file.
    #[arg(long, env = "PLANTD_CONFIG", global = true)]
    config: Option<PathBuf>,
    /// Directory for the embedded database and other state [default: ./plantd-data].
    #[arg(long, env = "PLANTD_DATA_DIR", global = true)]
    data_dir: Option<PathBuf>,
    /// sqlite://PATH or postgres://USER@HOST/DB [default: SQLite file in the data directory].
    #[arg(long, env = "PLANTD_DATABASE_URL", global = true)]
    database_url: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Start the platform and a simulated plant: the simulator, an edge agent reading it and
    /// forwarding its points over MQTT, the console, a demo organization with dashboards and
    /// alert rules (created once).
    Up {
        /// Address to listen on [default: 127.0.0.1:8000].
        #[arg(long, env = "PLANTD_LISTEN")]
        listen: Option<String>,
        /// Do not start the simulator (the edge agent still reads --sim-port and
        /// --sim-modbus-port on 127.0.0.1).
        #[arg(long)]
        no_sim: bool,
        /// The simulator's OPC UA port (0: a free one).
        #[arg(long, default_value_t = 4840)]
        sim_port: u16,
        /// The simulator's Modbus TCP port (0, or taken: a free one).
        #[arg(long, default_value_t = 5020)]
        sim_modbus_port: u16,
        /// Where the edge agent's console listens [default: 127.0.0.1:3000, or a free port when
        /// that is taken].
        #[arg(long, env = "PLANTD_EDGE_LISTEN")]
        edge_listen: Option<std::net::SocketAddr>,
        /// The MQTT device channel [default: 127.0.0.1:1883, or a free port when that is taken].
        #[command(flatten)]
        mqtt: config::MqttArgs,
        #[command(flatten)]
        storage: StorageArgs,
    },
    /// Run the cloud service (web console at /, REST API under /v1).
    Serve {
        /// Address to listen on [default: 127.0.0.1:8000].
        #[arg(long, env = "PLANTD_LISTEN")]
        listen: Option<String>,
        #[command(flatten)]
        mqtt: config::MqttArgs,
        /// Several regions as one deployment (docs/api.md, "Regions").
        #[command(flatten)]
        regions: config::RegionArgs,
        #[command(flatten)]
        storage: StorageArgs,
    },
    /// Run the edge agent of a plant's gateway: connectors, a local store, alert rules, the
    /// provisioning API and the console (docs/api.md, "Edge provisioning"); its data directory
    /// is ./plantd-edge-data unless --data-dir (or the file) names one.
    Edge {
        /// Address to listen on [default: 0.0.0.0:3000].
        #[arg(long, env = "PLANTD_LISTEN")]
        listen: Option<String>,
        /// production (no preloaded assets), development (demo assets reading `plantd sim`)
        /// or demo (generated data) [default: production].
        #[arg(long, env = "DEPLOYMENT_MODE")]
        mode: Option<String>,
        /// development mode: the simulator's host.
        #[arg(long, default_value = "127.0.0.1")]
        sim_host: String,
        /// development mode: the simulator's OPC UA port.
        #[arg(long, default_value_t = 4840)]
        sim_opcua_port: u16,
        /// development mode: the simulator's Modbus TCP port.
        #[arg(long, default_value_t = 5020)]
        sim_modbus_port: u16,
        /// Enroll with the cloud (--cloud) by this enrollment token at start (once: an
        /// enrolled agent keeps its enrollment).
        #[arg(long, env = "PLANTD_ENROLLMENT_TOKEN", requires = "cloud")]
        enroll: Option<String>,
        /// The cloud's root address (https://plant.example.com).
        #[arg(long, env = "PLANTD_CLOUD_URL")]
        cloud: Option<String>,
        /// An MQTT device channel of the agent's own (off unless given).
        #[command(flatten)]
        mqtt: config::MqttArgs,
        #[command(flatten)]
        storage: StorageArgs,
    },
    /// Manage API keys and the signing keys of access tokens.
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// Check license keys offline.
    License {
        #[command(subcommand)]
        command: license::LicenseCommand,
    },
    /// Manage organizations.
    Orgs {
        #[command(subcommand)]
        command: OrgsCommand,
    },
    /// The simulation server: simulated equipment over OPC UA, with a control API.
    Sim {
        #[command(subcommand)]
        command: sim::SimCommand,
    },
    /// Manage users.
    Users {
        #[command(subcommand)]
        command: UsersCommand,
    },
}

#[derive(Subcommand)]
enum KeysCommand {
    /// Create an API key and print its secret (only the secret, on stdout).
    Create {
        #[arg(long)]
        name: String,
        /// Comma-separated: read:assets, write:assets, read:telemetry, write:telemetry,
        /// read:alerts, write:alerts, admin.
        #[arg(long, value_parser = parse_scopes)]
        scopes: ScopeList,
        /// Organization id [default: the first organization].
        #[arg(long)]
        org: Option<String>,
        /// Expiry, RFC 3339.
        #[arg(long, value_parser = parse_time)]
        expires_at: Option<Timestamp>,
        #[command(flatten)]
        storage: StorageArgs,
    },
    /// Add a new RS256 key for signing access tokens and print its id. The old key stays in
    /// /.well-known/jwks.json until the last token it signed has expired.
    RotateSigning {
        #[command(flatten)]
        storage: StorageArgs,
    },
}

#[derive(Subcommand)]
enum OrgsCommand {
    /// Create an organization and print its id.
    Create {
        #[arg(long)]
        name: String,
        #[arg(long, value_parser = parse_tier)]
        tier: Tier,
        #[command(flatten)]
        storage: StorageArgs,
    },
    /// Fail over: make this instance's region the organization's primary region, with the copy
    /// of its data the former primary region last sent here (run at its secondary region when
    /// the primary is lost; docs/api.md, "Regions").
    Failover {
        /// The organization's id.
        org: String,
        /// This instance's region (as given to `plantd serve --region`).
        #[arg(long, default_value = "us-east", env = "PLANTD_REGION")]
        region: String,
        #[command(flatten)]
        storage: StorageArgs,
    },
}

#[derive(Subcommand)]
enum UsersCommand {
    /// Create a user with a password (or set the password of an invited one) and print its id.
    Create {
        #[arg(long)]
        email: String,
        #[arg(long)]
        password: String,
        #[arg(long)]
        org: Option<String>,
        #[arg(long, default_value = "member", value_parser = parse_role)]
        role: Role,
        #[command(flatten)]
        storage: StorageArgs,
    },
}

#[derive(Clone, Debug)]
struct ScopeList(Vec<Scope>);

fn parse_scopes(s: &str) -> Result<ScopeList, String> {
    scope::parse_list(s).map(ScopeList)
}
fn parse_time(s: &str) -> Result<Timestamp, String> {
    Timestamp::parse(s)
}
fn parse_tier(s: &str) -> Result<Tier, String> {
    s.parse()
}
fn parse_role(s: &str) -> Result<Role, String> {
    s.parse()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    plantd_alerts::tls::install_provider();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(run(cli));
    // Connectors, store and listeners are closed; the runtime's threads go too.
    drop(runtime);
    match outcome {
        Ok(None) => ExitCode::SUCCESS,
        Ok(Some(again)) => restart::exec(again),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn open_store(
    args: &StorageArgs,
) -> anyhow::Result<(FileConfig, StorageConfig, plantd_store::Store)> {
    open_store_in(args, None).await
}

/// The store, its data directory defaulting to `default_dir` where neither the flag nor the
/// file names one.
async fn open_store_in(
    args: &StorageArgs,
    default_dir: Option<&str>,
) -> anyhow::Result<(FileConfig, StorageConfig, plantd_store::Store)> {
    let file = FileConfig::load(args.config.as_deref())?;
    let data_dir = args.data_dir.clone().or_else(|| {
        file.data_dir
            .is_none()
            .then(|| default_dir.map(PathBuf::from))
            .flatten()
    });
    let storage = StorageConfig::resolve(&file, data_dir, args.database_url.clone())?;
    let store = plantd_store::Store::connect(&storage.database_url)
        .await
        .with_context(|| {
            format!(
                "cannot open the database {}",
                server::redact(&storage.database_url)
            )
        })?;
    Ok((file, storage, store))
}

/// Runs the command; `Some` when the edge agent stopped to start again as another binary (its
/// self-update or rollback), which `main` does once the runtime is down.
async fn run(cli: Cli) -> anyhow::Result<Option<restart::Again>> {
    let log_level = cli.log_level;
    let init_logging = || server::init_logging(log_level.as_deref());
    match cli.command {
        Command::Serve {
            listen,
            mqtt,
            regions,
            storage,
        } => {
            init_logging();
            let (file, storage_cfg, store) = open_store(&storage).await?;
            let cfg = ServeConfig::resolve_with(file, listen, mqtt, None, storage_cfg)?
                .with_regions(regions)?;
            server::serve(cfg, store, None, None).await.map(|_| None)
        }
        Command::Edge {
            listen,
            mode,
            sim_host,
            sim_opcua_port,
            sim_modbus_port,
            enroll,
            cloud,
            mqtt,
            storage,
        } => {
            // An unknown mode is refused before anything starts.
            if let Some(m) = &mode {
                plantd_model::provisioning::DeploymentMode::parse(m).map_err(anyhow::Error::msg)?;
            }
            let (file, storage_cfg, store) =
                open_store_in(&storage, Some(edge::DEFAULT_DATA_DIR)).await?;
            let listen = listen
                .or_else(|| file.listen.clone())
                .or_else(|| Some(edge::DEFAULT_LISTEN.to_string()));
            let settings =
                config::edge_settings(mode, file.edge.as_ref(), &|k| std::env::var(k).ok())?;
            init_logging();
            let update_dir = storage_cfg.data_dir.join("update");
            let mut settings = settings;
            settings.update = Some(restart::self_update_settings(
                &update_dir,
                storage.config.as_deref(),
                file.edge.as_ref().and_then(|e| e.update_health_check_secs),
            )?);
            let mut cfg = ServeConfig::resolve_with(file, listen, mqtt, None, storage_cfg)?;
            cfg.api.retention.predictions_days = Some(settings.ml_predictions_days);
            let run = edge::EdgeRun {
                mode: settings.mode,
                sim_host,
                sim_opcua_port,
                sim_modbus_port,
                enroll: enroll.zip(cloud),
                quiet: false,
            };
            cfg.api.edge = Some(settings);
            let again = server::serve(cfg, store, None, Some(run)).await?;
            Ok(again.map(|restart| restart::Again {
                restart,
                update_dir,
            }))
        }
        Command::Up {
            listen,
            no_sim,
            sim_port,
            sim_modbus_port,
            edge_listen,
            mqtt,
            storage,
        } => {
            init_logging();
            let (file, storage_cfg, store) = open_store(&storage).await?;
            let cfg = ServeConfig::resolve_with(
                file,
                listen,
                mqtt,
                Some(server::UP_MQTT_LISTEN),
                storage_cfg,
            )?;
            server::serve(
                cfg,
                store,
                Some(server::Demo {
                    run_simulator: !no_sim,
                    sim_port,
                    sim_modbus_port,
                    edge_listen: edge_listen.unwrap_or_else(|| {
                        up_edge::UP_EDGE_LISTEN
                            .parse()
                            .expect("the default address parses")
                    }),
                }),
                None,
            )
            .await
            .map(|_| None)
        }
        Command::Keys {
            command:
                KeysCommand::Create {
                    name,
                    scopes,
                    org,
                    expires_at,
                    storage,
                },
        } => {
            let (_, _, store) = open_store(&storage).await?;
            let (_, secret) =
                operator::create_key(&store, org.as_deref(), &name, &scopes.0, expires_at).await?;
            println!("{secret}");
            Ok(None)
        }
        Command::Keys {
            command: KeysCommand::RotateSigning { storage },
        } => {
            let (_, _, store) = open_store(&storage).await?;
            let kid = operator::rotate_signing_key(&store).await?;
            println!("{kid}");
            Ok(None)
        }
        Command::Orgs {
            command:
                OrgsCommand::Create {
                    name,
                    tier,
                    storage,
                },
        } => {
            let (_, _, store) = open_store(&storage).await?;
            let org = operator::create_org(&store, &name, tier).await?;
            println!("{}", org.id);
            Ok(None)
        }
        Command::Orgs {
            command:
                OrgsCommand::Failover {
                    org,
                    region,
                    storage,
                },
        } => {
            let region: plantd_model::region::RegionId = region
                .parse()
                .map_err(|e: String| anyhow::anyhow!("--region: {e}"))?;
            let (_, _, store) = open_store(&storage).await?;
            let held = operator::fail_over(&store, &org, region.as_str()).await?;
            println!(
                "{org} is now served by {region}, with the copy taken at {} in {} ({} points, {} rows); what came after it stayed in {}",
                held.copied_at.to_rfc3339(),
                held.region,
                held.points,
                held.rows,
                held.region
            );
            Ok(None)
        }
        Command::License { command } => license::run(command).map(|()| None),
        Command::Sim { command } => {
            if matches!(command, sim::SimCommand::Start { .. }) {
                init_logging();
            }
            sim::run(command).await.map(|()| None)
        }
        Command::Users {
            command:
                UsersCommand::Create {
                    email,
                    password,
                    org,
                    role,
                    storage,
                },
        } => {
            let (_, _, store) = open_store(&storage).await?;
            let id = operator::create_user(&store, org.as_deref(), &email, &password, role).await?;
            println!("{id}");
            Ok(None)
        }
    }
}
