//! The in-process event bus (DESIGN 5): telemetry intake publishes committed points and alert
//! changes here; the live stream and the delivery worker subscribe. With NATS (`--nats-url`)
//! the other nodes of the region hear this node's points and alerts (`node_events.rs`) and put
//! them on this bus's **stream** side only: the live stream sees every node's events, while the
//! workers that act on an event (deliveries, scoring) see only this node's, so nothing is acted
//! on twice. The device door's events (a device changed or deleted, commands queued) go to the
//! **doors** side from every node: the node holding a device's connection acts on them, whichever
//! node made the change.

use plantd_model::alert::Alert;
use plantd_model::device::Device;
use plantd_model::event::EventType;
use plantd_model::telemetry::Point;
use std::sync::Arc;
use tokio::sync::broadcast;

/// Events buffered per subscriber before a slow one is told it missed some.
pub const BUS_CAPACITY: usize = 4096;

#[derive(Clone, Debug)]
pub enum Event {
    /// A committed batch of one organization.
    Telemetry {
        org_id: Arc<str>,
        points: Arc<Vec<Point>>,
    },
    /// An alert was triggered, acknowledged or resolved.
    Alert {
        org_id: Arc<str>,
        event: EventType,
        alert: Arc<Alert>,
    },
    /// A device turned online or offline.
    DeviceStatus {
        org_id: Arc<str>,
        event: EventType,
        device: Arc<Device>,
    },
    /// A device was changed or deleted: a door holding its connection reads it again (a
    /// deleted device is disconnected).
    DeviceChanged { device_id: String },
    /// Commands were queued for devices: the door holding their connections delivers them.
    CommandQueued { device_ids: Vec<String> },
    /// An OTA deployment changed (created, a phase started, paused, completed, failed,
    /// cancelled, rolled back).
    Ota {
        org_id: Arc<str>,
        event: EventType,
        deployment: Arc<plantd_model::ota::Deployment>,
    },
}

impl Event {
    /// A device door's business rather than the live stream's.
    fn is_for_doors(&self) -> bool {
        matches!(
            self,
            Event::DeviceChanged { .. } | Event::CommandQueued { .. }
        )
    }
}

#[derive(Clone)]
pub struct EventBus {
    sender: broadcast::Sender<Event>,
    /// This node's events and those of the region's other nodes, for the live stream.
    stream: broadcast::Sender<Event>,
    /// Every node's `DeviceChanged` and `CommandQueued`, for the device doors.
    doors: broadcast::Sender<Event>,
}

impl Default for EventBus {
    fn default() -> Self {
        Self {
            sender: broadcast::channel(BUS_CAPACITY).0,
            stream: broadcast::channel(BUS_CAPACITY).0,
            doors: broadcast::channel(BUS_CAPACITY).0,
        }
    }
}

impl EventBus {
    pub fn publish(&self, event: Event) {
        // No subscriber is not an error: nobody is listening right now.
        if event.is_for_doors() {
            let _ = self.doors.send(event.clone());
        } else {
            let _ = self.stream.send(event.clone());
        }
        let _ = self.sender.send(event);
    }

    /// An event another node of the region published: for the live stream, or the device doors.
    pub fn publish_from_peer(&self, event: Event) {
        let _ = if event.is_for_doors() {
            self.doors.send(event)
        } else {
            self.stream.send(event)
        };
    }

    /// Every node's device changes and queued commands, for a device door.
    pub fn subscribe_doors(&self) -> broadcast::Receiver<Event> {
        self.doors.subscribe()
    }

    /// Every node's events, for the live stream.
    pub fn subscribe_stream(&self) -> broadcast::Receiver<Event> {
        self.stream.subscribe()
    }

    /// Tells live subscribers of an alert change.
    pub fn publish_alert(&self, event: EventType, alert: Alert) {
        self.publish(Event::Alert {
            org_id: alert.org_id.as_str().into(),
            event,
            alert: Arc::new(alert),
        });
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.sender.subscribe()
    }
}
