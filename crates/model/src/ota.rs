//! OTA (SPEC 2.8, 4.8, 3 rule 2): firmware packages with their signed manifest, deployments in
//! phases with failure thresholds, and each target device's state, with the rules that need no
//! storage: the manifest's bytes, how targets split into phases, what a deployment does next,
//! and which step a device's report may move it to. Decisions where SPEC says "not shown" are
//! in docs/api.md ("OTA").

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::Timestamp;
use crate::validation::Validator;

/// A package is uploaded as a `draft`, and `released` once; only released packages deploy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum PackageStatus {
    Draft,
    Released,
}

impl PackageStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            PackageStatus::Draft => "draft",
            PackageStatus::Released => "released",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        [PackageStatus::Draft, PackageStatus::Released]
            .into_iter()
            .find(|x| x.as_str() == s)
    }
}

/// A firmware package as clients see it.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Package {
    pub id: String,
    #[serde(skip)]
    pub org_id: String,
    pub name: String,
    pub version: String,
    pub device_type: String,
    pub release_notes: String,
    pub size_bytes: u64,
    /// SHA-256 of the file, lowercase hex.
    pub sha256: String,
    pub status: PackageStatus,
    /// Base64 of the Ed25519 signature of [`Package::manifest`] by the organization's signing
    /// key (`GET /v1/ota/public-key`).
    pub signature: String,
    /// The signed text, exactly: a device checks the signature over these bytes (UTF-8).
    pub manifest: String,
    pub created_at: Timestamp,
    pub released_at: Option<Timestamp>,
}

/// The first line of every manifest: what the signed bytes are (so that a signature over them
/// can never be taken for a license key's, signed by the same key).
pub const MANIFEST_HEADER: &str = "plantd-ota-manifest-v1";

/// The manifest the platform signs for a package: its id, version, size and SHA-256, one
/// `name=value` line each after the header, each line ending in `\n`.
pub fn manifest(package_id: &str, version: &str, size_bytes: u64, sha256: &str) -> String {
    format!(
        "{MANIFEST_HEADER}\npackage_id={package_id}\nversion={version}\nsize_bytes={size_bytes}\nsha256={sha256}\n"
    )
}

/// Checks the form fields of an upload: a version (1 to 64 printable characters without
/// spaces), a name (1 to 200), a device type (up to 64) and release notes (up to 10,000).
pub fn check_package_fields(
    v: &mut Validator,
    name: &str,
    version: &str,
    device_type: &str,
    notes: &str,
) {
    v.text("version", version, 64);
    v.check(
        version.chars().all(|c| c.is_ascii_graphic()),
        "version",
        "must be printable ASCII without spaces, such as 2.4.1 or 2024.06-rc1",
    );
    v.text("name", name, 200);
    v.check(
        !name.chars().any(char::is_control),
        "name",
        "must not contain control characters",
    );
    v.check(
        device_type.chars().count() <= 64 && !device_type.chars().any(char::is_control),
        "device_type",
        "must be at most 64 characters without control characters",
    );
    v.check(
        notes.chars().count() <= 10_000,
        "release_notes",
        "must be at most 10000 characters",
    );
}

/// Where a deployment is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeploymentStatus {
    /// Created; starts at `start_at` (at once without one).
    Scheduled,
    InProgress,
    /// Between phases: until `resume_at`, or until `POST .../continue`.
    Paused,
    Completed,
    /// A phase crossed its failure threshold and rollback was not enabled.
    Failed,
    Cancelled,
    /// Rolled back: by hand, or automatically when a phase crossed its threshold.
    RolledBack,
}

impl DeploymentStatus {
    pub const ALL: [DeploymentStatus; 7] = [
        DeploymentStatus::Scheduled,
        DeploymentStatus::InProgress,
        DeploymentStatus::Paused,
        DeploymentStatus::Completed,
        DeploymentStatus::Failed,
        DeploymentStatus::Cancelled,
        DeploymentStatus::RolledBack,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            DeploymentStatus::Scheduled => "scheduled",
            DeploymentStatus::InProgress => "in_progress",
            DeploymentStatus::Paused => "paused",
            DeploymentStatus::Completed => "completed",
            DeploymentStatus::Failed => "failed",
            DeploymentStatus::Cancelled => "cancelled",
            DeploymentStatus::RolledBack => "rolled_back",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        DeploymentStatus::ALL.into_iter().find(|x| x.as_str() == s)
    }
    /// Still going: its devices are told, phases advance.
    pub fn is_active(self) -> bool {
        matches!(
            self,
            DeploymentStatus::Scheduled | DeploymentStatus::InProgress | DeploymentStatus::Paused
        )
    }
}

