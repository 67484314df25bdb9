//! Running the server: `plantd serve`, and `plantd up` (the same with the simulator in this
//! process and the demo plant): logging, the lock of a SQLite database, the one `App` of the
//! process, and the welcome, printed last.

use anyhow::Context;
use std::path::PathBuf;

use crate::config::ServeConfig;
use crate::signals;
use plantd_app::operator;

/// The log filter when neither `RUST_LOG`, `PLANTD_LOG` nor `--log-level` says otherwise:
/// warnings and errors, and the progress of a storage upgrade (a long first start after an
/// upgrade says what it is doing). What runs is in the welcome; everything else is for those who
/// ask (`--log-level info` or `debug`).
const DEFAULT_LOG: &str = "warn,plantd_tsdb::upgrade=info,opcua_client=off";

/// Logs to stderr, filtered by `RUST_LOG`, else `PLANTD_LOG`, else `level` (a level, or a
/// filter such as `info,opcua_client=off`), else [`DEFAULT_LOG`]. The OPC UA client library logs
/// every failed connection attempt as an error; the connectors report those in the source's
/// `last_error`, so that library stays off unless a filter names it.
pub(crate) fn init_logging(level: Option<&str>) {
    let filter = ["RUST_LOG", "PLANTD_LOG"]
        .iter()
        .find_map(|var| tracing_subscriber::EnvFilter::try_from_env(var).ok())
        .unwrap_or_else(|| {
            let text = level.map_or(DEFAULT_LOG.to_string(), |l| {
                format!("{l},sqlx::query=error,opcua_client=off")
            });
            tracing_subscriber::EnvFilter::try_new(&text)
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG))
        });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
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
pub(crate) struct Demo {
    pub(crate) run_simulator: bool,
    pub(crate) sim_port: u16,
}

