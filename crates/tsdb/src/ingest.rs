//! Atomic batch ingest: series upsert, raw upsert (a point with the same series and timestamp
//! replaces the stored one), then the touched minute buckets recomputed from raw, the touched
//! hours from minutes and the touched days from hours, all in one transaction.

use plantd_model::telemetry::Point;
use sqlx::Row;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::{LEVELS, Result, Shared, Tsdb, floor_to, runs};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// Rows per multi-row INSERT (4 parameters each, far below both engines' parameter limits).
const ROWS_PER_INSERT: usize = 500;
/// Ranges per rollup statement (3 parameters each).
const RANGES_PER_STATEMENT: usize = 300;
/// Bucket deltas per statement (6 parameters each).
const DELTAS_PER_STATEMENT: usize = 150;
/// Keys looked up per statement (2 parameters each).
const KEYS_PER_STATEMENT: usize = 400;

/// A raw point as written: ((series, ts), (value, quality)).
type RawPoint = ((i64, i64), (f64, i16));

/// What new points add to a bucket.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Delta {
    count: i64,
    sum: f64,
    min: f64,
    max: f64,
}

impl Delta {
    const EMPTY: Delta = Delta {
        count: 0,
        sum: 0.0,
        min: f64::INFINITY,
        max: f64::NEG_INFINITY,
    };
    fn of(v: f64) -> Self {
        Delta {
            count: 1,
            sum: v,
            min: v,
            max: v,
        }
    }
    fn merge(self, o: Delta) -> Self {
        Delta {
            count: self.count + o.count,
            sum: self.sum + o.sum,
            min: self.min.min(o.min),
            max: self.max.max(o.max),
        }
    }
}

/// The batch's keys that already hold a point (a correlated EXISTS, so each key is one primary
/// key probe: a join let SQLite scan the raw table instead, minutes on millions of rows). Only keys at or before their series' newest
/// stored timestamp can, so appends (the usual case) cost one index probe per series.
async fn find_replaced(
    tx: &mut plantd_store::WriteTx,
    sqlite: bool,
    rows: &[RawPoint],
) -> Result<std::collections::HashSet<(i64, i64)>> {
    let series: Vec<i64> = rows
        .iter()
        .map(|((s, _), _)| *s)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut newest: HashMap<i64, i64> = HashMap::new();
    for chunk in series.chunks(KEYS_PER_STATEMENT) {
        let sql = cached_sql(Statement::ProbeNewest, 0, sqlite, chunk.len(), || {
            let values = (0..chunk.len())
                .map(|i| format!("(CAST({} AS BIGINT))", placeholder(sqlite, i + 1)))
                .collect::<Vec<_>>()
                .join(", ");
            format!(
                "WITH k (id) AS (VALUES {values}) \
                 SELECT k.id AS id, (SELECT MAX(r.ts) FROM telemetry_raw r WHERE r.series_id = k.id) AS newest FROM k"
            )
        });
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for s in chunk {
            q = q.bind(*s);
        }
        for row in q.fetch_all(&mut **tx).await? {
            if let Some(n) = row.try_get::<Option<i64>, _>("newest")? {
                newest.insert(row.try_get("id")?, n);
            }
        }
    }
    let candidates: Vec<(i64, i64)> = rows
        .iter()
        .map(|(k, _)| *k)
        .filter(|(s, t)| newest.get(s).is_some_and(|n| t <= n))
        .collect();
    let mut replaced = std::collections::HashSet::new();
    for chunk in candidates.chunks(KEYS_PER_STATEMENT) {
        let sql = cached_sql(Statement::ProbeKeys, 0, sqlite, chunk.len(), || {
            let values = (0..chunk.len())
                .map(|i| {
                    let p = |k: usize| placeholder(sqlite, i * 2 + k);
                    format!("(CAST({} AS BIGINT), CAST({} AS BIGINT))", p(1), p(2))
                })
                .collect::<Vec<_>>()
                .join(", ");
            format!(
                "WITH k (s, t) AS (VALUES {values}) \
                 SELECT k.s AS s, k.t AS t FROM k \
                 WHERE EXISTS (SELECT 1 FROM telemetry_raw r WHERE r.series_id = k.s AND r.ts = k.t)"
            )
        });
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (s, t) in chunk {
            q = q.bind(*s).bind(*t);
        }
        for row in q.fetch_all(&mut **tx).await? {
            replaced.insert((row.try_get("s")?, row.try_get("t")?));
        }
    }
    Ok(replaced)
}

