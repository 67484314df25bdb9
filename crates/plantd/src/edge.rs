//! `plantd edge` (issue 34): the same server as `plantd serve`, run as a plant's edge agent. Its
//! `DEPLOYMENT_MODE` (SPEC 2.16) decides what it starts with: `production` nothing (assets are
//! provisioned: `/v1/provisioning`), `development` the simulator's demo assets (data sources
//! reading `plantd sim` over Modbus TCP and OPC UA), `demo` generated data with no device
//! connection (the simulator's models, run here).

use anyhow::Context;
use plantd_app::App;
use plantd_app::provisioning::Method;
use plantd_model::Timestamp;
use plantd_model::provisioning::DeploymentMode;
use plantd_model::telemetry::{Point, Quality};
use serde_json::{Value, json};
use std::time::Duration;
use tokio::sync::watch;

/// Where the listening address defaults to: the SPEC's dashboard port, on every interface.
pub(crate) const DEFAULT_LISTEN: &str = "0.0.0.0:3000";
/// The agent's data directory unless told otherwise (beside a cloud's `./plantd-data`).
pub(crate) const DEFAULT_DATA_DIR: &str = "./plantd-edge-data";

/// What `plantd edge` adds to the server.
#[derive(Clone, Debug)]
pub(crate) struct EdgeRun {
    pub(crate) mode: DeploymentMode,
    /// `development`: the simulator's host and ports.
    pub(crate) sim_host: String,
    pub(crate) sim_opcua_port: u16,
    pub(crate) sim_modbus_port: u16,
    /// `--enroll TOKEN --cloud URL`: the token and the cloud.
    pub(crate) enroll: Option<(String, String)>,
    /// Under `plantd up`: what went well is said by its welcome, not here (only failures are).
    pub(crate) quiet: bool,
}

/// The demo assets of `development` mode: the simulator's pump over Modbus TCP (its map: each
/// numeric variable a float in two registers, in order), its motor and HVAC unit over OPC UA.
pub(crate) fn development_assets(run: &EdgeRun) -> Vec<Value> {
    let pump = [
        "Vibration_X",
        "Vibration_Y",
        "Vibration_Z",
        "Motor_Temperature",
        "Bearing_Temperature",
        "Discharge_Pressure",
        "Suction_Pressure",
        "Flow_Rate",
        "Motor_Current",
        "Motor_Speed",
    ]
    .iter()
    .enumerate()
    .map(|(i, name)| format!("{name}:{}", 2 * i))
    .collect::<Vec<_>>()
    .join(";");
    vec![
        json!({"asset_id": "Pump_01", "asset_type": "centrifugal_pump", "protocol": "modbus",
               "host": run.sim_host, "port": run.sim_modbus_port, "sensors": pump,
               "initial_state": "running"}),
        json!({"asset_id": "Motor_01", "asset_type": "electric_motor", "protocol": "opcua",
               "host": run.sim_host, "port": run.sim_opcua_port, "linked_to": "Pump_01",
               "sensors": "Stator_Temperature;Rotor_Temperature;Voltage_L1;Voltage_L2;Voltage_L3;Current_L1;Current_L2;Current_L3;Power_Factor;Active_Power;Speed"}),
        json!({"asset_id": "HVAC_01", "asset_type": "hvac_unit", "protocol": "opcua",
               "host": run.sim_host, "port": run.sim_opcua_port,
               "sensors": "Supply_Temperature;Return_Temperature;Humidity;CO2_Level;Fan_Speed;Filter_Status"}),
    ]
}

/// What the simulator's catalog says the demo assets' tags measure (units and ranges): its
/// Modbus map carries none, and the agent tells its cloud what it knows of its tags.
fn development_descriptions() -> Vec<(String, String, plantd_model::tag::TagDescription)> {
    use plantd_sim::catalog::AssetType;
    [
        ("Pump_01", AssetType::CentrifugalPump),
        ("Motor_01", AssetType::ElectricMotor),
        ("HVAC_01", AssetType::Hvac),
    ]
    .into_iter()
    .flat_map(|(asset, kind)| {
        kind.variables().into_iter().filter_map(move |v| {
            let (low, high) = v.range?;
            Some((
                asset.to_string(),
                v.name,
                plantd_model::tag::TagDescription {
                    unit: v.unit.filter(|u| !u.trim().is_empty()),
                    description: None,
                    eu_range: (low < high).then_some(plantd_model::tag::EuRange { low, high }),
                },
            ))
        })
    })
    .collect()
}

/// The setup wizard's asset templates: the simulator's catalog, each numeric variable with its
/// unit and its register in the simulator's Modbus map (a float in two registers, in order).
pub(crate) fn templates() -> Vec<plantd_model::provisioning::AssetTemplate> {
    use plantd_model::provisioning::{AssetTemplate, TemplateSensor};
    use plantd_sim::catalog::{AssetType, DataType};
    AssetType::ALL
        .into_iter()
        .map(|kind| {
            let name = kind.name();
            let mut title = name.replace('_', " ");
            if let Some(first) = title.get_mut(0..1) {
                first.make_ascii_uppercase();
            }
            let sensors = kind
                .variables()
                .into_iter()
                .filter(|v| matches!(v.data_type, DataType::Float | DataType::Int))
                .enumerate()
                .map(|(k, v)| TemplateSensor {
                    name: v.name,
                    unit: v.unit.filter(|u| !u.trim().is_empty()),
                    modbus_address: 2 * k as u16,
                })
                .collect();
            AssetTemplate {
                asset_type: name.to_string(),
                title: if name == "hvac" {
                    "HVAC unit".into()
                } else {
                    title
                },
                sensors,
            }
        })
        .collect()
}

