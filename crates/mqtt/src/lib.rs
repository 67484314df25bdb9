//! The MQTT device channel (issue 28): an embedded MQTT 3.1.1 and 5 broker (the `mqtt5` crate)
//! on the server's runtime, plain and over TLS. Devices log in with the credentials their
//! registration answered; what they publish goes through the application's device use cases
//! (`door.rs`); their queued commands are delivered on their command topic by the delivery
//! loop here: at once when created on this node, when the device subscribes, and every two
//! seconds for commands created on other nodes. Deleted devices are disconnected.

mod door;
mod external;
pub mod uplink;

pub use external::{ExternalBroker, start as start_external};

use mqtt5::QoS;
use mqtt5::broker::config::{StorageBackend, TlsConfig};
use mqtt5::broker::router::MessageRouter;
use mqtt5::broker::server::BrokerShutdownHandle;
use mqtt5::broker::{BrokerConfig, MqttBroker};
use mqtt5::packet::publish::PublishPacket;
use plantd_app::App;
use plantd_app::events::Event;
use plantd_model::device::DeviceTopics;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};
use tokio::task::JoinHandle;

use door::{DeviceAuth, DeviceEvents, Sessions};

/// Where the channel listens.
#[derive(Clone, Debug)]
pub struct MqttSettings {
    /// Plain MQTT (1883 by convention).
    pub listen: SocketAddr,
    /// MQTT over TLS (8883 by convention): address, certificate chain and key (PEM files).
    pub tls: Option<(SocketAddr, PathBuf, PathBuf)>,
}

/// The running channel.
pub struct MqttChannel {
    shutdown: BrokerShutdownHandle,
    broker: JoinHandle<()>,
    delivery: JoinHandle<()>,
    /// The bound plain address (the real port when 0 was asked for).
    pub local_addr: Option<SocketAddr>,
    pub tls_local_addr: Option<SocketAddr>,
}

/// Why the channel could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot start the MQTT device channel: {0}")]
pub struct StartError(String);

/// How often commands created on other nodes are looked for (with NATS they arrive at once as
/// node events; this catches those of a node without NATS, or missed while NATS was away).
const POLL: Duration = Duration::from_secs(2);
/// How often the devices connected here are checked against the database (deleted on another
/// node: disconnected).
const GONE_CHECK: Duration = Duration::from_secs(10);

/// Starts the broker on `settings` with the application's logins, rights and use cases.
pub async fn start(app: App, settings: &MqttSettings) -> Result<MqttChannel, StartError> {
    let sessions = Sessions::default();
    let (deliver_tx, deliver_rx) = mpsc::unbounded_channel();
    let mut config = BrokerConfig::default()
        .with_bind_address(settings.listen)
        .with_max_clients(100_000)
        .with_sys_topics_enabled(false)
        .with_retain_available(false)
        .with_max_packet_size(4 * 1024 * 1024)
        // What flows to a device is its commands: a small queue each (the default holds 10,000).
        .with_client_channel_capacity(256)
        .with_event_handler(Arc::new(DeviceEvents {
            app: app.clone(),
            sessions: sessions.clone(),
            deliver: deliver_tx,
        }));
    // Sessions live in memory: commands are kept by the application, not the broker.
    config.storage_config.backend = StorageBackend::Memory;
    config.storage_config.enable_persistence = false;
    config.session_expiry_interval = Duration::from_secs(3600);
    if let Some((addr, cert, key)) = &settings.tls {
        config =
            config.with_tls(TlsConfig::new(cert.clone(), key.clone()).with_bind_address(*addr));
    }
    let broker = MqttBroker::with_config(config)
        .await
        .map_err(|e| StartError(e.to_string()))?
        .with_auth_provider(Arc::new(DeviceAuth {
            app: app.clone(),
            sessions: sessions.clone(),
        }));
    let local_addr = broker.local_addr();
    let tls_local_addr = broker.tls_local_addr();
    let shutdown = broker.shutdown_handle();
    let router = broker.router();
    let mut broker = broker;
    let broker_task = tokio::spawn(async move {
        if let Err(e) = broker.run().await {
            tracing::error!(error = %e, "the MQTT device channel stopped");
        }
    });
    let delivery = tokio::spawn(deliver(app, router, sessions, deliver_rx));
    tracing::info!(
        ?local_addr,
        ?tls_local_addr,
        "MQTT device channel listening"
    );
    Ok(MqttChannel {
        shutdown,
        broker: broker_task,
        delivery,
        local_addr,
        tls_local_addr,
    })
}

