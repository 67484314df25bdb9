//! The control API of the simulation server (SPEC 4.16), on its own port: status, start/stop,
//! scenarios, variable overrides and configuration reload. Answers use the main API's envelope:
//! `{"data": ...}`, or `{"error": {"code", "message", "details"}}` with 400/404/405.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Serialize;
use serde_json::{Value as JsonValue, json};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::{ControlError, Scenario, SimConfig, Simulation};

/// The running simulation and what the control API needs beside it.
pub struct SimState {
    pub sim: Mutex<Simulation>,
    pub seed: u64,
    pub started: Instant,
    /// Open OPC UA sessions (reported by the OPC UA server).
    pub sessions: std::sync::atomic::AtomicU64,
    /// Value changes served to OPC UA clients.
    pub served: std::sync::atomic::AtomicU64,
    /// Asked to shut down (`POST /api/shutdown`).
    pub shutdown: tokio::sync::Notify,
    /// Counts configuration loads (the OPC UA address space is rebuilt when it moves).
    pub generation: std::sync::atomic::AtomicU64,
}

impl SimState {
    pub fn new(sim: Simulation, seed: u64) -> Arc<Self> {
        Arc::new(Self {
            sim: Mutex::new(sim),
            seed,
            started: Instant::now(),
            sessions: Default::default(),
            served: Default::default(),
            shutdown: tokio::sync::Notify::new(),
            generation: Default::default(),
        })
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, Simulation> {
        self.sim.lock().unwrap_or_else(|p| p.into_inner())
    }
}

type Shared = Arc<SimState>;

/// An error in the main API's envelope.
pub struct HttpError {
    status: StatusCode,
    code: &'static str,
    message: String,
    field: Option<&'static str>,
}

impl HttpError {
    fn invalid(field: &'static str, message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            code: "validation_error",
            message: message.into(),
            field: Some(field),
        }
    }
    fn not_found(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            code: "not_found",
            message: message.into(),
            field: None,
        }
    }
}

impl From<ControlError> for HttpError {
    fn from(e: ControlError) -> Self {
        match e {
            ControlError::NotFound(m) => HttpError::not_found(m),
            ControlError::Invalid(m) => HttpError::invalid("value", m),
        }
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        let details: Vec<JsonValue> = self
            .field
            .map(|f| json!({"field": f, "message": self.message}))
            .into_iter()
            .collect();
        (
            self.status,
            Json(
                json!({"error": {"code": self.code, "message": self.message, "details": details}}),
            ),
        )
            .into_response()
    }
}

fn data(v: impl Serialize) -> Response {
    Json(json!({ "data": v })).into_response()
}

/// The control API's routes.
pub fn router(state: Shared) -> Router {
    Router::new()
        .route("/api/status", get(status))
        .route("/api/simulation/start", post(start))
        .route("/api/simulation/stop", post(stop))
        .route("/api/scenarios", get(scenarios))
        .route("/api/scenarios/{id}/enable", post(enable))
        .route("/api/scenarios/{id}/disable", post(disable))
        .route("/api/variables", get(variables))
        .route(
            "/api/variables/{asset_id}/{variable}",
            post(set_variable).delete(release_variable),
        )
        .route("/api/config", post(load_config))
        .route("/api/shutdown", post(shutdown))
        .fallback(|| async { HttpError::not_found("no such control API route") })
        .method_not_allowed_fallback(|| async {
            HttpError {
                status: StatusCode::METHOD_NOT_ALLOWED,
                code: "method_not_allowed",
                message: "this method is not allowed on this route".into(),
                field: None,
            }
        })
        .with_state(state)
}

fn status_body(state: &SimState) -> JsonValue {
    use std::sync::atomic::Ordering;
    let s = state.lock().status();
    json!({
        "state": s.state,
        "uptime_seconds": state.started.elapsed().as_secs(),
        "simulation_seconds": s.simulation_seconds,
        "assets": s.assets,
        "variables": s.variables,
        "active_scenarios": s.active_scenarios,
        "sessions": state.sessions.load(Ordering::Relaxed),
        "value_updates": s.value_updates,
        "value_changes_served": state.served.load(Ordering::Relaxed),
        "seed": state.seed,
    })
}

