//! One server per SQLite database: the lock file beside it.

use anyhow::Context;
use std::path::PathBuf;

/// Holds `<database file>.lock` for the life of the server: one server per SQLite database.
/// Several servers on one file would each run connectors and count limits of their own, and
/// the data source cache relies on this server making every data source write.
pub(crate) fn lock_sqlite(database_url: &str) -> anyhow::Result<Option<std::fs::File>> {
    let Some(db) = plantd_store::sqlite_file(database_url) else {
        return Ok(None);
    };
    let path = PathBuf::from(format!("{}.lock", db.display()));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot open the lock file {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
            "another plantd server is already using {} (it holds {}); stop it first or use another --data-dir",
            db.display(),
            path.display()
        ),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("cannot lock {}", path.display()))
        }
    }
}
