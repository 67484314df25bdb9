//! The two backends and how a database URL selects one.

use std::path::Path;

use crate::error::{Result, StoreError};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgresql",
        }
    }
}

/// Which backend a database URL selects. Anything but `sqlite:` and `postgres(ql)://` is refused,
/// so a typo never silently creates a file.
pub fn backend_of(url: &str) -> Result<Backend> {
    let lower = url.to_ascii_lowercase();
    if lower.starts_with("sqlite:") {
        Ok(Backend::Sqlite)
    } else if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
        Ok(Backend::Postgres)
    } else {
        let scheme = url.split(':').next().unwrap_or_default();
        Err(StoreError::InvalidUrl(format!(
            "unsupported scheme '{scheme}' in '{url}': use sqlite://PATH or postgres://USER@HOST/DB"
        )))
    }
}

/// The file of a SQLite URL (`None` for in-memory databases and other backends).
pub fn sqlite_file(url: &str) -> Option<std::path::PathBuf> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    let path = rest.split('?').next().unwrap_or_default();
    (!path.is_empty() && !path.starts_with(":memory:")).then(|| std::path::PathBuf::from(path))
}

/// The default SQLite URL for a data directory.
pub fn sqlite_url_for(data_dir: &Path) -> String {
    format!("sqlite://{}", data_dir.join("plantd.db").display())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_schemes() {
        assert_eq!(backend_of("sqlite:///tmp/x.db").unwrap(), Backend::Sqlite);
        assert_eq!(
            backend_of("postgres://root@127.0.0.1/test").unwrap(),
            Backend::Postgres
        );
        assert_eq!(backend_of("postgresql://h/db").unwrap(), Backend::Postgres);
        let e = backend_of("postgress://h/db").unwrap_err().to_string();
        assert!(e.contains("unsupported scheme 'postgress'"), "{e}");
        assert!(backend_of("/tmp/plantd.db").is_err());
    }

    #[test]
    fn sqlite_files() {
        assert_eq!(
            sqlite_file("sqlite:///tmp/a.db?mode=rwc").unwrap(),
            std::path::PathBuf::from("/tmp/a.db")
        );
        assert_eq!(
            sqlite_file("sqlite:rel.db").unwrap(),
            std::path::PathBuf::from("rel.db")
        );
        assert!(sqlite_file("sqlite::memory:").is_none());
        assert!(sqlite_file("postgres://h/db").is_none());
    }
}
