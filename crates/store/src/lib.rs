//! Storage of plantd on SQLite (the embedded default, a file in the data directory) or
//! PostgreSQL, chosen by the database URL's scheme. One SQL text with `$N` placeholders serves
//! both through sqlx's `Any` driver; migrations are kept per backend and embedded in the binary.

mod alerts;
mod api_keys;
mod audit;
mod data_source_cache;
mod data_sources;
mod lease;
mod migrate;
mod notifications;
mod notify;
mod orgs;
mod webhooks;

pub use alerts::{AlertFilter, RuleFields};
pub use api_keys::NewApiKey;
pub use audit::{AuditFilter, AuditSummary, NewAuditRecord, insert_audit_rows};
pub use data_sources::{ConnectorState, DataSourceUpdate, NewDataSource};
pub use lease::{CONNECTORS_LEASE, Lease};
pub use notifications::{
    AlertEvent, NewNotification, Notification, NotificationFilter, NotificationSettings,
};
pub use notify::NotifyTarget;
pub use orgs::NewUser;
pub use webhooks::{AttemptOutcome, Delivery, Webhook};

use sqlx::AnyPool;
use sqlx::any::AnyPoolOptions;
use std::path::Path;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("not found")]
    NotFound,
    #[error("conflict: {0}")]
    Conflict(String),
    #[error("invalid database URL: {0}")]
    InvalidUrl(String),
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
}

pub type Result<T> = std::result::Result<T, StoreError>;

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

/// A connection pool plus the backend it talks to.
#[derive(Clone, Debug)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
    data_source_cache: std::sync::Arc<data_source_cache::DataSourceCache>,
    /// SQLite allows one writer at a time; writers of this process queue here rather than in
    /// SQLite's busy handler, which sleeps and made concurrent writes take seconds.
    write_gate: std::sync::Arc<tokio::sync::Mutex<()>>,
    /// The audit writer's queue, started with the first record.
    audit_writer: std::sync::Arc<std::sync::OnceLock<audit::AuditQueue>>,
    /// The PostgreSQL URL, for change listeners.
    postgres_url: Option<std::sync::Arc<str>>,
}

/// A write transaction; on SQLite it also holds the process's write gate until it ends.
pub struct WriteTx {
    tx: sqlx::Transaction<'static, sqlx::Any>,
    _gate: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl WriteTx {
    pub async fn commit(self) -> std::result::Result<(), sqlx::Error> {
        self.tx.commit().await
    }
}

impl std::ops::Deref for WriteTx {
    type Target = sqlx::AnyConnection;
    fn deref(&self) -> &Self::Target {
        &self.tx
    }
}

impl std::ops::DerefMut for WriteTx {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.tx
    }
}

