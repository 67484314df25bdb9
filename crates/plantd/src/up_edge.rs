//! The edge agent inside `plantd up` (issue 34): the whole path of a plant in one command, the
//! simulator -> the edge agent (its connectors read the simulator's pump over Modbus TCP and its
//! motor and HVAC unit over OPC UA, into its own store) -> MQTT -> the platform. The agent is
//! the same as `plantd edge --mode development`, run in this process with its own data
//! directory (`<data dir>/edge`, SQLite) and console; it enrolls with the platform by an
//! enrollment token the platform makes for it, into the demo's device group, whose alert rules
//! then watch its points.

use anyhow::Context;
use plantd_app::App;
use plantd_app::fleet::NewTokenRequest;
use plantd_app::{AppConfig, EdgeSettings};
use plantd_model::Timestamp;
use plantd_model::provisioning::DeploymentMode;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::watch;

use crate::edge::EdgeRun;
use crate::lock::lock_sqlite;
use crate::signals::stopped;

/// Where the agent's console listens under `plantd up` unless told otherwise (the SPEC's edge
/// dashboard port, on loopback); a taken default gives way to a free port.
pub(crate) const UP_EDGE_LISTEN: &str = "127.0.0.1:3000";

/// What the platform gives the agent.
pub(crate) struct Platform {
    pub(crate) app: App,
    pub(crate) org_id: String,
    /// The demo's device group, which the agent joins.
    pub(crate) group_id: String,
    /// The platform's root address and its MQTT device channel.
    pub(crate) root: String,
    pub(crate) mqtt: String,
}

/// The agent, running.
pub(crate) struct UpEdge {
    pub(crate) addr: SocketAddr,
    pub(crate) data_dir: PathBuf,
    /// Serves the agent until the stop, then ends its tasks and closes its store.
    pub(crate) task: tokio::task::JoinHandle<()>,
}

/// Starts the agent: its store and console now, its enrollment and connectors once the
/// platform answers. `config` is the platform's (the agent shares its settings, not its
/// database); `password` the owner's login when the agent's data directory is new (the
/// platform's own first password, so that one login opens both consoles).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn start(
    platform: Platform,
    config: AppConfig,
    data_dir: &std::path::Path,
    listen: SocketAddr,
    sim: (u16, u16),
    password: Option<String>,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<UpEdge> {
    let data_dir = data_dir.join("edge");
    std::fs::create_dir_all(&data_dir)
        .with_context(|| format!("cannot create {}", data_dir.display()))?;
    let url = format!("sqlite://{}", data_dir.join("plantd.db").display());
    let lock = lock_sqlite(&url)?;
    let store = plantd_store::Store::connect(&url)
        .await
        .with_context(|| format!("cannot open the edge agent's database {url}"))?;
    let password = match password {
        Some(p) => plantd_app::operator::FirstPassword::Given(p),
        None => plantd_app::operator::FirstPassword::Random,
    };
    plantd_app::operator::first_start(&store, "Edge", password).await?;
    let org_id = store
        .first_org()
        .await?
        .context("the edge agent's database has no organization")?
        .id;
    let listener = match tokio::net::TcpListener::bind(listen).await {
        Ok(l) => l,
        Err(_) if listen.to_string() == UP_EDGE_LISTEN => {
            println!("edge agent: {UP_EDGE_LISTEN} is taken; using a free port");
            tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?
        }
        Err(e) => {
            return Err(e).with_context(|| format!("the edge agent cannot listen on {listen}"));
        }
    };
    let addr = listener.local_addr()?;
    let mut config = config;
    config.public_url = None;
    config.retention.predictions_days = Some(EdgeSettings::default().ml_predictions_days);
    config.edge = Some(EdgeSettings {
        mode: DeploymentMode::Development,
        mqtt_url: Some(platform.mqtt.clone()),
        templates: crate::edge::templates(),
        ..EdgeSettings::default()
    });
    let app = App::new(store.clone(), config.listening_on(addr));
    let run = EdgeRun {
        mode: DeploymentMode::Development,
        sim_host: "127.0.0.1".into(),
        sim_opcua_port: sim.0,
        sim_modbus_port: sim.1,
        enroll: None,
        quiet: true,
    };
    let task = tokio::spawn(async move {
        let _lock = lock;
        let serving = tokio::spawn(plantd_api::serve(
            listener,
            app.clone(),
            stopped(stop.clone()),
        ));
        let tasks = match link(&app, &org_id, &platform, run, stop.clone()).await {
            Ok(tasks) => tasks,
            Err(e) => {
                println!("edge agent: {e:#}");
                Vec::new()
            }
        };
        match serving.await {
            Ok(Err(e)) => tracing::error!(error = %e, "the edge agent's server failed"),
            Err(e) => tracing::error!(error = %e, "the edge agent's server panicked"),
            Ok(Ok(())) => {}
        }
        for t in tasks {
            let _ = t.await;
        }
        store.close().await;
    });
    Ok(UpEdge {
        addr,
        data_dir,
        task,
    })
}

/// Once the platform answers: the agent enrolled (or its enrollment kept, at the platform's
/// address of this start), then its uplink and demo assets.
async fn link(
    app: &App,
    org_id: &str,
    platform: &Platform,
    mut run: EdgeRun,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<Vec<tokio::task::JoinHandle<()>>> {
    let client = reqwest::Client::new();
    let health = format!("{}/v1/health", platform.root);
    let mut ready = false;
    for _ in 0..600 {
        if *stop.borrow() {
            return Ok(Vec::new());
        }
        if client
            .get(&health)
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::ensure!(
        ready,
        "the platform did not answer at {health}; not enrolled"
    );
    let device = match app.cloud_link(org_id).await? {
        Some(link) => platform
            .app
            .device(&platform.org_id, &link.device_id)
            .await
            .ok(),
        None => None,
    };
    if device.is_some() {
        // The same platform (its database holds the device): only its address may differ.
        app.move_cloud(org_id, &platform.root).await?;
    } else {
        let token = platform
            .app
            .create_enrollment_token(
                &platform.org_id,
                NewTokenRequest {
                    group_id: Some(platform.group_id.clone()),
                    tags: vec!["edge".into()],
                    expires_at: Some(Timestamp::from_millis(
                        Timestamp::now().millis() + 10 * 60_000,
                    )),
                    max_uses: Some(1),
                },
            )
            .await
            .map_err(|e| anyhow::anyhow!("cannot make an enrollment token: {e}"))?;
        run.enroll = Some((token.token, platform.root.clone()));
    }
    crate::edge::start(app, org_id, &run, stop).await
}
