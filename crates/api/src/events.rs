//! The in-process event bus (DESIGN 5): ingest publishes committed telemetry here; the WebSocket
//! stream (and later alerts, webhooks and ML scoring) subscribe. Events are per node: several API
//! nodes will carry them over NATS JetStream behind the same type.

use plantd_model::telemetry::Point;
use std::sync::Arc;
use tokio::sync::broadcast;

/// Events buffered per subscriber before a slow one is told it missed some.
pub const BUS_CAPACITY: usize = 4096;

#[derive(Clone, Debug)]
pub enum Event {
    /// A committed ingest batch of one organization.
    Telemetry {
        org_id: Arc<str>,
        points: Arc<Vec<Point>>,
    },
    /// An alert was triggered, acknowledged or resolved (`alert.triggered`, ...).
    Alert {
        org_id: Arc<str>,
        event: &'static str,
        alert: Arc<plantd_model::alert::Alert>,
    },
}

#[derive(Clone)]
pub struct EventBus {
    sender: broadcast::Sender<Event>,
}

impl Default for EventBus {
    fn default() -> Self {
        Self {
            sender: broadcast::channel(BUS_CAPACITY).0,
        }
    }
}

impl EventBus {
    pub fn publish(&self, event: Event) {
        // No subscriber is not an error: nobody is listening right now.
        let _ = self.sender.send(event);
    }
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.sender.subscribe()
    }
}
