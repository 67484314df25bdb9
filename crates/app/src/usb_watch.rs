//! USB auto-import (SPEC 2.16, 4.15; issue 34): an organization's mount directory watched with
//! inotify (the `notify` crate) for `twinbox_config.csv` or a `.yaml` file in it or in a folder
//! of it; each is imported (`Method::Usb`) and marked `<file>.imported` beside it, so it is not
//! imported twice. The parent is watched too, so a stick that appears or is removed is
//! noticed; a mount over the directory (a new device under the same path) is noticed by the
//! look every few seconds, which also covers a missed event. The watched path is kept in the
//! database and watched again after a restart.

use notify::{RecursiveMode, Watcher};
use plantd_model::Timestamp;
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::{mpsc, watch};

use crate::app::App;
use crate::error::{AppError, AppResult};
use crate::provisioning::{FileFormat, MAX_IMPORT_BYTES, Method};
pub use crate::usb_state::{UsbImport, UsbWatchView};

/// How often the directory is looked at without an event (a mount, a missed event).
const LOOK_EVERY: Duration = Duration::from_secs(3);
/// Quiet time after an event before the directory is read (a file being copied).
const SETTLE: Duration = Duration::from_millis(300);
/// The CSV's file name on a stick (SPEC 2.16).
pub const CSV_NAME: &str = "twinbox_config.csv";

impl App {
    /// Watches `path` (an absolute directory: where the stick mounts) for the organization,
    /// replacing a former path; answers at once and reads the directory in the background.
    pub async fn start_usb_watch(&self, org_id: &str, path: &str) -> AppResult<UsbWatchView> {
        let p = Path::new(path.trim());
        if !p.is_absolute() || p.parent().is_none() {
            return Err(AppError::invalid(
                "path",
                "must be an absolute directory below /, such as /media/usb",
            ));
        }
        if p.exists() && !p.is_dir() {
            return Err(AppError::invalid("path", "is a file, not a directory"));
        }
        let path = p.to_string_lossy().trim_end_matches('/').to_string();
        let started_at = self.store().set_usb_watch(org_id, &path).await?;
        let view = UsbWatchView::fresh(path, started_at, p.is_dir());
        self.usb().start(org_id, view.clone());
        self.usb().wake().notify_one();
        Ok(view)
    }

    /// The organization's watch on this node.
    pub fn usb_watch(&self, org_id: &str) -> AppResult<UsbWatchView> {
        self.usb()
            .get(org_id)
            .ok_or(AppError::NotFound("USB watch"))
    }

    fn update_watch(&self, org_id: &str, change: impl FnOnce(&mut UsbWatchView)) {
        self.usb().update(org_id, change);
    }
}

/// The worker: a watch per stored path, started again when a path is set.
pub(crate) async fn run(app: App, mut stop: watch::Receiver<bool>) {
    let mut running: HashMap<String, (String, tokio::task::JoinHandle<()>)> = HashMap::new();
    loop {
        match app.store().usb_watches().await {
            Ok(list) => {
                for (org, path, started_at) in list {
                    if running.get(&org).is_some_and(|(p, _)| *p == path) {
                        continue;
                    }
                    if let Some((_, task)) = running.remove(&org) {
                        task.abort();
                    }
                    app.usb()
                        .resume(&org, UsbWatchView::fresh(path.clone(), started_at, false));
                    let task = tokio::spawn(watch_dir(app.clone(), org.clone(), path.clone()));
                    running.insert(org, (path, task));
                }
            }
            Err(e) => {
                tracing::warn!(error = %plantd_model::error_chain(&e), "cannot read the USB watches")
            }
        }
        tokio::select! {
            _ = app.usb().wake().notified() => {}
            _ = stop.changed() => {
                for (_, (_, task)) in running {
                    task.abort();
                }
                return;
            }
        }
    }
}

/// A file's size and modification time: a file seen with the same is not read again.
type Seen = HashMap<PathBuf, (u64, i64)>;

