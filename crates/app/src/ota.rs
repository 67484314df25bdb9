//! OTA deployments (SPEC 2.8, 4.8; issue 29; packages are `ota_packages.rs`): deployments
//! in phases with failure thresholds, the device reports of SPEC 3 rule 2 that move each device
//! through its steps, and the deployment engine: a worker that starts phases, fails devices that
//! do not answer in time, stops a phase above its threshold and rolls back. Every transition is
//! a store transaction conditional on the status it read, so several nodes may run the engine.

use plantd_model::Timestamp;
use plantd_model::audit::{ActorType, AuditEvent};
use plantd_model::event::EventType;
use plantd_model::ota::{
    self, Deployment, DeploymentDevice, DeploymentStatus, DeviceState, OtaReport, PackageStatus,
    Phase, Step, Strategy, Targets,
};
use plantd_model::page::{Page, Paged};
use plantd_model::validation::Validator;
use plantd_store::{DeviceFilter, NewDeployment, OtaCommand, ReportUpdate, StoreError};
use serde::Deserialize;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

use crate::access::{Actor, AuditTrail, CallFacts, CallOutcome};
use crate::app::App;
use crate::device_channel::DeviceSession;
use crate::error::{AppError, AppResult};
use crate::events::Event;

/// A device not done this long after it was told has failed, unless the deployment says
/// otherwise (`device_timeout_seconds`, 60 s to 7 days).
pub const DEFAULT_DEVICE_TIMEOUT: Duration = Duration::from_secs(600);
const MAX_DEVICE_TIMEOUT_SECS: u64 = 7 * 86_400;
const MIN_DEVICE_TIMEOUT_SECS: u64 = 1;
/// How often the engine looks at active deployments (and at once after a device's report).
const ENGINE_TICK: Duration = Duration::from_secs(1);
/// How often a running deployment's group or tags are read again for devices that joined.
const JOIN_CHECK_TICKS: u64 = 5;
const OTA_WORKER: &str = "ota";
/// The update command a device receives on its command topic.
pub const UPDATE_COMMAND: &str = "ota.update";
/// The rollback command.
pub const ROLLBACK_COMMAND: &str = "ota.rollback";

/// A deployment request (SPEC 2.8, and the settings docs/api.md describes).
#[derive(Clone, Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewDeploymentRequest {
    pub name: String,
    pub package_id: String,
    pub targets: Targets,
    /// `phased` (default) or `all_at_once`.
    #[serde(default)]
    pub strategy: Option<Strategy>,
    /// Automatic rollback when a phase crosses its threshold (default true).
    #[serde(default)]
    pub rollback_enabled: Option<bool>,
    /// Phased only; default 10%, 50%, 100% with a 20% failure threshold each.
    #[serde(default)]
    pub phases: Option<Vec<Phase>>,
    /// All at once only: its one phase's threshold (default 20).
    #[serde(default)]
    pub failure_threshold_percent: Option<f64>,
    /// Default 600 (10 minutes).
    #[serde(default)]
    pub device_timeout_seconds: Option<u64>,
    /// Default true: devices joining the group (or gaining the tags) while it runs are
    /// updated in its last phase.
    #[serde(default)]
    pub include_new_devices: Option<bool>,
    /// Start later (default: at once).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub start_at: Option<Timestamp>,
}

