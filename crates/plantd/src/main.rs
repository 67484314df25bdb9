//! The `plantd` command: `up` runs the platform with a simulated plant for a first look, `serve`
//! runs the cloud service; `keys`, `orgs` and `users` are operator commands that work beside a
//! running server on the same database.

mod config;
mod license;
mod signals;
mod sim;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use plantd_app::operator;
use plantd_model::org::Role;
use plantd_model::{Scope, Tier, Timestamp, scope};
use std::path::PathBuf;
use std::process::ExitCode;

use config::{FileConfig, ServeConfig, StorageConfig};

#[derive(Parser)]
#[command(
    name = "plantd",
    version,
    about = "Open industrial monitoring platform"
)]
struct Cli {
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
    /// Start the platform and a simulated plant: the console, a demo organization with an OPC UA
    /// data source on the simulator, dashboards and alert rules (created once).
    Up {
        /// Address to listen on [default: 127.0.0.1:8000].
        #[arg(long, env = "PLANTD_LISTEN")]
        listen: Option<String>,
        /// Do not start the simulator (the demo data source still reads --sim-port).
        #[arg(long)]
        no_sim: bool,
        /// The simulator's OPC UA port (0: a free one).
        #[arg(long, default_value_t = 4840)]
        sim_port: u16,
        #[command(flatten)]
        storage: StorageArgs,
    },
    /// Run the cloud service (web console at /, REST API under /v1).
    Serve {
        /// Address to listen on [default: 127.0.0.1:8000].
        #[arg(long, env = "PLANTD_LISTEN")]
        listen: Option<String>,
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
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn open_store(
    args: &StorageArgs,
) -> anyhow::Result<(FileConfig, StorageConfig, plantd_store::Store)> {
    let file = FileConfig::load(args.config.as_deref())?;
    let storage = StorageConfig::resolve(&file, args.data_dir.clone(), args.database_url.clone())?;
    let store = plantd_store::Store::connect(&storage.database_url)
        .await
        .with_context(|| format!("cannot open the database {}", redact(&storage.database_url)))?;
    Ok((file, storage, store))
}

/// A database URL without its password, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let userinfo = &url[s + 3..at];
            let user = userinfo.split(':').next().unwrap_or_default();
            format!("{}{}@{}", &url[..s + 3], user, &url[at + 1..])
        }
        _ => url.to_string(),
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve { listen, storage } => {
            init_logging();
            let (file, storage_cfg, store) = open_store(&storage).await?;
            let cfg = ServeConfig::resolve(file, listen, storage_cfg)?;
            serve(cfg, store, None).await
        }
        Command::Up {
            listen,
            no_sim,
            sim_port,
            storage,
        } => {
            init_logging();
            let (file, storage_cfg, store) = open_store(&storage).await?;
            let cfg = ServeConfig::resolve(file, listen, storage_cfg)?;
            serve(
                cfg,
                store,
                Some(Demo {
                    run_simulator: !no_sim,
                    sim_port,
                }),
            )
            .await
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
            Ok(())
        }
        Command::Keys {
            command: KeysCommand::RotateSigning { storage },
        } => {
            let (_, _, store) = open_store(&storage).await?;
            let kid = operator::rotate_signing_key(&store).await?;
            println!("{kid}");
            Ok(())
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
            Ok(())
        }
        Command::License { command } => license::run(command),
        Command::Sim { command } => {
            if matches!(command, sim::SimCommand::Start { .. }) {
                init_logging();
            }
            sim::run(command).await
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
            Ok(())
        }
    }
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("PLANTD_LOG")
        // The OPC UA client library logs every failed connection attempt as an error; the
        // connectors report those in the source's last_error and log them at info.
        .unwrap_or_else(|_| {
            tracing_subscriber::EnvFilter::new("info,sqlx::query=error,opcua_client=off")
        });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

/// Holds `<database file>.lock` for the life of the server: one server per SQLite database.
/// Several servers on one file would each run connectors and count limits of their own, and
/// the data source cache relies on this server making every data source write.
fn lock_sqlite(database_url: &str) -> anyhow::Result<Option<std::fs::File>> {
    let Some(db) = plantd_store::sqlite_file(database_url) else {
        return Ok(None);
    };
    let path = PathBuf::from(format!("{}.lock", db.display()));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot open the lock file {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
            "another plantd server is already using {} (it holds {}); stop it first or use another --data-dir",
            db.display(),
            path.display()
        ),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("cannot lock {}", path.display()))
        }
    }
}

/// What `plantd up` adds to `plantd serve`: the simulator in this process and the demo plant.
struct Demo {
    run_simulator: bool,
    sim_port: u16,
}

