//! Running the server: `plantd serve`, and `plantd up` (the same with the simulator in this
//! process and the demo plant): logging, the lock of a SQLite database, the one `App` of the
//! process, and the welcome, printed last.

use crate::lock::lock_sqlite;
use crate::signals::stopped;
use anyhow::Context;

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

/// What `plantd up` adds to `plantd serve`: the simulator and the edge agent in this process,
/// and the demo plant.
pub(crate) struct Demo {
    pub(crate) run_simulator: bool,
    pub(crate) sim_port: u16,
    /// The simulator's Modbus TCP port (the edge agent reads the pump there).
    pub(crate) sim_modbus_port: u16,
    /// Where the edge agent's console listens.
    pub(crate) edge_listen: std::net::SocketAddr,
}

/// The simulator of `plantd up`, running in this process.
struct Simulator {
    task: tokio::task::JoinHandle<Result<(), String>>,
    ready: plantd_sim::server::Ready,
}

/// Starts the simulator in this process (default plant) with OPC UA on `port` and Modbus TCP
/// on `modbus_port`, and waits until it listens.
async fn start_simulator(
    port: u16,
    modbus_port: u16,
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
        modbus_port: Some(modbus_port),
        // The edge agent of `plantd up` reads it by address; discovery finds it announced.
        mdns: true,
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

/// Serves until the shutdown signal; returns the restart an edge agent's self-update (or its
/// rollback) asked for, to be done once everything is closed.
pub(crate) async fn serve(
    cfg: ServeConfig,
    store: plantd_store::Store,
    demo: Option<Demo>,
    edge: Option<crate::edge::EdgeRun>,
) -> anyhow::Result<Option<plantd_app::edge_update::Restart>> {
    let _lock = lock_sqlite(&cfg.storage.database_url)?;
    let listener = tokio::net::TcpListener::bind(cfg.listen)
        .await
        .with_context(|| format!("cannot listen on {}", cfg.listen))?;
    let addr = listener.local_addr()?;
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let stop_tx = std::sync::Arc::new(stop_tx);
    let on_signal = stop_tx.clone();
    tokio::spawn(async move {
        signals::shutdown().await;
        let _ = on_signal.send(true);
    });
    let mut demo = demo;
    if let Some(d) = demo.as_mut().filter(|d| d.run_simulator && d.sim_port == 0) {
        // Port 0: a free port, chosen here because the edge agent's demo assets name it.
        d.sim_port = free_loopback_port().await?;
    }
    if let Some(d) = demo.as_mut().filter(|d| {
        d.run_simulator
            && (d.sim_modbus_port == 0
                || std::net::TcpListener::bind(("127.0.0.1", d.sim_modbus_port)).is_err())
    }) {
        // The Modbus port taken (another simulator?) or 0: a free one, said in the welcome.
        d.sim_modbus_port = free_loopback_port().await?;
    }
    let simulator = match &demo {
        Some(d) if d.run_simulator => Some(
            start_simulator(
                d.sim_port,
                d.sim_modbus_port,
                &cfg.storage.data_dir,
                stop.clone(),
            )
            .await?,
        ),
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
        // An edge agent's owner sets a password in its setup wizard; a platform's is printed.
        let password = if edge.is_some() {
            operator::FirstPassword::ByWizard
        } else {
            operator::FirstPassword::Random
        };
        operator::first_start(&store, org_name, password).await?
    } else {
        None
    };
    // The one application of this process: the demo is seeded through it, then it is served.
    let app = plantd_app::App::new(store.clone(), cfg.api.clone().listening_on(addr));
    // An edge agent's self-update stops it the same way as the signal, to start again.
    let updating = app.clone();
    tokio::spawn(async move {
        let plan = updating.restart_requested().await;
        println!(
            "edge agent: stopping to start {} (self-update)",
            plan.exe.display()
        );
        let _ = stop_tx.send(true);
    });
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
    let mut seeded = None;
    if let Some(d) = &demo {
        let org = store
            .first_org()
            .await?
            .context("the database has no organization")?;
        let report = app
            .seed_demo(&org.id)
            .await
            .map_err(|e| anyhow::anyhow!("cannot create the demo plant: {e}"))?;
        if report.created.is_empty() {
            println!(
                "demo plant in \"{}\": already set up (device group, dashboards, alert rules)",
                org.name
            );
        } else {
            println!(
                "demo plant in \"{}\": created {}",
                org.name,
                report.created.join(", ")
            );
        }
        let endpoint = format!("opc.tcp://127.0.0.1:{}/", d.sim_port);
        match &simulator {
            Some(sim) => {
                let api = format!("http://127.0.0.1:{}", sim.ready.api_port);
                println!(
                    "simulator: {endpoint} and Modbus TCP 127.0.0.1:{} (in this process; control API {api}/api/status)",
                    d.sim_modbus_port
                );
                println!(
                    "  try a failing pump: plantd sim scenario enable bearing_failure --api-url {api}"
                );
            }
            None => println!(
                "simulator: {endpoint} and Modbus TCP 127.0.0.1:{} (not started here: --no-sim)",
                d.sim_modbus_port
            ),
        }
        seeded = Some((org.id, report.group_id));
    }
    let edge_tasks = match &edge {
        Some(run) => {
            let org = store
                .first_org()
                .await?
                .context("the database has no organization")?;
            crate::edge::announce_setup(&app, &org.id, &cfg.storage.data_dir).await?;
            crate::edge::start(&app, &org.id, run, stop.clone()).await?
        }
        None => Vec::new(),
    };
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
    // `plantd up`: the edge agent between the simulator and this platform.
    let up_edge = match (&demo, seeded, &mqtt) {
        (Some(d), Some((org_id, group_id)), Some(channel)) => match channel.local_addr {
            Some(mqtt_addr) => {
                let platform = crate::up_edge::Platform {
                    app: app.clone(),
                    org_id,
                    group_id,
                    root: plantd_app::AppConfig::local_root(addr),
                    mqtt: format!("mqtt://{mqtt_addr}"),
                };
                let agent = crate::up_edge::start(
                    platform,
                    cfg.api.clone(),
                    &cfg.storage.data_dir,
                    d.edge_listen,
                    (d.sim_port, d.sim_modbus_port),
                    first.as_ref().and_then(|f| f.password.clone()),
                    stop.clone(),
                )
                .await?;
                println!(
                    "edge agent: http://{} (in this process, development mode: reads the simulator, keeps the points in {} and forwards them here over MQTT as a device of the group \"{}\")",
                    agent.addr,
                    agent.data_dir.display(),
                    plantd_app::demo::DEMO_GROUP
                );
                Some(agent)
            }
            None => None,
        },
        (Some(_), _, _) => {
            println!("edge agent: not started (the MQTT device channel is off)");
            None
        }
        _ => None,
    };
    match first {
        Some(first) => {
            println!(
                "first start: created organization \"{}\" ({})",
                first.org.name, first.org.id
            );
            match &first.password {
                Some(password) => {
                    println!("  login email:    {}", first.email);
                    println!("  login password: {password}");
                    if demo.is_some() {
                        println!("  (the same login opens the edge agent's console)");
                    }
                    println!(
                        "  (shown once; create an API key with: plantd keys create --name me --scopes admin)"
                    );
                }
                None => println!(
                    "  login email:    {} (its password is set in the setup wizard, above)",
                    first.email
                ),
            }
        }
        None if demo.is_some() => println!(
            "log in as {} with the password printed at the first start",
            operator::FIRST_ADMIN_EMAIL
        ),
        None => {}
    }
    let external = cfg.mqtt_external.clone().map(|b| {
        println!(
            "MQTT device channel through the external broker mqtt://{}:{}",
            b.host, b.port
        );
        plantd_mqtt::start_external(app.clone(), b)
    });
    println!("stop: Ctrl-C (or SIGTERM); logs go to stderr (--log-level info for more)");
    tracing::info!(%addr, "serving");
    plantd_api::serve(listener, app.clone(), stopped(stop)).await?;
    if let Some(channel) = mqtt {
        channel.stop().await;
    }
    if let Some(task) = external {
        task.abort();
    }
    for task in edge_tasks {
        let _ = task.await;
    }
    if let Some(agent) = up_edge
        && let Err(e) = agent.task.await
    {
        tracing::warn!(error = %e, "the edge agent's task failed");
    }
    store.close().await;
    if let Some(sim) = simulator
        && let Err(e) = sim.task.await
    {
        tracing::warn!(error = %e, "the simulator task failed");
    }
    tracing::info!("stopped");
    Ok(app.restart_plan())
}

/// A loopback port free now.
async fn free_loopback_port() -> anyhow::Result<u16> {
    Ok(tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await?
        .local_addr()?
        .port())
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
