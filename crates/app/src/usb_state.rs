//! What a node keeps of its USB watches (`usb_watch.rs`): per organization, what a client sees
//! of its watch, and the wake-up of the watch worker.

use plantd_model::Timestamp;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Mutex;

/// Imports remembered per watch.
pub(crate) const KEPT_IMPORTS: usize = 50;

/// What this node knows of its watches, per organization, and the wake-up of the worker.
#[derive(Default)]
pub(crate) struct UsbWatches {
    wake: tokio::sync::Notify,
    states: Mutex<HashMap<String, UsbWatchView>>,
}

impl UsbWatches {
    pub(crate) fn wake(&self) -> &tokio::sync::Notify {
        &self.wake
    }

    fn states(&self) -> std::sync::MutexGuard<'_, HashMap<String, UsbWatchView>> {
        self.states.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The organization's watch starts afresh (a new path, or the same again).
    pub(crate) fn start(&self, org_id: &str, view: UsbWatchView) {
        self.states().insert(org_id.to_string(), view);
    }

    /// A watch read from the database at start, unless this node knows it already.
    pub(crate) fn resume(&self, org_id: &str, view: UsbWatchView) {
        self.states().entry(org_id.to_string()).or_insert(view);
    }

    pub(crate) fn get(&self, org_id: &str) -> Option<UsbWatchView> {
        self.states().get(org_id).cloned()
    }

    /// Changes the organization's watch, if this node has it.
    pub(crate) fn update(&self, org_id: &str, change: impl FnOnce(&mut UsbWatchView)) {
        if let Some(v) = self.states().get_mut(org_id) {
            change(v);
        }
    }
}

impl UsbWatchView {
    /// A watch of `path` started at `started_at`, nothing looked at yet.
    pub(crate) fn fresh(path: String, started_at: Timestamp, present: bool) -> Self {
        Self {
            path,
            started_at,
            present,
            last_look_at: None,
            error: None,
            imports: Vec::new(),
        }
    }
}

/// `POST /v1/provisioning/usb/watch/start` and `GET /v1/provisioning/usb/watch`.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct UsbWatchView {
    pub path: String,
    pub started_at: Timestamp,
    /// Whether the directory is there (a stick is mounted).
    pub present: bool,
    pub last_look_at: Option<Timestamp>,
    /// Why the directory cannot be watched, if it cannot.
    pub error: Option<String>,
    /// The files imported or refused, newest first.
    pub imports: Vec<UsbImport>,
}

#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct UsbImport {
    pub file: String,
    pub at: Timestamp,
    /// Assets imported; absent when refused.
    pub imported: Option<usize>,
    /// Why the file was refused (each bad line named).
    pub error: Option<String>,
}
