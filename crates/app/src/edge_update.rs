//! The edge agent's self-update (issue 34, SPEC 3 rule 2; docs/api.md, "Self-update of the
//! edge agent"): the agent's side of an OTA deployment that targets it. The cloud's command
//! `ota.update` starts the steps, each reported on the device's `ota` topic:
//!
//! 1. `downloading`: the package, resumable (a cut download goes on from where it stopped, with
//!    `Range`), into `<update dir>/download/`;
//! 2. `verifying`: its size and SHA-256 against the command, the manifest rebuilt from them, the
//!    Ed25519 signature over the manifest with the organization's key (pinned at the first
//!    update), and the new binary asked its version (`--version` must answer `plantd ...`);
//! 3. `backing_up`: the running binary, the configuration file and the agent's configuration
//!    (the clone document: assets and alert rules) into `<update dir>/backups/<deployment>/`,
//!    kept 24 hours;
//! 4. `installing`: the binary replaced (a rename: atomic), a marker written, and a graceful
//!    restart asked for (the server drains its connectors and closes its store; the binary then
//!    replaces the process by the new version, same arguments);
//! 5. `health_check`: the new version, at its start, finds the marker and must connect to the
//!    cloud and read the sources that were read before the update within the deadline;
//!    `succeeded` when it does, else it puts the backup back, restarts the same way into the
//!    version before, which reports `failed` with the reason. A new version that never gets as
//!    far as its health check (it crashes, and its supervisor starts it again) is rolled back at
//!    its fourth start.
//!
//! The command `ota.rollback` puts a deployment's backup back the same way and reports
//! `rolled_back`. The database stays as it is through an update and a rollback, so nothing the
//! agent stored or still has to forward is lost; a version reads a database a newer one opened
//! (migrations only add).

use plantd_model::Timestamp;
use serde::Deserialize;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::AsyncWriteExt;

use crate::app::App;
use crate::update_files::{
    BackupInfo, FIRMWARE, Firmware, MARKER, PINNED_KEY, PackageParams, Pending, Stage, Step,
    binary_version, file_name, mkdir, prune_backups, read_json, replace_file, restore, verify_file,
    verify_signature, write_json, write_private,
};
pub use crate::update_files::{
    KEEP_BACKUPS, Restart, SelfUpdateSettings, roll_back_after_failed_start,
};

/// Starts a new version gets to pass its health check (it may crash, and be started again by
/// its supervisor) before the version before is put back.
pub const MAX_STARTS: u32 = 3;
/// Download attempts in a row without progress before the update fails.
const DOWNLOAD_ATTEMPTS: u32 = 6;
/// A download that sends nothing for this long is cut and resumed.
const STALL: Duration = Duration::from_secs(60);
/// How long the agent waits for its `installing` report to reach the cloud before it restarts.
const REPORT_BEFORE_RESTART: Duration = Duration::from_secs(10);

#[derive(Clone, Debug, Deserialize)]
struct UpdateParams {
    deployment_id: String,
    package: PackageParams,
    download_url: String,
    public_key_url: String,
}

impl App {
    fn self_update(&self) -> Result<&SelfUpdateSettings, String> {
        self.config()
            .edge
            .as_ref()
            .and_then(|e| e.update.as_ref())
            .ok_or_else(|| {
                "this agent does not update itself: it runs inside `plantd up` and is updated with the platform"
                    .to_string()
            })
    }

    /// The version the agent reports (its heartbeat's `firmware_version`): the package it last
    /// installed, else the binary's own.
    pub fn firmware_version(&self) -> String {
        self.self_update()
            .ok()
            .and_then(|s| read_json::<Firmware>(&s.dir.join(FIRMWARE)))
            .map_or_else(|| env!("CARGO_PKG_VERSION").to_string(), |f| f.version)
    }

