//! Embedded, per-backend migrations applied at start, each once, in a transaction.

use crate::{Backend, Result, Store, StoreError};
use plantd_model::Timestamp;
use sqlx::Row;

struct Migration {
    version: i64,
    sqlite: &'static str,
    postgres: &'static str,
}

const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        sqlite: include_str!("../migrations/sqlite/0001_foundation.sql"),
        postgres: include_str!("../migrations/postgres/0001_foundation.sql"),
    },
    Migration {
        version: 2,
        sqlite: include_str!("../migrations/sqlite/0002_telemetry.sql"),
        postgres: include_str!("../migrations/postgres/0002_telemetry.sql"),
    },
    Migration {
        version: 3,
        sqlite: include_str!("../migrations/sqlite/0003_connectors.sql"),
        postgres: include_str!("../migrations/postgres/0003_connectors.sql"),
    },
    Migration {
        version: 4,
        sqlite: include_str!("../migrations/sqlite/0004_alerts.sql"),
        postgres: include_str!("../migrations/postgres/0004_alerts.sql"),
    },
    Migration {
        version: 5,
        sqlite: include_str!("../migrations/sqlite/0005_webhooks.sql"),
        postgres: include_str!("../migrations/postgres/0005_webhooks.sql"),
    },
    Migration {
        version: 6,
        sqlite: include_str!("../migrations/sqlite/0006_notifications.sql"),
        postgres: include_str!("../migrations/postgres/0006_notifications.sql"),
    },
];

pub(crate) async fn run(store: &Store) -> Result<()> {
    sqlx::raw_sql(
        "CREATE TABLE IF NOT EXISTS plantd_migrations (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)",
    )
    .execute(store.pool())
    .await?;
    for m in MIGRATIONS {
        let applied = sqlx::query("SELECT COUNT(*) AS n FROM plantd_migrations WHERE version = $1")
            .bind(m.version)
            .fetch_one(store.pool())
            .await?
            .try_get::<i64, _>("n")?;
        if applied > 0 {
            continue;
        }
        let sql = match store.backend() {
            Backend::Sqlite => m.sqlite,
            Backend::Postgres => m.postgres,
        };
        let mut tx = store.pool().begin().await?;
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
    Ok(())
}
