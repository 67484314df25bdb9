//! `plantd sim start`: the simulation, its OPC UA server and its control API, until shutdown.

use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::control::{SimState, router, spawn_clock};
use crate::opcua::Face;
use crate::{SimConfig, Simulation};

pub struct Options {
    pub host: String,
    pub opcua_port: u16,
    pub api_port: u16,
    /// Modbus TCP port (`None`: no Modbus server).
    pub modbus_port: Option<u16>,
    /// Announce the OPC UA server over mDNS (`_opcua-tcp._tcp`).
    pub mdns: bool,
    pub seed: u64,
    /// Where the server's certificate is created on first start (and trusted client
    /// certificates are kept).
    pub pki_dir: PathBuf,
    /// Who is told where the server listens once it does: `None` prints it (a server of its
    /// own); a process that embeds the simulator (`plantd up`) says it in its own words.
    pub ready: Option<tokio::sync::oneshot::Sender<Ready>>,
}

/// Where a started simulation server listens.
#[derive(Clone, Copy, Debug)]
pub struct Ready {
    pub opcua_port: u16,
    pub api_port: u16,
}

/// How often the simulation advances and changed values are served.
const TICK: Duration = Duration::from_millis(50);

/// Runs until `shutdown` completes or `POST /api/shutdown` asks.
pub async fn run(
    config: SimConfig,
    options: Options,
    shutdown: impl Future<Output = ()>,
) -> Result<(), String> {
    let epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let sim = Simulation::new(&config, options.seed, epoch)?;
    let state = SimState::new(sim, options.seed);

    let api_addr = format!("{}:{}", options.host, options.api_port);
    let api_listener = tokio::net::TcpListener::bind(&api_addr)
        .await
        .map_err(|e| format!("cannot listen on {api_addr} for the control API: {e}"))?;
    let opcua_addr = format!("{}:{}", options.host, options.opcua_port);
    let opcua_listener = tokio::net::TcpListener::bind(&opcua_addr)
        .await
        .map_err(|e| format!("cannot listen on {opcua_addr} for OPC UA: {e}"))?;
    let opcua_port = opcua_listener
        .local_addr()
        .map_err(|e| e.to_string())?
        .port();
    let api_port = api_listener.local_addr().map_err(|e| e.to_string())?.port();

    let modbus = match options.modbus_port {
        Some(port) => {
            let addr = format!("{}:{port}", options.host);
            let listener = tokio::net::TcpListener::bind(&addr)
                .await
                .map_err(|e| format!("cannot listen on {addr} for Modbus TCP: {e}"))?;
            let port = listener.local_addr().map_err(|e| e.to_string())?.port();
            let service = crate::modbus::ModbusService::new(state.clone());
            let map = service.map();
            let task = tokio::spawn(crate::modbus::serve(listener, service));
            Some((port, map, task))
        }
        None => None,
    };
    // Announced as OPC UA servers are (Part 12); a host without multicast still serves.
    let announcement = if options.mdns {
        match crate::announce::announce(&options.host, opcua_port) {
            Ok(a) => Some(a),
            Err(e) => {
                tracing::warn!(error = %e, "the OPC UA server is not announced over mDNS");
                None
            }
        }
    } else {
        None
    };
    let (server, handle) =
        crate::opcua::build(&config, &options.host, opcua_port, &options.pki_dir)?;
    let mut face = Face::new(handle.clone())?;
    face.populate(&state.lock().snapshot());
    let ns = face.ns;
    let opcua_task = tokio::spawn(server.run_with(opcua_listener));

    let clock = spawn_clock(state.clone(), TICK);
    let publisher = {
        let state = state.clone();
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(TICK);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut generation = state.generation.load(Ordering::Acquire);
            loop {
                interval.tick().await;
                let now = state.generation.load(Ordering::Acquire);
                if now != generation {
                    generation = now;
                    let snapshot = state.lock().snapshot();
                    face.populate(&snapshot);
                }
                let served = face.publish(&state);
                state.served.fetch_add(served, Ordering::Relaxed);
                state.sessions.store(face.sessions(), Ordering::Relaxed);
            }
        })
    };

    let app = router(state.clone());
    let (stop_api, api_stopped) = tokio::sync::oneshot::channel::<()>();
    let api_task = tokio::spawn(async move {
        axum::serve(api_listener, app)
            .with_graceful_shutdown(async {
                let _ = api_stopped.await;
            })
            .await
    });

    let (variables, assets) = {
        let s = state.lock().status();
        (s.variables, s.assets)
    };
    match options.ready {
        Some(ready) => {
            let _ = ready.send(Ready {
                opcua_port,
                api_port,
            });
        }
        None => {
            println!(
                "plantd simulation server: {assets} assets, {variables} variables, seed {}",
                options.seed
            );
            println!(
                "OPC UA endpoint: opc.tcp://{}:{opcua_port}/ (security {:?}; namespace {} = index {ns}; variables under Objects/Simulation/<asset_id>, node ids ns={ns};s=<asset_id>.<Variable>)",
                options.host,
                config.security_mode,
                crate::opcua::NAMESPACE_URI
            );
            if let Some((port, map, _)) = &modbus {
                println!(
                    "Modbus TCP: {}:{port} (any unit id; numeric variables as float32, high word first, in input and holding registers; flags as coils and discrete inputs; asset i starts at {} * i; read-only)",
                    options.host,
                    crate::modbus::ASSET_STRIDE
                );
                for line in map.describe() {
                    println!("  {line}");
                }
            }
            if let Some(a) = &announcement {
                println!("mDNS: announced as \"{}\"", a.fullname);
            }
            println!("control API: http://{}:{api_port}/api/status", options.host);
            println!("certificates: {}", options.pki_dir.display());
        }
    }

    tokio::select! {
        _ = shutdown => {}
        _ = state.shutdown.notified() => {}
    }
    tracing::info!("simulation server shutting down");
    handle.cancel();
    let _ = stop_api.send(());
    clock.abort();
    publisher.abort();
    if let Some((_, _, task)) = modbus {
        task.abort();
    }
    if let Some(a) = announcement {
        a.withdraw().await;
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), opcua_task).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), api_task).await;
    Ok(())
}