/// Completes when `stop` turns true (the shutdown signal, shared by the servers of one process).
async fn stopped(mut stop: tokio::sync::watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// The simulator of `plantd up`, running in this process.
struct Simulator {
    task: tokio::task::JoinHandle<Result<(), String>>,
    ready: plantd_sim::server::Ready,
}

/// Starts the simulator in this process (default plant, OPC UA only) on `port`, and waits
/// until it listens.
async fn start_simulator(
    port: u16,
    data_dir: &std::path::Path,
    stop: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<Simulator> {
    // Refuse a busy port now rather than from inside the task.
    drop(
        tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .with_context(|| {
                format!("the simulator's OPC UA port {port} is in use; pass --sim-port PORT, or --no-sim to use the simulator already running there")
            })?,
    );
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let options = plantd_sim::server::Options {
        host: "127.0.0.1".into(),
        opcua_port: port,
        api_port: 0,
        modbus_port: None,
        seed: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
        pki_dir: data_dir.join("pki-sim"),
        ready: Some(ready_tx),
    };
    let task = tokio::spawn(async move {
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
    });
    match ready_rx.await {
        Ok(ready) => Ok(Simulator { task, ready }),
        Err(_) => match task.await {
            Ok(Err(e)) => Err(anyhow::anyhow!("the simulator did not start: {e}")),
            _ => Err(anyhow::anyhow!("the simulator did not start")),
        },
    }
}

/// Where `plantd up` serves the MQTT device channel unless told otherwise.
pub(crate) const UP_MQTT_LISTEN: &str = "127.0.0.1:1883";

/// Starts the MQTT device channel; under `plantd up`, a taken default port (a developer
/// machine may run a broker there) gives way to a free one, said on the console.
async fn start_mqtt(
    app: &plantd_app::App,
    settings: &plantd_mqtt::MqttSettings,
    up: bool,
) -> anyhow::Result<plantd_mqtt::MqttChannel> {
    let mut settings = settings.clone();
    if up
        && settings.listen.to_string() == UP_MQTT_LISTEN
        && std::net::TcpListener::bind(settings.listen).is_err()
    {
        println!("MQTT: {UP_MQTT_LISTEN} is taken (another broker?); using a free port");
        settings.listen.set_port(0);
    }
    Ok(plantd_mqtt::start(app.clone(), &settings).await?)
}

pub(crate) async fn serve(
    cfg: ServeConfig,
    store: plantd_store::Store,
    demo: Option<Demo>,
    edge: Option<crate::edge::EdgeRun>,
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
    } else if edge.is_some() {
        "Edge"
    } else {
        "Default"
    };
    // In a deployment of several regions only the bootstrap region's instance creates the
    // first organization and its owner; the others receive them through replication.
    let regions = &cfg.api.regions;
    let first = if regions.region == regions.bootstrap_region() {
        operator::first_start(&store, org_name).await?
    } else {
        None
    };
    // The one application of this process: the demo is seeded through it, then it is served.
    let app = plantd_app::App::new(store.clone(), cfg.api.clone().listening_on(addr));
    println!(
        "plantd {} listening on http://{addr}",
        env!("CARGO_PKG_VERSION")
    );
    println!("web console: http://{addr}/");
    println!("API docs: http://{addr}/v1/docs");
    println!("data directory: {}", cfg.storage.data_dir.display());
    if regions.is_deployment() {
        let peers: Vec<String> = regions
            .peers
            .iter()
            .map(|(r, u)| format!("{r}={u}"))
            .collect();
        println!(
            "region: {} of deployment \"{}\" (peers: {}; NATS: {})",
            regions.region,
            regions.deployment,
            if peers.is_empty() {
                "none".into()
            } else {
                peers.join(", ")
            },
            regions.nats_url.as_deref().unwrap_or("none")
        );
        if regions.region != regions.bootstrap_region() && store.org_count().await? == 0 {
            println!(
                "  organizations and their owners arrive from {} (the deployment's first region) through NATS",
                regions.bootstrap_region()
            );
        }
    }
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
        match &simulator {
            Some(sim) => {
                let api = format!("http://127.0.0.1:{}", sim.ready.api_port);
                println!("simulator: {endpoint} (in this process; control API {api}/api/status)");
                println!(
                    "  try a failing pump: plantd sim scenario enable bearing_failure --api-url {api}"
                );
            }
            None => println!("simulator: {endpoint} (not started here: --no-sim)"),
        }
    }
    let edge_tasks = match &edge {
        Some(run) => {
            let org = store
                .first_org()
                .await?
                .context("the database has no organization")?;
            crate::edge::start(&app, &org.id, run, stop.clone()).await?
        }
        None => Vec::new(),
    };
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
    let mqtt = match &cfg.mqtt {
        Some(settings) => {
            let channel = start_mqtt(&app, settings, demo.is_some()).await?;
            if let Some(a) = channel.local_addr {
                println!("MQTT device channel: mqtt://{a}");
            }
            if let Some(a) = channel.tls_local_addr {
                println!("MQTT device channel over TLS: mqtts://{a}");
            }
            Some(channel)
        }
        None => None,
    };
    let external = cfg.mqtt_external.clone().map(|b| {
        println!(
            "MQTT device channel through the external broker mqtt://{}:{}",
            b.host, b.port
        );
        plantd_mqtt::start_external(app.clone(), b)
    });
    println!("stop: Ctrl-C (or SIGTERM); logs go to stderr (--log-level info for more)");
    tracing::info!(%addr, "serving");
    plantd_api::serve(listener, app, stopped(stop)).await?;
    if let Some(channel) = mqtt {
        channel.stop().await;
    }
    if let Some(task) = external {
        task.abort();
    }
    for task in edge_tasks {
        let _ = task.await;
    }
    store.close().await;
    if let Some(sim) = simulator
        && let Err(e) = sim.task.await
    {
        tracing::warn!(error = %e, "the simulator task failed");
    }
    tracing::info!("stopped");
    Ok(())
}

/// A database URL without its password, for messages.
pub(crate) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let userinfo = &url[s + 3..at];
            let user = userinfo.split(':').next().unwrap_or_default();
            format!("{}{}@{}", &url[..s + 3], user, &url[at + 1..])
        }
        _ => url.to_string(),
    }
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