/// Adds deltas to `level` buckets (creating them when new).
async fn add_deltas(
    tx: &mut plantd_store::WriteTx,
    sqlite: bool,
    level: i16,
    deltas: &[(i64, i64, Delta)],
) -> Result<()> {
    let sql = cached_sql(
        Statement::AddDeltas,
        i64::from(level),
        sqlite,
        deltas.len(),
        || {
            let values = (0..deltas.len())
                .map(|i| {
                    let p = |k: usize| placeholder(sqlite, i * 6 + k);
                    format!(
                        "({level}, {}, {}, {}, {}, {}, {})",
                        p(1),
                        p(2),
                        p(3),
                        p(4),
                        p(5),
                        p(6)
                    )
                })
                .collect::<Vec<_>>()
                .join(", ");
            let (least, greatest) = if sqlite {
                ("MIN", "MAX")
            } else {
                ("LEAST", "GREATEST")
            };
            format!(
                "INSERT INTO telemetry_rollup (level, series_id, bucket, count, sum, min, max) VALUES {values} \
             ON CONFLICT (level, series_id, bucket) DO UPDATE SET count = telemetry_rollup.count + excluded.count, \
             sum = telemetry_rollup.sum + excluded.sum, min = {least}(telemetry_rollup.min, excluded.min), \
             max = {greatest}(telemetry_rollup.max, excluded.max)"
            )
        },
    );
    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
    for (s, b, d) in deltas {
        q = q
            .bind(*s)
            .bind(*b)
            .bind(d.count)
            .bind(d.sum)
            .bind(d.min)
            .bind(d.max);
    }
    q.execute(&mut **tx).await?;
    Ok(())
}

/// One batch waiting for the writer, with where to send its outcome.
pub(crate) struct Job {
    org_id: String,
    points: Arc<Vec<Point>>,
    reply: oneshot::Sender<Result<usize>>,
}

/// Batches queued while the writer commits are written together, up to this many points.
const GROUP_POINTS: usize = 50_000;
/// Batches that may wait for the writer before `ingest` waits to queue.
const QUEUE: usize = 256;

impl Tsdb {
    /// Stores a validated batch, all or nothing, and returns once it is durable. Returns the
    /// number of points accepted (points repeating a series and timestamp within the batch count
    /// once: the last one wins).
    ///
    /// Batches go through one writer task, which commits the batches that queued while it was
    /// writing in one transaction (group commit): one lock, one fsync and a few large statements
    /// for many concurrent requests. The result is what committing them one after the other in
    /// arrival order would give; a failing transaction fails every batch in it and stores none.
    pub async fn ingest(&self, org_id: &str, points: Arc<Vec<Point>>) -> Result<usize> {
        let writer = self.writer.get_or_init(|| {
            let (tx, rx) = tokio::sync::mpsc::channel(QUEUE);
            tokio::spawn(run_writer(self.shared.clone(), rx));
            tx
        });
        let (reply, outcome) = oneshot::channel();
        let job = Job {
            org_id: org_id.to_string(),
            points,
            reply,
        };
        writer.send(job).await.map_err(|_| writer_gone())?;
        outcome.await.map_err(|_| writer_gone())?
    }
}

fn writer_gone() -> crate::TsdbError {
    crate::TsdbError::Store("the ingest writer stopped before answering".into())
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
            let outcome = shared.write_group(&jobs).await;
            match outcome {
                Ok(counts) => {
                    for (job, n) in jobs.into_iter().zip(counts) {
                        let _ = job.reply.send(Ok(n));
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, batches = jobs.len(), "telemetry ingest failed");
                    let message = e.to_string();
                    for job in jobs {
                        let _ = job
                            .reply
                            .send(Err(crate::TsdbError::Store(message.clone())));
                    }
                }
            }
        });
        if let Err(e) = group.await {
            tracing::error!(error = %e, "telemetry ingest group failed");
        }
    }
}