    /// The command `ota.update` (`params` as the cloud sends them): starts the update in the
    /// background. Every outcome goes to the `ota` topic; the command itself gets no answer (the
    /// final report completes it). Err: the command cannot be taken (no deployment named).
    pub fn take_update_command(&self, org_id: &str, params: &Value) -> Result<(), String> {
        let p: UpdateParams = match serde_json::from_value(params.clone()) {
            Ok(p) => p,
            Err(e) => {
                let message = format!("the update command's parameters: {e}");
                if let Some(d) = params["deployment_id"].as_str() {
                    self.report_ota(d, "failed", Some(&message), None);
                }
                return Err(message);
            }
        };
        let app = self.clone();
        let org = org_id.to_string();
        tokio::spawn(async move {
            let deployment = p.deployment_id.clone();
            if let Err(message) = app.update_once(&org, p).await {
                tracing::warn!(deployment, message, "edge agent: the update failed");
                app.report_ota(&deployment, "failed", Some(&message), None);
            }
        });
        Ok(())
    }

    /// One update at a time: a second command while one runs fails; a repeated command of the
    /// update under way is ignored, and one already installed is reported again.
    async fn update_once(&self, org_id: &str, p: UpdateParams) -> Step {
        let settings = self.self_update()?.clone();
        if let Some(pending) = read_json::<Pending>(&settings.dir.join(MARKER)) {
            if pending.deployment_id == p.deployment_id {
                return Ok(());
            }
            return Err(format!(
                "the agent is busy with the update of deployment {}",
                pending.deployment_id
            ));
        }
        if let Some(f) = read_json::<Firmware>(&settings.dir.join(FIRMWARE))
            && f.deployment_id == p.deployment_id
            && f.version == p.package.version
        {
            self.report_ota(
                &p.deployment_id,
                "succeeded",
                Some(&format!("version {} is installed", f.version)),
                None,
            );
            return Ok(());
        }
        let Some(_busy) = self.uplink().begin_update() else {
            return Err("the agent is busy with another update".into());
        };
        self.update(org_id, &settings, &p).await
    }

    async fn update(&self, org_id: &str, s: &SelfUpdateSettings, p: &UpdateParams) -> Step {
        let login = self
            .uplink_route(org_id)
            .await
            .map_err(|e| e.to_string())?
            .map(|(login, _)| login)
            .ok_or("the agent is not enrolled with a cloud")?;
        let d = &p.deployment_id;
        let downloads = s.dir.join("download");
        mkdir(&downloads).await?;
        let file = downloads.join(file_name(&p.package.sha256)?);

        self.report_ota(d, "downloading", None, Some(0));
        self.download(p, &login.password, &file).await?;

        self.report_ota(d, "verifying", None, None);
        verify_file(&file, &p.package).await?;
        let key = self
            .pinned_key(&s.dir, &p.public_key_url, &login.password)
            .await?;
        verify_signature(&key, &p.package)?;
        let said = binary_version(&file).await?;

        self.report_ota(d, "backing_up", None, None);
        let backup = s.dir.join("backups").join(file_name(d)?);
        self.back_up(org_id, s, d, &backup).await?;

        self.report_ota(
            d,
            "installing",
            Some(&format!("installing {said} over {}", s.exe.display())),
            None,
        );
        let sources = self.connected_sources(org_id).await;
        let before = s.restart_as_now();
        let pending = Pending {
            deployment_id: d.clone(),
            package_id: p.package.id.clone(),
            from_version: self.firmware_version(),
            to_version: p.package.version.clone(),
            backup,
            before: before.clone(),
            sources,
            started_at: Timestamp::now(),
            starts: 0,
            stage: Stage::Installed,
        };
        // The marker first: a binary in place without its marker would never be checked.
        write_json(&s.dir.join(MARKER), &pending).await?;
        let exe = s.exe.clone();
        let installed = tokio::task::spawn_blocking(move || replace_file(&file, &exe))
            .await
            .map_err(|e| e.to_string())?;
        if let Err(e) = installed {
            let _ = tokio::fs::remove_file(s.dir.join(MARKER)).await;
            return Err(format!("cannot replace {}: {e}", s.exe.display()));
        }
        tracing::warn!(deployment = %d, version = %p.package.version, "edge agent: update installed; restarting");
        self.uplink().reports_delivered(REPORT_BEFORE_RESTART).await;
        self.uplink().restart(before);
        Ok(())
    }

