//! The door's hooks into the embedded broker: logins checked by the application (username =
//! device id, its password; the client id must be the device id), each device allowed only its
//! own topics, and every message a device publishes handed to the application's use case for
//! its topic. The hook is awaited before the broker acknowledges (QoS 1 PUBACK), so a telemetry
//! message is acknowledged only once durable; a refused or malformed one is dropped with a
//! counted, logged reason, and the channel goes on. A server fault (the database unreachable)
//! is not a refusal: the message is handed again until it is taken (`handle_message`).

use mqtt5::broker::events::{ClientSubscribeEvent, PublishAction};
use mqtt5::broker::{
    AuthProvider, AuthResult, BrokerEventHandler, ClientConnectEvent, ClientPublishEvent,
};
use mqtt5::packet::connect::ConnectPacket;
use mqtt5::protocol::v5::reason_codes::ReasonCode;
use plantd_app::App;
use plantd_app::access::CallFacts;
use plantd_app::device_channel::DeviceSession;
use plantd_model::device::{DeviceTopic, DeviceTopics, parse_topic};
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::mpsc;

/// The devices logged in on this node, by device id (which is also their client id): each
/// login's session, so that a message of an earlier connection can tell it was superseded.
#[derive(Clone, Default)]
pub(crate) struct Sessions(Arc<Mutex<HashMap<String, Arc<DeviceSession>>>>);

impl Sessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<DeviceSession>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
    pub(crate) fn get(&self, device_id: &str) -> Option<Arc<DeviceSession>> {
        self.lock().get(device_id).cloned()
    }
    /// Whether `session` is still its device's latest login (not deleted, not logged in again).
    fn is_current(&self, session: &Arc<DeviceSession>) -> bool {
        self.lock()
            .get(&session.device_id)
            .is_some_and(|s| Arc::ptr_eq(s, session))
    }
    pub(crate) fn ids(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }
    fn insert(&self, s: DeviceSession) {
        self.lock().insert(s.device_id.clone(), Arc::new(s));
    }
    /// Forgets a device (deleted); a device that disconnects stays, as a reconnection of the
    /// same client id may have logged in already.
    pub(crate) fn remove(&self, device_id: &str) {
        self.lock().remove(device_id);
    }
}

/// Logins and topic rights, decided by the application.
pub(crate) struct DeviceAuth {
    pub(crate) app: App,
    pub(crate) sessions: Sessions,
}

fn boxed<'a, T>(
    f: impl Future<Output = T> + Send + 'a,
) -> Pin<Box<dyn Future<Output = T> + Send + 'a>> {
    Box::pin(f)
}