/// A device's place in a deployment. The steps a device reports follow SPEC 3 rule 2:
/// download, verify (SHA-256 and signature), back up, apply, health check.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum DeviceState {
    /// In a phase not started yet.
    Pending,
    /// Sent the update command.
    Notified,
    Downloading,
    Verifying,
    BackingUp,
    Installing,
    HealthCheck,
    Succeeded,
    Failed,
    /// Told to return to its previous version; waits for its report.
    RollingBack,
    RolledBack,
    /// Not updated: the deployment was cancelled or stopped before the device was reached.
    Cancelled,
}

impl DeviceState {
    pub const ALL: [DeviceState; 12] = [
        DeviceState::Pending,
        DeviceState::Notified,
        DeviceState::Downloading,
        DeviceState::Verifying,
        DeviceState::BackingUp,
        DeviceState::Installing,
        DeviceState::HealthCheck,
        DeviceState::Succeeded,
        DeviceState::Failed,
        DeviceState::RollingBack,
        DeviceState::RolledBack,
        DeviceState::Cancelled,
    ];
    /// Told and not yet done: the device's time limit runs.
    pub const OPEN: [DeviceState; 7] = [
        DeviceState::Notified,
        DeviceState::Downloading,
        DeviceState::Verifying,
        DeviceState::BackingUp,
        DeviceState::Installing,
        DeviceState::HealthCheck,
        DeviceState::RollingBack,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceState::Pending => "pending",
            DeviceState::Notified => "notified",
            DeviceState::Downloading => "downloading",
            DeviceState::Verifying => "verifying",
            DeviceState::BackingUp => "backing_up",
            DeviceState::Installing => "installing",
            DeviceState::HealthCheck => "health_check",
            DeviceState::Succeeded => "succeeded",
            DeviceState::Failed => "failed",
            DeviceState::RollingBack => "rolling_back",
            DeviceState::RolledBack => "rolled_back",
            DeviceState::Cancelled => "cancelled",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        DeviceState::ALL.into_iter().find(|x| x.as_str() == s)
    }
    /// Nothing more happens to the device in this deployment (unless it is rolled back).
    pub fn is_final(self) -> bool {
        matches!(
            self,
            DeviceState::Succeeded
                | DeviceState::Failed
                | DeviceState::RolledBack
                | DeviceState::Cancelled
        )
    }
    fn step(self) -> u8 {
        match self {
            DeviceState::Pending => 0,
            DeviceState::Notified => 1,
            DeviceState::Downloading => 2,
            DeviceState::Verifying => 3,
            DeviceState::BackingUp => 4,
            DeviceState::Installing => 5,
            DeviceState::HealthCheck => 6,
            _ => 7,
        }
    }
}

/// What a device may report on its `ota` topic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReportedState {
    Downloading,
    Verifying,
    BackingUp,
    Installing,
    HealthCheck,
    Succeeded,
    Failed,
    RolledBack,
}

impl ReportedState {
    fn state(self) -> DeviceState {
        match self {
            ReportedState::Downloading => DeviceState::Downloading,
            ReportedState::Verifying => DeviceState::Verifying,
            ReportedState::BackingUp => DeviceState::BackingUp,
            ReportedState::Installing => DeviceState::Installing,
            ReportedState::HealthCheck => DeviceState::HealthCheck,
            ReportedState::Succeeded => DeviceState::Succeeded,
            ReportedState::Failed => DeviceState::Failed,
            ReportedState::RolledBack => DeviceState::RolledBack,
        }
    }
}

/// A device's report on `plantd/devices/{id}/ota`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OtaReport {
    pub deployment_id: String,
    pub state: ReportedState,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub progress_percent: Option<u8>,
}

/// The state a report moves a device to, or `None` when it is stale or out of turn (reports
/// only move forward: a late `downloading` after `installing` is ignored). A device still
/// updating that reports `rolled_back` rolled back by itself (its health check failed): that
/// is a failure. A device told to roll back reports `rolled_back`, or `failed` if it could not.
pub fn next_state(current: DeviceState, reported: ReportedState) -> Option<DeviceState> {
    let to = reported.state();
    match current {
        DeviceState::RollingBack => match to {
            DeviceState::RolledBack | DeviceState::Failed => Some(to),
            _ => None,
        },
        // A device that timed out may still finish: its late answer is taken.
        DeviceState::Failed if to == DeviceState::Succeeded => Some(to),
        c if c.is_final() || c == DeviceState::Pending => None,
        c => {
            let to = if to == DeviceState::RolledBack {
                DeviceState::Failed
            } else {
                to
            };
            (to.step() > c.step()).then_some(to)
        }
    }
}

