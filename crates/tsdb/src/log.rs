//! The telemetry log (`telemetry_log`): what ingest appends, a row per acknowledged batch, and
//! what the flusher (`flush.rs`) reads back, writes into blocks and rollups and deletes.
//!
//! A record holds the batch's rows (series id, timestamp, value, quality), sorted by series and
//! time without repeats, as four little-endian columns behind a one-byte tag. It lives only until
//! the next flush, so it is kept plain: writing it is a copy, and the bytes it takes are given back
//! when the flush deletes it.

use sqlx::{AnyConnection, Row};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use crate::block::{Reader, corrupt};
use crate::error::Result;
use crate::sql::{Statement, cached_sql, placeholder};

/// A raw point as written: ((series, ts), (value, quality)).
pub(crate) type RawPoint = ((i64, i64), (f64, i16));

const PLAIN: u8 = 1;

/// Sorts rows by (series, timestamp) and keeps the last of each repeated key (the sort is
/// stable, so "last" is arrival order).
pub(crate) fn sort_rows(rows: &mut Vec<RawPoint>) {
    rows.sort_by_key(|(k, _)| *k);
    let mut kept = 0;
    for i in 0..rows.len() {
        if i + 1 < rows.len() && rows[i + 1].0 == rows[i].0 {
            continue;
        }
        rows[kept] = rows[i];
        kept += 1;
    }
    rows.truncate(kept);
}

/// A batch's rows as a log record.
pub(crate) fn encode(rows: &[RawPoint]) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + rows.len() * 26);
    out.push(PLAIN);
    out.extend_from_slice(&(rows.len() as u32).to_le_bytes());
    for ((s, _), _) in rows {
        out.extend_from_slice(&s.to_le_bytes());
    }
    for ((_, t), _) in rows {
        out.extend_from_slice(&t.to_le_bytes());
    }
    for (_, (v, _)) in rows {
        out.extend_from_slice(&v.to_bits().to_le_bytes());
    }
    for (_, (_, q)) in rows {
        out.extend_from_slice(&q.to_le_bytes());
    }
    out
}

/// A log record's rows, appended to `into`.
pub(crate) fn decode(bytes: &[u8], into: &mut Vec<RawPoint>) -> Result<()> {
    let mut r = Reader(bytes);
    if r.take(1)?[0] != PLAIN {
        return Err(corrupt("unknown telemetry log encoding"));
    }
    let n = r.u32()? as usize;
    let eights = |r: &mut Reader| -> Result<Vec<[u8; 8]>> {
        let bytes = r.take(n * 8)?;
        Ok(bytes
            .chunks_exact(8)
            .map(|c| c.try_into().unwrap_or([0; 8]))
            .collect())
    };
    let series = eights(&mut r)?;
    let ts = eights(&mut r)?;
    let values = eights(&mut r)?;
    let quality = r.take(n * 2)?;
    if !r.0.is_empty() {
        return Err(corrupt("trailing bytes after a telemetry log record"));
    }
    into.reserve(n);
    for i in 0..n {
        into.push((
            (i64::from_le_bytes(series[i]), i64::from_le_bytes(ts[i])),
            (
                f64::from_bits(u64::from_le_bytes(values[i])),
                i16::from_le_bytes([quality[2 * i], quality[2 * i + 1]]),
            ),
        ));
    }
    Ok(())
}

/// Appends one record per batch `(org, points, record)` in the writer's transaction; returns
/// the id of the last.
pub(crate) async fn append(
    conn: &mut AnyConnection,
    records: &[(&str, usize, Vec<u8>)],
) -> Result<i64> {
    let mut last = 0;
    for (org, points, data) in records {
        last = sqlx::query(
            "INSERT INTO telemetry_log (org_id, points, data) VALUES ($1, $2, $3) RETURNING id",
        )
        .bind(*org)
        .bind(*points as i64)
        .bind(data.as_slice())
        .fetch_one(&mut *conn)
        .await?
        .try_get("id")?;
    }
    Ok(last)
}

/// The oldest records, up to about `points` points (at least one record): `(id, org, rows)`
/// each, by id. Exactly the records read are what [`delete`] is given: on PostgreSQL a record
/// with a smaller id may commit after a larger one, so a range of ids is not a set of records.
pub(crate) async fn oldest(
    conn: &mut AnyConnection,
    sqlite: bool,
    points: usize,
) -> Result<Vec<(i64, String, Vec<RawPoint>)>> {
    // The ids and sizes first (small), then the records that fit.
    let heads = sqlx::query("SELECT id, points FROM telemetry_log ORDER BY id LIMIT 10000")
        .fetch_all(&mut *conn)
        .await?;
    let mut wanted = Vec::new();
    let mut total = 0usize;
    for h in &heads {
        let n: i64 = h.try_get("points")?;
        if !wanted.is_empty() && total + n as usize > points {
            break;
        }
        total += n as usize;
        wanted.push(h.try_get::<i64, _>("id")?);
    }
    let mut out = Vec::with_capacity(wanted.len());
    for chunk in wanted.chunks(IDS_PER_STATEMENT) {
        let sql = cached_sql(Statement::ReadLog, 0, sqlite, chunk.len(), || {
            format!(
                "SELECT id, org_id, data FROM telemetry_log WHERE id IN ({}) ORDER BY id",
                placeholders(sqlite, chunk.len())
            )
        });
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for id in chunk {
            q = q.bind(*id);
        }
        for r in q.fetch_all(&mut *conn).await? {
            let mut points = Vec::new();
            decode(&r.try_get::<Vec<u8>, _>("data")?, &mut points)?;
            out.push((r.try_get("id")?, r.try_get("org_id")?, points));
        }
    }
    Ok(out)
}