impl App {
    /// Creates a deployment of a released package to its targets, split into phases; it starts
    /// at `start_at` (at once without one).
    pub async fn create_deployment(
        &self,
        org_id: &str,
        new: NewDeploymentRequest,
    ) -> AppResult<Deployment> {
        let strategy = new.strategy.unwrap_or(Strategy::Phased);
        let mut v = Validator::new();
        v.text("name", new.name.trim(), 200);
        let phases = match strategy {
            Strategy::Phased => {
                v.check(
                    new.failure_threshold_percent.is_none(),
                    "failure_threshold_percent",
                    "applies to all_at_once; a phased deployment sets it per phase",
                );
                new.phases.clone().unwrap_or_else(ota::default_phases)
            }
            Strategy::AllAtOnce => {
                v.check(
                    new.phases.is_none(),
                    "phases",
                    "an all_at_once deployment has no phases",
                );
                let t = new
                    .failure_threshold_percent
                    .unwrap_or(ota::DEFAULT_FAILURE_THRESHOLD);
                v.check(
                    t.is_finite() && (0.0..=100.0).contains(&t),
                    "failure_threshold_percent",
                    "must be between 0 and 100",
                );
                ota::all_at_once(t)
            }
        };
        ota::check_phases(&mut v, &phases);
        let timeout = new
            .device_timeout_seconds
            .unwrap_or(DEFAULT_DEVICE_TIMEOUT.as_secs());
        v.check(
            (MIN_DEVICE_TIMEOUT_SECS..=MAX_DEVICE_TIMEOUT_SECS).contains(&timeout),
            "device_timeout_seconds",
            format!("must be between {MIN_DEVICE_TIMEOUT_SECS} and {MAX_DEVICE_TIMEOUT_SECS}"),
        );
        match &new.targets {
            Targets::Group { group_id } => v.check(
                !group_id.trim().is_empty(),
                "targets.group_id",
                "is required",
            ),
            Targets::Devices { device_ids } => v.check(
                (1..=10_000).contains(&device_ids.len()),
                "targets.device_ids",
                "must name 1 to 10000 devices",
            ),
            Targets::Tags { tags } => v.check(
                (1..=20).contains(&tags.len()) && tags.iter().all(|t| !t.trim().is_empty()),
                "targets.tags",
                "must name 1 to 20 tags",
            ),
        }
        v.finish()?;
        let package = self
            .store()
            .package(org_id, &new.package_id)
            .await
            .map_err(|e| match e {
                StoreError::NotFound => AppError::invalid("package_id", "no such package"),
                e => e.into(),
            })?;
        if package.status != PackageStatus::Released {
            return Err(AppError::Refused {
                code: "package_not_released",
                message: "only released packages can be deployed; release it first".into(),
            });
        }
        let devices = self.target_devices(org_id, &new.targets).await?;
        if devices.is_empty() {
            return Err(AppError::invalid(
                "targets",
                "no device matches the targets",
            ));
        }
        let busy = self.busy_devices(&devices, None).await?;
        if !busy.is_empty() {
            let shown: Vec<&str> = busy.iter().take(10).map(String::as_str).collect();
            return Err(AppError::Refused {
                code: "devices_in_active_deployment",
                message: format!(
                    "{} target device(s) take part in another active deployment (a device updates in one at a time): {}{}",
                    busy.len(),
                    shown.join(", "),
                    if busy.len() > shown.len() {
                        ", ..."
                    } else {
                        ""
                    }
                ),
            });
        }
        let sizes = ota::phase_sizes(&phases, devices.len());
        let mut assigned = Vec::with_capacity(devices.len());
        let mut it = devices.into_iter();
        for (i, n) in sizes.iter().enumerate() {
            for d in it.by_ref().take(*n) {
                assigned.push((d, i as u32 + 1));
            }
        }
        let now = Timestamp::now();
        let deployment = Deployment {
            id: plantd_model::new_id(),
            org_id: org_id.to_string(),
            name: new.name.trim().to_string(),
            package_id: package.id,
            targets: new.targets,
            strategy,
            phases,
            rollback_enabled: new.rollback_enabled.unwrap_or(true),
            include_new_devices: new.include_new_devices.unwrap_or(true),
            device_timeout_seconds: timeout,
            status: DeploymentStatus::Scheduled,
            current_phase: 0,
            resume_at: new.start_at.filter(|t| *t > now),
            reason: None,
            device_counts: Default::default(),
            phase_progress: Vec::new(),
            created_at: now,
            updated_at: now,
            started_at: None,
            finished_at: None,
        };
        let created = self
            .store()
            .create_deployment(&NewDeployment {
                deployment,
                devices: assigned,
            })
            .await?;
        self.publish_ota(EventType::OtaDeploymentCreated, &created);
        self.wake_ota();
        Ok(created)
    }

    /// The organization's devices a deployment's targets name: a group's members, devices
    /// carrying all the tags, or the devices listed (each must be the organization's).
    async fn target_devices(&self, org_id: &str, targets: &Targets) -> AppResult<Vec<String>> {
        match targets {
            Targets::Group { group_id } => {
                self.store()
                    .group(org_id, group_id)
                    .await
                    .map_err(|e| match e {
                        StoreError::NotFound => {
                            AppError::invalid("targets.group_id", "no such device group")
                        }
                        e => e.into(),
                    })?;
                let filter = DeviceFilter {
                    group_id: Some(group_id.clone()),
                    ..Default::default()
                };
                Ok(self.store().device_ids(org_id, &filter).await?)
            }
            Targets::Tags { tags } => {
                let filter = DeviceFilter {
                    tags: tags.iter().map(|t| t.trim().to_string()).collect(),
                    ..Default::default()
                };
                Ok(self.store().device_ids(org_id, &filter).await?)
            }
            Targets::Devices { device_ids } => {
                let mut wanted: Vec<String> = device_ids.clone();
                wanted.sort();
                wanted.dedup();
                let mut found = Vec::with_capacity(wanted.len());
                for chunk in wanted.chunks(500) {
                    found.extend(self.store().org_device_ids(org_id, chunk).await?);
                }
                if let Some(missing) = wanted.iter().find(|d| !found.contains(d)) {
                    return Err(AppError::invalid(
                        "targets.device_ids",
                        format!("no such device: {missing}"),
                    ));
                }
                Ok(found)
            }
        }
    }

