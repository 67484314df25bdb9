//! Atomic batch ingest: series upsert, raw upsert (a point with the same series and timestamp
//! replaces the stored one), then the touched minute buckets recomputed from raw, the touched
//! hours from minutes and the touched days from hours, all in one transaction.

use plantd_model::telemetry::Point;
use sqlx::Row;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::{LEVELS, Result, Tsdb, floor_to, runs};

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
        let values = (0..chunk.len())
            .map(|i| format!("(CAST({} AS BIGINT))", placeholder(sqlite, i + 1)))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "WITH k (id) AS (VALUES {values}) \
             SELECT k.id AS id, (SELECT MAX(r.ts) FROM telemetry_raw r WHERE r.series_id = k.id) AS newest FROM k"
        );
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
        let values = (0..chunk.len())
            .map(|i| {
                let p = |k: usize| placeholder(sqlite, i * 2 + k);
                format!("(CAST({} AS BIGINT), CAST({} AS BIGINT))", p(1), p(2))
            })
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "WITH k (s, t) AS (VALUES {values}) \
             SELECT k.s AS s, k.t AS t FROM k \
             WHERE EXISTS (SELECT 1 FROM telemetry_raw r WHERE r.series_id = k.s AND r.ts = k.t)"
        );
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
    let sql = format!(
        "INSERT INTO telemetry_rollup (level, series_id, bucket, count, sum, min, max) VALUES {values} \
         ON CONFLICT (level, series_id, bucket) DO UPDATE SET count = telemetry_rollup.count + excluded.count, \
         sum = telemetry_rollup.sum + excluded.sum, min = {least}(telemetry_rollup.min, excluded.min), \
         max = {greatest}(telemetry_rollup.max, excluded.max)"
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

impl Tsdb {
    /// Stores a validated batch, all or nothing. Returns the number of points accepted (points
    /// repeating a series and timestamp within the batch count once: the last one wins).
    pub async fn ingest(&self, org_id: &str, points: &[Point]) -> Result<usize> {
        let mut tx = self
            .store
            .begin_write()
            .await
            .map_err(crate::TsdbError::from_store)?;
        if self.store.backend() == plantd_store::Backend::Postgres {
            // Rollups are recomputed from what the transaction sees. Two batches of one
            // organization must not recompute the same bucket from different snapshots (the later
            // upsert would drop the other's points), so they take turns, across API nodes too.
            // SQLite needs nothing: its write gate already serializes whole transactions.
            sqlx::query("SELECT pg_advisory_xact_lock($1)")
                .bind(org_lock_key(org_id))
                .execute(&mut *tx)
                .await?;
        }
        // Series ids, creating series (and linking data sources) inside the transaction.
        let mut ids: HashMap<(&str, &str), i64> = HashMap::new();
        let mut created: Vec<(crate::SeriesKey, crate::SeriesEntry)> = Vec::new();
        {
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
                        .fetch_one(&mut *tx)
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
        }
        // Last point wins for a repeated (series, timestamp) within the batch.
        let mut rows: BTreeMap<(i64, i64), (f64, i16)> = BTreeMap::new();
        for p in points {
            let id = ids[&(p.asset_id.as_str(), p.tag_name.as_str())];
            rows.insert((id, p.timestamp.millis()), (p.value, p.quality.code()));
        }
        let rows: Vec<_> = rows.into_iter().collect();
        let sqlite = self.store.backend() == plantd_store::Backend::Sqlite;
        // Which points replace stored ones: their buckets are recomputed, the others get deltas.
        let replaced = find_replaced(&mut tx, sqlite, &rows).await?;
        for chunk in rows.chunks(ROWS_PER_INSERT) {
            let mut sql =
                String::from("INSERT INTO telemetry_raw (series_id, ts, value, quality) VALUES ");
            for i in 0..chunk.len() {
                if i > 0 {
                    sql.push(',');
                }
                let p = |k: usize| placeholder(sqlite, i * 4 + k);
                sql.push_str(&format!("({}, {}, {}, {})", p(1), p(2), p(3), p(4)));
            }
            sql.push_str(" ON CONFLICT (series_id, ts) DO UPDATE SET value = excluded.value, quality = excluded.quality");
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
        self.latest.observe(org_id, points);
        self.storage.add(org_id, rows.len());
        Ok(rows.len())
    }
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
    let sql = format!(
        "WITH touched (series_id, lo, hi) AS (VALUES {values}) \
         INSERT INTO telemetry_rollup (level, series_id, bucket, count, sum, min, max) \
         SELECT {level}, q.* FROM ({select}) AS q WHERE 1 = 1 \
         ON CONFLICT (level, series_id, bucket) DO UPDATE SET count = excluded.count, sum = excluded.sum, \
         min = excluded.min, max = excluded.max"
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
