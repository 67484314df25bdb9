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

    pub(crate) fn states(&self) -> &Mutex<HashMap<String, UsbWatchView>> {
        &self.states
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
