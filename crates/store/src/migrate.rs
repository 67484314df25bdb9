//! Embedded migrations applied at start, each once, in a transaction: one file per version in
//! `migrations/` where both backends take the same SQL, one per backend in
//! `migrations/{sqlite,postgres}/` where they differ.

use crate::backend::Backend;
use crate::error::{Result, StoreError};
use plantd_model::Timestamp;
use sqlx::Row;

/// The SQL of one version: the same for both backends, or one text per backend where they
/// differ (row ids, `WITHOUT ROWID`, table rebuilds that PostgreSQL does with `ALTER`).
enum Sql {
    Both(&'static str),
    PerBackend {
        sqlite: &'static str,
        postgres: &'static str,
    },
}

struct Migration {
    version: i64,
    sql: Sql,
}

/// Every version, in order, from the files in `migrations/` (listed by `build.rs`). A database
/// records the versions it has applied (`plantd_migrations`), so moving a file between
/// `migrations/` and the per-backend folders changes nothing for a database that has it; only its
/// text matters for new databases.
const MIGRATIONS: &[Migration] = include!(concat!(env!("OUT_DIR"), "/migrations.rs"));

/// The newest schema version this build knows.
pub(crate) const LATEST_VERSION: i64 = MIGRATIONS[MIGRATIONS.len() - 1].version;

pub(crate) async fn run(pool: &sqlx::AnyPool, backend: Backend) -> Result<()> {
    sqlx::raw_sql(
        "CREATE TABLE IF NOT EXISTS plantd_migrations (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)",
    )
    .execute(pool)
    .await?;
    for m in MIGRATIONS {
        let applied = sqlx::query("SELECT COUNT(*) AS n FROM plantd_migrations WHERE version = $1")
            .bind(m.version)
            .fetch_one(pool)
            .await?
            .try_get::<i64, _>("n")?;
        if applied > 0 {
            continue;
        }
        let sql = match (&m.sql, backend) {
            (Sql::Both(sql), _) => *sql,
            (Sql::PerBackend { sqlite, .. }, Backend::Sqlite) => *sqlite,
            (Sql::PerBackend { postgres, .. }, Backend::Postgres) => *postgres,
        };
        let mut tx = pool.begin().await?;
        sqlx::raw_sql(sql).execute(&mut *tx).await?;
        let recorded =
            sqlx::query("INSERT INTO plantd_migrations (version, applied_at) VALUES ($1, $2)")
                .bind(m.version)
                .bind(Timestamp::now().millis())
                .execute(&mut *tx)
                .await;
        match recorded {
            Ok(_) => tx.commit().await?,
            // Another process (an operator command beside the server) applied it first.
            Err(sqlx::Error::Database(db)) if db.is_unique_violation() => tx.rollback().await?,
            Err(e) => return Err(StoreError::Database(e)),
        }
        tracing::info!(version = m.version, "applied migration");
    }
    tracing::debug!(version = LATEST_VERSION, "database schema is current");
    Ok(())
}