/// Which devices a deployment updates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Targets {
    /// The members of a device group.
    Group { group_id: String },
    /// These devices.
    Devices { device_ids: Vec<String> },
    /// Devices carrying every one of these tags.
    Tags { tags: Vec<String> },
}

impl Targets {
    /// Whether devices that join later (the group, or the tags) are targets too.
    pub fn can_grow(&self) -> bool {
        !matches!(self, Targets::Devices { .. })
    }
}

/// How targets are reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// In phases, each checked against its failure threshold before the next starts.
    Phased,
    /// Every target at once: one phase.
    AllAtOnce,
}

impl Strategy {
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Phased => "phased",
            Strategy::AllAtOnce => "all_at_once",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        [Strategy::Phased, Strategy::AllAtOnce]
            .into_iter()
            .find(|x| x.as_str() == s)
    }
}

/// The failure threshold of a phase when none is given: more than 20% failed stops it.
pub const DEFAULT_FAILURE_THRESHOLD: f64 = 20.0;

fn default_threshold() -> f64 {
    DEFAULT_FAILURE_THRESHOLD
}

/// One phase of a deployment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Phase {
    /// The share of all targets updated once this phase is done (cumulative: 10, 50, 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percent: Option<u32>,
    /// Or: how many more devices this phase updates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// The phase stops the deployment when more than this share of its devices fail (0 to
    /// 100; default 20).
    #[serde(default = "default_threshold")]
    pub failure_threshold_percent: f64,
    /// Seconds to wait after this phase before the next starts.
    #[serde(default)]
    pub pause_seconds: u64,
    /// Wait after this phase for `POST /v1/ota/deployments/{id}/continue`.
    #[serde(default)]
    pub wait_for_continue: bool,
}

impl Phase {
    fn percent(p: u32, threshold: f64) -> Self {
        Phase {
            percent: Some(p),
            count: None,
            failure_threshold_percent: threshold,
            pause_seconds: 0,
            wait_for_continue: false,
        }
    }
}

/// The phases of a phased deployment that names none: 10%, 50%, then the rest, each stopping
/// above 20% failed.
pub fn default_phases() -> Vec<Phase> {
    [10, 50, 100]
        .into_iter()
        .map(|p| Phase::percent(p, DEFAULT_FAILURE_THRESHOLD))
        .collect()
}

/// The one phase of an all-at-once deployment.
pub fn all_at_once(threshold: f64) -> Vec<Phase> {
    vec![Phase::percent(100, threshold)]
}

/// At most this many phases.
pub const MAX_PHASES: usize = 20;

/// Checks requested phases: 1 to 20, each with a percent (1 to 100, rising) or a count (at
/// least 1), not both; thresholds within 0 to 100; pauses up to 7 days.
pub fn check_phases(v: &mut Validator, phases: &[Phase]) {
    v.check(
        (1..=MAX_PHASES).contains(&phases.len()),
        "phases",
        format!("must hold 1 to {MAX_PHASES} phases"),
    );
    let mut last_percent = 0;
    for (i, p) in phases.iter().enumerate() {
        let at = |f: &str| format!("phases[{i}].{f}");
        match (p.percent, p.count) {
            (Some(_), Some(_)) => v.add(at("percent"), "give a percent or a count, not both"),
            (None, None) => v.add(at("percent"), "give a percent (1 to 100) or a count"),
            (Some(pc), None) => {
                v.check(
                    (1..=100).contains(&pc),
                    &at("percent"),
                    "must be between 1 and 100",
                );
                v.check(
                    pc > last_percent,
                    &at("percent"),
                    "must be more than the previous phase's (percents are cumulative)",
                );
                last_percent = pc;
            }
            (None, Some(c)) => v.check(c >= 1, &at("count"), "must be at least 1"),
        }
        v.check(
            p.failure_threshold_percent.is_finite()
                && (0.0..=100.0).contains(&p.failure_threshold_percent),
            &at("failure_threshold_percent"),
            "must be between 0 and 100",
        );
        v.check(
            p.pause_seconds <= 7 * 86_400,
            &at("pause_seconds"),
            "must be at most 604800 (7 days)",
        );
    }
}

/// How many of `n` targets each phase takes, in order: a percent phase reaches that share of
/// all targets (rounded up), a count phase adds that many; the last phase takes whatever is
/// left.
pub fn phase_sizes(phases: &[Phase], n: usize) -> Vec<usize> {
    let mut sizes = Vec::with_capacity(phases.len());
    let mut reached = 0usize;
    for (i, p) in phases.iter().enumerate() {
        let end = if i + 1 == phases.len() {
            n
        } else {
            match (p.percent, p.count) {
                (Some(pc), _) => (n * pc as usize).div_ceil(100),
                (None, Some(c)) => reached.saturating_add(c as usize),
                (None, None) => reached,
            }
        }
        .clamp(reached, n);
        sizes.push(end - reached);
        reached = end;
    }
    sizes
}