impl Shared {
    /// Writes a group of batches in one transaction; returns each batch's accepted count.
    async fn write_group(&self, jobs: &[Job]) -> Result<Vec<usize>> {
        let mut tx = self
            .store
            .begin_write()
            .await
            .map_err(crate::TsdbError::from_store)?;
        let sqlite = self.store.backend() == plantd_store::Backend::Sqlite;
        if !sqlite {
            // Rollups are recomputed from what the transaction sees. Two transactions writing
            // one organization must not recompute the same bucket from different snapshots (the
            // later upsert would drop the other's points), so they take turns, across API nodes
            // too; locks are taken in one order so that groups never deadlock. SQLite needs
            // nothing: its write gate already serializes whole transactions.
            let orgs: BTreeSet<i64> = jobs.iter().map(|j| org_lock_key(&j.org_id)).collect();
            for key in orgs {
                sqlx::query("SELECT pg_advisory_xact_lock($1)")
                    .bind(key)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        // Series ids, creating series (and linking data sources) inside the transaction.
        let mut created: Vec<(crate::SeriesKey, crate::SeriesEntry)> = Vec::new();
        let mut ids_per_job: Vec<Vec<i64>> = Vec::with_capacity(jobs.len());
        for job in jobs {
            let mut ids: HashMap<(&str, &str), i64> = HashMap::new();
            let known = self
                .series
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone_subset(&job.org_id, &job.points);
            for p in job.points.iter() {
                let key = (p.asset_id.as_str(), p.tag_name.as_str());
                if ids.contains_key(&key) {
                    continue;
                }
                // A series created by an earlier batch of this group is found again by its
                // upsert (the cache learns of it only after the commit).
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
                        .bind(&job.org_id)
                        .bind(&p.asset_id)
                        .bind(&p.tag_name)
                        .bind(p.data_source_id.clone())
                        .fetch_one(&mut *tx)
                        .await?;
                        let id: i64 = row.try_get("id")?;
                        let ds: Option<String> = row.try_get("data_source_id")?;
                        ids.insert(key, id);
                        created.push((
                            (job.org_id.clone(), p.asset_id.clone(), p.tag_name.clone()),
                            (id, ds),
                        ));
                    }
                }
            }
            ids_per_job.push(
                job.points
                    .iter()
                    .map(|p| ids[&(p.asset_id.as_str(), p.tag_name.as_str())])
                    .collect(),
            );
        }
        // Last point wins for a repeated (series, timestamp), within a batch and across the
        // batches of the group in arrival order.
        let mut rows: BTreeMap<(i64, i64), (f64, i16)> = BTreeMap::new();
        let mut counts = Vec::with_capacity(jobs.len());
        for (job, ids) in jobs.iter().zip(&ids_per_job) {
            let mut keys: Vec<(i64, i64)> = Vec::with_capacity(ids.len());
            for (p, id) in job.points.iter().zip(ids) {
                let key = (*id, p.timestamp.millis());
                rows.insert(key, (p.value, p.quality.code()));
                keys.push(key);
            }
            keys.sort_unstable();
            keys.dedup();
            counts.push(keys.len());
        }
        let rows: Vec<_> = rows.into_iter().collect();
        // Which points replace stored ones: their buckets are recomputed, the others get deltas.
        let replaced = find_replaced(&mut tx, sqlite, &rows).await?;
        for chunk in rows.chunks(ROWS_PER_INSERT) {
            let sql = cached_sql(Statement::InsertRaw, 0, sqlite, chunk.len(), || {
                let mut sql = String::from(
                    "INSERT INTO telemetry_raw (series_id, ts, value, quality) VALUES ",
                );
                for i in 0..chunk.len() {
                    if i > 0 {
                        sql.push(',');
                    }
                    let p = |k: usize| placeholder(sqlite, i * 4 + k);
                    sql.push_str(&format!("({}, {}, {}, {})", p(1), p(2), p(3), p(4)));
                }
                sql.push_str(" ON CONFLICT (series_id, ts) DO UPDATE SET value = excluded.value, quality = excluded.quality");
                sql
            });
            let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
            for ((series, ts), (value, quality)) in chunk {
                q = q.bind(*series).bind(*ts).bind(*value).bind(*quality);
            }
            q.execute(&mut *tx).await?;
        }
        // Rollups per level: buckets holding only new points add their delta; buckets where a
        // point was replaced (`None`) are recomputed from the level below.
        let mut touched: BTreeMap<(i64, i64), Option<Delta>> = BTreeMap::new();
        for ((series, ts), (value, _)) in &rows {
            let delta = (!replaced.contains(&(*series, *ts))).then(|| Delta::of(*value));
            touched.insert((*series, *ts), delta);
        }
        let mut source_width = 1;
        for (level, width) in LEVELS {
            let mut buckets: BTreeMap<(i64, i64), Option<Delta>> = BTreeMap::new();
            for ((s, t), d) in &touched {
                let entry = buckets
                    .entry((*s, floor_to(*t, width)))
                    .or_insert(Some(Delta::EMPTY));
                *entry = match (*entry, d) {
                    (Some(acc), Some(d)) => Some(acc.merge(*d)),
                    _ => None,
                };
            }
            let deltas: Vec<(i64, i64, Delta)> = buckets
                .iter()
                .filter_map(|((s, b), d)| d.map(|d| (*s, *b, d)))
                .collect();
            for chunk in deltas.chunks(DELTAS_PER_STATEMENT) {
                add_deltas(&mut tx, sqlite, level, chunk).await?;
            }
            let mut per_series: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
            for ((s, b), d) in &buckets {
                if d.is_none() {
                    per_series.entry(*s).or_default().push(*b);
                }
            }
            let ranges: Vec<(i64, i64, i64)> = per_series
                .iter()
                .flat_map(|(s, bs)| {
                    runs(bs, width)
                        .into_iter()
                        .map(move |(lo, hi)| (*s, lo, hi))
                })
                .collect();
            for chunk in ranges.chunks(RANGES_PER_STATEMENT) {
                recompute(&mut tx, sqlite, level, width, source_width, chunk).await?;
            }
            touched = buckets;
            source_width = width;
        }
        tx.commit().await?;
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

/// The statements whose text depends only on their row count, built once per count.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Statement {
    InsertRaw,
    AddDeltas,
    Recompute,
    ProbeNewest,
    ProbeKeys,
}

/// The text of a bulk statement, built on first use and then copied from a cache (formatting
/// thousands of placeholders per batch cost more than the statement's execution).
fn cached_sql(
    kind: Statement,
    variant: i64,
    sqlite: bool,
    rows: usize,
    build: impl FnOnce() -> String,
) -> String {
    type Cache = HashMap<(Statement, i64, bool, usize), String>;
    static CACHE: std::sync::LazyLock<Mutex<Cache>> = std::sync::LazyLock::new(Mutex::default);
    let key = (kind, variant, sqlite, rows);
    if let Some(sql) = CACHE.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return sql.clone();
    }
    let sql = build();
    CACHE
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key, sql.clone());
    sql
}

