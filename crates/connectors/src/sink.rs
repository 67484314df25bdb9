//! The [`Sink`]: where a connector puts the points it reads and reports its connection state,
//! never blocking the protocol side; whoever runs the connector takes them from it.

use plantd_model::Timestamp;
use plantd_model::tag::TagDescription;
use plantd_model::telemetry::Point;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{Notify, watch};

/// Points held for the supervisor at most; beyond, the oldest are dropped (and counted).
pub const MAX_BUFFERED_POINTS: usize = 1_000_000;

/// One value a message was mapped to (MQTT JSON or Sparkplug B), before it is a point.
#[derive(Debug, PartialEq)]
pub struct Mapped {
    pub asset_id: String,
    pub tag_name: String,
    pub value: f64,
    pub timestamp: Timestamp,
    pub quality: plantd_model::telemetry::Quality,
}

/// What a connector reports about its connection.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConnectionState {
    /// True only while the protocol session is up.
    pub connected: bool,
    /// Tags the connector reads.
    pub tag_count: usize,
    /// Why it is not connected, or the latest problem while connected (unreadable tags,
    /// payloads that could not be mapped, dropped points).
    pub error: Option<String>,
}

/// Where a connector puts its points and its state. Cheap to clone.
#[derive(Clone)]
pub struct Sink {
    inner: Arc<SinkInner>,
}

struct SinkInner {
    source_id: String,
    points: Mutex<Vec<Point>>,
    ready: Notify,
    dropped: AtomicU64,
    state: watch::Sender<ConnectionState>,
    /// What the device said its tags measure, not yet recorded: (asset, tag, description).
    described: Mutex<Vec<(String, String, TagDescription)>>,
}

impl Sink {
    /// A sink for the data source `source_id` (set on every point).
    pub fn new(source_id: &str) -> Self {
        Self {
            inner: Arc::new(SinkInner {
                source_id: source_id.to_string(),
                points: Mutex::new(Vec::new()),
                ready: Notify::new(),
                dropped: AtomicU64::new(0),
                described: Mutex::new(Vec::new()),
                state: watch::channel(ConnectionState {
                    connected: false,
                    tag_count: 0,
                    error: Some("connecting".into()),
                })
                .0,
            }),
        }
    }

    pub fn source_id(&self) -> &str {
        &self.inner.source_id
    }

    /// A point read now-ish from `asset/tag`.
    pub fn point(
        &self,
        asset_id: &str,
        tag_name: &str,
        value: f64,
        timestamp: Timestamp,
        quality: plantd_model::telemetry::Quality,
    ) -> Point {
        Point {
            asset_id: asset_id.to_string(),
            tag_name: tag_name.to_string(),
            value,
            timestamp,
            quality,
            data_source_id: Some(self.inner.source_id.clone()),
        }
    }

    /// Hands points to the supervisor (never blocks; see [`MAX_BUFFERED_POINTS`]).
    pub fn push(&self, points: impl IntoIterator<Item = Point>) {
        let mut buf = self.inner.points.lock().unwrap_or_else(|p| p.into_inner());
        let before = buf.len();
        buf.extend(points);
        if buf.len() > MAX_BUFFERED_POINTS {
            let excess = buf.len() - MAX_BUFFERED_POINTS;
            buf.drain(..excess);
            self.inner
                .dropped
                .fetch_add(excess as u64, Ordering::Relaxed);
        }
        if buf.len() > before {
            drop(buf);
            self.inner.ready.notify_one();
        }
    }

    /// Hands what the device says its tags measure to the supervisor (recorded beside the
    /// points).
    pub fn describe(&self, tags: Vec<(String, String, TagDescription)>) {
        if tags.is_empty() {
            return;
        }
        self.inner
            .described
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(tags);
        self.inner.ready.notify_one();
    }

    /// Takes what the device said of its tags since the last call.
    pub fn take_descriptions(&self) -> Vec<(String, String, TagDescription)> {
        std::mem::take(
            &mut *self
                .inner
                .described
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        )
    }

    /// Takes every buffered point (oldest first).
    pub fn take_points(&self) -> Vec<Point> {
        std::mem::take(&mut *self.inner.points.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Waits until points are buffered.
    pub async fn points_ready(&self) {
        self.inner.ready.notified().await
    }

    /// Points dropped because the supervisor fell behind, since the last call.
    pub fn take_dropped(&self) -> u64 {
        self.inner.dropped.swap(0, Ordering::Relaxed)
    }

    pub fn state(&self) -> watch::Receiver<ConnectionState> {
        self.inner.state.subscribe()
    }

    pub fn connected(&self, tag_count: usize) {
        self.inner.state.send_if_modified(|s| {
            let new = ConnectionState {
                connected: true,
                tag_count,
                error: None,
            };
            std::mem::replace(s, new.clone()) != new
        });
    }

    pub fn disconnected(&self, error: String) {
        self.inner.state.send_if_modified(|s| {
            let changed = s.connected || s.error.as_deref() != Some(&error);
            s.connected = false;
            s.error = Some(error);
            changed
        });
    }

    /// A problem met while connected (or `None` once it is gone).
    pub fn problem(&self, error: Option<String>) {
        self.inner.state.send_if_modified(|s| {
            let changed = s.error != error;
            s.error = error;
            changed
        });
    }

    pub fn set_tag_count(&self, tag_count: usize) {
        self.inner.state.send_if_modified(|s| {
            let changed = s.tag_count != tag_count;
            s.tag_count = tag_count;
            changed
        });
    }

    pub(crate) fn is_connected(&self) -> bool {
        self.inner.state.borrow().connected
    }
}
