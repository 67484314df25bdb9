//! The files of the edge agent's self-update (`edge_update.rs` runs the steps): where an update
//! keeps its marker, its backups and the installed version's record under `<data dir>/update`,
//! the checks of a downloaded package (size, SHA-256, manifest, signature, the binary's
//! `--version`), the atomic replacement of the binary, the rollback's restore and the pruning
//! of backups older than 24 hours. Nothing here needs the application.

use plantd_model::Timestamp;
use serde::{Deserialize, Serialize};
use sha2::Digest;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// How long a backup is kept.
pub const KEEP_BACKUPS: Duration = Duration::from_secs(24 * 3600);
/// How long the new binary may take to say its version.
const VERSION_CHECK: Duration = Duration::from_secs(30);
/// The marker of an update under way.
pub(crate) const MARKER: &str = "pending.json";
/// What the agent runs since its last update (the package's version).
pub(crate) const FIRMWARE: &str = "firmware.json";
/// The organization's key, pinned at the first update.
pub(crate) const PINNED_KEY: &str = "ota-public-key";

/// Where and how the agent updates itself (`plantd edge` sets it; an agent inside `plantd up`
/// has none and refuses updates: it is updated with the platform).
#[derive(Clone, Debug, PartialEq)]
pub struct SelfUpdateSettings {
    /// `<data dir>/update`: downloads, backups, the marker.
    pub dir: PathBuf,
    /// The binary an update replaces (the one this process was started from).
    pub exe: PathBuf,
    /// The arguments it was started with (without the program's name).
    pub args: Vec<String>,
    /// The configuration file (`--config`), backed up and put back with the binary.
    pub config_file: Option<PathBuf>,
    /// How long a new version has to connect to the cloud and read its sources.
    pub health_deadline: Duration,
}

/// How the process is to start again once it has stopped: this binary, these arguments, this
/// environment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Restart {
    pub exe: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

#[derive(Clone, Debug, Deserialize)]
pub(crate) struct PackageParams {
    pub(crate) id: String,
    pub(crate) version: String,
    pub(crate) size_bytes: u64,
    pub(crate) sha256: String,
    pub(crate) signature: String,
    pub(crate) manifest: String,
}

/// Where an update stands, in its marker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "stage", rename_all = "snake_case")]
pub(crate) enum Stage {
    /// The new binary is in place: the next start checks its health.
    Installed,
    /// The health check failed and the backup is back: the next start (the version before)
    /// reports `failed`.
    RolledBack { reason: String },
    /// The cloud asked for the version before and it is back: the next start reports
    /// `rolled_back`.
    RollbackAsked,
}

/// `<update dir>/pending.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Pending {
    pub(crate) deployment_id: String,
    pub(crate) package_id: String,
    pub(crate) from_version: String,
    pub(crate) to_version: String,
    pub(crate) backup: PathBuf,
    /// How to start the agent as it ran before the update (the rollback's restart).
    pub(crate) before: Restart,
    /// Sources that were connected before the update: the new version must read them.
    pub(crate) sources: Vec<String>,
    pub(crate) started_at: Timestamp,
    /// Starts of the new version so far.
    pub(crate) starts: u32,
    #[serde(flatten)]
    pub(crate) stage: Stage,
}

/// `<backup>/backup.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct BackupInfo {
    pub(crate) deployment_id: String,
    pub(crate) version: String,
    pub(crate) taken_at: Timestamp,
    pub(crate) exe: PathBuf,
    pub(crate) config_file: Option<PathBuf>,
    /// Whether a firmware record was there (else the rollback removes the new one).
    pub(crate) had_firmware: bool,
}

/// `<update dir>/firmware.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Firmware {
    pub(crate) version: String,
    pub(crate) package_id: String,
    pub(crate) deployment_id: String,
    pub(crate) installed_at: Timestamp,
}

pub(crate) type Step = Result<(), String>;