impl AuthProvider for DeviceAuth {
    fn authenticate<'a>(
        &'a self,
        connect: &'a ConnectPacket,
        client_addr: SocketAddr,
    ) -> Pin<Box<dyn Future<Output = mqtt5::Result<AuthResult>> + Send + 'a>> {
        boxed(async move {
            let (Some(username), Some(password)) = (&connect.username, &connect.password) else {
                metrics::counter!("plantd_mqtt_logins_refused_total", "reason" => "anonymous")
                    .increment(1);
                return Ok(AuthResult::fail_with_reason(
                    ReasonCode::BadUsernameOrPassword,
                    "log in with the device's MQTT username and password",
                ));
            };
            if connect.client_id != *username {
                metrics::counter!("plantd_mqtt_logins_refused_total", "reason" => "client_id")
                    .increment(1);
                return Ok(AuthResult::fail_with_reason(
                    ReasonCode::ClientIdentifierNotValid,
                    "the client id must be the device id (the username)",
                ));
            }
            let facts = CallFacts {
                method: "CONNECT".into(),
                operation: "mqtt".into(),
                client_ip: Some(client_addr.ip().to_string()),
                user_agent: Some(format!("MQTT {}", connect.protocol_version)),
                request_id: plantd_model::new_id(),
            };
            match self.app.device_login(username, password, facts).await {
                Ok(session) => {
                    let id = session.device_id.clone();
                    self.sessions.insert(session);
                    Ok(AuthResult::success_with_user(id))
                }
                Err(plantd_app::AppError::Unauthenticated(m)) => {
                    metrics::counter!("plantd_mqtt_logins_refused_total", "reason" => "credentials")
                        .increment(1);
                    Ok(AuthResult::fail_with_reason(
                        ReasonCode::BadUsernameOrPassword,
                        m,
                    ))
                }
                Err(e) => {
                    tracing::warn!(error = %plantd_model::error_chain(&e), "an MQTT login could not be checked");
                    Ok(AuthResult::fail_with_reason(
                        ReasonCode::ServerUnavailable,
                        "the login could not be checked; try again",
                    ))
                }
            }
        })
    }

    fn authorize_publish<'a>(
        &'a self,
        _client_id: &str,
        user_id: Option<&'a str>,
        topic: &'a str,
    ) -> Pin<Box<dyn Future<Output = bool> + Send + 'a>> {
        let allowed = match (user_id, parse_topic(topic)) {
            (Some(user), Some((device, kind))) => user == device && kind != DeviceTopic::Commands,
            _ => false,
        };
        if !allowed {
            metrics::counter!("plantd_mqtt_refused_total", "what" => "publish").increment(1);
        }
        boxed(async move { allowed })
    }

    fn authorize_subscribe<'a>(
        &'a self,
        _client_id: &str,
        user_id: Option<&'a str>,
        topic_filter: &'a str,
    ) -> Pin<Box<dyn Future<Output = bool> + Send + 'a>> {
        let allowed = user_id.is_some_and(|u| DeviceTopics::of(u).commands == topic_filter);
        if !allowed {
            metrics::counter!("plantd_mqtt_refused_total", "what" => "subscribe").increment(1);
        }
        boxed(async move { allowed })
    }
}

/// What the broker tells the door: messages, connections and subscriptions.
pub(crate) struct DeviceEvents {
    pub(crate) app: App,
    pub(crate) sessions: Sessions,
    /// Devices whose queued commands should be delivered now (they subscribed).
    pub(crate) deliver: mpsc::UnboundedSender<String>,
}

/// How long a message waits before it is handed again after a server fault: the first wait,
/// doubled each time up to the last.
pub(crate) const FAULT_WAITS: (Duration, Duration) =
    (Duration::from_secs(1), Duration::from_secs(30));

/// Hands a device's message to the use case of its topic. A refusal (a malformed message, a
/// point its organization may not store) is counted and logged and the message dropped: sending
/// it again would get the same answer; never an error of the channel. A server fault (the
/// database unreachable, a failed write) is not a refusal: the message is handed again, after
/// 1 s, then up to 30 s apart, until it is taken, so that it is acknowledged only once taken.
/// It stops trying when `current` says the connection it came on was superseded (the device
/// logged in again, or was deleted): the device holds the message unacknowledged and sends it
/// again itself, and a device has at most one message waiting so.
pub(crate) async fn handle_message(
    app: &App,
    session: &DeviceSession,
    kind: DeviceTopic,
    payload: &[u8],
    current: impl Fn() -> bool,
) {
    let what = match kind {
        DeviceTopic::Telemetry => "telemetry",
        DeviceTopic::Heartbeat => "heartbeat",
        DeviceTopic::CommandResults => "command_result",
        DeviceTopic::Ota => "ota",
        DeviceTopic::Tags => "tags",
        DeviceTopic::Commands => return,
    };
    let mut wait = FAULT_WAITS.0;
    let result = loop {
        let result = match kind {
            DeviceTopic::Telemetry => telemetry(app, session, payload).await,
            DeviceTopic::Heartbeat => app.device_heartbeat(session, payload).await,
            DeviceTopic::CommandResults => app.device_command_result(session, payload).await,
            DeviceTopic::Ota => app.device_ota_report(session, payload).await,
            DeviceTopic::Tags => app.device_tags(session, payload).await,
            DeviceTopic::Commands => return,
        };
        match result {
            Err(e) if e.is_server_fault() && current() => {
                if wait == FAULT_WAITS.0 {
                    tracing::warn!(device = %session.device_id, topic = what, error = %plantd_model::error_chain(&e), "a device's message could not be taken; it stays unacknowledged and is tried again");
                }
                metrics::counter!("plantd_mqtt_messages_retried_total", "topic" => what)
                    .increment(1);
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(FAULT_WAITS.1);
            }
            other => break other,
        }
    };
    match result {
        Ok(()) => {
            metrics::counter!("plantd_mqtt_messages_total", "topic" => what).increment(1);
        }
        Err(e) if e.is_server_fault() => {
            metrics::counter!("plantd_mqtt_messages_superseded_total", "topic" => what)
                .increment(1);
            tracing::info!(device = %session.device_id, topic = what, "a device's message not taken was left to the device (its connection was superseded)");
        }
        Err(e) => {
            metrics::counter!("plantd_mqtt_messages_dropped_total", "topic" => what).increment(1);
            tracing::info!(device = %session.device_id, topic = what, reason = %plantd_model::error_chain(&e), "a device's message was dropped");
        }
    }
}

