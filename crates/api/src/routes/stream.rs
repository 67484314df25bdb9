//! The live stream `/v1/ws` (SPEC 6, 8.2): subscribe to telemetry by data source, asset and tag;
//! points arrive as they are committed. Messages are JSON objects with a `type`; see
//! docs/api.md. Tier limits (connections per organization, messages per second in and out) end
//! the connection with close code 1008 and a reason that says which limit.

use axum::extract::State;
use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade, close_code};
use axum::response::Response;
use plantd_app::Caller;
use plantd_app::events::Event;
use plantd_model::Scope::ReadTelemetry;
use plantd_model::alert::Alert;
use plantd_model::audit::AuditEvent;
use plantd_model::device::Device;
use plantd_model::telemetry::Point;
use plantd_model::tier::WebSocketLimits;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use tokio::sync::broadcast::error::RecvError;

use crate::error::{ApiError, ApiResult};
use crate::extract::Auth;
use crate::routing::{Policy, Route, route};
use crate::state::AppState;
use crate::stream_slots::Slot;

pub(crate) fn routes() -> Vec<Route> {
    vec![route!(ws, Policy::scope(ReadTelemetry, AuditEvent::StreamOpen)).query_token()]
}

/// The largest message a client may send.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024;
/// Subscriptions one connection may hold.
pub const MAX_SUBSCRIPTIONS: usize = 100;
/// Series one subscription may name (`series`).
pub const MAX_SERIES: usize = 1_000;

/// Open the stream. Authenticate with `Authorization: Bearer <API_KEY>` or, where a client
/// cannot set headers (browsers), `?access_token=<API_KEY>`.
#[utoipa::path(get, path = "/ws", tag = "stream",
    params(("access_token" = Option<String>, Query, description = "API key, for clients that cannot send headers")),
    responses((status = 101, description = "WebSocket upgrade; JSON messages described in docs/api.md")))]
async fn ws(
    State(state): State<AppState>,
    Auth(caller): Auth,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> ApiResult<Response> {
    let upgrade = upgrade.map_err(|e| {
        ApiError::validation(
            "Upgrade",
            format!(
                "this endpoint needs a WebSocket upgrade request: {}",
                e.body_text()
            ),
        )
    })?;
    let limits = state.app.config().limits.websocket(caller.tier);
    // The slot is counted before the handshake is answered, so that a client whose connection
    // was accepted holds it (a refused one is told why once upgraded).
    let slot = state.stream_slots.take(&caller.org_id, limits.connections);
    Ok(upgrade
        .max_message_size(MAX_MESSAGE_BYTES)
        .on_upgrade(move |socket| run(state, caller, limits, slot, socket)))
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
enum ClientMessage {
    Subscribe {
        #[serde(default)]
        data_source_id: Option<String>,
        #[serde(default)]
        asset_id: Option<String>,
        #[serde(default)]
        tag_name: Option<String>,
        /// Only these series (at most [`MAX_SERIES`]): what a page shows.
        #[serde(default)]
        series: Option<Vec<SeriesKey>>,
    },
    Unsubscribe {
        subscription: String,
    },
    Ping,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct SeriesKey {
    asset_id: String,
    tag_name: String,
}

/// Series a subscription follows: tag names by asset.
#[derive(Clone, Debug, Default)]
struct SeriesSet(BTreeMap<String, BTreeSet<String>>);

impl Serialize for SeriesSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().flat_map(|(asset_id, tags)| {
            tags.iter()
                .map(move |tag_name| json!({"asset_id": asset_id, "tag_name": tag_name}))
        }))
    }
}

#[derive(Clone, Debug, Serialize)]
struct Filter {
    data_source_id: Option<String>,
    asset_id: Option<String>,
    tag_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    series: Option<SeriesSet>,
}

impl Filter {
    /// Whether something of `asset`/`tag` from `data_source` is what this subscription follows.
    fn accepts(&self, asset: &str, tag: Option<&str>, data_source: Option<&str>) -> bool {
        self.asset_id.as_deref().is_none_or(|a| a == asset)
            && self.series.as_ref().is_none_or(|s| {
                s.0.get(asset)
                    .is_some_and(|tags| tag.is_none_or(|t| tags.contains(t)))
            })
            && self.tag_name.as_deref().is_none_or(|t| tag == Some(t))
            && self
                .data_source_id
                .as_deref()
                .is_none_or(|d| data_source == Some(d))
    }

