//! Atomic batch ingest: series upsert, the points into blocks (a point with the same series and
//! timestamp replaces the stored one), then the touched minute buckets recomputed from the points,
//! the touched hours from minutes and the touched days from hours, all in one transaction.

use plantd_model::telemetry::Point;
use plantd_store::NewAuditRecord;
use sqlx::Row;
use std::collections::{BTreeSet, HashMap, HashSet};

use crate::block::Columns;
use crate::blocks::{self, NewBlock};
use crate::error::{Result, TsdbError};
use crate::levels::{BucketStats, HOUR, LEVELS, MINUTE, floor_to, runs};
use crate::rollups::{self, DELTAS_PER_STATEMENT, write_buckets};
use crate::sql::{Statement, cached_sql, value_rows};
use crate::state::{SeriesEntry, SeriesKey, Shared};
use std::sync::Arc;
use tokio::sync::oneshot;

/// Ranges per rollup statement (3 parameters each).
const RANGES_PER_STATEMENT: usize = 300;

/// A raw point as written: ((series, ts), (value, quality)).
type RawPoint = ((i64, i64), (f64, i16));

/// Writes the group's rows (sorted by series and time, without repeats) into blocks and returns
/// the keys that replaced a stored point.
///
/// Per series and window: points after the series' newest stored point (appends, the usual case:
/// one index probe per series for the whole group) become a new head block; others are merged
/// with the blocks they overlap, which are rewritten as one (the group's point wins a key).
async fn write_blocks(
    tx: &mut plantd_store::WriteTx,
    sqlite: bool,
    rows: &[RawPoint],
) -> Result<HashSet<(i64, i64)>> {
    let series: Vec<i64> = rows
        .iter()
        .map(|((s, _), _)| *s)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let newest = blocks::newest(tx, sqlite, &series).await?;
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
    Ok(replaced)
}

/// One batch waiting for the writer, with where to send its outcome.
pub(crate) struct Job {
    org_id: String,
    points: Arc<Vec<Point>>,
    /// The batch's rows, sorted and without repeats, when every series was in the cache (built
    /// by the request's task, beside other requests); else the writer builds them.
    rows: Option<Vec<RawPoint>>,
    /// The request's audit record (id, record, time), stored in the same transaction.
    audit: Option<(String, NewAuditRecord, i64)>,
    reply: oneshot::Sender<Result<usize>>,
}

/// Batches queued while the writer commits are written together, up to this many points.
const GROUP_POINTS: usize = 50_000;
/// Batches that may wait for the writer before `ingest` waits to queue.
const QUEUE: usize = 256;

/// The writer's queue, started with the first batch.
pub(crate) type Writer = std::sync::OnceLock<tokio::sync::mpsc::Sender<Job>>;

/// Batches waiting for the writer.
pub(crate) fn queued(writer: &Writer) -> usize {
    writer
        .get()
        .map_or(0, |tx| tx.max_capacity() - tx.capacity())
}

/// Queues a validated batch for the writer and waits until it is durable (see `Tsdb::ingest`).
pub(crate) async fn submit(
    shared: &Arc<Shared>,
    writer: &Writer,
    org_id: &str,
    points: Arc<Vec<Point>>,
    audit: Option<NewAuditRecord>,
) -> Result<usize> {
    let writer = writer.get_or_init(|| {
        let (tx, rx) = tokio::sync::mpsc::channel(QUEUE);
        tokio::spawn(run_writer(shared.clone(), rx));
        tokio::spawn(crate::seal::run(shared.clone()));
        tx
    });
    let rows = shared.rows_from_cache(org_id, &points);
    let (reply, outcome) = oneshot::channel();
    let job = Job {
        org_id: org_id.to_string(),
        points,
        rows,
        audit: audit.map(|r| {
            (
                plantd_model::new_id(),
                r,
                plantd_model::Timestamp::now().millis(),
            )
        }),
        reply,
    };
    writer.send(job).await.map_err(|_| writer_gone())?;
    outcome.await.map_err(|_| writer_gone())?
}

fn writer_gone() -> TsdbError {
    TsdbError::Writer("the ingest writer stopped before answering".into())
}

