//! The worker board: the last run and last error of each background worker, for
//! `GET /v1/status`.

use plantd_model::Timestamp;
use std::collections::HashMap;
use std::sync::Mutex;

/// Last run and last error of each background worker.
#[derive(Default)]
pub struct WorkerBoard {
    workers: Mutex<HashMap<&'static str, WorkerState>>,
}

#[derive(Clone, Debug, serde::Serialize, utoipa::ToSchema)]
pub struct WorkerState {
    pub name: String,
    /// `running` or `failing`.
    pub status: String,
    pub last_run: Option<Timestamp>,
    pub last_error: Option<String>,
}

impl WorkerBoard {
    pub fn report(&self, name: &'static str, result: Result<(), String>) {
        let mut w = self.workers.lock().unwrap_or_else(|p| p.into_inner());
        let (status, last_error) = match result {
            Ok(()) => ("running", None),
            Err(e) => ("failing", Some(e)),
        };
        w.insert(
            name,
            WorkerState {
                name: name.to_string(),
                status: status.into(),
                last_run: Some(Timestamp::now()),
                last_error,
            },
        );
    }

    pub fn register(&self, name: &'static str) {
        let mut w = self.workers.lock().unwrap_or_else(|p| p.into_inner());
        w.entry(name).or_insert(WorkerState {
            name: name.into(),
            status: "running".into(),
            last_run: None,
            last_error: None,
        });
    }

    pub fn all(&self) -> Vec<WorkerState> {
        let w = self.workers.lock().unwrap_or_else(|p| p.into_inner());
        let mut all: Vec<_> = w.values().cloned().collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }
}
