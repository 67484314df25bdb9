//! The connection pool with the backend it talks to, and write transactions. On SQLite every
//! write of this process passes one async write gate: SQLite has one writer at a time, and
//! writers queuing in its busy handler slept for seconds under concurrent ingest. Write
//! transactions run on one connection of their own, whose page cache then stays valid.

use sqlx::AnyPool;

use crate::backend::Backend;
use crate::error::Result;

#[derive(Clone, Debug)]
pub(crate) struct Database {
    pub(crate) pool: AnyPool,
    /// SQLite: the one connection write transactions run on (its page cache stays warm, no
    /// other connection writing in between).
    writer: Option<AnyPool>,
    pub(crate) backend: Backend,
    /// PostgreSQL: a pool of PostgreSQL's own driver for bulk reads of binary rows (telemetry
    /// blocks), which the generic pool copies value by value into its own rows.
    pub(crate) bulk: Option<sqlx::PgPool>,
    write_gate: std::sync::Arc<tokio::sync::Mutex<()>>,
    /// SQLite: the write connection was left at synchronous=NORMAL by a transaction that
    /// could be done again ([`Database::begin_write_unsynced`]); the next durable one restores
    /// FULL first. Only read and changed behind the write gate.
    unsynced: std::sync::Arc<std::sync::atomic::AtomicBool>,
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

impl Database {
    pub(crate) fn new(
        pool: AnyPool,
        writer: Option<AnyPool>,
        bulk: Option<sqlx::PgPool>,
        backend: Backend,
    ) -> Self {
        Self {
            pool,
            writer,
            bulk,
            backend,
            write_gate: Default::default(),
            unsynced: Default::default(),
        }
    }

    /// Whether [`Database::close`] has begun (either pool closed).
    pub(crate) fn is_closed(&self) -> bool {
        self.pool.is_closed() || self.writer.as_ref().is_some_and(|w| w.is_closed())
    }

    pub(crate) async fn close(&self) {
        if let Some(writer) = &self.writer {
            writer.close().await;
        }
        if let Some(bulk) = &self.bulk {
            bulk.close().await;
        }
        self.pool.close().await;
    }

    /// Waits for the write gate (SQLite only).
    pub(crate) async fn write_guard(&self) -> Option<tokio::sync::OwnedMutexGuard<()>> {
        match self.backend {
            Backend::Sqlite => Some(self.write_gate.clone().lock_owned().await),
            Backend::Postgres => None,
        }
    }

    /// Begins a write transaction (behind the write gate on SQLite) whose commit is durable
    /// when it returns.
    pub(crate) async fn begin_write(&self) -> Result<WriteTx> {
        self.begin(true).await
    }

    /// Begins a write transaction whose commit may reach the disk later (SQLite
    /// synchronous=NORMAL, PostgreSQL synchronous_commit off): a crash of the machine may lose
    /// the newest such commits, never one that an earlier durable commit followed, because both
    /// logs are replayed in order (the next durable commit syncs everything before it). For
    /// writes that are done again when lost: the telemetry flusher.
    pub(crate) async fn begin_write_unsynced(&self) -> Result<WriteTx> {
        self.begin(false).await
    }

    async fn begin(&self, synced: bool) -> Result<WriteTx> {
        use std::sync::atomic::Ordering;
        let gate = self.write_guard().await;
        let pool = self.writer.as_ref().unwrap_or(&self.pool);
        if self.backend == Backend::Sqlite && self.unsynced.load(Ordering::Acquire) == synced {
            // The setting belongs to the one write connection; behind the gate nothing else
            // uses it meanwhile (a connection the pool opened again starts at FULL: safe).
            let pragma = if synced {
                "PRAGMA synchronous=FULL"
            } else {
                "PRAGMA synchronous=NORMAL"
            };
            sqlx::query(pragma).execute(pool).await?;
            self.unsynced.store(!synced, Ordering::Release);
        }
        let mut tx = pool.begin().await?;
        if self.backend == Backend::Postgres && !synced {
            sqlx::query("SET LOCAL synchronous_commit TO OFF")
                .execute(&mut *tx)
                .await?;
        }
        Ok(WriteTx { tx, _gate: gate })
    }
}