    /// The package into `file`, resuming what an earlier attempt left there.
    async fn download(&self, p: &UpdateParams, password: &str, file: &Path) -> Step {
        let size = p.package.size_bytes;
        let mut failures = 0;
        let mut told = 0;
        loop {
            let have = tokio::fs::metadata(file).await.map_or(0, |m| m.len());
            if have == size {
                return Ok(());
            }
            if have > size {
                tokio::fs::remove_file(file)
                    .await
                    .map_err(|e| e.to_string())?;
                continue;
            }
            match self.download_from(p, password, file, have, &mut told).await {
                Ok(()) => {}
                Err(Fetch::Refused(e)) => return Err(e),
                Err(Fetch::Cut(e)) => {
                    let now = tokio::fs::metadata(file).await.map_or(0, |m| m.len());
                    failures = if now > have { 1 } else { failures + 1 };
                    if failures >= DOWNLOAD_ATTEMPTS {
                        return Err(format!("download: {e} ({failures} attempts)"));
                    }
                    tracing::info!(error = %e, have = now, "edge agent: the download was cut; resuming");
                    tokio::time::sleep(Duration::from_secs(1 << failures.min(5))).await;
                }
            }
        }
    }

    async fn download_from(
        &self,
        p: &UpdateParams,
        password: &str,
        file: &Path,
        from: u64,
        told: &mut u64,
    ) -> Result<(), Fetch> {
        let size = p.package.size_bytes;
        let mut request = self
            .regional()
            .http()
            .get(&p.download_url)
            .bearer_auth(password);
        if from > 0 {
            request = request.header("Range", format!("bytes={from}-"));
        }
        let mut response = request
            .send()
            .await
            .map_err(|e| Fetch::Cut(e.to_string()))?;
        let append = match response.status().as_u16() {
            206 => true,
            200 => false,
            // The part on disk is not a start of this file: start over.
            416 => {
                let _ = tokio::fs::remove_file(file).await;
                return Err(Fetch::Cut("the server refused the range".into()));
            }
            s if (500..600).contains(&s) => return Err(Fetch::Cut(format!("HTTP {s}"))),
            s => {
                let body = response.text().await.unwrap_or_default();
                return Err(Fetch::Refused(format!(
                    "download: HTTP {s}: {}",
                    body.chars().take(300).collect::<String>()
                )));
            }
        };
        let mut out = tokio::fs::OpenOptions::new()
            .create(true)
            .append(append)
            .write(true)
            .truncate(!append)
            .open(file)
            .await
            .map_err(|e| Fetch::Refused(format!("{}: {e}", file.display())))?;
        let mut have = if append { from } else { 0 };
        loop {
            let chunk = match tokio::time::timeout(STALL, response.chunk()).await {
                Err(_) => return Err(Fetch::Cut("the download stalled".into())),
                Ok(Err(e)) => return Err(Fetch::Cut(e.to_string())),
                Ok(Ok(None)) => break,
                Ok(Ok(Some(c))) => c,
            };
            have += chunk.len() as u64;
            if have > size {
                return Err(Fetch::Refused(format!(
                    "the server sent more than the package's {size} bytes"
                )));
            }
            out.write_all(&chunk)
                .await
                .map_err(|e| Fetch::Refused(format!("{}: {e}", file.display())))?;
            let percent = (have * 100).checked_div(size).unwrap_or(100);
            if percent >= *told + 10 {
                *told = percent - percent % 10;
                self.report_ota(
                    &p.deployment_id,
                    "downloading",
                    None,
                    Some(percent.min(100) as u8),
                );
            }
        }
        out.sync_all()
            .await
            .map_err(|e| Fetch::Refused(format!("{}: {e}", file.display())))?;
        if have < size {
            return Err(Fetch::Cut(format!(
                "the connection ended after {have} of {size} bytes"
            )));
        }
        Ok(())
    }

    /// The organization's public key: pinned in `dir` at the first update, else read from the
    /// cloud (with the device's password) and pinned.
    async fn pinned_key(&self, dir: &Path, url: &str, password: &str) -> Result<[u8; 32], String> {
        use base64::Engine;
        let path = dir.join(PINNED_KEY);
        let text = match tokio::fs::read_to_string(&path).await {
            Ok(t) => t,
            Err(_) => {
                let r = self
                    .regional()
                    .http()
                    .get(url)
                    .bearer_auth(password)
                    .timeout(Duration::from_secs(30))
                    .send()
                    .await
                    .map_err(|e| format!("the signing key: {e}"))?;
                if !r.status().is_success() {
                    return Err(format!("the signing key: HTTP {}", r.status()));
                }
                let body: Value = r
                    .json()
                    .await
                    .map_err(|e| format!("the signing key: {e}"))?;
                let key = body["data"]["public_key"]
                    .as_str()
                    .ok_or("the signing key: no public_key in the answer")?
                    .to_string();
                write_private(&path, key.as_bytes()).await?;
                key
            }
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|e| format!("the pinned signing key {}: {e}", path.display()))?;
        bytes
            .try_into()
            .map_err(|_| format!("the pinned signing key {} is not 32 bytes", path.display()))
    }

