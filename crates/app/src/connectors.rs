//! The connector supervisor: runs a connector (crate `plantd-connectors`) for every enabled
//! data source of every organization, restarts it when its type, config or switch changes,
//! stops it when the source is deleted or disabled, stores what it reads through the same path
//! as `POST /v1/telemetry` ([`App::store_points`]), and records its state (`status`, `tag_count`, `last_error`).
//!
//! With several nodes on one PostgreSQL database, one node at a time runs the connectors: the
//! holder of an advisory-lock lease. Another node takes over within seconds of losing it.

use plantd_connectors::{ConnectionState, Protocol, Sink};
use plantd_model::Timestamp;
use plantd_model::data_source::{DataSource, DataSourceStatus};
use plantd_model::telemetry::{Point, check_point};
use plantd_store::{CONNECTORS_LEASE, ConnectorState};
use std::collections::HashMap;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::app::App;
use crate::caller::{Caller, Credential};
use crate::error::AppError;
use crate::telemetry::Batch;

const WORKER: &str = "connectors";

/// How long points gather before they are written together.
const FLUSH_DELAY: Duration = Duration::from_millis(100);
/// Points one write commits at most. Bigger than the API's batch: points are sorted by series
/// first, so that a write covering a second of 10,000 tags updates each tag's rollups once per
/// write rather than once per point.
const MAX_WRITE: usize = 100_000;
/// Sources are read again this often even without a change notification.
const RESYNC_EVERY: Duration = Duration::from_secs(30);
/// A node without the lease asks again this often.
const LEASE_RETRY: Duration = Duration::from_secs(3);

/// Runs until `stop` turns true.
pub(crate) async fn supervise(app: App, mut stop: watch::Receiver<bool>) {
    app.workers().register(WORKER);
    loop {
        let lease = tokio::select! {
            l = app.store().try_lease(CONNECTORS_LEASE) => l,
            _ = stop.changed() => return,
        };
        match lease {
            Ok(Some(mut lease)) => {
                tracing::info!("this node runs the data source connectors");
                app.workers().report(WORKER, Ok(()));
                let lost = run_all(&app, &mut stop, lease.lost()).await;
                if !lost {
                    return;
                }
                tracing::warn!("lost the connectors lease; connectors stopped");
                app.workers()
                    .report(WORKER, Err("lost the connectors lease".into()));
            }
            Ok(None) => {}
            Err(e) => app.workers().report(
                WORKER,
                Err(format!(
                    "cannot take the connectors lease: {}",
                    plantd_model::error_chain(&e)
                )),
            ),
        }
        tokio::select! {
            _ = tokio::time::sleep(LEASE_RETRY) => {}
            _ = stop.changed() => return,
        }
    }
}