/// A name from the command used as a file name: letters, digits, `-` and `_` only.
pub(crate) fn file_name(s: &str) -> Result<&str, String> {
    let fine = !s.is_empty()
        && s.len() <= 128
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    fine.then_some(s)
        .ok_or_else(|| format!("'{s}' is not a valid id or checksum"))
}

/// The size and SHA-256 of what was downloaded, and the manifest of the command rebuilt from
/// its fields.
pub(crate) async fn verify_file(file: &Path, p: &PackageParams) -> Step {
    let expected = plantd_model::ota::manifest(&p.id, &p.version, p.size_bytes, &p.sha256);
    if p.manifest != expected {
        return Err(
            "the manifest does not match the package's id, version, size and SHA-256".into(),
        );
    }
    let path = file.to_path_buf();
    let (size, digest) = tokio::task::spawn_blocking(move || -> std::io::Result<(u64, String)> {
        use std::io::Read;
        let mut f = std::fs::File::open(&path)?;
        let mut hasher = sha2::Sha256::new();
        let mut buf = vec![0u8; 1 << 16];
        let mut size = 0u64;
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                break;
            }
            size += n as u64;
            hasher.update(&buf[..n]);
        }
        Ok((size, hex::encode(hasher.finalize())))
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| format!("{}: {e}", file.display()))?;
    if size != p.size_bytes {
        return Err(format!(
            "the download has {size} bytes, the package {}",
            p.size_bytes
        ));
    }
    if !digest.eq_ignore_ascii_case(&p.sha256) {
        let _ = tokio::fs::remove_file(file).await;
        return Err(format!(
            "SHA-256 mismatch: downloaded {digest}, the package says {}",
            p.sha256
        ));
    }
    Ok(())
}

pub(crate) fn verify_signature(key: &[u8; 32], p: &PackageParams) -> Step {
    use base64::Engine;
    let signature = base64::engine::general_purpose::STANDARD
        .decode(&p.signature)
        .map_err(|_| "the package's signature is not base64".to_string())?;
    if plantd_auth::license_key::verify_message(key, p.manifest.as_bytes(), &signature) {
        Ok(())
    } else {
        Err("the package's signature does not verify with the organization's key".into())
    }
}

/// Makes the new binary executable and asks it its version: it must run here and say
/// `plantd ...`.
pub(crate) async fn binary_version(file: &Path) -> Result<String, String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        tokio::fs::set_permissions(file, std::fs::Permissions::from_mode(0o755))
            .await
            .map_err(|e| format!("{}: {e}", file.display()))?;
    }
    let run = tokio::process::Command::new(file)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(VERSION_CHECK, run)
        .await
        .map_err(|_| "the new binary did not say its version in time".to_string())?
        .map_err(|e| format!("the new binary does not run here: {e}"))?;
    let said = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || !said.starts_with("plantd ") {
        return Err(format!(
            "the new binary is not a plantd agent (`--version` said {:?})",
            said.chars().take(100).collect::<String>()
        ));
    }
    Ok(said)
}

/// Puts `from` in place of `to` atomically: a copy beside `to`, then a rename over it (a
/// running binary is replaced that way without disturbing the process that runs it).
pub(crate) fn replace_file(from: &Path, to: &Path) -> std::io::Result<()> {
    let name = to
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| "plantd".into());
    let staged = to.with_file_name(format!(".{name}.staged"));
    std::fs::copy(from, &staged)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o755))?;
    }
    std::fs::File::open(&staged)?.sync_all()?;
    std::fs::rename(&staged, to)
}

