//! [`Store`]: the handle every repository method hangs off (one module per aggregate adds its
//! `impl Store` block). It holds the pool, the data source cache and the audit writer's queue.

use sqlx::Row;
use sqlx::any::AnyPoolOptions;
use std::sync::Arc;
use std::time::Duration;

use crate::audit_writer::AuditQueue;
use crate::backend::{Backend, backend_of};
use crate::data_source_cache::{self, DataSourceCache};
use crate::database::{Database, WriteTx};
use crate::error::Result;
use crate::notify::{self, NotifyTarget};

/// A connection pool plus the backend it talks to.
#[derive(Clone, Debug)]
pub struct Store {
    pub(crate) db: Database,
    pub(crate) data_source_cache: Arc<DataSourceCache>,
    /// The audit writer's queue, started with the first record.
    pub(crate) audit_writer: Arc<std::sync::OnceLock<AuditQueue>>,
    /// The heartbeat writer's queue, started with the first heartbeat.
    pub(crate) heartbeat_writer: Arc<std::sync::OnceLock<crate::heartbeat_writer::HeartbeatQueue>>,
    /// The PostgreSQL URL, for change listeners and leases.
    pub(crate) postgres_url: Option<Arc<str>>,
}

impl Store {
    /// Connects (creating a SQLite file if needed) and applies pending migrations.
    pub async fn connect(url: &str) -> Result<Self> {
        let backend = backend_of(url)?;
        sqlx::any::install_default_drivers();
        let sqlite_url = if url.contains('?') {
            url.to_string()
        } else {
            format!("{url}?mode=rwc")
        };
        let pool = match backend {
            Backend::Sqlite => sqlite_pool(&sqlite_url, 8, READ_CACHE_KIB).await?,
            Backend::Postgres => {
                AnyPoolOptions::new()
                    .acquire_timeout(Duration::from_secs(10))
                    .max_connections(16)
                    .connect(url)
                    .await?
            }
        };
        let cache = Arc::new(DataSourceCache::new(backend == Backend::Sqlite));
        if backend == Backend::Postgres {
            data_source_cache::spawn_listener(url.to_string(), &cache);
        }
        if backend == Backend::Sqlite {
            // A new file gives freed pages back to the file system (telemetry sealing rewrites
            // blocks); the mode can only be chosen before the first table.
            let tables: i64 = sqlx::query("SELECT COUNT(*) AS n FROM sqlite_master")
                .fetch_one(&pool)
                .await?
                .try_get("n")?;
            if tables == 0 {
                // The file exists already (WAL mode is written in its header): VACUUM applies the
                // mode, at no cost on an empty file.
                let mut conn = pool.acquire().await?;
                sqlx::raw_sql("PRAGMA auto_vacuum = INCREMENTAL; VACUUM")
                    .execute(&mut *conn)
                    .await?;
            }
        }
        crate::migrate::run(&pool, backend).await?;
        // On SQLite, write transactions run on one connection of their own, the pool serving
        // reads: SQLite drops a connection's page cache whenever another connection has written
        // since its last transaction, so writes spread over the pool each began with a cold
        // cache (hundreds of page reads before a group's first row).
        let writer = match backend {
            Backend::Sqlite => Some(sqlite_pool(&sqlite_url, 1, WRITE_CACHE_KIB).await?),
            Backend::Postgres => None,
        };
        // On PostgreSQL, bulk reads use the driver's own rows: connected when first used.
        let bulk = match backend {
            Backend::Sqlite => None,
            Backend::Postgres => Some(
                sqlx::postgres::PgPoolOptions::new()
                    .acquire_timeout(Duration::from_secs(10))
                    .max_connections(8)
                    .connect_lazy(url)?,
            ),
        };
        Ok(Self {
            db: Database::new(pool, writer, bulk, backend),
            data_source_cache: cache,
            audit_writer: Default::default(),
            heartbeat_writer: Default::default(),
            postgres_url: (backend == Backend::Postgres).then(|| url.into()),
        })
    }

    pub fn backend(&self) -> Backend {
        self.db.backend
    }

    pub fn pool(&self) -> &sqlx::AnyPool {
        &self.db.pool
    }

    /// On PostgreSQL, a pool of its own driver for bulk reads of binary rows (the generic
    /// pool's rows copy every value once more; telemetry scans read blocks through this one).
    pub fn postgres_pool(&self) -> Option<&sqlx::PgPool> {
        self.db.bulk.as_ref()
    }

    /// Waits for the write gate (SQLite only); hold the guard for the duration of a write
    /// statement outside a [`WriteTx`].
    pub async fn write_guard(&self) -> Option<tokio::sync::OwnedMutexGuard<()>> {
        self.db.write_guard().await
    }

    /// Begins a write transaction (behind the write gate on SQLite).
    pub async fn begin_write(&self) -> Result<WriteTx> {
        self.db.begin_write().await
    }

    /// Begins a write transaction whose commit may reach the disk after it returns (see
    /// `Database::begin_write_unsynced`): only for writes done again when a crash loses them.
    pub async fn begin_write_unsynced(&self) -> Result<WriteTx> {
        self.db.begin_write_unsynced().await
    }

    /// On PostgreSQL, starts a task telling `target` of every `NOTIFY <channel>` from any node
    /// (see [`NotifyTarget`]) until `target` or `alive`'s sender is dropped. Returns false on
    /// SQLite, where this process sees every write itself.
    pub fn listen<T: NotifyTarget>(
        &self,
        channel: &'static str,
        target: &Arc<T>,
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

    /// Round trip to the database, for health reporting.
    /// Connections of the read pool: (open, idle).
    pub fn pool_use(&self) -> (u32, usize) {
        (self.pool().size(), self.pool().num_idle())
    }

    pub async fn ping(&self) -> Result<Duration> {
        let started = std::time::Instant::now();
        sqlx::query("SELECT 1").execute(self.pool()).await?;
        Ok(started.elapsed())
    }

    /// Whether the store is closing or closed (the server stopping): background work that
    /// fails then ends quietly.
    pub fn is_closed(&self) -> bool {
        self.db.is_closed()
    }

    pub async fn close(&self) {
        self.db.close().await;
    }
}

/// SQLite's page cache of each read connection (its default, 2 MiB).
const READ_CACHE_KIB: u32 = 2_048;
/// SQLite's page cache of the write connection: every write of the process goes through it, and
/// at 100,000 series a telemetry flush touches rollup and block pages all over the file; with
/// the default 2 MiB most of them were read again from the file system on every flush (a
/// third of the writer's time, docs/benchmarks.md "Telemetry at plant scale"). Filled only as
/// pages are used.
const WRITE_CACHE_KIB: u32 = 65_536;

/// A pool of SQLite connections to `url` with this project's settings, each with a page cache
/// of `cache_kib`.
async fn sqlite_pool(url: &str, connections: u32, cache_kib: u32) -> Result<sqlx::AnyPool> {
    Ok(AnyPoolOptions::new()
        .acquire_timeout(Duration::from_secs(10))
        .max_connections(connections)
        .after_connect(move |conn, _| {
            Box::pin(async move {
                // WAL lets readers run beside the writer and operator commands run beside the
                // server; synchronous=FULL makes every commit durable.
                let pragmas = format!(
                    "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; \
                     PRAGMA busy_timeout=10000; PRAGMA foreign_keys=ON; PRAGMA cache_size=-{cache_kib};"
                );
                sqlx::raw_sql(sqlx::AssertSqlSafe(pragmas))
                    .execute(conn)
                .await?;
                Ok(())
            })
        })
        .connect(url)
        .await?)
}
