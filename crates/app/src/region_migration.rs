//! Region migrations (SPEC 3 rule 1, 4.14; issue 33): an Enterprise organization moves its
//! resident data to another served region. `PUT /api/v1/organizations/current/region`
//! schedules it; at its time the source region's migration worker (one node: the migration
//! lease) opens the read-only window, publishes the copy (crate module `migration_copy`), asks
//! the target's instance over NATS to write and count it, compares the figures, keeps the
//! window open at least `min_window`, switches the primary region (replicated to every region),
//! stops the organization's connectors here and asks the target to write the points held
//! during the window and serve. The source's copy is deleted `delete_source_after` later. A
//! migration that fails at any step before the switch leaves the source as it was: the window
//! closes, the held points are written here, the target deletes what it received.
//!
//! While the window is open every write of the organization answers 409 (`Retry-After` on
//! ingest), the platform's connectors and models keep reading: their points are evaluated by
//! the alert rules and shown live as always, and published to the migration's held subject.

use async_nats::jetstream;
use futures_util::StreamExt;
use plantd_model::Timestamp;
use plantd_model::region::RegionId;
use plantd_model::telemetry::Point;
use plantd_model::tier::Tier;
use plantd_store::RegionMigration;
use serde::Serialize;
use std::time::{Duration, Instant};
use tokio::sync::watch;

use crate::app::App;
use crate::caller::Caller;
use crate::error::{AppError, AppResult};
use crate::migration_copy::{self, Piece, PointsPiece, Publisher};
use crate::migration_target::{
    Reply, Request, answer, ask, delete_copy, not_resident_here, purge, request_subject, send_copy,
};
use crate::replication::safe_name;

const WORKER: &str = "region migrations";
/// How long the target may take to write and count a copy.
const IMPORT_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// How long the target may take to write the held points, and to delete a copy.
const FINISH_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// How long the source waits for the organization's connectors to stop after the switch.
const CONNECTORS_STOP: Duration = Duration::from_secs(30);
/// The secondary copies due are looked for this often.
const STANDBY_ROUNDS: Duration = Duration::from_secs(5);
/// A client told to wait is told this many seconds.
const RETRY_AFTER_SECS: u64 = 5;

/// `PUT /api/v1/organizations/current/region`'s answer.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct MigrationScheduled {
    pub id: String,
    /// `scheduled`.
    pub status: &'static str,
    #[schema(value_type = String, example = "eu-west")]
    pub target_region: RegionId,
    pub migration_time: Timestamp,
    /// SPEC 4.14's estimate for the organization's size: `1-2 hours` under 100 GB, `4-8 hours`
    /// to 1 TB, else `contact support`.
    pub estimate: &'static str,
}

/// An organization's newest migration, as its region view shows it.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct MigrationView {
    pub id: String,
    /// `scheduled`, `running`, `completed` or `failed`.
    pub status: String,
    pub source_region: String,
    pub target_region: String,
    pub migration_time: Timestamp,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
    /// 0 to 100.
    pub progress: i64,
    /// Why it failed.
    pub error: Option<String>,
    /// When the source region's copy is (or was) deleted, once completed.
    pub source_deleted_after: Option<Timestamp>,
}

impl From<RegionMigration> for MigrationView {
    fn from(m: RegionMigration) -> Self {
        Self {
            id: m.id,
            status: m.status,
            source_region: m.source_region,
            target_region: m.target_region,
            migration_time: m.migration_time,
            started_at: m.started_at,
            finished_at: m.finished_at,
            progress: m.progress,
            error: m.error,
            source_deleted_after: m.delete_after,
        }
    }
}

/// A write refused during a migration's read-only window.
pub(crate) fn migration_refusal() -> AppError {
    AppError::Migrating {
        message: "the organization is moving to another region: its data is read-only until the migration ends".into(),
        retry_after: RETRY_AFTER_SECS,
    }
}

fn estimate_of(bytes: u64) -> &'static str {
    const GB: u64 = 1_000_000_000;
    if bytes < 100 * GB {
        "1-2 hours"
    } else if bytes <= 1000 * GB {
        "4-8 hours"
    } else {
        "contact support"
    }
}