/// A phase's devices by where they are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PhaseCounts {
    pub total: u64,
    pub failed: u64,
    /// Not final yet (pending, told, or on their way).
    pub open: u64,
}

/// What a deployment does next, decided from its state and its phases' counts.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    Wait,
    /// Start phase `n` (1-based): its devices are told.
    StartPhase(u32),
    /// Pause after the current phase, until a time or until continued.
    Pause(Option<Timestamp>),
    Complete,
    /// The current phase crossed its failure threshold.
    Abort(String),
}

/// The next step of an active deployment in `status`, at `current` (1-based; 0 before the
/// first phase), with each phase's counts.
pub fn decide(
    status: DeploymentStatus,
    current: u32,
    resume_at: Option<Timestamp>,
    phases: &[Phase],
    counts: &[PhaseCounts],
    now: Timestamp,
) -> Step {
    let due = resume_at.is_none_or(|t| t <= now);
    match status {
        DeploymentStatus::Scheduled if due => Step::StartPhase(1),
        DeploymentStatus::Paused if resume_at.is_some() && due => Step::StartPhase(current + 1),
        DeploymentStatus::InProgress => {
            let i = current.saturating_sub(1) as usize;
            let (Some(phase), Some(c)) = (phases.get(i), counts.get(i)) else {
                return Step::Wait;
            };
            if c.total > 0
                && c.failed as f64 * 100.0 > phase.failure_threshold_percent * c.total as f64
            {
                return Step::Abort(format!(
                    "phase {current}: {} of {} devices failed ({:.0}%), above its failure threshold of {}%",
                    c.failed,
                    c.total,
                    c.failed as f64 * 100.0 / c.total as f64,
                    phase.failure_threshold_percent
                ));
            }
            if c.open > 0 {
                Step::Wait
            } else if i + 1 >= phases.len() {
                Step::Complete
            } else if phase.wait_for_continue {
                Step::Pause(None)
            } else if phase.pause_seconds > 0 {
                Step::Pause(Some(Timestamp::from_millis(
                    now.millis() + phase.pause_seconds as i64 * 1000,
                )))
            } else {
                Step::StartPhase(current + 1)
            }
        }
        _ => Step::Wait,
    }
}

/// A deployment as clients see it (read back by the region's other nodes from a node event;
/// `org_id` travels beside it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Deployment {
    pub id: String,
    #[serde(skip)]
    pub org_id: String,
    pub name: String,
    pub package_id: String,
    pub targets: Targets,
    pub strategy: Strategy,
    pub phases: Vec<Phase>,
    pub rollback_enabled: bool,
    /// Devices that join the target group (or gain the tags) while it runs are updated too.
    pub include_new_devices: bool,
    pub device_timeout_seconds: u64,
    pub status: DeploymentStatus,
    /// The phase under way, or the last one reached (1-based; 0 before the first starts).
    pub current_phase: u32,
    /// When a scheduled deployment starts, or a paused one resumes by itself.
    pub resume_at: Option<Timestamp>,
    /// Why it stopped (a phase above its threshold), when it did.
    pub reason: Option<String>,
    /// Target devices per state (every state, zeros included).
    #[schema(value_type = Object)]
    pub device_counts: BTreeMap<DeviceState, u64>,
    /// Per phase: its devices, how many succeeded, failed and are still open.
    pub phase_progress: Vec<PhaseProgress>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
}

impl Deployment {
    /// Each phase's counts, in phase order, as [`decide`] takes them.
    pub fn phase_counts(&self) -> Vec<PhaseCounts> {
        self.phase_progress
            .iter()
            .map(|p| PhaseCounts {
                total: p.devices,
                failed: p.failed,
                open: p.open,
            })
            .collect()
    }
}

/// One phase's devices as counted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PhaseProgress {
    pub phase: u32,
    pub devices: u64,
    pub succeeded: u64,
    pub failed: u64,
    pub open: u64,
}