/// The backup of `pending` back in place: the binary, the configuration file, the firmware
/// record; then the marker's new stage.
pub(crate) fn restore(dir: &Path, pending: &Pending) -> Step {
    let b = &pending.backup;
    let info = read_json::<BackupInfo>(&b.join("backup.json"))
        .ok_or_else(|| format!("the backup {} is gone", b.display()))?;
    replace_file(&b.join("plantd"), &info.exe)
        .map_err(|e| format!("putting back {}: {e}", info.exe.display()))?;
    if let Some(c) = &info.config_file {
        std::fs::copy(b.join("config.toml"), c)
            .map_err(|e| format!("putting back {}: {e}", c.display()))?;
    }
    let firmware = dir.join(FIRMWARE);
    if info.had_firmware {
        std::fs::copy(b.join(FIRMWARE), &firmware).map_err(|e| e.to_string())?;
    } else {
        let _ = std::fs::remove_file(&firmware);
    }
    let text = serde_json::to_vec_pretty(pending).map_err(|e| e.to_string())?;
    std::fs::write(dir.join(MARKER), text).map_err(|e| e.to_string())
}

/// Drops backups older than [`KEEP_BACKUPS`] (never `keep`, nor the one an update under way
/// names) and downloads that are not the one of an update under way.
pub(crate) fn prune_backups(dir: &Path, keep: Option<&Path>) {
    let pending = read_json::<Pending>(&dir.join(MARKER)).map(|p| p.backup);
    let now = Timestamp::now().millis();
    if let Ok(entries) = std::fs::read_dir(dir.join("backups")) {
        for e in entries.flatten() {
            let path = e.path();
            if Some(path.as_path()) == keep || pending.as_deref() == Some(path.as_path()) {
                continue;
            }
            let old = read_json::<BackupInfo>(&path.join("backup.json"))
                .is_none_or(|i| now - i.taken_at.millis() > KEEP_BACKUPS.as_millis() as i64);
            if old {
                let _ = std::fs::remove_dir_all(&path);
            }
        }
    }
    if keep.is_none() && pending.is_none() {
        let _ = std::fs::remove_dir_all(dir.join("download"));
    }
}

impl SelfUpdateSettings {
    /// How to start this agent again as it runs now: its binary, its arguments, this process's
    /// environment (what a rollback starts the version before with).
    pub(crate) fn restart_as_now(&self) -> Restart {
        Restart {
            exe: self.exe.clone(),
            args: self.args.clone(),
            env: environment(),
        }
    }
}

/// This process's environment.
fn environment() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

pub(crate) fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Option<T> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

pub(crate) async fn write_json<T: Serialize>(path: &Path, value: &T) -> Step {
    let text = serde_json::to_vec_pretty(value).map_err(|e| e.to_string())?;
    write_private(path, &text).await
}

/// Writes `path` readable by this user only (the marker holds the environment) and syncs it.
pub(crate) async fn write_private(path: &Path, bytes: &[u8]) -> Step {
    let mut o = tokio::fs::OpenOptions::new();
    o.create(true).truncate(true).write(true);
    #[cfg(unix)]
    o.mode(0o600);
    let mut f = o
        .open(path)
        .await
        .map_err(|e| format!("{}: {e}", path.display()))?;
    f.write_all(bytes)
        .await
        .map_err(|e| format!("{}: {e}", path.display()))?;
    f.sync_all()
        .await
        .map_err(|e| format!("{}: {e}", path.display()))
}