/// Enrolls with the cloud once (`--enroll`); a failure is said and the agent runs on without
/// the cloud (enrolling again at the next start, or by `POST /v1/edge/enroll`).
async fn enroll(app: &App, org_id: &str, run: &EdgeRun) {
    let Some((token, cloud)) = &run.enroll else {
        return;
    };
    let cloud = plantd_app::edge_uplink::cloud_root(cloud);
    match app.cloud_link(org_id).await {
        Ok(Some(link)) if link.url == cloud => {
            if run.quiet {
                return;
            }
            println!(
                "edge agent: enrolled with {} as device {} (since {})",
                link.url,
                link.device_id,
                link.enrolled_at.to_rfc3339()
            );
            return;
        }
        _ => {}
    }
    match app.enroll(org_id, &cloud, token).await {
        Ok(link) if !run.quiet => println!(
            "edge agent: enrolled with {} as device {}",
            link.url, link.device_id
        ),
        Ok(_) => {}
        Err(e) => {
            println!("edge agent: cannot enroll with {cloud}: {e}; running without the cloud")
        }
    }
}

/// The setup wizard's code while the owner has no password: a new one at each start, printed
/// with the wizard's address and kept in `<data dir>/setup-code` (readable by its owner only),
/// which goes once the password is set.
pub(crate) async fn announce_setup(
    app: &App,
    org_id: &str,
    data_dir: &std::path::Path,
) -> anyhow::Result<()> {
    let file = data_dir.join(SETUP_CODE_FILE);
    let Some(code) = app.issue_setup_code(org_id).await? else {
        let _ = std::fs::remove_file(&file);
        return Ok(());
    };
    write_private(&file, &format!("{code}\n"))
        .with_context(|| format!("cannot write {}", file.display()))?;
    println!(
        "edge agent: set it up in a browser at {}/setup",
        app.issuer()
    );
    println!("  setup code: {code}");
    println!(
        "  (it sets the password of {}; also in {}; a new code at each start until then)",
        plantd_app::operator::FIRST_ADMIN_EMAIL,
        file.display()
    );
    Ok(())
}

/// The file beside the database that holds the setup code while setup is pending.
pub(crate) const SETUP_CODE_FILE: &str = "setup-code";

/// Writes `text` to `path`, readable and writable by this user only.
fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut o = std::fs::OpenOptions::new();
    o.create(true).truncate(true).write(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    o.open(path)?.write_all(text.as_bytes())
}

/// Starts the uplink to the cloud (it waits for the enrollment) and what the mode adds, and
/// says so; returns their tasks.
pub(crate) async fn start(
    app: &App,
    org_id: &str,
    run: &EdgeRun,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<Vec<tokio::task::JoinHandle<()>>> {
    enroll(app, org_id, run).await;
    // After a self-update: the new version's health check (or the report of a rollback).
    app.resume_self_update(org_id);
    let uplink = plantd_mqtt::uplink::start(app.clone(), org_id.to_string(), stop.clone());
    let mut tasks = vec![uplink];
    tasks.extend(start_mode(app, org_id, run, stop).await?);
    Ok(tasks)
}

/// What the mode adds; `demo` returns its generator's task.
async fn start_mode(
    app: &App,
    org_id: &str,
    run: &EdgeRun,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<Option<tokio::task::JoinHandle<()>>> {
    match run.mode {
        DeploymentMode::Production => {
            println!(
                "edge agent: production mode (no preloaded assets; provision them: POST /v1/provisioning/import/csv, yaml or qr)"
            );
            Ok(None)
        }
        DeploymentMode::Development => {
            let report = app
                .import_entries(org_id, development_assets(run), Method::Development)
                .await
                .map_err(|e| anyhow::anyhow!("cannot preload the demo assets: {e}"))?;
            app.record_device_tags(org_id, &development_descriptions())
                .await;
            if !run.quiet {
                println!(
                    "edge agent: development mode, {} demo assets reading the simulator at {} (OPC UA {}, Modbus TCP {}; start it with: plantd sim start)",
                    report.imported, run.sim_host, run.sim_opcua_port, run.sim_modbus_port
                );
            }
            Ok(None)
        }
        DeploymentMode::Demo => {
            let sim = plantd_sim::Simulation::new(
                &plantd_sim::SimConfig::default_plant(),
                Timestamp::now().millis() as u64,
                Timestamp::now().millis() as f64 / 1000.0,
            )
            .map_err(|e| anyhow::anyhow!("cannot start the demo data: {e}"))?;
            println!(
                "edge agent: demo mode, generated data of the simulator's plant every second (no device connections)"
            );
            Ok(Some(tokio::spawn(generate(
                app.clone(),
                org_id.to_string(),
                sim,
                stop,
            ))))
        }
    }
}

/// `demo` mode: every second, the simulated plant's values as points of their assets.
async fn generate(
    app: App,
    org_id: String,
    mut sim: plantd_sim::Simulation,
    mut stop: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        sim.advance(1.0);
        let now = Timestamp::now();
        let points: Vec<Point> = sim
            .snapshot()
            .into_iter()
            .filter(|v| !matches!(v.value, plantd_sim::Value::Text(_)))
            .map(|v| Point {
                asset_id: v.asset_id,
                tag_name: v.name,
                value: v.value.as_f64(),
                timestamp: now,
                quality: Quality::Good,
                data_source_id: None,
            })
            .collect();
        if let Err(e) = app.write_generated(&org_id, points).await {
            tracing::warn!(error = %e, "demo mode: generated points were not stored");
        }
    }
}