/// Ids per statement that reads or deletes records.
pub(crate) const IDS_PER_STATEMENT: usize = 500;

pub(crate) fn placeholders(sqlite: bool, n: usize) -> String {
    (1..=n)
        .map(|i| placeholder(sqlite, i))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Deletes the records `ids` (those a flush wrote).
pub(crate) async fn delete(conn: &mut AnyConnection, sqlite: bool, ids: &[i64]) -> Result<()> {
    for chunk in ids.chunks(IDS_PER_STATEMENT) {
        let sql = cached_sql(Statement::DeleteLog, 0, sqlite, chunk.len(), || {
            format!(
                "DELETE FROM telemetry_log WHERE id IN ({})",
                placeholders(sqlite, chunk.len())
            )
        });
        bind_ids(sqlx::query(sqlx::AssertSqlSafe(sql)), chunk)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// A statement with `ids` bound to its placeholders, in order.
pub(crate) fn bind_ids<'q>(
    mut q: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
    ids: &'q [i64],
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments> {
    for id in ids {
        q = q.bind(*id);
    }
    q
}

/// The points the log holds and its newest id (0 when empty).
pub(crate) async fn backlog(pool: &sqlx::AnyPool) -> Result<(u64, i64)> {
    let row = sqlx::query(
        "SELECT CAST(COALESCE(SUM(points), 0) AS BIGINT) AS n, CAST(COALESCE(MAX(id), 0) AS BIGINT) AS last FROM telemetry_log",
    )
    .fetch_one(pool)
    .await?;
    Ok((row.try_get::<i64, _>("n")? as u64, row.try_get("last")?))
}

/// Points one flush reads from the log at most.
pub(crate) const FLUSH_POINTS: usize = 12_000_000;
/// Points the log may hold before ingest waits for the flusher.
pub(crate) const MAX_BACKLOG: u64 = 24_000_000;

/// What this process knows of the log.
pub(crate) struct LogState {
    /// Points one flush transaction writes at most, and points the log may hold before ingest
    /// waits ([`FLUSH_POINTS`], [`MAX_BACKLOG`]; smaller in tests).
    pub(crate) flush_points: AtomicU64,
    pub(crate) max_backlog: AtomicU64,
    /// Points in the log (this node's appends minus what its flushes wrote; on PostgreSQL read
    /// again from the database when it says ingest must wait).
    pub(crate) backlog: AtomicU64,
    /// The newest record this process appended (or found at start).
    pub(crate) appended: AtomicI64,
    /// One flush at a time in this process.
    pub(crate) flushing: tokio::sync::Mutex<()>,
    /// Told after each append (the background flusher waits for it).
    pub(crate) wake: tokio::sync::Notify,
    /// Told after each flush (ingest waiting for room waits for it).
    pub(crate) flushed: tokio::sync::Notify,
    /// Counted once, at the first operation (a restart finds what a crash left).
    pub(crate) counted: tokio::sync::OnceCell<()>,
    /// Makes the next SQLite flush stop after its first slice, as a crash would (tests).
    #[cfg(test)]
    pub(crate) stop_after_slice: std::sync::atomic::AtomicBool,
}

impl Default for LogState {
    fn default() -> Self {
        Self {
            flush_points: AtomicU64::new(FLUSH_POINTS as u64),
            max_backlog: AtomicU64::new(MAX_BACKLOG),
            backlog: AtomicU64::new(0),
            appended: AtomicI64::new(0),
            flushing: Default::default(),
            wake: Default::default(),
            flushed: Default::default(),
            counted: Default::default(),
            #[cfg(test)]
            stop_after_slice: Default::default(),
        }
    }
}

impl LogState {
    /// Sets the points per flush transaction and the most the log may hold.
    pub(crate) fn set_limits(&self, flush_points: u64, max_backlog: u64) {
        self.flush_points
            .store(flush_points.max(1), Ordering::Release);
        self.max_backlog
            .store(max_backlog.max(1), Ordering::Release);
    }

    pub(crate) fn flush_points(&self) -> u64 {
        self.flush_points.load(Ordering::Acquire)
    }

    pub(crate) fn max_backlog(&self) -> u64 {
        self.max_backlog.load(Ordering::Acquire)
    }

    /// Points in the log, as far as this process knows.
    pub(crate) fn backlog(&self) -> u64 {
        self.backlog.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back_bit_for_bit() {
        let rows: Vec<RawPoint> = (0..1000)
            .map(|i| {
                (
                    (i / 10, 1_700_000_000_000 + i),
                    (i as f64 / 3.0, (i % 3) as i16),
                )
            })
            .collect();
        let bytes = encode(&rows);
        let mut back = Vec::new();
        decode(&bytes, &mut back).unwrap();
        assert_eq!(back, rows);
        for cut in [0, 1, 4, 5, 100, bytes.len() - 1] {
            assert!(
                decode(&bytes[..cut], &mut Vec::new()).is_err(),
                "cut at {cut}"
            );
        }
    }
}