/// One target device of a deployment.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct DeploymentDevice {
    pub device_id: String,
    pub device_name: String,
    pub phase: u32,
    pub state: DeviceState,
    /// The device's own words on its last report, or why plantd failed it (a timeout).
    pub message: Option<String>,
    pub progress_percent: Option<u8>,
    pub notified_at: Option<Timestamp>,
    pub updated_at: Timestamp,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phases(p: &[u32]) -> Vec<Phase> {
        p.iter().map(|&p| Phase::percent(p, 20.0)).collect()
    }

    #[test]
    fn targets_split_into_phases() {
        assert_eq!(phase_sizes(&default_phases(), 20), vec![2, 8, 10]);
        assert_eq!(phase_sizes(&default_phases(), 1), vec![1, 0, 0]);
        assert_eq!(phase_sizes(&default_phases(), 0), vec![0, 0, 0]);
        assert_eq!(phase_sizes(&phases(&[50, 60]), 1000), vec![500, 500]);
        let mixed = vec![
            Phase {
                count: Some(3),
                percent: None,
                ..Phase::percent(0, 20.0)
            },
            Phase::percent(50, 20.0),
            Phase {
                count: Some(1),
                percent: None,
                ..Phase::percent(0, 20.0)
            },
        ];
        assert_eq!(phase_sizes(&mixed, 20), vec![3, 7, 10]);
        assert_eq!(phase_sizes(&mixed, 2), vec![2, 0, 0]);
    }

    #[test]
    fn a_phase_above_its_threshold_aborts() {
        let now = Timestamp::from_millis(1_000);
        let p = phases(&[50, 100]);
        let c = |total, failed, open| PhaseCounts {
            total,
            failed,
            open,
        };
        let s = decide(
            DeploymentStatus::InProgress,
            1,
            None,
            &p,
            &[c(10, 3, 5), c(10, 0, 10)],
            now,
        );
        assert!(
            matches!(s, Step::Abort(ref m) if m.contains("3 of 10")),
            "{s:?}"
        );
        // Exactly at the threshold is not above it.
        let s = decide(
            DeploymentStatus::InProgress,
            1,
            None,
            &p,
            &[c(10, 2, 0), c(10, 0, 10)],
            now,
        );
        assert_eq!(s, Step::StartPhase(2));
        let s = decide(
            DeploymentStatus::InProgress,
            2,
            None,
            &p,
            &[c(10, 2, 0), c(10, 1, 0)],
            now,
        );
        assert_eq!(s, Step::Complete);
        assert_eq!(
            decide(DeploymentStatus::Scheduled, 0, None, &p, &[], now),
            Step::StartPhase(1)
        );
        let later = Timestamp::from_millis(5_000);
        assert_eq!(
            decide(DeploymentStatus::Scheduled, 0, Some(later), &p, &[], now),
            Step::Wait
        );
        let mut paused = p.clone();
        paused[0].wait_for_continue = true;
        assert_eq!(
            decide(
                DeploymentStatus::InProgress,
                1,
                None,
                &paused,
                &[c(10, 0, 0), c(10, 0, 10)],
                now
            ),
            Step::Pause(None)
        );
        assert_eq!(
            decide(DeploymentStatus::Paused, 1, None, &paused, &[], now),
            Step::Wait
        );
    }

    #[test]
    fn reports_only_move_forward() {
        use DeviceState as D;
        use ReportedState as R;
        assert_eq!(
            next_state(D::Notified, R::Downloading),
            Some(D::Downloading)
        );
        assert_eq!(next_state(D::Installing, R::Downloading), None);
        assert_eq!(next_state(D::Installing, R::Succeeded), Some(D::Succeeded));
        assert_eq!(next_state(D::HealthCheck, R::RolledBack), Some(D::Failed));
        assert_eq!(next_state(D::Succeeded, R::Failed), None);
        assert_eq!(next_state(D::Pending, R::Downloading), None);
        assert_eq!(
            next_state(D::RollingBack, R::RolledBack),
            Some(D::RolledBack)
        );
        assert_eq!(next_state(D::Failed, R::Succeeded), Some(D::Succeeded));
        assert_eq!(next_state(D::Cancelled, R::Succeeded), None);
    }

    #[test]
    fn manifest_is_stable_text() {
        assert_eq!(
            manifest("p1", "2.0.1", 42, "ab"),
            "plantd-ota-manifest-v1\npackage_id=p1\nversion=2.0.1\nsize_bytes=42\nsha256=ab\n"
        );
    }

    #[test]
    fn phases_are_checked() {
        let mut v = Validator::new();
        check_phases(&mut v, &phases(&[50, 40]));
        let e = v.finish().unwrap_err();
        assert_eq!(e[0].field, "phases[1].percent");
        let mut v = Validator::new();
        check_phases(&mut v, &[]);
        assert!(v.finish().is_err());
        let mut v = Validator::new();
        check_phases(&mut v, &default_phases());
        assert!(v.finish().is_ok());
    }
}