    async fn busy_devices(&self, ids: &[String], except: Option<&str>) -> AppResult<Vec<String>> {
        let mut busy = Vec::new();
        for chunk in ids.chunks(500) {
            busy.extend(
                self.store()
                    .devices_in_active_deployments(chunk, except)
                    .await?,
            );
        }
        Ok(busy)
    }

    pub async fn deployments(
        &self,
        org_id: &str,
        status: Option<DeploymentStatus>,
        page: Page,
    ) -> AppResult<Paged<Deployment>> {
        let (items, total) = self
            .store()
            .deployments(org_id, status, (page.limit(), page.offset()))
            .await?;
        Ok(Paged { items, total })
    }

    pub async fn deployment(&self, org_id: &str, id: &str) -> AppResult<Deployment> {
        self.store()
            .deployment(org_id, id)
            .await
            .map_err(AppError::missing("deployment"))
    }

    pub async fn deployment_devices(
        &self,
        org_id: &str,
        id: &str,
        state: Option<DeviceState>,
        page: Page,
    ) -> AppResult<Paged<DeploymentDevice>> {
        self.deployment(org_id, id).await?;
        let (items, total) = self
            .store()
            .deployment_devices(org_id, id, state, (page.limit(), page.offset()))
            .await?;
        Ok(Paged { items, total })
    }

    /// Cancels an active deployment (409 `deployment_finished` once it is final).
    pub async fn cancel_deployment(&self, org_id: &str, id: &str) -> AppResult<Deployment> {
        loop {
            let d = self.deployment(org_id, id).await?;
            if !d.status.is_active() {
                return Err(finished(&d, "cancelled"));
            }
            if let Some(done) = self.store().cancel_deployment(&d).await? {
                self.publish_ota(EventType::OtaDeploymentCancelled, &done);
                return Ok(done);
            }
        }
    }

    /// Rolls a deployment back: every device that installed the package is told to return to
    /// its previous version. Refused (409 `deployment_finished`) once rolled back or cancelled.
    pub async fn roll_back_deployment(&self, org_id: &str, id: &str) -> AppResult<Deployment> {
        loop {
            let d = self.deployment(org_id, id).await?;
            if matches!(
                d.status,
                DeploymentStatus::RolledBack | DeploymentStatus::Cancelled
            ) {
                return Err(finished(&d, "rolled back"));
            }
            let command = self.rollback_command(&d).await?;
            if let Some((done, told)) = self.store().roll_back_deployment(&d, &command).await? {
                self.commands_queued(told);
                self.publish_ota(EventType::OtaDeploymentRolledBack, &done);
                return Ok(done);
            }
        }
    }

    /// Starts the next phase of a deployment paused for a person (409 `deployment_not_paused`
    /// otherwise).
    pub async fn continue_deployment(&self, org_id: &str, id: &str) -> AppResult<Deployment> {
        let d = self.deployment(org_id, id).await?;
        if d.status != DeploymentStatus::Paused {
            return Err(AppError::Refused {
                code: "deployment_not_paused",
                message: format!("the deployment is {}, not paused", d.status.as_str()),
            });
        }
        let command = self.update_command(&d).await?;
        match self.store().continue_deployment(&d, &command).await? {
            Some((done, told)) => {
                self.commands_queued(told);
                self.publish_ota(EventType::OtaDeploymentPhaseStarted, &done);
                Ok(done)
            }
            None => Err(AppError::Refused {
                code: "deployment_not_paused",
                message: "the deployment moved on meanwhile".into(),
            }),
        }
    }

