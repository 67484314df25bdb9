//! What the edge agent's uplink (`edge_forward.rs`, `plantd_mqtt::uplink`) keeps in memory: the
//! forwarding status `GET /v1/edge/config` shows, and the CPU sample the next heartbeat needs.

use plantd_model::Timestamp;
use serde::Serialize;
use std::sync::Mutex;

/// `forwarding` in `GET /v1/edge/config`.
#[derive(Clone, Debug, Default, Serialize, utoipa::ToSchema)]
pub struct ForwardingView {
    /// Connected to a regional cloud's MQTT channel now.
    pub connected: bool,
    /// The region forwarded to (or being reached), and its addresses.
    pub region: Option<String>,
    pub api_url: Option<String>,
    pub mqtt_url: Option<String>,
    pub connected_since: Option<Timestamp>,
    /// Why the last connection failed or ended; null while connected.
    pub last_error: Option<String>,
    /// Since this start: batches and points the cloud acknowledged.
    pub forwarded_batches: u64,
    pub forwarded_points: u64,
    pub last_forwarded_at: Option<Timestamp>,
    /// Kept on the agent, waiting for the cloud (read when asked).
    pub pending_batches: u64,
    pub pending_points: u64,
    /// Points per second of the backlog (the live points go at once).
    pub backfill_points_per_second: u64,
    /// Moves between regions since this start (the failover rule), newest last, at most 20.
    pub failovers: Vec<FailoverEvent>,
}

/// A move between regional clouds.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct FailoverEvent {
    pub from: String,
    pub to: String,
    pub at: Timestamp,
    pub reason: String,
}

/// Kept moves.
const KEPT_FAILOVERS: usize = 20;

#[derive(Default)]
pub(crate) struct UplinkState {
    view: Mutex<ForwardingView>,
    /// (busy, total) jiffies of the last CPU sample.
    cpu: Mutex<Option<(u64, u64)>>,
}

impl UplinkState {
    fn view(&self) -> std::sync::MutexGuard<'_, ForwardingView> {
        self.view.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn get(&self) -> ForwardingView {
        self.view().clone()
    }

    pub(crate) fn update(&self, f: impl FnOnce(&mut ForwardingView)) {
        f(&mut self.view());
    }

    pub(crate) fn failed_over(&self, event: FailoverEvent) {
        let mut v = self.view();
        v.failovers.push(event);
        if v.failovers.len() > KEPT_FAILOVERS {
            v.failovers.remove(0);
        }
    }

    /// The CPU's busy share since the last call (none at the first).
    pub(crate) fn cpu_percent(&self, busy: u64, total: u64) -> Option<f64> {
        let mut last = self.cpu.lock().unwrap_or_else(|p| p.into_inner());
        let out = last.and_then(|(b, t)| {
            let dt = total.checked_sub(t).filter(|d| *d > 0)?;
            let db = busy.saturating_sub(b);
            Some((db as f64 * 100.0 / dt as f64).clamp(0.0, 100.0))
        });
        *last = Some((busy, total));
        out
    }
}