    /// The binary, the configuration file and the agent's configuration into `backup`.
    async fn back_up(
        &self,
        org_id: &str,
        s: &SelfUpdateSettings,
        deployment_id: &str,
        backup: &Path,
    ) -> Step {
        let _ = tokio::fs::remove_dir_all(backup).await;
        mkdir(backup).await?;
        let copy = |from: &Path, to: PathBuf| {
            let from = from.to_path_buf();
            async move {
                tokio::fs::copy(&from, &to)
                    .await
                    .map(|_| ())
                    .map_err(|e| format!("backing up {}: {e}", from.display()))
            }
        };
        copy(&s.exe, backup.join("plantd")).await?;
        if let Some(c) = &s.config_file {
            copy(c, backup.join("config.toml")).await?;
        }
        let firmware = s.dir.join(FIRMWARE);
        let had_firmware = firmware.exists();
        if had_firmware {
            copy(&firmware, backup.join(FIRMWARE)).await?;
        }
        let document = self
            .export_clone(org_id)
            .await
            .map_err(|e| format!("backing up the configuration: {e}"))?;
        write_json(&backup.join("configuration.json"), &document).await?;
        let info = BackupInfo {
            deployment_id: deployment_id.to_string(),
            version: self.firmware_version(),
            taken_at: Timestamp::now(),
            exe: s.exe.clone(),
            config_file: s.config_file.clone(),
            had_firmware,
        };
        write_json(&backup.join("backup.json"), &info).await?;
        let dir = s.dir.clone();
        let keep = backup.to_path_buf();
        let _ = tokio::task::spawn_blocking(move || prune_backups(&dir, Some(&keep))).await;
        Ok(())
    }