impl Store {
    /// Connects (creating a SQLite file if needed) and applies pending migrations.
    pub async fn connect(url: &str) -> Result<Self> {
        let backend = backend_of(url)?;
        sqlx::any::install_default_drivers();
        let options = AnyPoolOptions::new().acquire_timeout(Duration::from_secs(10));
        let pool = match backend {
            Backend::Sqlite => {
                let url = if url.contains('?') {
                    url.to_string()
                } else {
                    format!("{url}?mode=rwc")
                };
                options
                    .max_connections(8)
                    .after_connect(|conn, _| {
                        Box::pin(async move {
                            // WAL lets readers run beside the writer and operator commands run
                            // beside the server; synchronous=FULL makes every commit durable.
                            sqlx::raw_sql(
                                "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; \
                                 PRAGMA busy_timeout=10000; PRAGMA foreign_keys=ON;",
                            )
                            .execute(conn)
                            .await?;
                            Ok(())
                        })
                    })
                    .connect(&url)
                    .await?
            }
            Backend::Postgres => options.max_connections(16).connect(url).await?,
        };
        let cache = std::sync::Arc::new(data_source_cache::DataSourceCache::new(
            backend == Backend::Sqlite,
        ));
        if backend == Backend::Postgres {
            data_source_cache::spawn_listener(url.to_string(), &cache);
        }
        let store = Self {
            pool,
            backend,
            data_source_cache: cache,
            write_gate: Default::default(),
            audit_writer: Default::default(),
            postgres_url: (backend == Backend::Postgres).then(|| url.into()),
        };
        migrate::run(&store).await?;
        Ok(store)
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// Waits for the write gate (SQLite only); hold the guard for the duration of a write
    /// statement outside a [`WriteTx`].
    pub async fn write_guard(&self) -> Option<tokio::sync::OwnedMutexGuard<()>> {
        match self.backend {
            Backend::Sqlite => Some(self.write_gate.clone().lock_owned().await),
            Backend::Postgres => None,
        }
    }

    /// On PostgreSQL, starts a task telling `target` of every `NOTIFY <channel>` from any node
    /// (see [`NotifyTarget`]) until `target` or `alive`'s sender is dropped. Returns false on
    /// SQLite, where this process sees every write itself.
    pub fn listen<T: NotifyTarget>(
        &self,
        channel: &'static str,
        target: &std::sync::Arc<T>,
        alive: tokio::sync::watch::Receiver<()>,
    ) -> bool {
        match &self.postgres_url {
            Some(url) => {
                notify::spawn_listener(url.to_string(), channel, target, alive);
                true
            }
            None => false,
        }
    }

    /// Begins a write transaction (behind the write gate on SQLite).
    pub async fn begin_write(&self) -> Result<WriteTx> {
        let gate = self.write_guard().await;
        Ok(WriteTx {
            tx: self.pool.begin().await?,
            _gate: gate,
        })
    }

    /// Round trip to the database, for health reporting.
    pub async fn ping(&self) -> Result<Duration> {
        let started = std::time::Instant::now();
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(started.elapsed())
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// Maps a unique-constraint violation to [`StoreError::Conflict`] with `message`.
pub(crate) fn conflict_on_unique(e: sqlx::Error, message: &str) -> StoreError {
    match &e {
        sqlx::Error::Database(db) if db.is_unique_violation() => {
            StoreError::Conflict(message.to_string())
        }
        _ => StoreError::Database(e),
    }
}

/// Escapes `%`, `_` and `\` for a `LIKE ... ESCAPE '\'` pattern.
pub(crate) fn like_pattern(text: &str) -> String {
    let mut out = String::from("%");
    for c in text.to_lowercase().chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('%');
    out
}

/// Builds `WHERE` clauses with numbered placeholders for the `Any` driver.
pub(crate) struct Where {
    clauses: Vec<String>,
    args: Vec<Arg>,
}

#[derive(Clone, Debug)]
pub(crate) enum Arg {
    Text(String),
    Int(i64),
}

impl Where {
    pub(crate) fn new() -> Self {
        Self {
            clauses: Vec::new(),
            args: Vec::new(),
        }
    }
    /// Adds a clause where `?` stands for the next placeholder(s).
    pub(crate) fn push(&mut self, clause: &str, args: impl IntoIterator<Item = Arg>) {
        let mut text = String::new();
        let mut pieces = clause.split('?').peekable();
        let args: Vec<Arg> = args.into_iter().collect();
        let mut used = 0;
        while let Some(piece) = pieces.next() {
            text.push_str(piece);
            if pieces.peek().is_some() {
                used += 1;
                text.push_str(&format!("${}", self.args.len() + used));
            }
        }
        debug_assert_eq!(used, args.len(), "placeholder count of '{clause}'");
        self.args.extend(args);
        self.clauses.push(text);
    }
    pub(crate) fn sql(&self) -> String {
        if self.clauses.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", self.clauses.join(" AND "))
        }
    }
    pub(crate) fn next_placeholder(&self, offset: usize) -> String {
        format!("${}", self.args.len() + offset)
    }
    pub(crate) fn bind<'q>(
        &self,
        mut q: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
    ) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments> {
        for a in &self.args {
            q = match a {
                Arg::Text(s) => q.bind(s.clone()),
                Arg::Int(i) => q.bind(*i),
            };
        }
        q
    }
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

    #[test]
    fn where_numbers_placeholders() {
        let mut w = Where::new();
        w.push("org_id = ?", [Arg::Text("o".into())]);
        w.push("ts BETWEEN ? AND ?", [Arg::Int(1), Arg::Int(2)]);
        assert_eq!(w.sql(), " WHERE org_id = $1 AND ts BETWEEN $2 AND $3");
        assert_eq!(w.next_placeholder(1), "$4");
        assert_eq!(like_pattern("50%_a"), "%50\\%\\_a%");
    }
}
