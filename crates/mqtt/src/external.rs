//! The device channel through an external broker (Mosquitto, ...): plantd connects as one
//! client, subscribes to every device's telemetry, heartbeat, command-results and ota topics, and
//! publishes commands. The broker authenticates the devices and enforces their topics with its
//! own password and ACL files (docs/api.md, "An external broker"), so a message's device is the
//! one its topic names. Messages are acknowledged to the broker only once handled (manual acks,
//! QoS 1, a persistent session): what plantd has not stored is delivered again after a restart.

use plantd_app::App;
use plantd_model::device::{DeviceTopic, DeviceTopics, TOPIC_ROOT, parse_topic};
use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use crate::door::{FAULT_WAITS, handle_message};

/// How plantd reaches the external broker.
#[derive(Clone, Debug)]
pub struct ExternalBroker {
    /// `mqtt://host:port`.
    pub host: String,
    pub port: u16,
    pub username: Option<String>,
    pub password: Option<String>,
    /// Stable, so that the broker keeps plantd's session across restarts.
    pub client_id: String,
}

/// Messages handled at once.
const IN_FLIGHT: usize = 256;

/// Runs the client until the task is aborted, reconnecting after failures.
pub fn start(app: App, broker: ExternalBroker) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut delay = Duration::from_secs(1);
        loop {
            match session(&app, &broker).await {
                Ok(()) => delay = Duration::from_secs(1),
                Err(e) => {
                    tracing::warn!(error = %e, broker = %broker.host, "the external MQTT broker connection failed; retrying");
                }
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(30));
        }
    })
}

async fn session(app: &App, b: &ExternalBroker) -> Result<(), String> {
    let mut o = MqttOptions::new(&b.client_id, b.host.clone(), b.port);
    o.set_keep_alive(Duration::from_secs(30));
    o.set_clean_session(false);
    o.set_manual_acks(true);
    if let Some(u) = &b.username {
        o.set_credentials(u.clone(), b.password.clone().unwrap_or_default());
    }
    let (client, mut events) = AsyncClient::new(o, 1024);
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    let commands = tokio::spawn(deliver(app.clone(), client.clone()));
    let result = loop {
        let event = match events.poll().await {
            Ok(e) => e,
            Err(e) => break Err(e.to_string()),
        };
        match event {
            Event::Incoming(Packet::ConnAck(_)) => {
                if let Err(e) = subscribe(&client).await {
                    break Err(e);
                }
                tracing::info!(broker = %b.host, "connected to the external MQTT broker");
            }
            Event::Incoming(Packet::Publish(p)) => {
                let Ok(permit) = slots.clone().acquire_owned().await else {
                    break Ok(());
                };
                let (app, client) = (app.clone(), client.clone());
                tokio::spawn(async move {
                    if let Some((device, kind)) = parse_topic(&p.topic)
                        && kind != DeviceTopic::Commands
                        && let Some(session) = session_of(&app, device).await
                    {
                        // Tried until taken (a server fault is tried again): the
                        // broker holds the message for plantd's persistent session meanwhile.
                        handle_message(&app, &session, kind, &p.payload, || true).await;
                    } else {
                        metrics::counter!("plantd_mqtt_messages_dropped_total", "topic" => "other")
                            .increment(1);
                    }
                    // Handled (taken, or dropped for a reason that a retry would not change).
                    let _ = client.ack(&p).await;
                    drop(permit);
                });
            }
            _ => {}
        }
    };
    commands.abort();
    result
}

/// The device a topic names, if it exists; a server fault (the database unreachable) is tried
/// again until it answers, as the message's use case would be.
async fn session_of(app: &App, device: &str) -> Option<plantd_app::device_channel::DeviceSession> {
    let mut wait = FAULT_WAITS.0;
    loop {
        match app.device_session(device).await {
            Ok(s) => return Some(s),
            Err(e) if e.is_server_fault() => {
                tracing::warn!(device, error = %plantd_model::error_chain(&e), "could not look a device up; trying again");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(FAULT_WAITS.1);
            }
            Err(_) => return None,
        }
    }
}

/// Every device's telemetry, heartbeat, command-results, ota and tags topics.
async fn subscribe(client: &AsyncClient) -> Result<(), String> {
    for kind in ["telemetry", "heartbeat", "command-results", "ota", "tags"] {
        client
            .subscribe(format!("{TOPIC_ROOT}/+/{kind}"), QoS::AtLeastOnce)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Publishes queued commands of online devices every 2 s (the broker holds them for a device
/// whose persistent session is away).
async fn deliver(app: App, client: AsyncClient) {
    let mut tick = tokio::time::interval(Duration::from_secs(2));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let commands = match app.queued_commands_of_online_devices().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %plantd_model::error_chain(&e), "could not read queued device commands");
                continue;
            }
        };
        for c in commands {
            let Ok(payload) = serde_json::to_vec(&c) else {
                continue;
            };
            let topic = DeviceTopics::of(&c.device_id).commands;
            if client
                .publish(topic, QoS::AtLeastOnce, false, payload)
                .await
                .is_ok()
                && let Err(e) = app.command_delivered(&c.id).await
            {
                tracing::warn!(error = %plantd_model::error_chain(&e), "could not mark a device command sent");
            }
        }
    }
}
