//! Events between the nodes of one region (issue 33) over core NATS, subject
//! `plantd.<deployment>.nodes.<region>`: each node publishes the points it committed, the
//! alert, device-status and OTA changes it made, the devices it changed and the commands it
//! queued, what its caches must forget (API keys, organizations, licenses), and every quarter
//! second what it counted against rate limits. The other nodes put the points and changes on
//! their live stream (`EventBus::publish_from_peer`, so a WebSocket client on any node sees a
//! point ingested on another), hand device changes and queued commands to their device door
//! (the node holding the device's connection delivers at once), forget what they were told and
//! add those counts to their own. Nothing here is durable: the database is the record, a node
//! that missed an invalidation trusts a cached key or license for at most `key_cache_ttl`, and
//! a door looks for queued commands every 2 s anyway.

use futures_util::StreamExt;
use plantd_model::alert::Alert;
use plantd_model::device::Device;
use plantd_model::event::EventType;
use plantd_model::ota::Deployment;
use plantd_model::telemetry::{Point, Quality};
use plantd_model::{Timestamp, new_id};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, watch};

use crate::app::App;
use crate::events::Event;
use crate::regional::Forget;
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
    Device {
        org_id: String,
        event: EventType,
        device: Box<Device>,
    },
    Ota {
        org_id: String,
        event: EventType,
        deployment: Box<Deployment>,
    },
    DeviceChanged {
        device_id: String,
    },
    CommandQueued {
        device_ids: Vec<String>,
    },
    Forget {
        what: Forget,
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
        self.forget_key_ids(ids);
        self.regional().announce_forgotten(Forget::Keys {
            key_ids: ids.to_vec(),
        });
    }

    /// Forgets an organization's cached keys and region here and on the region's other nodes.
    pub(crate) fn forget_organization(&self, org_id: &str) {
        self.forget_organization_here(org_id);
        self.regional().announce_forgotten(Forget::Organization {
            org_id: org_id.to_string(),
        });
    }

    /// Forgets a cached license and its activations here and on the region's other nodes.
    pub(crate) fn forget_license(&self, license_id: &str) {
        self.forget_license_here(license_id);
        self.regional().announce_forgotten(Forget::License {
            license_id: license_id.to_string(),
        });
    }

    fn forget_key_ids(&self, ids: &[String]) {
        self.keys().forget(|_, (key, _)| ids.contains(&key.id));
    }

    fn forget_organization_here(&self, org_id: &str) {
        self.keys().forget(|_, (key, _)| key.org_id == org_id);
        self.regional().org_regions().forget(|org, _| org == org_id);
    }

    fn forget_license_here(&self, id: &str) {
        self.license_cache().forget(|k, _| k == id);
        self.activation_cache().forget(|_, a| a.license_id == id);
    }

    fn forget_here(&self, what: Forget) {
        match what {
            Forget::Keys { key_ids } => self.forget_key_ids(&key_ids),
            Forget::Organization { org_id } => self.forget_organization_here(&org_id),
            Forget::License { license_id } => self.forget_license_here(&license_id),
        }
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
        Event::DeviceStatus {
            org_id,
            event,
            device,
        } => Some(Message::Device {
            org_id: org_id.to_string(),
            event: *event,
            device: Box::new((**device).clone()),
        }),
        Event::Ota {
            org_id,
            event,
            deployment,
        } => Some(Message::Ota {
            org_id: org_id.to_string(),
            event: *event,
            deployment: Box::new((**deployment).clone()),
        }),
        Event::DeviceChanged { device_id } => Some(Message::DeviceChanged {
            device_id: device_id.clone(),
        }),
        Event::CommandQueued { device_ids } => Some(Message::CommandQueued {
            device_ids: device_ids.clone(),
        }),
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
        Message::Device {
            org_id,
            event,
            mut device,
        } => {
            device.org_id.clone_from(&org_id);
            app.events().publish_from_peer(Event::DeviceStatus {
                org_id: org_id.into(),
                event,
                device: Arc::new(*device),
            });
        }
        Message::Ota {
            org_id,
            event,
            mut deployment,
        } => {
            deployment.org_id.clone_from(&org_id);
            app.events().publish_from_peer(Event::Ota {
                org_id: org_id.into(),
                event,
                deployment: Arc::new(*deployment),
            });
        }
        Message::DeviceChanged { device_id } => {
            app.events()
                .publish_from_peer(Event::DeviceChanged { device_id });
        }
        Message::CommandQueued { device_ids } => {
            app.events()
                .publish_from_peer(Event::CommandQueued { device_ids });
        }
        Message::Forget { what } => app.forget_here(what),
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
            Some(what) = forgotten.recv() => Some(Message::Forget { what }),
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