    /// Ids of the organization's enabled sources that are connected and read tags now.
    async fn connected_sources(&self, org_id: &str) -> Vec<String> {
        self.store()
            .org_data_sources(org_id)
            .await
            .map(|all| {
                all.iter()
                    .filter(|d| d.enabled && read_now(d))
                    .map(|d| d.id.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The command `ota.rollback`: the backup of `deployment_id` goes back and the agent
    /// restarts into the version before; it then reports `rolled_back`.
    pub fn take_rollback_command(&self, params: &Value) -> Result<(), String> {
        let deployment = params["deployment_id"]
            .as_str()
            .ok_or("the rollback command names no deployment_id")?
            .to_string();
        let app = self.clone();
        tokio::spawn(async move {
            if let Err(message) = app.roll_back_on_request(&deployment).await {
                app.report_ota(&deployment, "failed", Some(&message), None);
            }
        });
        Ok(())
    }

    async fn roll_back_on_request(&self, deployment_id: &str) -> Step {
        let s = self.self_update()?.clone();
        let Some(_busy) = self.uplink().begin_update() else {
            return Err("the agent is busy with an update".into());
        };
        let marker = s.dir.join(MARKER);
        let mut pending = match read_json::<Pending>(&marker) {
            Some(p) if p.deployment_id == deployment_id => p,
            Some(p) => {
                return Err(format!(
                    "the agent is busy with the update of deployment {}",
                    p.deployment_id
                ));
            }
            None => {
                let backup = s.dir.join("backups").join(file_name(deployment_id)?);
                let info = read_json::<BackupInfo>(&backup.join("backup.json")).ok_or_else(|| {
                    format!(
                        "no backup of the version before deployment {deployment_id} (backups are kept 24 hours)"
                    )
                })?;
                Pending {
                    deployment_id: deployment_id.to_string(),
                    package_id: String::new(),
                    from_version: info.version,
                    to_version: self.firmware_version(),
                    backup,
                    before: s.restart_as_now(),
                    sources: Vec::new(),
                    started_at: Timestamp::now(),
                    starts: 0,
                    stage: Stage::Installed,
                }
            }
        };
        pending.stage = Stage::RollbackAsked;
        self.put_back(&s, pending).await
    }

    /// Puts the backup back, writes the marker's new stage and asks for the restart into it.
    async fn put_back(&self, s: &SelfUpdateSettings, pending: Pending) -> Step {
        let dir = s.dir.clone();
        let p = pending.clone();
        tokio::task::spawn_blocking(move || restore(&dir, &p))
            .await
            .map_err(|e| e.to_string())??;
        tracing::warn!(deployment = %pending.deployment_id, version = %pending.from_version, stage = ?pending.stage, "edge agent: the version before is back; restarting");
        self.uplink().reports_delivered(REPORT_BEFORE_RESTART).await;
        self.uplink().restart(pending.before);
        Ok(())
    }

    /// At the agent's start: goes on with an update under way (its health check, or the report
    /// of a rollback), and drops backups older than 24 hours.
    pub fn resume_self_update(&self, org_id: &str) {
        let Ok(s) = self.self_update().cloned() else {
            return;
        };
        let app = self.clone();
        let org = org_id.to_string();
        tokio::spawn(async move {
            let marker = s.dir.join(MARKER);
            let Some(mut pending) = read_json::<Pending>(&marker) else {
                let dir = s.dir.clone();
                let _ = tokio::task::spawn_blocking(move || prune_backups(&dir, None)).await;
                return;
            };
            let d = pending.deployment_id.clone();
            let Some(_busy) = app.uplink().begin_update() else {
                return;
            };
            match pending.stage.clone() {
                Stage::Installed => {
                    pending.starts += 1;
                    if let Err(e) = write_json(&marker, &pending).await {
                        tracing::warn!(error = %e, "edge agent: cannot count this start of the update");
                    }
                    let outcome = if pending.starts > MAX_STARTS {
                        Err(format!(
                            "version {} did not pass its health check in {MAX_STARTS} starts",
                            pending.to_version
                        ))
                    } else {
                        app.health_check(&org, &s, &pending).await
                    };
                    match outcome {
                        Ok(message) => {
                            let firmware = Firmware {
                                version: pending.to_version.clone(),
                                package_id: pending.package_id.clone(),
                                deployment_id: d.clone(),
                                installed_at: Timestamp::now(),
                            };
                            if let Err(e) = write_json(&s.dir.join(FIRMWARE), &firmware).await {
                                tracing::warn!(error = %e, "edge agent: cannot record the installed version");
                            }
                            // Checked again at the next start if this one ends before the
                            // cloud has the report: it says so again.
                            app.report_and_forget(&marker, &d, "succeeded", &message)
                                .await;
                        }
                        Err(reason) => {
                            tracing::warn!(deployment = %d, reason, "edge agent: the new version failed its health check; rolling back");
                            pending.stage = Stage::RolledBack { reason };
                            if let Err(e) = app.put_back(&s, pending).await {
                                tracing::error!(error = %e, "edge agent: the rollback failed");
                                app.report_ota(
                                    &d,
                                    "failed",
                                    Some(&format!(
                                        "the health check failed and so did the rollback: {e}"
                                    )),
                                    None,
                                );
                            }
                        }
                    }
                }
                Stage::RolledBack { reason } => {
                    let message = format!(
                        "health check of version {} failed: {reason}; rolled back to {}",
                        pending.to_version, pending.from_version
                    );
                    app.report_and_forget(&marker, &d, "failed", &message).await;
                }
                Stage::RollbackAsked => {
                    let message = format!("rolled back to version {}", pending.from_version);
                    app.report_and_forget(&marker, &d, "rolled_back", &message)
                        .await;
                }
            }
        });
    }

    /// Reports a final step and removes the marker once the cloud has the report (the marker
    /// stays for the next start if this one ends first); the download goes then, and backups
    /// older than a day.
    async fn report_and_forget(&self, marker: &Path, deployment: &str, state: &str, message: &str) {
        self.report_ota(deployment, state, Some(message), None);
        while !self
            .uplink()
            .reports_delivered(Duration::from_secs(60))
            .await
        {}
        let _ = tokio::fs::remove_file(marker).await;
        if let Some(dir) = marker.parent().map(Path::to_path_buf) {
            let _ = tokio::task::spawn_blocking(move || prune_backups(&dir, None)).await;
        }
    }

    /// The new version's health check: within the deadline it is connected to the cloud and
    /// reads every source that was read before the update. Ok: what it found; Err: what is
    /// missing.
    async fn health_check(
        &self,
        org_id: &str,
        s: &SelfUpdateSettings,
        pending: &Pending,
    ) -> Result<String, String> {
        let d = &pending.deployment_id;
        self.report_ota(
            d,
            "health_check",
            Some(&format!(
                "version {} started (start {} of {MAX_STARTS}); checking it reaches the cloud and reads {} sources within {} s",
                pending.to_version,
                pending.starts,
                pending.sources.len(),
                s.health_deadline.as_secs()
            )),
            None,
        );
        let began = std::time::Instant::now();
        loop {
            let missing = self.still_missing(org_id, &pending.sources).await;
            if missing.is_empty() {
                return Ok(format!(
                    "version {} is running: connected to the cloud and reading its {} sources after {:.0} s",
                    pending.to_version,
                    pending.sources.len(),
                    began.elapsed().as_secs_f64()
                ));
            }
            if began.elapsed() >= s.health_deadline {
                return Err(format!(
                    "after {} s: {}",
                    s.health_deadline.as_secs(),
                    missing.join("; ")
                ));
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// What the health check still waits for.
    async fn still_missing(&self, org_id: &str, sources: &[String]) -> Vec<String> {
        let mut missing = Vec::new();
        let uplink = self.uplink().get();
        if !uplink.connected {
            missing.push(match uplink.last_error {
                Some(e) => format!("not connected to the cloud ({e})"),
                None => "not connected to the cloud".into(),
            });
        }
        for id in sources {
            match self.store().data_source(org_id, id).await {
                Ok(ds) if !ds.enabled || read_now(&ds) => {}
                Ok(ds) => missing.push(format!(
                    "source {} not read ({})",
                    ds.name,
                    ds.last_error.as_deref().unwrap_or("not connected")
                )),
                // Deleted since: nothing to read.
                Err(_) => {}
            }
        }
        missing
    }

    /// Queues a report of the update's step for the `ota` topic.
    fn report_ota(
        &self,
        deployment_id: &str,
        state: &str,
        message: Option<&str>,
        progress: Option<u8>,
    ) {
        let mut report = json!({"deployment_id": deployment_id, "state": state});
        if let Some(m) = message {
            report["message"] = json!(m.chars().take(1000).collect::<String>());
        }
        if let Some(p) = progress {
            report["progress_percent"] = json!(p);
        }
        tracing::info!(deployment_id, state, message, "edge agent: update step");
        self.uplink()
            .queue_report(serde_json::to_vec(&report).unwrap_or_default());
    }

    /// Reports waiting for the `ota` topic, in order, with their numbers; the transport
    /// publishes each and says when the cloud acknowledged it ([`App::ota_report_acked`]).
    pub fn ota_reports_to_send(&self) -> Vec<(u64, Vec<u8>)> {
        self.uplink().reports_to_send()
    }

    /// Wakes when a report is queued.
    pub async fn ota_report_queued(&self) {
        self.uplink().report_queued().await
    }

    /// The cloud acknowledged report `n`.
    pub fn ota_report_acked(&self, n: u64) {
        self.uplink().report_acked(n)
    }

    /// A new connection: reports not acknowledged are sent again.
    pub fn ota_reports_resend(&self) {
        self.uplink().reports_resend()
    }

    /// Waits until an update or a rollback asks for a restart; what to start then.
    pub async fn restart_requested(&self) -> Restart {
        self.uplink().restart_requested().await
    }

    /// The restart asked for, if any (read once the server has stopped).
    pub fn restart_plan(&self) -> Option<Restart> {
        self.uplink().restart_plan()
    }
}

enum Fetch {
    /// The connection failed: resume.
    Cut(String),
    /// The server or the disk refused: the update fails.
    Refused(String),
}

/// A source connected and reading tags.
fn read_now(ds: &plantd_model::data_source::DataSource) -> bool {
    ds.status == plantd_model::data_source::DataSourceStatus::Connected && ds.tag_count > 0
}
