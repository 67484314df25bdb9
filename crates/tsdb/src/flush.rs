//! The flusher: writes what ingest appended to the telemetry log (`log.rs`) into blocks and
//! rollups, many batches at once, and deletes those log records in the same transaction.
//!
//! Ingest costs a log append per batch; the work per series (the newest-point probe, a head
//! block, the minute, hour and day rollup rows) is paid here once per flush for every batch the
//! flush holds, so a plant whose scans send one point per tag per batch costs per point, not
//! per series and batch. What a flush writes is what committing its batches one after the other,
//! in log order, would have written: a later batch wins a repeated key, replaced points have
//! their buckets recomputed, rollups stay exact.
//!
//! When it runs: in the background [`GATHER`] after an append (sooner when [`log::FLUSH_POINTS`] are
//! waiting), and before every read ([`ensure_flushed`]), so that a read sees every acknowledged
//! point, on any node (the log is in the shared database); a restart's first read, or the
//! graceful stop, flushes what a crash left. Ingest waits for room when the log holds
//! [`log::MAX_BACKLOG`] points (slower answers rather than an unbounded log).

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::block::Columns;
use crate::blocks::{self, NewBlock};
use crate::error::Result;
use crate::levels::{BucketStats, LEVELS, floor_to, runs};
use crate::log::{self, RawPoint};
use crate::rollups::{self, DELTAS_PER_STATEMENT, Packing, write_buckets};
use crate::sql::{Statement, cached_sql, value_rows};
use crate::state::Shared;

/// A background flush waits this long after the first append it will hold, gathering more
/// (sooner when [`log::FLUSH_POINTS`] wait): what a flush costs is mostly per series it touches (a
/// head block, the minute, hour and day rows), so a plant of 100,000 tags sending each once a
/// second pays it for 8 points a tag rather than for each (at 100,000 series, 4 s held the
/// rate to a third of the 10-series rate, 8 s to about half: docs/benchmarks.md).
pub(crate) const GATHER: Duration = Duration::from_millis(8000);
/// ...unless no append came for this long (longer than a connector's scan interval of a
/// second): ingest paused, what it sent is flushed at once.
const QUIET: Duration = Duration::from_millis(1500);
/// Ranges per rollup statement (3 parameters each).
const RANGES_PER_STATEMENT: usize = 300;
/// The PostgreSQL advisory lock one flush at a time holds, across nodes.
const FLUSH_LOCK: i64 = 0x706c_616e_7464_6c67; // "plantdlg"

/// Counts what the log holds at start (a crash leaves records; they are flushed by the first
/// read, the background flusher or the graceful stop).
pub(crate) async fn count_at_start(shared: &Shared) -> Result<()> {
    shared
        .log
        .counted
        .get_or_try_init(|| async {
            let (points, last) = log::backlog(shared.store.pool()).await?;
            shared.log.backlog.store(points, Ordering::Release);
            shared.log.appended.fetch_max(last, Ordering::AcqRel);
            Ok::<_, crate::error::TsdbError>(())
        })
        .await?;
    Ok(())
}

/// Tells the flusher that records up to `last` holding `points` were appended.
pub(crate) fn appended(shared: &Shared, last: i64, points: usize) {
    shared.log.appended.fetch_max(last, Ordering::AcqRel);
    shared
        .log
        .backlog
        .fetch_add(points as u64, Ordering::AcqRel);
    shared.log.wake.notify_one();
}

/// Waits while the log holds [`log::MAX_BACKLOG`] points or more: the flusher is behind.
pub(crate) async fn wait_for_room(shared: &Shared) -> Result<()> {
    let mut checked = false;
    while shared.log.backlog() >= shared.log.max_backlog() {
        let flushed = shared.log.flushed.notified();
        if !checked && shared.store.backend() == plantd_store::Backend::Postgres {
            // Other nodes' flushes wrote some of it: count again.
            let (points, _) = log::backlog(shared.store.pool()).await?;
            shared.log.backlog.store(points, Ordering::Release);
            checked = true;
            continue;
        }
        shared.log.wake.notify_one();
        let _ = tokio::time::timeout(Duration::from_secs(1), flushed).await;
        checked = false;
    }
    Ok(())
}