    /// A device's report of an update step (its `ota` topic). A stale or out-of-turn report
    /// changes nothing.
    pub async fn device_ota_report(
        &self,
        session: &DeviceSession,
        payload: &[u8],
    ) -> AppResult<()> {
        self.device_seen(session).await;
        let report: OtaReport = plantd_model::json::parse(payload)?;
        let mut v = Validator::new();
        if let Some(m) = &report.message {
            v.check(
                m.chars().count() <= 1000,
                "message",
                "must be at most 1000 characters",
            );
        }
        v.check(
            report.progress_percent.is_none_or(|p| p <= 100),
            "progress_percent",
            "must be between 0 and 100",
        );
        v.finish()?;
        for _ in 0..3 {
            let (from, d) = self
                .store()
                .deployment_device_state(&report.deployment_id, &session.device_id)
                .await
                .map_err(AppError::missing("deployment of this device"))?;
            let Some(to) = ota::next_state(from, report.state) else {
                tracing::debug!(device = %session.device_id, deployment = %d.id, from = from.as_str(), "an OTA report out of turn was ignored");
                return Ok(());
            };
            // A device that installs the package once its deployment was rolled back returns
            // to its previous version at once (the store decides, under the deployment's lock).
            let rollback = if to == DeviceState::Succeeded {
                Some(self.rollback_command(&d).await?)
            } else {
                None
            };
            let update = ReportUpdate {
                deployment_id: d.id.clone(),
                device_id: session.device_id.clone(),
                from,
                to,
                message: report.message.clone(),
                progress_percent: report.progress_percent,
                rollback,
            };
            if let Some(rolled) = self.store().record_ota_report(&d, &update).await? {
                if rolled {
                    self.commands_queued(vec![session.device_id.clone()]);
                }
                if to.is_final() {
                    self.wake_ota();
                }
                return Ok(());
            }
        }
        Err(AppError::Conflict(
            "the device's state kept changing; report again".into(),
        ))
    }

    async fn update_command(&self, d: &Deployment) -> AppResult<OtaCommand> {
        let p = self
            .store()
            .package(&d.org_id, &d.package_id)
            .await
            .map_err(AppError::missing("package"))?;
        let params = serde_json::json!({
            "deployment_id": d.id,
            "package": {
                "id": p.id,
                "name": p.name,
                "version": p.version,
                "device_type": p.device_type,
                "size_bytes": p.size_bytes,
                "sha256": p.sha256,
                "signature": p.signature,
                "manifest": p.manifest,
            },
            "download_url": format!("{}/v1/ota/packages/{}/download", self.issuer(), p.id),
            "public_key_url": format!("{}/v1/ota/public-key", self.issuer()),
        });
        Ok(OtaCommand {
            command: UPDATE_COMMAND,
            params,
            expires_at: deadline(d),
        })
    }

    async fn rollback_command(&self, d: &Deployment) -> AppResult<OtaCommand> {
        let p = self
            .store()
            .package(&d.org_id, &d.package_id)
            .await
            .map_err(AppError::missing("package"))?;
        Ok(OtaCommand {
            command: ROLLBACK_COMMAND,
            params: serde_json::json!({
                "deployment_id": d.id,
                "package_id": p.id,
                "version": p.version,
            }),
            expires_at: deadline(d),
        })
    }

    fn publish_ota(&self, event: EventType, d: &Deployment) {
        self.events().publish(Event::Ota {
            org_id: d.org_id.as_str().into(),
            event,
            deployment: Arc::new(d.clone()),
        });
    }

    fn commands_queued(&self, device_ids: Vec<String>) {
        if !device_ids.is_empty() {
            self.events().publish(Event::CommandQueued { device_ids });
        }
    }

    /// Wakes the deployment engine (a device finished, a deployment was created).
    fn wake_ota(&self) {
        self.ota_wake().notify_one();
    }

    /// The engine's own change of a deployment, audited as the platform's act.
    async fn audit_engine(&self, d: &Deployment, what: &str) {
        let trail = AuditTrail::new(
            CallFacts {
                method: "OTA".into(),
                operation: format!("deployment {what}"),
                client_ip: None,
                user_agent: None,
                request_id: plantd_model::new_id(),
            },
            AuditEvent::OtaDeploymentAdvance,
        );
        trail.act_as(Actor {
            org_id: Some(d.org_id.clone()),
            actor_type: ActorType::Platform,
            actor_id: None,
            user_id: None,
        });
        trail.resource(&d.id);
        self.finish_audit(
            &trail,
            CallOutcome {
                status: CallOutcome::SUCCESS,
                error_code: None,
            },
        )
        .await;
    }

    /// One pass of the engine over every active deployment.
    async fn ota_pass(&self, check_joins: bool) -> AppResult<()> {
        let now = Timestamp::now();
        self.store().time_out_ota_devices(now).await?;
        for d in self.store().active_deployments().await? {
            if let Err(e) = self.advance(d, check_joins, now).await {
                tracing::warn!(error = %plantd_model::error_chain(&e), "an OTA deployment could not advance; retrying");
            }
        }
        Ok(())
    }