async fn watch_dir(app: App, org: String, path: String) {
    let dir = PathBuf::from(&path);
    let (tx, mut events) = mpsc::unbounded_channel();
    let watcher = notify::recommended_watcher(move |e: notify::Result<notify::Event>| {
        let _ = tx.send(e.is_ok());
    });
    let mut watcher = match watcher {
        Ok(w) => w,
        Err(e) => {
            app.update_watch(&org, |v| v.error = Some(format!("cannot watch: {e}")));
            return;
        }
    };
    // The parent: the mount directory appearing and going.
    if let Some(parent) = dir.parent()
        && let Err(e) = watcher.watch(parent, RecursiveMode::NonRecursive)
    {
        app.update_watch(&org, |v| {
            v.error = Some(format!("cannot watch {}: {e}", parent.display()))
        });
    }
    // The directory watched, by its device and inode: a mount over it is another directory.
    let mut watched: Option<(u64, u64)> = None;
    let mut seen = Seen::new();
    loop {
        let here = std::fs::metadata(&dir)
            .ok()
            .filter(|m| m.is_dir())
            .map(|m| (m.dev(), m.ino()));
        if here != watched {
            let _ = watcher.unwatch(&dir);
            watched = here;
            if here.is_some()
                && let Err(e) = watcher.watch(&dir, RecursiveMode::Recursive)
            {
                app.update_watch(&org, |v| {
                    v.error = Some(format!("cannot watch {path}: {e}"))
                });
            }
        }
        app.update_watch(&org, |v| {
            v.present = here.is_some();
            v.last_look_at = Some(Timestamp::now());
        });
        if here.is_some() {
            look(&app, &org, &dir, &mut seen).await;
        }
        // An event, or the next look; then quiet for a moment (a file still being copied).
        match tokio::time::timeout(LOOK_EVERY, events.recv()).await {
            Ok(None) => return,
            Ok(Some(_)) => loop {
                match tokio::time::timeout(SETTLE, events.recv()).await {
                    Ok(Some(_)) => continue,
                    Ok(None) => return,
                    Err(_) => break,
                }
            },
            Err(_) => {}
        }
    }
}

/// The configuration files in `dir` and its folders (one level), by name.
fn candidates(dir: &Path) -> Vec<PathBuf> {
    let is_config = |p: &Path| {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        name == CSV_NAME || name.ends_with(".yaml") || name.ends_with(".yml")
    };
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            if let Ok(inner) = std::fs::read_dir(&p) {
                out.extend(
                    inner
                        .flatten()
                        .map(|e| e.path())
                        .filter(|p| p.is_file() && is_config(p)),
                );
            }
        } else if p.is_file() && is_config(&p) {
            out.push(p);
        }
    }
    out.sort();
    out
}

fn marker(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".imported");
    PathBuf::from(name)
}

/// Imports every configuration file not marked and not seen unchanged.
async fn look(app: &App, org: &str, dir: &Path, seen: &mut Seen) {
    for file in candidates(dir) {
        if marker(&file).exists() {
            continue;
        }
        let Ok(meta) = std::fs::metadata(&file) else {
            continue;
        };
        let stamp = (meta.len(), meta.mtime());
        if seen.get(&file) == Some(&stamp) {
            continue;
        }
        seen.insert(file.clone(), stamp);
        let outcome = import(app, org, &file, meta.len()).await;
        let at = Timestamp::now();
        let (imported, error) = match outcome {
            Ok(n) => {
                tracing::info!(file = %file.display(), assets = n, "USB import");
                let text = serde_json::json!({"imported_at": at, "assets": n});
                let marked = std::fs::write(marker(&file), format!("{text}\n"));
                (
                    Some(n),
                    marked
                        .err()
                        .map(|e| format!("imported, but the marker cannot be written: {e}")),
                )
            }
            Err(message) => {
                tracing::warn!(file = %file.display(), error = %message, "USB import refused");
                (None, Some(message))
            }
        };
        let record = UsbImport {
            file: file.display().to_string(),
            at,
            imported,
            error,
        };
        app.update_watch(org, |v| {
            v.imports.insert(0, record);
            v.imports.truncate(crate::usb_state::KEPT_IMPORTS);
        });
    }
}

async fn import(app: &App, org: &str, file: &Path, len: u64) -> Result<usize, String> {
    if len > MAX_IMPORT_BYTES as u64 {
        return Err(format!("larger than {MAX_IMPORT_BYTES} bytes"));
    }
    let bytes = tokio::fs::read(file)
        .await
        .map_err(|e| format!("cannot read: {e}"))?;
    let format = if file.extension().and_then(|e| e.to_str()) == Some("csv") {
        FileFormat::Csv
    } else {
        FileFormat::Yaml
    };
    let report = app.import_file(org, format, &bytes, Method::Usb).await;
    report.map(|r| r.imported).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_are_the_csv_and_yaml_files_of_the_directory_and_its_folders() {
        let dir = std::env::temp_dir().join(format!("plantd-usb-{}", plantd_model::new_id()));
        std::fs::create_dir_all(dir.join("site-a/deeper")).unwrap();
        for f in [
            "twinbox_config.csv",
            "other.csv",
            "plant.yaml",
            "site-a/line.yml",
            "site-a/twinbox_config.csv",
            "site-a/deeper/too-deep.yaml",
        ] {
            std::fs::write(dir.join(f), "x").unwrap();
        }
        let found: Vec<String> = candidates(&dir)
            .iter()
            .map(|p| p.strip_prefix(&dir).unwrap().display().to_string())
            .collect();
        assert_eq!(
            found,
            [
                "plant.yaml",
                "site-a/line.yml",
                "site-a/twinbox_config.csv",
                "twinbox_config.csv"
            ]
        );
        assert_eq!(
            marker(&dir.join("plant.yaml")),
            dir.join("plant.yaml.imported")
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