impl MqttChannel {
    /// Disconnects every device and stops the broker.
    pub async fn stop(self) {
        self.delivery.abort();
        self.shutdown.shutdown();
        let _ = self.broker.await;
    }
}

/// Delivers queued commands to connected, subscribed devices, and disconnects deleted ones.
async fn deliver(
    app: App,
    router: Arc<MessageRouter>,
    sessions: Sessions,
    mut subscribed: mpsc::UnboundedReceiver<String>,
) {
    let mut events = app.events().subscribe_doors();
    let mut tick = tokio::time::interval(POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut ticks: u64 = 0;
    loop {
        tokio::select! {
            // A device subscribed, or a command was created for it on any node: its commands.
            Some(device_id) = subscribed.recv() => {
                send_queued(&app, &router, vec![device_id]).await;
            }
            event = events.recv() => match event {
                Ok(Event::CommandQueued { device_ids }) => {
                    send_queued(&app, &router, device_ids).await;
                }
                Ok(Event::DeviceChanged { device_id }) => {
                    disconnect_gone(&app, &router, &sessions, vec![device_id]).await;
                }
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return,
            },
            // Commands created on other nodes without NATS (or missed while the event stream
            // lagged): those of every device subscribed here.
            _ = tick.tick() => {
                ticks += 1;
                let mut here = Vec::new();
                for id in sessions.ids() {
                    if router.has_subscription(&id, &DeviceTopics::of(&id).commands).await {
                        here.push(id);
                    }
                }
                send_queued(&app, &router, here).await;
                // Deletions on this node, or another one with NATS, disconnect at once
                // (DeviceChanged); other nodes' within GONE_CHECK.
                if ticks.is_multiple_of(GONE_CHECK.as_secs() / POLL.as_secs()) {
                    let mut connected = Vec::new();
                    for id in sessions.ids() {
                        if router.is_connected(&id).await {
                            connected.push(id);
                        }
                    }
                    disconnect_gone(&app, &router, &sessions, connected).await;
                }
            }
        }
    }
}

/// Publishes every queued command of `device_ids` whose device is connected here and
/// subscribed to its command topic, and marks it sent.
async fn send_queued(app: &App, router: &MessageRouter, device_ids: Vec<String>) {
    let commands = match app.queued_commands(&device_ids).await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %plantd_model::error_chain(&e), "could not read queued device commands");
            return;
        }
    };
    for command in commands {
        let topic = DeviceTopics::of(&command.device_id).commands;
        if !router.has_subscription(&command.device_id, &topic).await {
            continue;
        }
        let payload = match serde_json::to_vec(&command) {
            Ok(p) => p,
            Err(e) => {
                tracing::error!(error = %e, "could not encode a device command");
                continue;
            }
        };
        router
            .route_message(&PublishPacket::new(topic, payload, QoS::AtLeastOnce), None)
            .await;
        if let Err(e) = app.command_delivered(&command.id).await {
            tracing::warn!(error = %plantd_model::error_chain(&e), "could not mark a device command sent");
        }
    }
}

/// Disconnects the devices among `ids` that are no longer registered.
async fn disconnect_gone(app: &App, router: &MessageRouter, sessions: &Sessions, ids: Vec<String>) {
    match app.devices_gone(&ids).await {
        Ok(gone) => {
            for id in gone {
                sessions.remove(&id);
                router.disconnect_client(&id).await;
                tracing::info!(device = %id, "a deleted device was disconnected");
            }
        }
        Err(e) => {
            tracing::warn!(error = %plantd_model::error_chain(&e), "could not check for deleted devices")
        }
    }
}
