//! Events between the nodes of one region (issue 33) over core NATS, subject
//! `plantd.<deployment>.nodes.<region>`: each node publishes the points it committed and the
//! alert changes it made, the API keys it revoked, and every quarter second what it counted
//! against rate limits; the other nodes put those points and alerts on their live stream
//! (`EventBus::publish_from_peer`, so a WebSocket client on any node sees a point ingested on
//! another), forget those keys at once and add those counts to their own. Nothing here is
//! durable: the database is the record, and a node that missed an invalidation trusts a key
//! for at most `key_cache_ttl`.

use futures_util::StreamExt;
use plantd_model::alert::Alert;
use plantd_model::event::EventType;
use plantd_model::telemetry::{Point, Quality};
use plantd_model::{Timestamp, new_id};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, watch};

use crate::app::App;
use crate::events::Event;
use crate::replication::{nats_client, safe_name, until_ok};

/// How often a node tells the others what it counted against rate limits.
const SHARE_COUNTS_EVERY: Duration = Duration::from_millis(250);

/// A point as it travels between nodes: asset, tag, value, time (ms), quality, data source.
#[derive(Serialize, Deserialize)]
struct WirePoint(String, String, f64, i64, Quality, Option<String>);

#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Message {
    Telemetry {
        org_id: String,
        points: Vec<WirePoint>,
    },
    Alert {
        org_id: String,
        event: EventType,
        alert: Box<Alert>,
    },
    ForgetKeys {
        key_ids: Vec<String>,
    },
    /// Requests and points this node counted against rate limits since it last said.
    Counted {
        counts: Vec<crate::rate_limit::CountedUnits>,
    },
}

#[derive(Serialize, Deserialize)]
struct Envelope {
    /// The publishing node, which ignores its own messages.
    node: String,
    message: Message,
}

impl App {
    /// Forgets the cached keys `ids` on this node at once, and on the region's other nodes as
    /// soon as they hear it (with NATS).
    pub(crate) fn forget_keys(&self, ids: &[String]) {
        self.keys().forget(|_, (key, _)| ids.contains(&key.id));
        self.regional().announce_forgotten_keys(ids);
    }
}

fn to_message(event: &Event) -> Option<Message> {
    match event {
        Event::Telemetry { org_id, points } => Some(Message::Telemetry {
            org_id: org_id.to_string(),
            points: points
                .iter()
                .map(|p| {
                    WirePoint(
                        p.asset_id.clone(),
                        p.tag_name.clone(),
                        p.value,
                        p.timestamp.millis(),
                        p.quality,
                        p.data_source_id.clone(),
                    )
                })
                .collect(),
        }),
        Event::Alert {
            org_id,
            event,
            alert,
        } => Some(Message::Alert {
            org_id: org_id.to_string(),
            event: *event,
            alert: Box::new((**alert).clone()),
        }),
        _ => None,
    }
}

fn handle(app: &App, message: Message) {
    match message {
        Message::Telemetry { org_id, points } => {
            let points = points
                .into_iter()
                .map(
                    |WirePoint(asset_id, tag_name, value, ts, quality, ds)| Point {
                        asset_id,
                        tag_name,
                        value,
                        timestamp: Timestamp::from_millis(ts),
                        quality,
                        data_source_id: ds,
                    },
                )
                .collect();
            app.events().publish_from_peer(Event::Telemetry {
                org_id: org_id.into(),
                points: Arc::new(points),
            });
        }
        Message::Alert {
            org_id,
            event,
            alert,
        } => app.events().publish_from_peer(Event::Alert {
            org_id: org_id.into(),
            event,
            alert: Arc::new(*alert),
        }),
        Message::ForgetKeys { key_ids } => {
            app.keys().forget(|_, (key, _)| key_ids.contains(&key.id));
        }
        Message::Counted { counts } => app.limiter().add_counted(&counts),
    }
}

/// The node-events worker: without `--nats-url` it ends at once.
pub(crate) async fn run(app: App, mut stop: watch::Receiver<bool>) {
    let settings = app.region_settings().clone();
    let Some(url) = settings.nats_url.clone() else {
        return;
    };
    let node = new_id();
    let subject = format!(
        "plantd.{}.nodes.{}",
        safe_name(&settings.deployment),
        settings.region
    );
    let (forgotten_tx, mut forgotten) = mpsc::unbounded_channel();
    app.regional().set_node_out(forgotten_tx);
    let connected = until_ok(
        &mut stop,
        || async {
            let client = nats_client(&url, format!("plantd node {node}")).await?;
            let sub = client
                .subscribe(subject.clone())
                .await
                .map_err(|e| e.to_string())?;
            Ok((client, sub))
        },
        |e| tracing::warn!(error = %e, nats = %url, "node events: cannot reach NATS; trying again"),
    )
    .await;
    let Some((client, mut incoming)) = connected else {
        return;
    };
    // Rate-limit counts go to the region's other nodes every quarter second.
    app.limiter().share();
    let mut share_counts = tokio::time::interval(SHARE_COUNTS_EVERY);
    share_counts.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut local = app.events().subscribe();
    let publish = |message: Message| {
        let envelope = Envelope {
            node: node.clone(),
            message,
        };
        serde_json::to_vec(&envelope).ok()
    };
    loop {
        let outgoing = tokio::select! {
            _ = stop.changed() => return,
            event = local.recv() => match event {
                Ok(e) => to_message(&e),
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(missed = n, "node events: this node's events came faster than NATS took them; some were not shared");
                    None
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            Some(key_ids) = forgotten.recv() => Some(Message::ForgetKeys { key_ids }),
            _ = share_counts.tick() => {
                let counts = app.limiter().take_unshared();
                (!counts.is_empty()).then_some(Message::Counted { counts })
            }
            m = incoming.next() => {
                let Some(m) = m else { return };
                match serde_json::from_slice::<Envelope>(&m.payload) {
                    Ok(e) if e.node == node => {}
                    Ok(e) => handle(&app, e.message),
                    Err(e) => tracing::warn!(error = %e, "node events: an unreadable message is skipped"),
                }
                None
            }
        };
        if let Some(payload) = outgoing.and_then(publish)
            && let Err(e) = client.publish(subject.clone(), payload.into()).await
        {
            tracing::warn!(error = %e, "node events: cannot publish");
        }
    }
}