    /// Whether an alert is about what this subscription follows (an alert without a tag or
    /// data source matches only subscriptions that do not filter by them).
    fn covers(&self, a: &Alert) -> bool {
        self.accepts(
            &a.asset_id,
            a.tag_name.as_deref(),
            a.data_source_id.as_deref(),
        )
    }

    /// Whether a device's status change concerns this subscription: the device's asset, with
    /// no tag or data source filter (as for an alert without them).
    fn covers_device(&self, d: &Device) -> bool {
        self.accepts(&d.asset_id, None, None)
    }

    /// Whether the subscription follows everything (no filter): it receives the organization's
    /// events that concern no one asset (OTA deployments).
    fn covers_everything(&self) -> bool {
        self.asset_id.is_none()
            && self.series.is_none()
            && self.tag_name.is_none()
            && self.data_source_id.is_none()
    }

    fn matches(&self, p: &Point) -> bool {
        self.accepts(&p.asset_id, Some(&p.tag_name), p.data_source_id.as_deref())
    }
}

/// Messages allowed per second, counted in whole-second windows.
struct Rate {
    limit: Option<u64>,
    window: Instant,
    count: u64,
}

impl Rate {
    fn new(limit: Option<u64>) -> Self {
        Self {
            limit,
            window: Instant::now(),
            count: 0,
        }
    }
    fn allow(&mut self) -> bool {
        if self.window.elapsed() >= Duration::from_secs(1) {
            self.window = Instant::now();
            self.count = 0;
        }
        self.count += 1;
        self.limit.is_none_or(|l| self.count <= l)
    }
}

async fn close(socket: &mut WebSocket, code: u16, reason: String) {
    let _ = socket
        .send(Message::Close(Some(CloseFrame {
            code,
            reason: Utf8Bytes::from(reason),
        })))
        .await;
}

async fn send(socket: &mut WebSocket, value: Value) -> bool {
    socket
        .send(Message::Text(Utf8Bytes::from(value.to_string())))
        .await
        .is_ok()
}