/// Flushes every record acknowledged before the call, so that a read that follows sees them.
pub(crate) async fn ensure_flushed(shared: &Shared) -> Result<()> {
    let target = if shared.store.backend() == plantd_store::Backend::Sqlite {
        // This process is the only writer: what it appended is all there is.
        if shared.log.backlog() == 0 {
            return Ok(());
        }
        shared.log.appended.load(Ordering::Acquire)
    } else {
        // Another node's acknowledged records are in the database already.
        let (points, last) = log::backlog(shared.store.pool()).await?;
        if points == 0 {
            return Ok(());
        }
        last
    };
    flush_through(shared, target).await
}

/// Flushes until no record up to `target` is left.
async fn flush_through(shared: &Shared, target: i64) -> Result<()> {
    let _turn = shared.log.flushing.lock().await;
    loop {
        match flush_once(shared).await? {
            Some(first_left) if first_left <= target => {}
            _ => return Ok(()),
        }
    }
}

/// Flushes everything in the log (graceful stop, tests, the benchmark).
pub(crate) async fn flush_all(shared: &Shared) -> Result<()> {
    flush_through(shared, i64::MAX).await
}

/// The background flusher: after an append, gathers for [`GATHER`] (or until [`log::FLUSH_POINTS`]
/// wait, or ingest was [`QUIET`]), then flushes what it gathered; every few seconds it looks for records other nodes
/// left (PostgreSQL: a node that crashed).
pub(crate) async fn run(shared: Arc<Shared>) {
    loop {
        tokio::select! {
            _ = shared.log.wake.notified() => {}
            _ = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
        let deadline = tokio::time::Instant::now() + GATHER;
        while shared.log.backlog() < shared.log.flush_points() {
            let until = (tokio::time::Instant::now() + QUIET).min(deadline);
            if tokio::time::timeout_at(until, shared.log.wake.notified())
                .await
                .is_err()
            {
                break;
            }
        }
        // What was gathered, not what arrives meanwhile (that gathers for the next flush).
        let mut target = shared.log.appended.load(Ordering::Acquire);
        if shared.store.backend() == plantd_store::Backend::Postgres {
            match log::backlog(shared.store.pool()).await {
                Ok((_, last)) => target = target.max(last),
                Err(_) if shared.store.is_closed() => return,
                Err(e) => {
                    tracing::warn!(error = %plantd_model::error_chain(&e), "reading the telemetry log failed")
                }
            }
        }
        if let Err(e) = flush_through(&shared, target).await {
            if shared.store.is_closed() {
                // The server stopped and closed its store: what is left stays in the log,
                // durable, for the next start.
                return;
            }
            tracing::warn!(error = %plantd_model::error_chain(&e), "flushing the telemetry log failed; will try again");
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

/// One flush transaction: the oldest records (up to about [`log::FLUSH_POINTS`] points) into blocks
/// and rollups, then deleted. Returns the smallest id left after it (`None`: the log is empty).
async fn flush_once(shared: &Shared) -> Result<Option<i64>> {
    if shared.store.backend() == plantd_store::Backend::Sqlite {
        flush_once_sqlite(shared).await
    } else {
        flush_once_postgres(shared).await
    }
}

/// Points a SQLite flush writes per transaction (whole series each): ingest's appends, which
/// need the same write lock, wait at most that long (a few milliseconds), so that clients
/// with one batch in flight keep their pace while a flush runs.
const SLICE_POINTS: usize = 50_000;
/// Series a SQLite flush writes per transaction at most.
const SLICE_SERIES: usize = 500;

/// SQLite: this process is the only writer, so a flush reads its records, writes them a slice
/// of series at a time (each slice its own short transaction, so that appends go on between
/// them), then deletes the records. A crash between slices leaves the records, which the next
/// flush writes again: writing a point again is replacing it by itself, so blocks and rollups
/// end the same (the replaced buckets are recomputed). So the flush's commits need not be
/// synced at once ([`plantd_store::Store::begin_write_unsynced`]): a machine crash can lose
/// only the newest of them, whose records are then still in the log. Reads wait for the whole flush
/// ([`ensure_flushed`] holds the flush's turn), so none sees a flush half done.
async fn flush_once_sqlite(shared: &Shared) -> Result<Option<i64>> {
    let started = std::time::Instant::now();
    // Time spent waiting for the write lock (ingest's appends go between slices), and slices.
    let (mut waited, mut slices) = (Duration::ZERO, 0);
    let records = {
        let mut conn = shared.store.pool().acquire().await?;
        log::oldest(&mut conn, true, shared.log.flush_points() as usize).await?
    };
    if records.is_empty() {
        return Ok(None);
    }
    let ids: Vec<i64> = records.iter().map(|(id, _, _)| *id).collect();
    let (rows, points) = rows_of(records);
    // The newest stored point of each series: this process writes every point, so what it
    // wrote is remembered.
    let mut newest = std::collections::HashMap::new();
    {
        let cache = shared.newest.lock().unwrap_or_else(|p| p.into_inner());
        let mut last = None;
        for ((s, _), _) in &rows {
            if last != Some(*s) {
                last = Some(*s);
                if let Some(n) = cache.get(s) {
                    newest.insert(*s, *n);
                }
            }
        }
    }
    let mut start = 0;
    while start < rows.len() {
        // Whole series, up to the slice's points and series.
        let (mut end, mut series, mut last) = (start, 0, None);
        while end < rows.len() {
            let s = rows[end].0.0;
            if last != Some(s) {
                if series == SLICE_SERIES || (end - start >= SLICE_POINTS && series > 0) {
                    break;
                }
                series += 1;
                last = Some(s);
            }
            end += 1;
        }
        let asked = std::time::Instant::now();
        let mut tx = shared.store.begin_write_unsynced().await?;
        waited += asked.elapsed();
        slices += 1;
        let mut slice_newest = std::collections::HashMap::new();
        for ((s, _), _) in &rows[start..end] {
            if let Some(n) = newest.get(s) {
                slice_newest.insert(*s, *n);
            }
        }
        apply(&mut tx, true, &rows[start..end], &mut slice_newest).await?;
        tx.commit().await?;
        shared
            .newest
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(slice_newest);
        start = end;
        #[cfg(test)]
        if shared.log.stop_after_slice.swap(false, Ordering::AcqRel) {
            return Err(crate::error::TsdbError::Writer(
                "stopped after a slice (test)".into(),
            ));
        }
    }
    let mut tx = shared.store.begin_write_unsynced().await?;
    log::delete(&mut tx, true, &ids).await?;
    let left = first_left(&mut tx).await?;
    tx.commit().await?;
    tracing::debug!(
        points,
        slices,
        elapsed_ms = started.elapsed().as_millis() as u64,
        waited_ms = waited.as_millis() as u64,
        "flushed the telemetry log"
    );
    flushed(shared, points);
    Ok(left)
}

/// PostgreSQL: one transaction under the flush lock (one flush at a time across nodes) and the
/// organizations' locks; appends of other transactions go on meanwhile.
async fn flush_once_postgres(shared: &Shared) -> Result<Option<i64>> {
    let mut tx = shared.store.begin_write_unsynced().await?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(FLUSH_LOCK)
        .execute(&mut *tx)
        .await?;
    let records = log::oldest(&mut tx, false, shared.log.flush_points() as usize).await?;
    if records.is_empty() {
        tx.commit().await?;
        return Ok(None);
    }
    // The sealer and retention rewrite blocks and rollups under the organizations' locks.
    blocks::lock_orgs(&mut tx, records.iter().map(|(_, org, _)| org.as_str())).await?;
    let ids: Vec<i64> = records.iter().map(|(id, _, _)| *id).collect();
    let (rows, points) = rows_of(records);
    // Other nodes write blocks too: the newest stored points are asked of the database.
    apply(&mut tx, false, &rows, &mut Default::default()).await?;
    log::delete(&mut tx, false, &ids).await?;
    let left = first_left(&mut tx).await?;
    tx.commit().await?;
    flushed(shared, points);
    Ok(left)
}

/// The records' rows in log order, sorted by series and time: a later batch wins a repeated
/// key (the sort is stable).
/// Also returns the points the records hold (as appended, before a later record's repeat of a
/// key replaced an earlier one's).
fn rows_of(records: Vec<(i64, String, Vec<RawPoint>)>) -> (Vec<RawPoint>, usize) {
    let mut rows: Vec<RawPoint> = Vec::with_capacity(records.iter().map(|r| r.2.len()).sum());
    for (_, _, points) in records {
        rows.extend(points);
    }
    let held = rows.len();
    log::sort_rows(&mut rows);
    (rows, held)
}

/// The smallest id left in the log.
async fn first_left(tx: &mut plantd_store::WriteTx) -> Result<Option<i64>> {
    use sqlx::Row;
    Ok(sqlx::query("SELECT MIN(id) AS id FROM telemetry_log")
        .fetch_one(&mut **tx)
        .await?
        .try_get("id")?)
}

/// After a flush of `points` points: the backlog counted down, waiting ingest and the sealer
/// told.
fn flushed(shared: &Shared, points: usize) {
    let _ = shared
        .log
        .backlog
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |b| {
            Some(b.saturating_sub(points as u64))
        });
    shared.log.flushed.notify_waiters();
    shared.seal_wake.notify_one();
}

/// Writes rows (sorted by series and time, without repeats) into blocks, then the rollups of
/// every level: buckets holding only new points add their delta, buckets where a point was
/// replaced are recomputed from the level below (from the points for minutes).
async fn apply(
    tx: &mut plantd_store::WriteTx,
    sqlite: bool,
    rows: &[RawPoint],
    newest: &mut std::collections::HashMap<i64, i64>,
) -> Result<()> {
    // Which points replace stored ones: their buckets are recomputed, the others get deltas.
    let replaced = write_blocks(tx, sqlite, rows, newest).await?;
    // Rollups per level, each from the one below in one pass over sorted entries: buckets
    // holding only new points add their delta; buckets where a point was replaced are
    // recomputed from the level below.
    let points = rows.iter().map(|((s, t), (v, _))| {
        // (Most flushes replace nothing: no lookup per point then.)
        let new = replaced.is_empty() || !replaced.contains(&(*s, *t));
        (*s, *t, new.then(|| BucketStats::of(*v)))
    });
    let mut below: Buckets = Vec::new();
    let mut source_width = 1;
    let now = plantd_model::Timestamp::now().millis();
    for (level, width) in LEVELS {
        // Minutes straight from the points (no copy of them), coarser levels from the level
        // below.
        let buckets = if source_width == 1 {
            bucketize(points.clone(), width)
        } else {
            bucketize(below.iter().copied(), width)
        };
        if let Some(p) = Packing::of_level(level) {
            // Packed hours (days) these minutes (hours) fall in become rows again before they
            // change.
            let spans: Vec<(i64, i64)> = buckets
                .iter()
                .map(|(s, b, _)| (*s, floor_to(*b, p.span)))
                .filter(|(_, start)| p.may_be_packed(*start, now))
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            rollups::unpack(tx, sqlite, p, &spans).await?;
        }
        let deltas: Vec<(i64, i64, BucketStats)> = buckets
            .iter()
            .filter_map(|(s, b, d)| d.map(|d| (*s, *b, d)))
            .collect();
        for chunk in deltas.chunks(DELTAS_PER_STATEMENT) {
            write_buckets(tx, sqlite, level, chunk, false).await?;
        }
        let mut ranges: Vec<(i64, i64, i64)> = Vec::new();
        let mut i = 0;
        while i < buckets.len() {
            let s = buckets[i].0;
            let mut recomputed = Vec::new();
            while i < buckets.len() && buckets[i].0 == s {
                if buckets[i].2.is_none() {
                    recomputed.push(buckets[i].1);
                }
                i += 1;
            }
            ranges.extend(
                runs(&recomputed, width)
                    .into_iter()
                    .map(|(lo, hi)| (s, lo, hi)),
            );
        }
        if source_width == 1 {
            recompute_from_points(tx, sqlite, level, width, &ranges).await?;
        } else {
            for chunk in ranges.chunks(RANGES_PER_STATEMENT) {
                recompute(tx, sqlite, level, width, source_width, chunk).await?;
            }
        }
        below = buckets;
        source_width = width;
    }
    Ok(())
}

/// Writes the rows (sorted by series and time, without repeats) into blocks and returns
/// the keys that replaced a stored point.
///
/// Per series and window: points after the series' newest stored point (appends, the usual case:
/// one index probe per series for the whole group) become a new head block; others are merged
/// with the blocks they overlap, which are rewritten as one (the group's point wins a key).
async fn write_blocks(
    tx: &mut plantd_store::WriteTx,
    sqlite: bool,
    rows: &[RawPoint],
    known: &mut std::collections::HashMap<i64, i64>,
) -> Result<HashSet<(i64, i64)>> {
    let unknown: Vec<i64> = rows
        .iter()
        .map(|((s, _), _)| *s)
        .filter(|s| !known.contains_key(s))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let found = blocks::newest(tx, sqlite, &unknown).await?;
    for s in unknown {
        known.insert(s, found.get(&s).copied().unwrap_or(i64::MIN));
    }
    let newest = &*known;
    // The group's points per series and window.
    let mut segments: Vec<(i64, i64, Columns)> = Vec::new();
    let mut i = 0;
    while i < rows.len() {
        let ((s, t0), _) = rows[i];
        let window = blocks::window_of(t0);
        let mut seg = Columns::default();
        while i < rows.len() && rows[i].0.0 == s && blocks::window_of(rows[i].0.1) == window {
            let ((_, t), (v, q)) = rows[i];
            seg.push(t, v, q);
            i += 1;
        }
        segments.push((s, window, seg));
    }
    // Segments not after their series' newest point may overlap stored blocks: one statement
    // finds those blocks for all of them.
    let probes: Vec<(i64, i64, i64)> = segments
        .iter()
        .filter(|(s, _, seg)| newest.get(s).is_some_and(|n| seg.ts[0] <= *n))
        .map(|(s, _, seg)| (*s, seg.ts[0], seg.ts[seg.len() - 1]))
        .collect();
    let mut stored = if probes.is_empty() {
        Default::default()
    } else {
        blocks::overlapping_many(tx, sqlite, &probes).await?
    };
    // A compacted day the group lands in becomes hour blocks again first (compacted again
    // once the day is quiet), so that each segment merges with its window's blocks only.
    let spanning: Vec<(i64, i64)> = stored
        .iter()
        .filter(|(_, found)| found.iter().any(|b| blocks::spans_windows(b.start, b.end)))
        .map(|(key, _)| *key)
        .collect();
    for key in spanning {
        let found = stored.remove(&key).unwrap_or_default();
        for b in found {
            let pieces = if blocks::spans_windows(b.start, b.end) {
                crate::compact::split(tx, sqlite, key.0, &b).await?
            } else {
                vec![b]
            };
            for piece in pieces {
                let found = stored
                    .entry((key.0, blocks::window_of(piece.start)))
                    .or_default();
                found.push(piece);
                found.sort_by_key(|b| b.start);
            }
        }
    }
    let mut replaced = HashSet::new();
    let mut new_blocks = Vec::with_capacity(segments.len());
    for (s, window, seg) in segments {
        let old = stored.remove(&(s, window)).unwrap_or_default();
        let columns = match (old.first(), old.last()) {
            (Some(first), Some(last)) => {
                let mut kept = Columns::default();
                for b in &old {
                    kept.extend(b.columns()?);
                }
                let (merged, keys) = Columns::merge(&kept, &seg);
                replaced.extend(keys.into_iter().map(|t| (s, t)));
                blocks::delete_span(tx, s, first.start, last.start).await?;
                merged
            }
            _ => seg,
        };
        new_blocks.push(NewBlock {
            series: s,
            columns,
            sealed: false,
        });
    }
    blocks::insert(tx, sqlite, &new_blocks).await?;
    for b in &new_blocks {
        let last = b.columns.ts[b.columns.len() - 1];
        let slot = known.entry(b.series).or_insert(last);
        *slot = (*slot).max(last);
    }
    Ok(replaced)
}

/// Bucket aggregates of one level, sorted by (series, bucket): `None` where a point was
/// replaced (the bucket is recomputed from the level below), else what the new points add.
type Buckets = Vec<(i64, i64, Option<BucketStats>)>;

/// Groups sorted (series, time, delta) entries into buckets of `width`, in one pass.
fn bucketize(
    entries: impl Iterator<Item = (i64, i64, Option<BucketStats>)>,
    width: i64,
) -> Buckets {
    let mut out: Buckets = Vec::new();
    for (s, t, d) in entries {
        let b = floor_to(t, width);
        match out.last_mut() {
            Some((ls, lb, acc)) if *ls == s && *lb == b => {
                *acc = match (*acc, d) {
                    (Some(mut a), Some(d)) => {
                        a.merge(d);
                        Some(a)
                    }
                    _ => None,
                };
            }
            _ => out.push((s, b, d)),
        }
    }
    out
}

/// Recomputes `level` buckets of the given `(series, lo, hi)` ranges from the points of the
/// blocks (the finest level, whose buckets held a replaced point).
async fn recompute_from_points(
    tx: &mut plantd_store::WriteTx,
    sqlite: bool,
    level: i16,
    width: i64,
    ranges: &[(i64, i64, i64)],
) -> Result<()> {
    let mut buckets: Vec<(i64, i64, BucketStats)> = Vec::new();
    for (s, lo, hi) in ranges {
        let points = blocks::points(tx, *s, *lo, *hi).await?;
        let entries = points
            .ts
            .iter()
            .zip(&points.values)
            .map(|(t, v)| (*s, *t, Some(BucketStats::of(*v))));
        buckets.extend(
            bucketize(entries, width)
                .into_iter()
                .filter_map(|(s, b, d)| d.map(|d| (s, b, d))),
        );
    }
    for chunk in buckets.chunks(DELTAS_PER_STATEMENT) {
        write_buckets(tx, sqlite, level, chunk, true).await?;
    }
    Ok(())
}

/// Recomputes `level` buckets in the given `(series, lo, hi)` ranges from the level below.
async fn recompute(
    tx: &mut plantd_store::WriteTx,
    sqlite: bool,
    level: i16,
    width: i64,
    source_width: i64,
    ranges: &[(i64, i64, i64)],
) -> Result<()> {
    let sql = cached_sql(
        Statement::Recompute,
        i64::from(level) * 1_000_000_000_000 + source_width,
        sqlite,
        ranges.len(),
        || {
            let values = value_rows(sqlite, ranges.len(), 3, "", true);
            let below = level - 1;
            let select = format!(
                "SELECT r.series_id, (r.bucket / {width}) * {width}, SUM(r.count), SUM(r.sum), MIN(r.min), MAX(r.max) \
                 FROM telemetry_rollup r JOIN touched t ON r.series_id = t.series_id AND r.bucket >= t.lo AND r.bucket < t.hi \
                 WHERE r.level = {below} GROUP BY r.series_id, (r.bucket / {width}) * {width}"
            );
            format!(
                "WITH touched (series_id, lo, hi) AS (VALUES {values}) \
             INSERT INTO telemetry_rollup (level, series_id, bucket, count, sum, min, max) \
             SELECT {level}, q.* FROM ({select}) AS q WHERE 1 = 1 \
             ON CONFLICT (level, series_id, bucket) DO UPDATE SET count = excluded.count, sum = excluded.sum, \
             min = excluded.min, max = excluded.max"
            )
        },
    );
    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
    for (s, lo, hi) in ranges {
        q = q.bind(*s).bind(*lo).bind(*hi);
    }
    q.execute(&mut **tx).await?;
    Ok(())
}