/// Completes when `stop` turns true (the shutdown signal, shared by the servers of one process).
async fn stopped(mut stop: tokio::sync::watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Starts the simulator in this process (default plant, OPC UA only) on `port`.
async fn start_simulator(
    port: u16,
    data_dir: &std::path::Path,
    stop: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<tokio::task::JoinHandle<Result<(), String>>> {
    // Refuse a busy port now rather than from inside the task.
    drop(
        tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .with_context(|| {
                format!("the simulator's OPC UA port {port} is in use; pass --sim-port PORT, or --no-sim to use the simulator already running there")
            })?,
    );
    let options = plantd_sim::server::Options {
        host: "127.0.0.1".into(),
        opcua_port: port,
        api_port: 0,
        modbus_port: None,
        seed: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
        pki_dir: data_dir.join("pki-sim"),
    };
    Ok(tokio::spawn(async move {
        let result = plantd_sim::server::run(
            plantd_sim::SimConfig::default_plant(),
            options,
            stopped(stop),
        )
        .await;
        if let Err(e) = &result {
            tracing::error!(error = %e, "the simulator stopped");
        }
        result
    }))
}

async fn serve(
    cfg: ServeConfig,
    store: plantd_store::Store,
    demo: Option<Demo>,
) -> anyhow::Result<()> {
    let _lock = lock_sqlite(&cfg.storage.database_url)?;
    let listener = tokio::net::TcpListener::bind(cfg.listen)
        .await
        .with_context(|| format!("cannot listen on {}", cfg.listen))?;
    let addr = listener.local_addr()?;
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        signals::shutdown().await;
        let _ = stop_tx.send(true);
    });
    let mut demo = demo;
    if let Some(d) = demo.as_mut().filter(|d| d.run_simulator && d.sim_port == 0) {
        // Port 0: a free port, chosen here because the demo data source must name it.
        d.sim_port = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await?
            .local_addr()?
            .port();
    }
    let simulator = match &demo {
        Some(d) if d.run_simulator => {
            Some(start_simulator(d.sim_port, &cfg.storage.data_dir, stop.clone()).await?)
        }
        _ => None,
    };
    let org_name = if demo.is_some() {
        "Demo plant"
    } else {
        "Default"
    };
    let first = operator::first_start(&store, org_name).await?;
    // The one application of this process: the demo is seeded through it, then it is served.
    let app = plantd_app::App::new(store.clone(), cfg.api.clone().listening_on(addr));
    println!(
        "plantd {} listening on http://{addr}",
        env!("CARGO_PKG_VERSION")
    );
    println!("web console: http://{addr}/");
    println!("API docs: http://{addr}/v1/docs");
    println!("data directory: {}", cfg.storage.data_dir.display());
    println!(
        "database: {} ({})",
        redact(&cfg.storage.database_url),
        store.backend().as_str()
    );
    if let Some(d) = &demo {
        let org = store
            .first_org()
            .await?
            .context("the database has no organization")?;
        let endpoint = format!("opc.tcp://127.0.0.1:{}/", d.sim_port);
        let report = app
            .seed_demo(&org.id, &endpoint)
            .await
            .map_err(|e| anyhow::anyhow!("cannot create the demo plant: {e}"))?;
        if report.created.is_empty() {
            println!(
                "demo plant in \"{}\": already set up (data source, dashboards, alert rules)",
                org.name
            );
        } else {
            println!(
                "demo plant in \"{}\": created {}",
                org.name,
                report.created.join(", ")
            );
        }
        println!(
            "simulator: {endpoint}{}",
            if d.run_simulator {
                " (in this process)"
            } else {
                " (not started here: --no-sim)"
            }
        );
    }
    match first {
        Some(first) => {
            println!(
                "first start: created organization \"{}\" ({})",
                first.org.name, first.org.id
            );
            println!("  login email:    {}", first.email);
            println!("  login password: {}", first.password);
            println!(
                "  (shown once; create an API key with: plantd keys create --name me --scopes admin)"
            );
        }
        None if demo.is_some() => println!(
            "log in as {} with the password printed at the first start",
            operator::FIRST_ADMIN_EMAIL
        ),
        None => {}
    }
    tracing::info!(%addr, "serving");
    plantd_api::serve(listener, app, stopped(stop)).await?;
    store.close().await;
    if let Some(sim) = simulator
        && let Err(e) = sim.await
    {
        tracing::warn!(error = %e, "the simulator task failed");
    }
    tracing::info!("stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn redacts_passwords() {
        assert_eq!(
            super::redact("postgres://u:secret@h/db"),
            "postgres://u@h/db"
        );
        assert_eq!(super::redact("sqlite://x.db"), "sqlite://x.db");
    }
}
