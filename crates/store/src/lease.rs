//! A cluster-wide lease on PostgreSQL: a session advisory lock held on a connection of its own,
//! so that one node of several runs a singleton job (the connectors). The lease is lost when
//! that connection is; the lock is released by PostgreSQL the moment the session ends, crash
//! included.

use sqlx::Connection;
use std::time::Duration;

use crate::{Result, Store};

/// Advisory lock keys of plantd's singleton jobs.
pub const CONNECTORS_LEASE: i64 = 0x0070_6c61_6e74_6401; // "plantd" + 1
/// The replication publisher and applier of a region (one node of a region runs them).
pub const REPLICATION_LEASE: i64 = 0x0070_6c61_6e74_6402;
/// The region migrations of a region's organizations (one node of a region runs them).
pub const MIGRATION_LEASE: i64 = 0x0070_6c61_6e74_6403;

/// A held lease. On SQLite (one server process owns the database) it has no connection and is
/// never lost.
pub struct Lease {
    conn: Option<sqlx::postgres::PgConnection>,
}

impl Store {
    /// Takes the lease `key` if no other session holds it (`Ok(None)` if one does; on SQLite
    /// always granted).
    pub async fn try_lease(&self, key: i64) -> Result<Option<Lease>> {
        let Some(url) = &self.postgres_url else {
            return Ok(Some(Lease { conn: None }));
        };
        let mut conn = sqlx::postgres::PgConnection::connect(url).await?;
        let (held,): (bool,) = sqlx::query_as("SELECT pg_try_advisory_lock($1)")
            .bind(key)
            .fetch_one(&mut conn)
            .await?;
        Ok(held.then_some(Lease { conn: Some(conn) }))
    }
}

impl Lease {
    /// Returns once the lease's connection is lost (checked every few seconds).
    pub async fn lost(&mut self) {
        let Some(conn) = self.conn.as_mut() else {
            return std::future::pending().await;
        };
        loop {
            tokio::time::sleep(Duration::from_secs(3)).await;
            let alive = tokio::time::timeout(Duration::from_secs(10), conn.ping()).await;
            if !matches!(alive, Ok(Ok(()))) {
                return;
            }
        }
    }
}
