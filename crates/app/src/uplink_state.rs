//! What the edge agent's uplink (`edge_forward.rs`, `plantd_mqtt::uplink`) keeps in memory: the
//! forwarding status `GET /v1/edge/config` shows, and the CPU sample the next heartbeat needs.

use plantd_model::Timestamp;
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::update_files::Restart;

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

pub(crate) struct UplinkState {
    view: Mutex<ForwardingView>,
    /// (busy, total) jiffies of the last CPU sample.
    cpu: Mutex<Option<(u64, u64)>>,
    /// The self-update's reports for the `ota` topic, kept until the cloud acknowledges them.
    reports: Mutex<Reports>,
    reports_wake: tokio::sync::Notify,
    /// An update or a rollback is running.
    updating: Arc<AtomicBool>,
    /// The restart an update or a rollback asked for.
    restart: tokio::sync::watch::Sender<Option<Restart>>,
}

impl Default for UplinkState {
    fn default() -> Self {
        Self {
            view: Default::default(),
            cpu: Default::default(),
            reports: Default::default(),
            reports_wake: Default::default(),
            updating: Default::default(),
            restart: tokio::sync::watch::Sender::new(None),
        }
    }
}

/// Reports in order: (number, payload, handed to the transport on this connection).
#[derive(Default)]
struct Reports {
    next: u64,
    queue: VecDeque<(u64, Vec<u8>, bool)>,
}

/// While held, an update or a rollback runs (a second one is refused).
pub(crate) struct UpdateGuard(Arc<AtomicBool>);

impl Drop for UpdateGuard {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
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

    /// Starts an update or a rollback; None while one runs.
    pub(crate) fn begin_update(&self) -> Option<UpdateGuard> {
        (!self.updating.swap(true, Ordering::SeqCst)).then(|| UpdateGuard(self.updating.clone()))
    }

    fn reports(&self) -> std::sync::MutexGuard<'_, Reports> {
        self.reports.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn queue_report(&self, payload: Vec<u8>) {
        {
            let mut r = self.reports();
            r.next += 1;
            let n = r.next;
            r.queue.push_back((n, payload, false));
        }
        self.reports_wake.notify_one();
    }

    /// Reports not yet handed to the transport, which now has them.
    pub(crate) fn reports_to_send(&self) -> Vec<(u64, Vec<u8>)> {
        let mut r = self.reports();
        r.queue
            .iter_mut()
            .filter(|(_, _, sent)| !*sent)
            .map(|(n, payload, sent)| {
                *sent = true;
                (*n, payload.clone())
            })
            .collect()
    }

    pub(crate) async fn report_queued(&self) {
        self.reports_wake.notified().await
    }

    pub(crate) fn report_acked(&self, n: u64) {
        self.reports().queue.retain(|(m, _, _)| *m != n);
    }

    pub(crate) fn reports_resend(&self) {
        for r in self.reports().queue.iter_mut() {
            r.2 = false;
        }
        self.reports_wake.notify_one();
    }

    /// Waits up to `within` for the cloud to have every queued report; whether it has.
    pub(crate) async fn reports_delivered(&self, within: Duration) -> bool {
        let until = tokio::time::Instant::now() + within;
        loop {
            if self.reports().queue.is_empty() {
                return true;
            }
            if tokio::time::Instant::now() >= until {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub(crate) fn restart(&self, plan: Restart) {
        self.restart.send_replace(Some(plan));
    }

    pub(crate) async fn restart_requested(&self) -> Restart {
        let mut rx = self.restart.subscribe();
        loop {
            if let Some(plan) = rx.borrow_and_update().clone() {
                return plan;
            }
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    pub(crate) fn restart_plan(&self) -> Option<Restart> {
        self.restart.borrow().clone()
    }
}