/// A stable 64-bit key for an organization's ingest lock (FNV-1a of its id).
fn org_lock_key(org_id: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in org_id.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h as i64
}

/// The `n`-th bind placeholder. SQLite gets bare `?`: with `$N`, binding looks every name up in
/// a linear list, which made a 2,000-parameter statement spend most of its time binding.
fn placeholder(sqlite: bool, n: usize) -> String {
    if sqlite {
        "?".to_string()
    } else {
        format!("${n}")
    }
}

/// Recomputes `level` buckets in the given `(series, lo, hi)` ranges from the level below
/// (raw points for minutes).
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
            let values = (0..ranges.len())
                .map(|i| {
                    let p = |k: usize| placeholder(sqlite, i * 3 + k);
                    format!(
                        "(CAST({} AS BIGINT), CAST({} AS BIGINT), CAST({} AS BIGINT))",
                        p(1),
                        p(2),
                        p(3)
                    )
                })
                .collect::<Vec<_>>()
                .join(", ");
            let select = if source_width == 1 {
                format!(
                    "SELECT r.series_id, (r.ts / {width}) * {width}, COUNT(*), SUM(r.value), MIN(r.value), MAX(r.value) \
                 FROM telemetry_raw r JOIN touched t ON r.series_id = t.series_id AND r.ts >= t.lo AND r.ts < t.hi \
                 WHERE 1 = 1 GROUP BY r.series_id, (r.ts / {width}) * {width}"
                )
            } else {
                let below = level - 1;
                format!(
                    "SELECT r.series_id, (r.bucket / {width}) * {width}, SUM(r.count), SUM(r.sum), MIN(r.min), MAX(r.max) \
                 FROM telemetry_rollup r JOIN touched t ON r.series_id = t.series_id AND r.bucket >= t.lo AND r.bucket < t.hi \
                 WHERE r.level = {below} GROUP BY r.series_id, (r.bucket / {width}) * {width}"
                )
            };
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

impl CloneSubset for HashMap<crate::SeriesKey, crate::SeriesEntry> {
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