struct Running {
    /// What the connector was started with; another value restarts it.
    fingerprint: String,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

/// Keeps connectors in step with the data sources until stopped (false) or `lost` (true).
async fn run_all(
    app: &App,
    stop: &mut watch::Receiver<bool>,
    lost: impl std::future::Future<Output = ()>,
) -> bool {
    let mut running: HashMap<String, Running> = HashMap::new();
    // Connectors told to stop, finishing their last writes.
    let mut retiring: Vec<JoinHandle<()>> = Vec::new();
    let mut changes = app.store().data_source_changes();
    let mut resync = tokio::time::interval(RESYNC_EVERY);
    resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(lost);
    let was_lost = loop {
        changes.borrow_and_update();
        match app.store().all_data_sources().await {
            Ok(all) => reconcile(app, &mut running, &mut retiring, all).await,
            Err(e) => {
                tracing::warn!(error = %plantd_model::error_chain(&e), "cannot read data sources; retrying")
            }
        }
        tokio::select! {
            _ = changes.changed() => {
                // Several writes often come together (a burst of state reports).
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            _ = resync.tick() => {}
            _ = stop.changed() => break false,
            _ = &mut lost => break true,
        }
    };
    stop_all(running, retiring).await;
    was_lost
}

/// Stops every connector and waits for their last writes (each connector gets 5 s to close its
/// session; its buffered points are then written).
async fn stop_all(running: HashMap<String, Running>, mut retiring: Vec<JoinHandle<()>>) {
    for r in running.into_values() {
        let _ = r.stop.send(true);
        retiring.push(r.task);
    }
    for t in retiring {
        let _ = tokio::time::timeout(Duration::from_secs(30), t).await;
    }
}

fn fingerprint(ds: &DataSource) -> String {
    format!("{}|{}", ds.source_type.as_str(), ds.config)
}

async fn reconcile(
    app: &App,
    running: &mut HashMap<String, Running>,
    retiring: &mut Vec<JoinHandle<()>>,
    all: Vec<DataSource>,
) {
    retiring.retain(|t| !t.is_finished());
    let mut wanted: HashMap<String, DataSource> = HashMap::new();
    let mut elsewhere: HashMap<String, bool> = HashMap::new();
    for ds in all {
        // An organization served by another region (it moved there) has its connectors there.
        let moved = match elsewhere.get(&ds.org_id) {
            Some(m) => *m,
            None => {
                let m = matches!(app.resident_elsewhere(&ds.org_id).await, Ok(Some(_)));
                elsewhere.insert(ds.org_id.clone(), m);
                m
            }
        };
        if moved {
            continue;
        }
        if ds.enabled {
            wanted.insert(ds.id.clone(), ds);
        } else {
            if let Some(r) = running.remove(&ds.id) {
                let _ = r.stop.send(true);
                retiring.push(r.task);
            }
            // A switched-off source is not connected, and says why.
            let off = ConnectorState {
                status: DataSourceStatus::Disconnected,
                tag_count: ds.tag_count,
                last_error: Some("disabled: no connector runs (set enabled to true)".into()),
            };
            if current_state(&ds) != off {
                let _ = app
                    .store()
                    .set_connector_state(&ds.org_id, &ds.id, &off)
                    .await;
            }
        }
    }
    let stale: Vec<String> = running
        .iter()
        .filter(|(id, r)| {
            wanted
                .get(*id)
                .is_none_or(|ds| fingerprint(ds) != r.fingerprint)
        })
        .map(|(id, _)| id.clone())
        .collect();
    // A restarted source's new connector starts once the old one has finished its last writes
    // (else the old one's final "stopped" record could land after the new one's "connected").
    let mut predecessors: HashMap<String, JoinHandle<()>> = HashMap::new();
    for id in stale {
        if let Some(r) = running.remove(&id) {
            let _ = r.stop.send(true);
            if wanted.contains_key(&id) {
                predecessors.insert(id, r.task);
            } else {
                retiring.push(r.task);
            }
        }
    }
    for (id, ds) in wanted {
        if running.contains_key(&id) {
            continue;
        }
        let (stop, stopped) = watch::channel(false);
        let fingerprint = fingerprint(&ds);
        let predecessor = predecessors.remove(&id);
        let task = tokio::spawn(source_task(app.clone(), ds, stopped, predecessor));
        running.insert(
            id,
            Running {
                fingerprint,
                stop,
                task,
            },
        );
    }
}

fn current_state(ds: &DataSource) -> ConnectorState {
    ConnectorState {
        status: ds.status,
        tag_count: ds.tag_count,
        last_error: ds.last_error.clone(),
    }
}

/// One source: its connector, the writes of its points, the records of its state.
async fn source_task(
    app: App,
    ds: DataSource,
    mut stop: watch::Receiver<bool>,
    predecessor: Option<JoinHandle<()>>,
) {
    if let Some(p) = predecessor {
        let _ = p.await;
    }
    // Counted while it runs: a region migration waits for the organization's to stop.
    let _running = app.regional().connector_started(&ds.org_id);
    // What is recorded now (the predecessor may have changed it since `ds` was read).
    let mut recorded = match app.store().data_source(&ds.org_id, &ds.id).await {
        Ok(now) => current_state(&now),
        Err(_) => current_state(&ds),
    };
    let protocol =
        match Protocol::from_config(ds.source_type, &ds.config, &app.config().connectors_pki_dir) {
            Ok(p) => p,
            Err(e) => {
                let failed = ConnectorState {
                    status: DataSourceStatus::Disconnected,
                    tag_count: 0,
                    last_error: Some(e.to_string()),
                };
                record(&app, &ds, &mut recorded, failed).await;
                return;
            }
        };
    let sink = Sink::new(&ds.id);
    let mut conn = sink.state();
    let (stop_connector, connector_stopped) = watch::channel(false);
    let connector = tokio::spawn(plantd_connectors::run(
        protocol,
        sink.clone(),
        connector_stopped,
    ));
    let mut writer = PointWriter::new(&app, &ds).await;
    // The first tick is at once: it records "connecting".
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = sink.points_ready() => {
                tokio::time::sleep(FLUSH_DELAY).await;
                writer.write(sink.take_points(), sink.take_dropped()).await;
                let described = sink.take_descriptions();
                if !described.is_empty() {
                    app.record_device_tags(&ds.org_id, &described).await;
                }
            }
            r = conn.changed() => {
                if r.is_err() {
                    break;
                }
            }
            _ = tick.tick() => {
                writer.write(sink.take_points(), sink.take_dropped()).await;
            }
            _ = stop.changed() => break,
        }
        let wanted = desired(&conn.borrow_and_update(), writer.problem.as_deref());
        record(&app, &ds, &mut recorded, wanted).await;
    }
    let _ = stop_connector.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(5), connector).await;
    // What was read before the stop is kept.
    writer.write(sink.take_points(), sink.take_dropped()).await;
    let still_there = app.store().data_source(&ds.org_id, &ds.id).await.is_ok();
    if still_there {
        let last = ConnectorState {
            status: DataSourceStatus::Disconnected,
            tag_count: recorded.tag_count,
            last_error: Some(
                "connector stopped (restarting with new settings, or the service is stopping)"
                    .into(),
            ),
        };
        record(&app, &ds, &mut recorded, last).await;
    }
}