    async fn advance(&self, d: Deployment, check_joins: bool, now: Timestamp) -> AppResult<()> {
        if check_joins && d.include_new_devices && d.targets.can_grow() {
            self.add_joined(&d).await?;
        }
        // Devices pending in later phases wait for their phase; only those that joined a
        // started phase are told here.
        if d.status == DeploymentStatus::InProgress
            && d.device_counts
                .get(&DeviceState::Pending)
                .copied()
                .unwrap_or(0)
                > 0
            && self.store().has_joined(&d).await?
        {
            let command = self.update_command(&d).await?;
            let told = self.store().notify_joined(&d, &command).await?;
            self.commands_queued(told);
        }
        let step = ota::decide(
            d.status,
            d.current_phase,
            d.resume_at,
            &d.phases,
            &d.phase_counts(),
            now,
        );
        match step {
            Step::Wait => {}
            Step::StartPhase(n) => {
                let command = self.update_command(&d).await?;
                if let Some((done, told)) = self.store().start_phase(&d, n, &command).await? {
                    self.commands_queued(told);
                    self.publish_ota(EventType::OtaDeploymentPhaseStarted, &done);
                    self.audit_engine(&done, &format!("phase {n} started"))
                        .await;
                }
            }
            Step::Pause(until) => {
                if let Some(done) = self.store().pause_deployment(&d, until).await? {
                    self.publish_ota(EventType::OtaDeploymentPaused, &done);
                    self.audit_engine(&done, "paused").await;
                }
            }
            Step::Complete => {
                if let Some(done) = self.store().complete_deployment(&d).await? {
                    self.publish_ota(EventType::OtaDeploymentCompleted, &done);
                    self.audit_engine(&done, "completed").await;
                }
            }
            Step::Abort(reason) => {
                let rollback = if d.rollback_enabled {
                    Some(self.rollback_command(&d).await?)
                } else {
                    None
                };
                if let Some((done, told)) = self
                    .store()
                    .abort_deployment(&d, &reason, rollback.as_ref())
                    .await?
                {
                    tracing::info!(deployment = %done.id, %reason, "an OTA deployment stopped");
                    self.commands_queued(told);
                    self.publish_ota(EventType::OtaDeploymentFailed, &done);
                    if rollback.is_some() {
                        self.publish_ota(EventType::OtaDeploymentRolledBack, &done);
                    }
                    self.audit_engine(&done, "stopped above its failure threshold")
                        .await;
                }
            }
        }
        Ok(())
    }

    /// Devices that joined the group (or gained the tags) since the deployment was created
    /// join its last phase, unless they take part in another active deployment.
    async fn add_joined(&self, d: &Deployment) -> AppResult<()> {
        let now = self.target_devices(&d.org_id, &d.targets).await?;
        let known = self.store().deployment_device_ids(&d.id).await?;
        let known: std::collections::HashSet<&String> = known.iter().collect();
        let joined: Vec<String> = now.into_iter().filter(|x| !known.contains(x)).collect();
        if joined.is_empty() {
            return Ok(());
        }
        let busy = self.busy_devices(&joined, Some(&d.id)).await?;
        let last = d.phases.len() as u32;
        let add: Vec<(String, u32)> = joined
            .into_iter()
            .filter(|x| !busy.contains(x))
            .map(|x| (x, last))
            .collect();
        if !add.is_empty() {
            self.store()
                .add_deployment_devices(&d.id, &d.org_id, &add)
                .await?;
        }
        Ok(())
    }
}

fn deadline(d: &Deployment) -> Timestamp {
    Timestamp::from_millis(Timestamp::now().millis() + d.device_timeout_seconds as i64 * 1000)
}

fn finished(d: &Deployment, what: &str) -> AppError {
    AppError::Refused {
        code: "deployment_finished",
        message: format!(
            "the deployment is {} and cannot be {what}",
            d.status.as_str()
        ),
    }
}

/// The deployment engine: every second, and at once when a device finishes or a deployment
/// is created.
pub(crate) async fn run(app: App, mut stop: watch::Receiver<bool>) {
    app.workers().register(OTA_WORKER);
    let mut ticks: u64 = 0;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(ENGINE_TICK) => {}
            _ = app.ota_wake().notified() => {}
            _ = stop.changed() => return,
        }
        ticks += 1;
        let result = app.ota_pass(ticks.is_multiple_of(JOIN_CHECK_TICKS)).await;
        if let Err(e) = &result {
            tracing::warn!(error = %plantd_model::error_chain(e), "OTA pass failed; retrying");
        }
        app.workers().report(
            OTA_WORKER,
            result.map_err(|e| plantd_model::error_chain(&e)),
        );
    }
}