impl App {
    /// Schedules the caller's organization's move to `region` at `migration_time` (now when
    /// absent or past). Enterprise only; the region must be served and not the current one.
    pub async fn schedule_region_migration(
        &self,
        caller: &Caller,
        region: &str,
        migration_time: Option<Timestamp>,
    ) -> AppResult<MigrationScheduled> {
        if caller.tier != Tier::Enterprise {
            return Err(AppError::Forbidden(format!(
                "moving an organization to another region is part of the Enterprise plan; this organization is on the {} plan",
                caller.tier
            )));
        }
        let target: RegionId = region.parse().map_err(|_| {
            AppError::invalid(
                "region",
                format!(
                    "unknown region '{region}': one of {}",
                    RegionId::ALL.map(|r| r.as_str()).join(", ")
                ),
            )
        })?;
        let settings = self.region_settings();
        let served = settings.served();
        if !served.contains(&target) {
            return Err(AppError::Conflict(format!(
                "region: {target} is not served by this deployment (served: {})",
                served
                    .iter()
                    .map(|r| r.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let (primary, _) = self.org_primary_region(&caller.org_id).await?;
        if primary == target {
            return Err(AppError::Conflict(format!(
                "region: the organization is already in {target}"
            )));
        }
        if settings.nats_url.is_none() {
            return Err(AppError::Conflict(
                "moving between regions needs the deployment's NATS server (serve --nats-url)"
                    .into(),
            ));
        }
        let now = Timestamp::now();
        let at = migration_time.map_or(now, |t| t.max(now));
        let bytes = self.tsdb().storage_bytes(&caller.org_id).await?;
        let m = self
            .store()
            .create_region_migration(&caller.org_id, primary.as_str(), target.as_str(), at)
            .await?;
        self.regional().migration_wake().notify_one();
        Ok(MigrationScheduled {
            id: m.id,
            status: "scheduled",
            target_region: target,
            migration_time: at,
            estimate: estimate_of(bytes),
        })
    }

    /// The organization's newest migration, if any.
    pub async fn org_migration(&self, org_id: &str) -> AppResult<Option<MigrationView>> {
        Ok(self
            .store()
            .latest_region_migration(org_id)
            .await?
            .map(MigrationView::from))
    }

    /// The migration whose read-only window is open for the organization on this node.
    pub(crate) fn migration_window(&self, org_id: &str) -> Option<String> {
        self.regional().window(org_id)
    }

    /// The refusal of a write while the window is open.
    pub fn migrating(&self, org_id: &str) -> Option<AppError> {
        self.migration_window(org_id).map(|_| migration_refusal())
    }

    /// Keeps a platform connector's points read during the window: published to the
    /// migration's held subject (durable in JetStream before this returns).
    pub(crate) async fn hold_points(&self, migration_id: &str, points: &[Point]) -> AppResult<()> {
        let js = self.regional().context().ok_or_else(|| {
            AppError::Conflict("the deployment's NATS server is not reachable".into())
        })?;
        let subject =
            migration_copy::held_subject(&self.region_settings().deployment, migration_id);
        let mut out = Publisher::new(js, subject);
        let fail = |e: String| AppError::internal("hold points during a region migration", e);
        for piece in PointsPiece::of_points(points) {
            out.piece(&Piece::Points(piece)).await.map_err(fail)?;
        }
        out.flush().await.map_err(fail)
    }
}

/// The migration worker: answers the other regions' requests (this region as a target) and
/// runs this region's due migrations (as the source). Without NATS it ends.
pub(crate) async fn run(app: App, mut stop: watch::Receiver<bool>) {
    let settings = app.region_settings().clone();
    if settings.nats_url.is_none() {
        return;
    }
    app.workers().register(WORKER);
    // The replication worker connects; this one uses its connection.
    let js = loop {
        if let Some(js) = app.regional().context() {
            break js;
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(250)) => {}
            _ = stop.changed() => return,
        }
    };
    let client = js.client();
    let subject = request_subject(&settings.deployment, settings.region);
    let queue = format!(
        "plantd-{}-{}",
        safe_name(&settings.deployment),
        settings.region
    );
    let mut requests = match client.queue_subscribe(subject, queue).await {
        Ok(s) => s,
        Err(e) => {
            app.workers()
                .report(WORKER, Err(format!("subscribe to migration requests: {e}")));
            return;
        }
    };
    if let Err(e) = migration_copy::migration_stream(&js, &settings.deployment).await {
        app.workers().report(WORKER, Err(e));
    }
    // Requests are answered beside the source's work, never behind it: two regions copying to
    // each other at once would otherwise wait for each other.
    let _responder = AbortOnDrop({
        let (app, js) = (app.clone(), js.clone());
        tokio::spawn(async move {
            while let Some(m) = requests.next().await {
                let (app, js) = (app.clone(), js.clone());
                tokio::spawn(async move { answer(&app, &js, m).await });
            }
        })
    });
    let mut lease = None;
    let mut standby_round = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = app.regional().migration_wake().notified() => {}
            _ = stop.changed() => return,
        }
        refresh_windows(&app).await;
        if lease.is_none() {
            match app.store().try_lease(plantd_store::MIGRATION_LEASE).await {
                Ok(Some(l)) => {
                    lease = Some(l);
                    recover_interrupted(&app, &js).await;
                }
                Ok(None) => continue,
                Err(e) => {
                    app.workers()
                        .report(WORKER, Err(plantd_model::error_chain(&e)));
                    continue;
                }
            }
        }
        let due = app
            .store()
            .region_migrations_in("scheduled", Some(Timestamp::now()))
            .await;
        match due {
            Ok(due) => {
                for m in due {
                    migrate(&app, &js, m).await;
                }
                app.workers().report(WORKER, Ok(()));
            }
            Err(e) => app
                .workers()
                .report(WORKER, Err(plantd_model::error_chain(&e))),
        }
        delete_moved_copies(&app).await;
        if standby_round.elapsed() >= STANDBY_ROUNDS {
            crate::standby::round(&app, &js).await;
            standby_round = Instant::now();
        }
    }
}

/// Every node learns the windows open in its region from the database (within a second of the
/// migration node); an organization whose window closed is looked up afresh.
async fn refresh_windows(app: &App) {
    let Ok(running) = app.store().region_migrations_in("running", None).await else {
        return;
    };
    let open: Vec<(String, String)> = running.into_iter().map(|m| (m.org_id, m.id)).collect();
    for org in app.regional().set_windows(open) {
        app.regional().org_regions().forget(|o, _| *o == org);
    }
}

/// Migrations left running by a stopped migration node: failed, as if their copy had failed.
async fn recover_interrupted(app: &App, js: &jetstream::Context) {
    let Ok(running) = app.store().region_migrations_in("running", None).await else {
        return;
    };
    for m in running {
        fail(
            app,
            js,
            &m,
            "interrupted: the source region's migration node stopped".into(),
        )
        .await;
    }
}

async fn migrate(app: &App, js: &jetstream::Context, m: RegionMigration) {
    match app
        .store()
        .start_region_migration(&m.id, Timestamp::now())
        .await
    {
        Ok(true) => {}
        Ok(false) => return,
        Err(e) => {
            tracing::warn!(error = %plantd_model::error_chain(&e), "cannot start a region migration");
            return;
        }
    }
    app.regional().open_window(&m.org_id, &m.id);
    tracing::info!(org = %m.org_id, target = %m.target_region, migration = %m.id, "region migration started: the organization is read-only");
    let opened = Instant::now();
    match copy_and_switch(app, js, &m, opened).await {
        Ok(verified) => {
            let delete_after = Timestamp::from_millis(
                Timestamp::now().millis()
                    + app.region_settings().delete_source_after.as_millis() as i64,
            );
            if let Err(e) = app
                .store()
                .finish_region_migration(&m.id, Ok((verified, delete_after)))
                .await
            {
                tracing::error!(error = %plantd_model::error_chain(&e), "cannot record a completed region migration");
            }
            app.regional().close_window(&m.org_id, &m.id);
            // The secondary copy this region sent is the new primary region's concern now.
            let _ = app.store().forget_standby_copy(&m.org_id, "sent").await;
            purge(
                app,
                js,
                &migration_copy::data_subject(&app.region_settings().deployment, &m.id),
            )
            .await;
            tracing::info!(org = %m.org_id, target = %m.target_region, seconds = opened.elapsed().as_secs_f64(), "region migration completed");
        }
        Err(e) => fail(app, js, &m, e).await,
    }
}

/// Copies, checks, switches. Errors before the switch leave the source as it was.
async fn copy_and_switch(
    app: &App,
    js: &jetstream::Context,
    m: &RegionMigration,
    opened: Instant,
) -> Result<String, String> {
    let target: RegionId = m.target_region.parse()?;
    let deployment = app.region_settings().deployment.clone();
    let progress = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(0));
    let reporter = {
        let (app, id, progress) = (app.clone(), m.id.clone(), progress.clone());
        tokio::spawn(async move {
            let mut last = -1;
            loop {
                let p = progress.load(std::sync::atomic::Ordering::Relaxed);
                if p != last {
                    let _ = app.store().set_region_migration_progress(&id, p).await;
                    last = p;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        })
    };
    let _stop_reporter = AbortOnDrop(reporter);
    let set = |share: f64| {
        progress.store((share * 100.0) as i64, std::sync::atomic::Ordering::Relaxed);
    };
    let import = Request::Import {
        migration_id: m.id.clone(),
        org_id: m.org_id.clone(),
    };
    let (sums, bytes) =
        send_copy(app, js, target, &import, IMPORT_TIMEOUT, &mut |s| set(s)).await?;
    set(0.9);
    let min_window = app.region_settings().min_window;
    if let Some(left) = min_window.checked_sub(opened.elapsed()) {
        tokio::time::sleep(left).await;
    }
    // The switch: from here the organization is served by the target.
    let org = &m.org_id;
    app.store()
        .set_org_primary_region(org, target.as_str())
        .await
        .map_err(|e| plantd_model::error_chain(&e))?;
    app.forget_organization(org);
    let _ = app.store().data_sources_changed(org).await;
    let waited = Instant::now();
    while app.regional().connectors_running(org) > 0 && waited.elapsed() < CONNECTORS_STOP {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let finished = ask(
        js,
        &deployment,
        target,
        &Request::Finish {
            migration_id: m.id.clone(),
            org_id: org.clone(),
        },
        FINISH_TIMEOUT,
    )
    .await;
    let held = match finished {
        Ok(Reply::Finished { held_points }) => held_points,
        other => {
            // Back to the source, as it was.
            let why = match other {
                Ok(Reply::Failed { error }) => error,
                Ok(r) => format!("answered {r:?}"),
                Err(e) => e,
            };
            let _ = app
                .store()
                .set_org_primary_region(org, &m.source_region)
                .await;
            app.forget_organization(org);
            let _ = app.store().data_sources_changed(org).await;
            return Err(format!(
                "{target} could not take the organization over: {why}"
            ));
        }
    };
    let verified = serde_json::json!({
        "tables": sums.tables,
        "points": sums.points,
        "files": sums.files,
        "held_points": held,
        "bytes": bytes,
    });
    Ok(verified.to_string())
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Ends a migration that failed before its switch: recorded, the window closed, the held
/// points written here, the target told to delete what it received.
async fn fail(app: &App, js: &jetstream::Context, m: &RegionMigration, why: String) {
    tracing::warn!(org = %m.org_id, target = %m.target_region, migration = %m.id, error = %why, "region migration failed; the organization stays where it was");
    if let Err(e) = app.store().finish_region_migration(&m.id, Err(why)).await {
        tracing::error!(error = %plantd_model::error_chain(&e), "cannot record a failed region migration");
    }
    app.regional().close_window(&m.org_id, &m.id);
    match migration_copy::write_held(app, js, &m.id, &m.org_id, 0).await {
        Ok((n, _)) if n > 0 => {
            tracing::info!(
                points = n,
                "points held during the failed migration written here"
            )
        }
        Ok(_) => {}
        Err(e) => {
            tracing::error!(error = %e, migration = %m.id, "cannot write the points held during a failed migration; they stay in the migration stream")
        }
    }
    if let Ok(target) = m.target_region.parse::<RegionId>() {
        let deployment = app.region_settings().deployment.clone();
        let abort = Request::Abort {
            migration_id: m.id.clone(),
            org_id: m.org_id.clone(),
        };
        if let Err(e) = ask(js, &deployment, target, &abort, FINISH_TIMEOUT).await {
            tracing::warn!(error = %e, "the target region did not confirm deleting a failed copy");
        }
    }
    purge(
        app,
        js,
        &migration_copy::data_subject(&app.region_settings().deployment, &m.id),
    )
    .await;
}

/// The source's copies whose delay has passed, deleted (unless the organization came back).
async fn delete_moved_copies(app: &App) {
    let Ok(due) = app
        .store()
        .region_migrations_to_delete(Timestamp::now())
        .await
    else {
        return;
    };
    let own = app.region_settings().region;
    for m in due {
        // Kept when it has become the new primary region's secondary copy.
        let standby = matches!(
            app.store().standby_copy(&m.org_id, "held").await,
            Ok(Some(_))
        );
        if !standby && not_resident_here(app, &m.org_id, own).await.is_ok() {
            match delete_copy(app, &m.org_id).await {
                Ok(()) => {
                    tracing::info!(org = %m.org_id, migration = %m.id, "the moved organization's copy in this region is deleted")
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot delete a moved organization's copy; trying again");
                    continue;
                }
            }
        }
        let _ = app
            .store()
            .mark_migration_source_deleted(&m.id, Timestamp::now())
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_follow_the_spec() {
        assert_eq!(estimate_of(0), "1-2 hours");
        assert_eq!(estimate_of(99_000_000_000), "1-2 hours");
        assert_eq!(estimate_of(500_000_000_000), "4-8 hours");
        assert_eq!(estimate_of(2_000_000_000_000), "contact support");
        assert_eq!(
            request_subject("a b", RegionId::EuWest),
            "plantd.a_b.migrate.eu-west"
        );
    }
}
