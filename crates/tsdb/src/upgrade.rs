//! The upgrade in place of a database written before storage v2: the rows of `telemetry_raw`
//! (one per point) become sealed blocks, series by series, each series in one transaction (an
//! interrupted upgrade resumes where it stopped), with progress in the log; then the table is
//! dropped. Rollups are kept as they are: the points do not change.

use plantd_store::{Backend, Store};
use sqlx::Row;
use std::time::{Duration, Instant};

use crate::block::Columns;
use crate::blocks::{self, NewBlock, window_of};
use crate::error::Result;

/// Points read per statement while converting.
const POINTS_PER_READ: i64 = 100_000;
/// A PostgreSQL session lock: one node converts, the others wait for it.
const UPGRADE_LOCK: i64 = 0x706c_616e_7464_0002;

/// Converts what `telemetry_raw` still holds; returns the number of points converted.
pub(crate) async fn convert_raw(store: &Store) -> Result<u64> {
    let sqlite = store.backend() == Backend::Sqlite;
    let mut conn = store.pool().acquire().await?;
    if !sqlite {
        sqlx::query("SELECT pg_advisory_lock($1)")
            .bind(UPGRADE_LOCK)
            .execute(&mut *conn)
            .await?;
    }
    let outcome = convert(store, &mut conn, sqlite).await;
    if !sqlite {
        sqlx::query("SELECT pg_advisory_unlock($1)")
            .bind(UPGRADE_LOCK)
            .execute(&mut *conn)
            .await?;
    }
    outcome
}

async fn convert(store: &Store, conn: &mut sqlx::AnyConnection, sqlite: bool) -> Result<u64> {
    let exists = if sqlite {
        "SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'telemetry_raw'"
    } else {
        "SELECT COUNT(*) AS n FROM information_schema.tables WHERE table_name = 'telemetry_raw' AND table_schema = current_schema()"
    };
    let n: i64 = sqlx::query(exists)
        .fetch_one(&mut *conn)
        .await?
        .try_get("n")?;
    if n == 0 {
        return Ok(0);
    }
    let total: i64 = sqlx::query("SELECT COUNT(*) AS n FROM telemetry_raw")
        .fetch_one(&mut *conn)
        .await?
        .try_get("n")?;
    let started = Instant::now();
    if total > 0 {
        tracing::info!(
            points = total,
            "upgrading telemetry storage: converting raw points to compressed blocks"
        );
    }
    let series: Vec<i64> = sqlx::query("SELECT id FROM telemetry_series ORDER BY id")
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|r| r.try_get("id"))
        .collect::<std::result::Result<_, _>>()?;
    let mut done: u64 = 0;
    let mut reported = Instant::now();
    for id in series {
        let _gate = store.write_guard().await;
        let mut tx = sqlx::Connection::begin(&mut *conn).await?;
        let mut after = i64::MIN;
        let mut window: Option<(i64, Columns)> = None;
        let mut out = Vec::new();
        loop {
            let rows = sqlx::query(
                "SELECT ts, value, quality FROM telemetry_raw WHERE series_id = $1 AND ts > $2 ORDER BY ts LIMIT $3",
            )
            .bind(id)
            .bind(after)
            .bind(POINTS_PER_READ)
            .fetch_all(&mut *tx)
            .await?;
            for r in &rows {
                let (ts, value, quality): (i64, f64, i16) =
                    (r.try_get("ts")?, r.try_get("value")?, r.try_get("quality")?);
                let w = window_of(ts);
                match &mut window {
                    Some((cw, c)) if *cw == w => c.push(ts, value, quality),
                    _ => {
                        if let Some((_, c)) = window.take() {
                            out.push(NewBlock {
                                series: id,
                                columns: c,
                                sealed: true,
                            });
                        }
                        let mut c = Columns::default();
                        c.push(ts, value, quality);
                        window = Some((w, c));
                    }
                }
                after = ts;
                done += 1;
            }
            if out.len() >= 64 {
                blocks::insert(&mut tx, sqlite, &out).await?;
                out.clear();
            }
            if (rows.len() as i64) < POINTS_PER_READ {
                break;
            }
        }
        if let Some((_, c)) = window {
            out.push(NewBlock {
                series: id,
                columns: c,
                sealed: true,
            });
        }
        blocks::insert(&mut tx, sqlite, &out).await?;
        sqlx::query("DELETE FROM telemetry_raw WHERE series_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        if reported.elapsed() > Duration::from_secs(5) {
            reported = Instant::now();
            tracing::info!(
                converted = done,
                of = total,
                "upgrading telemetry storage: {}%",
                done * 100 / total.max(1) as u64
            );
        }
    }
    let _gate = store.write_guard().await;
    sqlx::query("DROP TABLE telemetry_raw")
        .execute(&mut *conn)
        .await?;
    if total > 0 {
        tracing::info!(
            points = done,
            seconds = started.elapsed().as_secs_f64(),
            "upgraded telemetry storage: every raw point is in a compressed block"
        );
    }
    Ok(done)
}
