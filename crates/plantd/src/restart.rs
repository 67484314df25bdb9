//! The edge agent starting again as another binary (its self-update, or the rollback of one:
//! `plantd_app::edge_update`): once the server has stopped gracefully and the runtime is down,
//! the process becomes the new binary (`exec`: same process id, so a supervisor such as
//! systemd sees one service throughout), with the arguments and environment the update kept.

use plantd_app::edge_update::{Restart, SelfUpdateSettings, roll_back_after_failed_start};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Seconds a new version has to pass its health check unless the file says otherwise.
const DEFAULT_HEALTH_SECS: u64 = 300;

/// What to start again, and where the update keeps its marker (a failed start rolls back).
pub(crate) struct Again {
    pub(crate) restart: Restart,
    pub(crate) update_dir: PathBuf,
}

/// How this `plantd edge` process updates itself: it replaces the binary it was started from,
/// keeps its arguments, and backs up its configuration file.
pub(crate) fn self_update_settings(
    update_dir: &Path,
    config: Option<&Path>,
    health_secs: Option<u64>,
) -> anyhow::Result<SelfUpdateSettings> {
    let health = match health_secs {
        Some(s) if !(5..=86_400).contains(&s) => {
            anyhow::bail!("edge.update_health_check_secs must be from 5 to 86400")
        }
        Some(s) => s,
        None => DEFAULT_HEALTH_SECS,
    };
    let exe = std::env::current_exe()
        .map_err(|e| anyhow::anyhow!("cannot tell which binary runs: {e}"))?;
    Ok(SelfUpdateSettings {
        dir: update_dir.to_path_buf(),
        exe,
        args: std::env::args_os()
            .skip(1)
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        config_file: config.map(|c| std::fs::canonicalize(c).unwrap_or_else(|_| c.to_path_buf())),
        health_deadline: Duration::from_secs(health),
    })
}

/// Becomes `again`'s binary; returns only when that fails, after putting the version before
/// back and becoming it instead.
#[cfg(unix)]
pub(crate) fn exec(again: Again) -> ExitCode {
    use std::os::unix::process::CommandExt;
    let run = |r: &Restart| {
        std::process::Command::new(&r.exe)
            .args(&r.args)
            .env_clear()
            .envs(r.env.iter().map(|(k, v)| (k, v)))
            .exec()
    };
    let error = run(&again.restart);
    eprintln!(
        "error: cannot start {}: {error}",
        again.restart.exe.display()
    );
    match roll_back_after_failed_start(&again.update_dir, &error.to_string()) {
        Some(before) => {
            eprintln!(
                "edge agent: the version before is back; starting {}",
                before.exe.display()
            );
            let error = run(&before);
            eprintln!("error: cannot start {}: {error}", before.exe.display());
            ExitCode::FAILURE
        }
        None => ExitCode::FAILURE,
    }
}

#[cfg(not(unix))]
pub(crate) fn exec(again: Again) -> ExitCode {
    eprintln!(
        "error: the agent updated itself: start {} again (this system cannot replace a running process)",
        again.restart.exe.display()
    );
    ExitCode::FAILURE
}