/// How long a device's telemetry may wait for its organization's point rate (or a region
/// migration's window) before it is dropped.
const HOLD_AT_MOST: Duration = Duration::from_secs(300);

/// A telemetry message, stored; over the organization's point rate, or during a migration's
/// read-only window, its acknowledgement waits (the time the refusal says, again and again up
/// to [`HOLD_AT_MOST`]) instead of the points being dropped: a device that sends faster than its
/// organization may (an edge agent sending what it kept while offline) is slowed, not cut.
async fn telemetry(
    app: &App,
    session: &DeviceSession,
    payload: &[u8],
) -> Result<(), plantd_app::AppError> {
    let started = std::time::Instant::now();
    loop {
        match app.device_telemetry(session, payload).await {
            Ok(_) => return Ok(()),
            Err(
                plantd_app::AppError::LimitReached { retry_after, .. }
                | plantd_app::AppError::Migrating { retry_after, .. },
            ) if started.elapsed() < HOLD_AT_MOST => {
                metrics::counter!("plantd_mqtt_messages_held_total").increment(1);
                let wait = Duration::from_secs(retry_after.clamp(1, 30));
                tokio::time::sleep(wait.min(HOLD_AT_MOST.saturating_sub(started.elapsed()))).await;
            }
            Err(e) => return Err(e),
        }
    }
}

impl BrokerEventHandler for DeviceEvents {
    fn on_client_connect<'a>(
        &'a self,
        event: ClientConnectEvent,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
        boxed(async move {
            if let Some(session) = self.sessions.get(&event.client_id) {
                self.app.device_seen(&session).await;
            }
        })
    }

    fn on_client_subscribe<'a>(
        &'a self,
        event: ClientSubscribeEvent,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
        let _ = self.deliver.send(event.client_id.to_string());
        boxed(async {})
    }

    fn on_client_publish<'a>(
        &'a self,
        event: ClientPublishEvent,
    ) -> Pin<Box<dyn Future<Output = PublishAction> + Send + 'a>> {
        boxed(async move {
            let session = event.user_id.as_deref().and_then(|u| self.sessions.get(u));
            match (session, parse_topic(&event.topic)) {
                (Some(session), Some((device, kind))) if device == session.device_id => {
                    let current = || self.sessions.is_current(&session);
                    handle_message(&self.app, &session, kind, &event.payload, current).await;
                }
                _ => {
                    metrics::counter!("plantd_mqtt_messages_dropped_total", "topic" => "other")
                        .increment(1);
                }
            }
            // Nothing a device publishes is routed to other clients.
            PublishAction::Handled
        })
    }
}