/// Sorts rows by (series, timestamp) and keeps the last of each repeated key (the sort is
/// stable, so "last" is arrival order).
fn sort_rows(rows: &mut Vec<RawPoint>) {
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

/// The writer: takes the first waiting batch and every batch queued behind it (up to
/// [`GROUP_POINTS`]), writes them in one transaction and answers each. A group runs in its own
/// task, so that a failure there (even a panic) answers its batches with an error and the writer
/// goes on with the next group.
async fn run_writer(shared: Arc<Shared>, mut rx: tokio::sync::mpsc::Receiver<Job>) {
    while let Some(first) = rx.recv().await {
        let mut points = first.points.len();
        let mut jobs = vec![first];
        while points < GROUP_POINTS {
            match rx.try_recv() {
                Ok(job) => {
                    points += job.points.len();
                    jobs.push(job);
                }
                Err(_) => break,
            }
        }
        let shared = shared.clone();
        let group = tokio::spawn(async move {
            let outcome = shared.write_group(&mut jobs).await;
            match outcome {
                Ok(counts) => {
                    for (job, n) in jobs.into_iter().zip(counts) {
                        let _ = job.reply.send(Ok(n));
                    }
                }
                Err(e) => {
                    // Each batch's caller reports the failure (with this cause chain).
                    let message = format!(
                        "the write of {} batches failed: {}",
                        jobs.len(),
                        plantd_model::error_chain(&e)
                    );
                    for job in jobs {
                        let _ = job.reply.send(Err(TsdbError::Writer(message.clone())));
                    }
                }
            }
        });
        if let Err(e) = group.await {
            // A panic: its batches' callers are told the writer stopped before answering.
            tracing::error!(error = %e, "telemetry ingest group panicked");
        }
    }
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

impl Shared {
    /// The rows of a batch whose series are all in the cache (and linked to the data source its
    /// points name), sorted; `None` sends the batch to the writer's slower path.
    fn rows_from_cache(&self, org_id: &str, points: &[Point]) -> Option<Vec<RawPoint>> {
        let series = self.series.lock().unwrap_or_else(|p| p.into_inner());
        let mut key = (org_id.to_string(), String::new(), String::new());
        let mut rows = Vec::with_capacity(points.len());
        let mut last: Option<(&Point, i64)> = None;
        for p in points {
            let id = match last {
                Some((l, id))
                    if l.asset_id == p.asset_id
                        && l.tag_name == p.tag_name
                        && l.data_source_id == p.data_source_id =>
                {
                    id
                }
                _ => {
                    key.1.clone_from(&p.asset_id);
                    key.2.clone_from(&p.tag_name);
                    match series.get(&key) {
                        Some((id, ds)) if p.data_source_id.is_none() || *ds == p.data_source_id => {
                            *id
                        }
                        _ => return None,
                    }
                }
            };
            last = Some((p, id));
            rows.push(((id, p.timestamp.millis()), (p.value, p.quality.code())));
        }
        drop(series);
        sort_rows(&mut rows);
        Some(rows)
    }

    /// Series ids of a batch, creating series (and linking data sources) in the transaction,
    /// then its rows, sorted. New series are added to `created` for the cache.
    async fn rows_in_tx(
        &self,
        tx: &mut plantd_store::WriteTx,
        org_id: &str,
        points: &[Point],
        created: &mut Vec<(SeriesKey, SeriesEntry)>,
    ) -> Result<Vec<RawPoint>> {
        let mut ids: HashMap<(&str, &str), i64> = HashMap::new();
        let known = self
            .series
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone_subset(org_id, points);
        for p in points {
            let key = (p.asset_id.as_str(), p.tag_name.as_str());
            if ids.contains_key(&key) {
                continue;
            }
            // A series created by an earlier batch of this group is found again by its upsert
            // (the cache learns of it only after the commit).
            match known.get(&key) {
                Some((id, ds)) if p.data_source_id.is_none() || *ds == p.data_source_id => {
                    ids.insert(key, *id);
                }
                _ => {
                    let row = sqlx::query(
                        "INSERT INTO telemetry_series (org_id, asset_id, tag_name, data_source_id) VALUES ($1, $2, $3, $4) \
                         ON CONFLICT (org_id, asset_id, tag_name) DO UPDATE \
                         SET data_source_id = COALESCE(excluded.data_source_id, telemetry_series.data_source_id) \
                         RETURNING id, data_source_id",
                    )
                    .bind(org_id)
                    .bind(&p.asset_id)
                    .bind(&p.tag_name)
                    .bind(p.data_source_id.clone())
                    .fetch_one(&mut **tx)
                    .await?;
                    let id: i64 = row.try_get("id")?;
                    let ds: Option<String> = row.try_get("data_source_id")?;
                    ids.insert(key, id);
                    created.push((
                        (org_id.to_string(), p.asset_id.clone(), p.tag_name.clone()),
                        (id, ds),
                    ));
                }
            }
        }
        let mut rows: Vec<RawPoint> = points
            .iter()
            .map(|p| {
                let id = ids[&(p.asset_id.as_str(), p.tag_name.as_str())];
                ((id, p.timestamp.millis()), (p.value, p.quality.code()))
            })
            .collect();
        sort_rows(&mut rows);
        Ok(rows)
    }

    /// Writes a group of batches in one transaction; returns each batch's accepted count.
    async fn write_group(&self, jobs: &mut [Job]) -> Result<Vec<usize>> {
        let mut tx = self.store.begin_write().await?;
        let sqlite = self.store.backend() == plantd_store::Backend::Sqlite;
        if !sqlite {
            // Rollups are recomputed from what the transaction sees. Two transactions writing
            // one organization must not recompute the same bucket from different snapshots (the
            // later upsert would drop the other's points), so they take turns, across API nodes
            // too; locks are taken in one order so that groups never deadlock. SQLite needs
            // nothing: its write gate already serializes whole transactions.
            blocks::lock_orgs(&mut tx, jobs.iter().map(|j| j.org_id.as_str())).await?;
        }
        let mut created: Vec<(SeriesKey, SeriesEntry)> = Vec::new();
        let mut counts = Vec::with_capacity(jobs.len());
        let mut rows: Vec<RawPoint> = Vec::new();
        for job in jobs.iter_mut() {
            let mine = match job.rows.take() {
                Some(r) => r,
                None => {
                    self.rows_in_tx(&mut tx, &job.org_id, &job.points, &mut created)
                        .await?
                }
            };
            counts.push(mine.len());
            if rows.is_empty() {
                rows = mine;
            } else {
                rows.extend(mine);
            }
        }
        // Across the batches of the group, the later batch wins a repeated key.
        if jobs.len() > 1 {
            sort_rows(&mut rows);
        }
        // Which points replace stored ones: their buckets are recomputed, the others get deltas.
        let replaced = write_blocks(&mut tx, sqlite, &rows).await?;
        // Rollups per level, each from the one below in one pass over sorted entries: buckets
        // holding only new points add their delta; buckets where a point was replaced are
        // recomputed from the level below.
        let mut below: Buckets = rows
            .iter()
            .map(|((s, t), (v, _))| {
                // (Most groups replace nothing: no lookup per point then.)
                let new = replaced.is_empty() || !replaced.contains(&(*s, *t));
                (*s, *t, new.then(|| BucketStats::of(*v)))
            })
            .collect();
        let mut source_width = 1;
        for (level, width) in LEVELS {
            let buckets = bucketize(below.iter().copied(), width);
            if width == MINUTE {
                // Packed hours these minutes fall in become rows again before they change.
                let hours: Vec<(i64, i64)> = buckets
                    .iter()
                    .map(|(s, b, _)| (*s, floor_to(*b, HOUR)))
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
                rollups::unpack(&mut tx, sqlite, &hours).await?;
            }
            let deltas: Vec<(i64, i64, BucketStats)> = buckets
                .iter()
                .filter_map(|(s, b, d)| d.map(|d| (*s, *b, d)))
                .collect();
            for chunk in deltas.chunks(DELTAS_PER_STATEMENT) {
                write_buckets(&mut tx, sqlite, level, chunk, false).await?;
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
                recompute_from_points(&mut tx, sqlite, level, width, &ranges).await?;
            } else {
                for chunk in ranges.chunks(RANGES_PER_STATEMENT) {
                    recompute(&mut tx, sqlite, level, width, source_width, chunk).await?;
                }
            }
            below = buckets;
            source_width = width;
        }
        let audit: Vec<(&str, &NewAuditRecord, i64)> = jobs
            .iter()
            .filter_map(|j| j.audit.as_ref().map(|(id, r, ts)| (id.as_str(), r, *ts)))
            .collect();
        if !audit.is_empty() {
            plantd_store::insert_audit_rows(&mut tx, self.store.backend(), &audit).await?;
        }
        if !sqlite {
            // Other nodes drop their cached latest values of the assets written here; sent with
            // the commit, heard only if it commits.
            let assets: BTreeSet<(&str, &str)> = jobs
                .iter()
                .flat_map(|j| {
                    j.points
                        .iter()
                        .map(move |p| (j.org_id.as_str(), p.asset_id.as_str()))
                })
                .collect();
            for text in self.latest.announcements(assets.into_iter()) {
                sqlx::query("SELECT pg_notify($1, $2)")
                    .bind(crate::latest::CHANNEL)
                    .bind(text)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        tx.commit().await?;
        self.seal_wake.notify_one();
        // Only now, with the data durable, do memory caches learn of it.
        let mut series = self.series.lock().unwrap_or_else(|p| p.into_inner());
        for (key, value) in created {
            series.insert(key, value);
        }
        drop(series);
        for (job, n) in jobs.iter().zip(&counts) {
            self.latest.observe(&job.org_id, &job.points);
            self.storage.add(&job.org_id, *n);
        }
        Ok(counts)
    }
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

/// The cached series ids a batch needs, copied out so the lock is not held across awaits.
trait CloneSubset {
    fn clone_subset<'a>(
        &self,
        org_id: &str,
        points: &'a [Point],
    ) -> HashMap<(&'a str, &'a str), (i64, Option<String>)>;
}

impl CloneSubset for HashMap<SeriesKey, SeriesEntry> {
    fn clone_subset<'a>(
        &self,
        org_id: &str,
        points: &'a [Point],
    ) -> HashMap<(&'a str, &'a str), (i64, Option<String>)> {
        let mut out = HashMap::new();
        let mut key = (org_id.to_string(), String::new(), String::new());
        for p in points {
            if out.contains_key(&(p.asset_id.as_str(), p.tag_name.as_str())) {
                continue;
            }
            key.1.clone_from(&p.asset_id);
            key.2.clone_from(&p.tag_name);
            if let Some(v) = self.get(&key) {
                out.insert((p.asset_id.as_str(), p.tag_name.as_str()), v.clone());
            }
        }
        out
    }
}