pub(crate) async fn mkdir(path: &Path) -> Step {
    tokio::fs::create_dir_all(path)
        .await
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// After a failed `exec` of an installed version: its backup back in place, the marker saying
/// so; the version before to start instead. None when no update was under way.
pub fn roll_back_after_failed_start(dir: &Path, error: &str) -> Option<Restart> {
    let mut pending = read_json::<Pending>(&dir.join(MARKER))?;
    if pending.stage != Stage::Installed {
        return None;
    }
    pending.stage = Stage::RolledBack {
        reason: format!("the new version did not start: {error}"),
    };
    restore(dir, &pending).ok()?;
    Some(pending.before)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn package(sha: &str) -> PackageParams {
        PackageParams {
            id: "pkg1".into(),
            version: "2.0.0".into(),
            size_bytes: 3,
            sha256: sha.into(),
            signature: String::new(),
            manifest: plantd_model::ota::manifest("pkg1", "2.0.0", 3, sha),
        }
    }

    #[tokio::test]
    async fn a_download_is_checked_against_the_command() {
        let dir = std::env::temp_dir().join(format!("plantd-update-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("f");
        std::fs::write(&file, b"abc").unwrap();
        let sha = hex::encode(sha2::Sha256::digest(b"abc"));
        verify_file(&file, &package(&sha)).await.unwrap();
        // A manifest that says something else.
        let mut p = package(&sha);
        p.version = "3.0.0".into();
        assert!(
            verify_file(&file, &p)
                .await
                .unwrap_err()
                .contains("manifest")
        );
        // Bytes that are not the package's: refused, and dropped (the next try downloads again).
        let other = hex::encode(sha2::Sha256::digest(b"abd"));
        let e = verify_file(&file, &package(&other)).await.unwrap_err();
        assert!(e.contains("SHA-256 mismatch"), "{e}");
        assert!(!file.exists());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn names_from_the_command_stay_in_their_folder() {
        assert!(file_name("dep_1-a").is_ok());
        assert!(file_name("../etc").is_err());
        assert!(file_name("").is_err());
    }

    #[test]
    fn a_rollback_puts_the_binary_the_configuration_and_the_version_back() {
        let dir = std::env::temp_dir().join(format!("plantd-update-{}", uuid::Uuid::new_v4()));
        let backup = dir.join("backups").join("d1");
        std::fs::create_dir_all(&backup).unwrap();
        let exe = dir.join("plantd");
        let config = dir.join("plantd.toml");
        std::fs::write(&exe, b"new").unwrap();
        std::fs::write(&config, b"new = true").unwrap();
        std::fs::write(dir.join(FIRMWARE), b"{}").unwrap();
        std::fs::write(backup.join("plantd"), b"old").unwrap();
        std::fs::write(backup.join("config.toml"), b"old = true").unwrap();
        let info = BackupInfo {
            deployment_id: "d1".into(),
            version: "1.0.0".into(),
            taken_at: Timestamp::now(),
            exe: exe.clone(),
            config_file: Some(config.clone()),
            had_firmware: false,
        };
        std::fs::write(
            backup.join("backup.json"),
            serde_json::to_vec(&info).unwrap(),
        )
        .unwrap();
        let before = Restart {
            exe: exe.clone(),
            args: vec!["edge".into()],
            env: vec![("A".into(), "1".into())],
        };
        let pending = Pending {
            deployment_id: "d1".into(),
            package_id: "p".into(),
            from_version: "1.0.0".into(),
            to_version: "2.0.0".into(),
            backup: backup.clone(),
            before: before.clone(),
            sources: vec![],
            started_at: Timestamp::now(),
            starts: 1,
            stage: Stage::Installed,
        };
        std::fs::write(dir.join(MARKER), serde_json::to_vec(&pending).unwrap()).unwrap();
        let again = roll_back_after_failed_start(&dir, "exec: no such file").unwrap();
        assert_eq!(again, before);
        assert_eq!(std::fs::read(&exe).unwrap(), b"old");
        assert_eq!(std::fs::read(&config).unwrap(), b"old = true");
        assert!(!dir.join(FIRMWARE).exists());
        let marker: Pending = read_json(&dir.join(MARKER)).unwrap();
        assert!(
            matches!(&marker.stage, Stage::RolledBack { reason } if reason.contains("did not start")),
            "{marker:?}"
        );
        // Once rolled back, a second failed start changes nothing.
        assert!(roll_back_after_failed_start(&dir, "again").is_none());
        // Backups a day old go; the one an update names stays.
        prune_backups(&dir, None);
        assert!(backup.exists());
        let _ = std::fs::remove_dir_all(dir);
    }
}