fn desired(conn: &ConnectionState, ingest_problem: Option<&str>) -> ConnectorState {
    ConnectorState {
        status: if conn.connected {
            DataSourceStatus::Connected
        } else {
            DataSourceStatus::Disconnected
        },
        tag_count: conn.tag_count as i64,
        last_error: conn
            .error
            .clone()
            .or_else(|| ingest_problem.map(str::to_string)),
    }
}

async fn record(app: &App, ds: &DataSource, recorded: &mut ConnectorState, wanted: ConnectorState) {
    if *recorded == wanted {
        return;
    }
    if recorded.status != DataSourceStatus::Connected
        && wanted.status == DataSourceStatus::Connected
    {
        metrics::counter!("plantd_connector_connects_total").increment(1);
    }
    match app
        .store()
        .set_connector_state(&ds.org_id, &ds.id, &wanted)
        .await
    {
        Ok(()) => *recorded = wanted,
        Err(e) => {
            tracing::warn!(source = %ds.id, error = %plantd_model::error_chain(&e), "cannot record connector state")
        }
    }
}

/// Writes a source's points through ingest ([`App::ingest`], as the connector: no audit record
/// per batch), in writes of at most [`MAX_WRITE`], under the organization's tier limits. Points
/// that fail ingest's checks are left out first, so one bad point does not refuse the rest.
struct PointWriter {
    app: App,
    /// The connector as ingest's caller: the source's organization, its tier (read again every
    /// minute) and `write:telemetry`.
    caller: Caller,
    tier_read_at: std::time::Instant,
    /// The latest reason points were not stored, cleared by a clean write.
    problem: Option<String>,
}

impl PointWriter {
    async fn new(app: &App, ds: &DataSource) -> Self {
        let tier = app
            .store()
            .org(&ds.org_id)
            .await
            .map(|o| o.tier)
            .unwrap_or(plantd_model::Tier::Trial);
        Self {
            app: app.clone(),
            caller: Caller {
                credential: Credential::Connector {
                    data_source_id: ds.id.clone(),
                },
                org_id: ds.org_id.clone(),
                user_id: None,
                scopes: vec![plantd_model::Scope::WriteTelemetry],
                tier,
            },
            tier_read_at: std::time::Instant::now(),
            problem: None,
        }
    }

    async fn write(&mut self, mut points: Vec<Point>, dropped: u64) {
        if points.is_empty() && dropped == 0 {
            return;
        }
        if self.tier_read_at.elapsed() > Duration::from_secs(60) {
            if let Ok(o) = self.app.store().org(&self.caller.org_id).await {
                self.caller.tier = o.tier;
            }
            self.tier_read_at = std::time::Instant::now();
        }
        let now = Timestamp::now();
        let oldest = self.app.oldest_accepted(now);
        let before = points.len();
        let mut refused: Option<String> = None;
        points.retain(|p| match check_point(p, now, oldest) {
            Ok(()) => true,
            Err(e) => {
                refused.get_or_insert(e);
                false
            }
        });
        let mut problems = Vec::new();
        if dropped > 0 {
            problems.push(format!(
                "{dropped} points dropped: storage fell behind the connector"
            ));
        }
        if let Some(e) = refused {
            problems.push(format!("{} points not stored: {e}", before - points.len()));
        }
        let mut not_stored = 0usize;
        let mut why = None;
        points.sort_by(|a, b| {
            (&a.asset_id, &a.tag_name, a.timestamp).cmp(&(&b.asset_id, &b.tag_name, b.timestamp))
        });
        for chunk in points.chunks(MAX_WRITE) {
            let result = self
                .app
                .ingest(&self.caller, Batch::Points(chunk.to_vec()), None)
                .await;
            if let Err(e) = result {
                not_stored += chunk.len();
                why = Some(match e {
                    AppError::LimitReached { message, .. } => message,
                    other => plantd_model::error_chain(&other),
                });
            }
        }
        if let Some(why) = why {
            tracing::warn!(org = %self.caller.org_id, not_stored, %why, "connector points not stored");
            problems.push(format!("{not_stored} points not stored: {why}"));
        }
        self.problem = (!problems.is_empty()).then(|| problems.join("; "));
    }
}