async fn status(State(state): State<Shared>) -> Response {
    data(status_body(&state))
}

async fn start(State(state): State<Shared>) -> Response {
    state.lock().set_running(true);
    data(status_body(&state))
}

async fn stop(State(state): State<Shared>) -> Response {
    state.lock().set_running(false);
    data(status_body(&state))
}

fn scenario_list(sim: &Simulation) -> Vec<JsonValue> {
    Scenario::ALL
        .iter()
        .map(|s| json!({"id": s.id(), "enabled": sim.scenario_enabled(*s), "description": s.description()}))
        .collect()
}

async fn scenarios(State(state): State<Shared>) -> Response {
    data(scenario_list(&state.lock()))
}

fn scenario(id: &str) -> Result<Scenario, HttpError> {
    Scenario::parse(id).ok_or_else(|| {
        let known: Vec<&str> = Scenario::ALL.iter().map(|s| s.id()).collect();
        HttpError::not_found(format!(
            "no scenario {id:?}; scenarios: {}",
            known.join(", ")
        ))
    })
}

async fn enable(
    State(state): State<Shared>,
    Path(id): Path<String>,
) -> Result<Response, HttpError> {
    let s = scenario(&id)?;
    let mut sim = state.lock();
    sim.enable(s);
    Ok(data(scenario_list(&sim)))
}

async fn disable(
    State(state): State<Shared>,
    Path(id): Path<String>,
) -> Result<Response, HttpError> {
    let s = scenario(&id)?;
    let mut sim = state.lock();
    sim.disable(s);
    Ok(data(scenario_list(&sim)))
}

async fn variables(State(state): State<Shared>) -> Response {
    data(state.lock().snapshot())
}

async fn set_variable(
    State(state): State<Shared>,
    Path((asset, variable)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> Result<Response, HttpError> {
    let parsed: JsonValue = serde_json::from_slice(&body)
        .map_err(|e| HttpError::invalid("body", format!("malformed JSON: {e}")))?;
    let value = match parsed.get("value") {
        Some(v) => v
            .as_f64()
            .ok_or_else(|| HttpError::invalid("value", "must be a number"))?,
        None => return Err(HttpError::invalid("value", "is required")),
    };
    if let Some(obj) = parsed.as_object()
        && let Some(k) = obj.keys().find(|k| *k != "value")
    {
        return Err(HttpError::invalid(
            "body",
            format!("{k} is not a known field"),
        ));
    }
    let mut sim = state.lock();
    sim.set_override(&asset, &variable, value)?;
    Ok(data(
        json!({"asset_id": asset, "variable": variable, "value": sim.value(&asset, &variable), "overridden": true}),
    ))
}

async fn release_variable(
    State(state): State<Shared>,
    Path((asset, variable)): Path<(String, String)>,
) -> Result<Response, HttpError> {
    state.lock().release(&asset, &variable)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Replaces the configuration with the YAML body; a bad one is refused (400, key and line) and
/// the running configuration stays.
async fn load_config(State(state): State<Shared>, body: String) -> Result<Response, HttpError> {
    let config = SimConfig::parse(&body, std::path::Path::new("."))
        .map_err(|e| HttpError::invalid("config", e.0))?;
    let epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let mut next =
        Simulation::new(&config, state.seed, epoch).map_err(|e| HttpError::invalid("config", e))?;
    let mut sim = state.lock();
    next.set_running(sim.is_running());
    for s in Scenario::ALL {
        if s != Scenario::Normal && sim.scenario_enabled(s) {
            next.enable(s);
        }
    }
    *sim = next;
    state
        .generation
        .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    drop(sim);
    Ok(data(status_body(&state)))
}

async fn shutdown(State(state): State<Shared>) -> Response {
    state.shutdown.notify_one();
    data(json!({"state": "shutting down"}))
}

/// Advances the simulation with the wall clock, every `tick` (values change at each asset's
/// own update rate).
pub fn spawn_clock(state: Shared, tick: std::time::Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(tick);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last = Instant::now();
        loop {
            interval.tick().await;
            let now = Instant::now();
            state.lock().advance((now - last).as_secs_f64());
            last = now;
        }
    })
}