async fn run(
    state: AppState,
    caller: Caller,
    limits: WebSocketLimits,
    slot: Option<Slot>,
    mut socket: WebSocket,
) {
    let tier = caller.tier;
    let Some(_slot) = slot else {
        let reason = format!(
            "connection limit of {} for the {tier} tier reached",
            limits.connections.unwrap_or(0)
        );
        close(&mut socket, close_code::POLICY, reason).await;
        return;
    };
    let mut events = state.app.events().subscribe_stream();
    let mut subscriptions: BTreeMap<String, Filter> = BTreeMap::new();
    let mut next_id = 1_u64;
    let mut inbound = Rate::new(limits.messages_in_per_second);
    let mut outbound = Rate::new(limits.messages_out_per_second);
    loop {
        tokio::select! {
            incoming = socket.recv() => {
                let text = match incoming {
                    Some(Ok(Message::Text(t))) => t,
                    Some(Ok(Message::Binary(_))) => {
                        close(&mut socket, close_code::UNSUPPORTED, "send JSON text messages".into()).await;
                        return;
                    }
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                    Some(Ok(_)) => continue, // ping/pong frames
                };
                if !inbound.allow() {
                    let reason = format!("inbound message rate limit of {}/s for the {tier} tier exceeded", limits.messages_in_per_second.unwrap_or(0));
                    close(&mut socket, close_code::POLICY, reason).await;
                    return;
                }
                let reply = match serde_json::from_str::<ClientMessage>(text.as_str()) {
                    Err(e) => json!({"type": "error", "code": "validation_error", "message": format!("invalid message: {e}")}),
                    Ok(ClientMessage::Ping) => json!({"type": "pong"}),
                    Ok(ClientMessage::Subscribe { data_source_id, asset_id, tag_name, series }) => {
                        if subscriptions.len() >= MAX_SUBSCRIPTIONS {
                            json!({"type": "error", "code": "validation_error", "message": format!("at most {MAX_SUBSCRIPTIONS} subscriptions per connection")})
                        } else if series.as_ref().is_some_and(|s| s.is_empty() || s.len() > MAX_SERIES) {
                            json!({"type": "error", "code": "validation_error", "message": format!("series: name 1 to {MAX_SERIES} series")})
                        } else {
                            let series = series.map(|list| {
                                let mut set = SeriesSet::default();
                                for k in list {
                                    set.0.entry(k.asset_id).or_default().insert(k.tag_name);
                                }
                                set
                            });
                            let id = format!("s{next_id}");
                            next_id += 1;
                            let filter = Filter { data_source_id, asset_id, tag_name, series };
                            let reply = json!({"type": "subscribed", "subscription": id, "filter": filter});
                            subscriptions.insert(id, filter);
                            reply
                        }
                    }
                    Ok(ClientMessage::Unsubscribe { subscription }) => match subscriptions.remove(&subscription) {
                        Some(_) => json!({"type": "unsubscribed", "subscription": subscription}),
                        None => json!({"type": "error", "code": "not_found", "message": format!("no subscription {subscription}")}),
                    },
                };
                if !send(&mut socket, reply).await {
                    return;
                }
            }
            event = events.recv() => {
                let event = match event {
                    Ok(e) => e,
                    Err(RecvError::Lagged(n)) => {
                        close(&mut socket, close_code::POLICY, format!("too slow: {n} events were missed; reconnect and subscribe again")).await;
                        return;
                    }
                    Err(RecvError::Closed) => return,
                };
                let (org_id, points) = match event {
                    Event::Telemetry { org_id, points } => (org_id, points),
                    Event::Alert { org_id, event, alert } => {
                        if *org_id != *caller.org_id {
                            continue;
                        }
                        // Once per connection, to its first subscription that covers the alert.
                        let Some((id, _)) = subscriptions.iter().find(|(_, f)| f.covers(&alert)) else {
                            continue;
                        };
                        if !outbound.allow() {
                            let reason = format!("outbound message rate limit of {}/s for the {tier} tier exceeded; subscribe to fewer series", limits.messages_out_per_second.unwrap_or(0));
                            close(&mut socket, close_code::POLICY, reason).await;
                            return;
                        }
                        if !send(&mut socket, json!({"type": "alert", "event": event, "subscription": id, "data": &*alert})).await {
                            return;
                        }
                        continue;
                    }
                    Event::DeviceStatus { org_id, event, device } => {
                        if *org_id != *caller.org_id {
                            continue;
                        }
                        let Some((id, _)) = subscriptions.iter().find(|(_, f)| f.covers_device(&device)) else {
                            continue;
                        };
                        if !outbound.allow() {
                            let reason = format!("outbound message rate limit of {}/s for the {tier} tier exceeded; subscribe to fewer series", limits.messages_out_per_second.unwrap_or(0));
                            close(&mut socket, close_code::POLICY, reason).await;
                            return;
                        }
                        if !send(&mut socket, json!({"type": "device", "event": event, "subscription": id, "data": &*device})).await {
                            return;
                        }
                        continue;
                    }
                    Event::Ota { org_id, event, deployment } => {
                        if *org_id != *caller.org_id {
                            continue;
                        }
                        // Organization-wide: to the connection's first subscription without a filter.
                        let Some((id, _)) = subscriptions.iter().find(|(_, f)| f.covers_everything()) else {
                            continue;
                        };
                        if !outbound.allow() {
                            let reason = format!("outbound message rate limit of {}/s for the {tier} tier exceeded; subscribe to fewer series", limits.messages_out_per_second.unwrap_or(0));
                            close(&mut socket, close_code::POLICY, reason).await;
                            return;
                        }
                        if !send(&mut socket, json!({"type": "ota", "event": event, "subscription": id, "data": &*deployment})).await {
                            return;
                        }
                        continue;
                    }
                    Event::DeviceChanged { .. } | Event::CommandQueued { .. } => continue,
                };
                if *org_id != *caller.org_id {
                    continue;
                }
                for (id, filter) in &subscriptions {
                    let data: Vec<Value> = points.iter().filter(|p| filter.matches(p)).map(|p| json!({
                        "asset_id": p.asset_id,
                        "tag_name": p.tag_name,
                        "value": p.value,
                        "timestamp": p.timestamp,
                        "quality": p.quality,
                        "data_source_id": p.data_source_id,
                    })).collect();
                    if data.is_empty() {
                        continue;
                    }
                    if !outbound.allow() {
                        let reason = format!("outbound message rate limit of {}/s for the {tier} tier exceeded; subscribe to fewer series", limits.messages_out_per_second.unwrap_or(0));
                        close(&mut socket, close_code::POLICY, reason).await;
                        return;
                    }
                    if !send(&mut socket, json!({"type": "telemetry", "subscription": id, "data": data})).await {
                        return;
                    }
                }
            }
        }
    }
}
