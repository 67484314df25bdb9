//! The service's own state: liveness (the database answers) and the status of its components.

use plantd_model::Timestamp;
use serde::Serialize;

use crate::app::App;
use crate::worker_board::WorkerState;

/// The version of the running service.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

#[derive(Serialize, utoipa::ToSchema)]
pub struct ServiceStatus {
    /// `operational` when every component is up, else `degraded`.
    pub status: &'static str,
    pub version: &'static str,
    pub started_at: Timestamp,
    pub uptime_seconds: i64,
    pub components: Components,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct Components {
    pub database: DatabaseStatus,
    pub workers: Vec<WorkerState>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct DatabaseStatus {
    /// `up` or `down`.
    pub status: &'static str,
    /// `sqlite` or `postgresql`.
    pub backend: &'static str,
    pub latency_ms: Option<f64>,
    pub error: Option<String>,
}

impl App {
    /// Whether the database answers.
    pub async fn healthy(&self) -> bool {
        self.store().ping().await.is_ok()
    }

    /// The database and the background workers.
    pub async fn status(&self) -> ServiceStatus {
        let ping = self.store().ping().await;
        let database = DatabaseStatus {
            status: if ping.is_ok() { "up" } else { "down" },
            backend: self.store().backend().as_str(),
            latency_ms: ping
                .as_ref()
                .ok()
                .map(|d| (d.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0),
            error: ping.err().map(|e| plantd_model::error_chain(&e)),
        };
        let workers = self.workers().all();
        let all_up = database.status == "up" && workers.iter().all(|w| w.status == "running");
        let now = Timestamp::now();
        ServiceStatus {
            status: if all_up { "operational" } else { "degraded" },
            version: VERSION,
            started_at: self.started_at(),
            uptime_seconds: (now.millis() - self.started_at().millis()) / 1000,
            components: Components { database, workers },
        }
    }
}
