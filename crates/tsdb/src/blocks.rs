//! The SQL of `telemetry_block`: raw points packed per series and window (one UTC hour), and
//! the sealed hours of sparse series compacted into one block a day (`compact.rs`).
//!
//! Invariants every writer keeps: a block holds the points of one series within one window, or
//! (compacted) within one UTC day, in time order, at least one; the blocks of a series never
//! overlap in time (`start_ts..=end_ts`), so the block holding a timestamp is found by one index
//! range on `(series_id, start_ts)` starting at the timestamp's day ([`reach_of`]).

use sqlx::pool::PoolConnection;
use sqlx::{AnyConnection, Row};
use std::collections::HashMap;

use crate::block::{self, Columns};
use crate::error::Result;
use crate::levels::{DAY, HOUR, floor_to};
use crate::sql::{Statement, cached_sql, placeholder, value_rows};

/// The time window of a block.
pub(crate) const WINDOW: i64 = HOUR;

/// A window is closed this long after its end (late points after that reopen it: they are
/// merged at the next pass); the minute rollups of its hour are packed then too.
pub(crate) const GRACE: i64 = 60_000;

pub(crate) fn window_of(t: i64) -> i64 {
    floor_to(t, WINDOW)
}

/// Where the blocks that may hold `t` start at the earliest: its UTC day (a compacted block
/// spans at most one).
pub(crate) fn reach_of(t: i64) -> i64 {
    floor_to(t, DAY)
}

/// Whether a block spans more than one window (a compacted day).
pub(crate) fn spans_windows(start: i64, end: i64) -> bool {
    window_of(start) != window_of(end)
}

/// A block as stored.
pub(crate) struct StoredBlock {
    pub start: i64,
    pub end: i64,
    pub count: i64,
    pub sealed: bool,
    pub data: Vec<u8>,
}

impl StoredBlock {
    pub(crate) fn columns(&self) -> Result<Columns> {
        block::decode(&self.data)
    }
}

const COLUMNS: &str = "start_ts, end_ts, count, sealed, data";

fn stored(r: &sqlx::any::AnyRow) -> Result<StoredBlock> {
    let sealed: i16 = r.try_get("sealed")?;
    Ok(StoredBlock {
        start: r.try_get("start_ts")?,
        end: r.try_get("end_ts")?,
        count: r.try_get("count")?,
        sealed: sealed != 0,
        data: r.try_get("data")?,
    })
}

/// Head blocks not yet sealed (counted over the head's partial index).
pub(crate) async fn unsealed(pool: &sqlx::AnyPool) -> Result<u64> {
    let n: i64 = sqlx::query("SELECT COUNT(*) AS n FROM telemetry_block WHERE sealed = 0")
        .fetch_one(pool)
        .await?
        .try_get("n")?;
    Ok(n as u64)
}

/// The blocks of `series` holding a point in `[lo, hi]` (both inclusive), by time.
pub(crate) async fn overlapping(
    conn: &mut AnyConnection,
    series: i64,
    lo: i64,
    hi: i64,
) -> Result<Vec<StoredBlock>> {
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM telemetry_block WHERE series_id = $1 AND start_ts >= $2 AND start_ts <= $3 \
         AND end_ts >= $4 ORDER BY start_ts"
    )))
    .bind(series)
    .bind(reach_of(lo))
    .bind(hi)
    .bind(lo)
    .fetch_all(&mut *conn)
    .await?;
    rows.iter().map(stored).collect()
}

/// The blocks holding a point in each probe's `[lo, hi]` (a series and a span within one
/// window), in one statement per 200 probes, by (series, window of their start), each by time.
pub(crate) async fn overlapping_many(
    conn: &mut AnyConnection,
    sqlite: bool,
    probes: &[(i64, i64, i64)],
) -> Result<HashMap<(i64, i64), Vec<StoredBlock>>> {
    const PER_STATEMENT: usize = 200;
    let mut out: HashMap<(i64, i64), Vec<StoredBlock>> = HashMap::new();
    for chunk in probes.chunks(PER_STATEMENT) {
        let sql = cached_sql(Statement::ProbeOverlaps, 0, sqlite, chunk.len(), || {
            let values = value_rows(sqlite, chunk.len(), 4, "", true);
            format!(
                "WITH p (series_id, w, lo, hi) AS (VALUES {values}) \
                 SELECT b.series_id, b.start_ts, b.end_ts, b.count, b.sealed, b.data FROM p \
                 JOIN telemetry_block b ON b.series_id = p.series_id AND b.start_ts >= p.w \
                 AND b.start_ts <= p.hi AND b.end_ts >= p.lo ORDER BY b.series_id, b.start_ts"
            )
        });
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (series, lo, hi) in chunk {
            q = q.bind(*series).bind(reach_of(*lo)).bind(*lo).bind(*hi);
        }
        for row in q.fetch_all(&mut *conn).await? {
            let block = stored(&row)?;
            let series: i64 = row.try_get("series_id")?;
            let found = out.entry((series, window_of(block.start))).or_default();
            // A compacted day's block answers every probe of its day: once is enough.
            if !found.iter().any(|b| b.start == block.start) {
                found.push(block);
            }
        }
    }
    Ok(out)
}

/// Up to `limit` blocks of `series` holding a point in `(after, end)`, by time.
pub(crate) async fn following(
    conn: &mut AnyConnection,
    series: i64,
    after: i64,
    end: i64,
    limit: i64,
) -> Result<Vec<StoredBlock>> {
    let read = following_of(conn, &[series], after, end, limit, None).await?;
    Ok(read.into_iter().map(|(_, b)| b).collect())
}

/// Up to `limit` blocks of the series `ids` (ascending) holding a point in `(after, end)`, by
/// series then time, each with its series: one statement for many series (a BI scan's). With
/// `resume`, the first series' blocks are those holding a point in `(resume, end)` (a read going
/// on where a page of blocks ended inside it), in the same statement as the others'.
/// Numbered placeholders on both backends (sqlx binds SQLite's `$n` by its number).
pub(crate) async fn following_of(
    conn: &mut AnyConnection,
    ids: &[i64],
    after: i64,
    end: i64,
    limit: i64,
    resume: Option<i64>,
) -> Result<Vec<(i64, StoredBlock)>> {
    let parts = parts_of(ids, after, resume);
    // Each part's series as a list of placeholders.
    let mut next = 3;
    let sql = following_sql(&parts, |ids| {
        let list = (next..next + ids.len())
            .map(|i| placeholder(false, i))
            .collect::<Vec<_>>()
            .join(", ");
        next += ids.len() + 2;
        (format!("IN ({list})"), next - 2)
    });
    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(end).bind(limit);
    for (ids, after) in parts {
        for id in ids {
            q = q.bind(*id);
        }
        q = q.bind(reach_of(after.saturating_add(1))).bind(after);
    }
    let rows = q.fetch_all(&mut *conn).await?;
    rows.iter()
        .map(|r| Ok((r.try_get("series_id")?, stored(r)?)))
        .collect()
}

/// Each part of a read of many series: its series and the time after which their blocks are
/// read (the first series alone when a page ended inside it).
fn parts_of(ids: &[i64], after: i64, resume: Option<i64>) -> Vec<(&[i64], i64)> {
    debug_assert!(ids.is_sorted(), "series ids ascending");
    match resume {
        Some(r) if ids.len() > 1 => vec![(&ids[..1], r), (&ids[1..], after)],
        Some(r) => vec![(ids, r)],
        None => vec![(ids, after)],
    }
}

/// The statement of [`following_of`]: `$1` the end, `$2` the limit, then each part's series
/// (`series` gives the condition on `series_id` and the number of the part's first parameter
/// after its series), its reach and its time.
fn following_sql(
    parts: &[(&[i64], i64)],
    mut series: impl FnMut(&[i64]) -> (String, usize),
) -> String {
    let selects: Vec<String> = parts
        .iter()
        .map(|(ids, _)| {
            let (condition, reach_n) = series(ids);
            let after_n = reach_n + 1;
            format!(
                "SELECT series_id, {COLUMNS} FROM telemetry_block WHERE series_id {condition} \
                 AND start_ts >= ${reach_n} AND start_ts < $1 AND end_ts > ${after_n}"
            )
        })
        .collect();
    format!(
        "{} ORDER BY series_id, start_ts LIMIT $2",
        selects.join(" UNION ALL ")
    )
}

/// Where a bulk read of blocks runs: PostgreSQL's own driver where the store has it (its rows
/// are read in place, not copied value by value into the generic driver's), else the store's
/// pool.
pub(crate) enum BulkConnection {
    Any(PoolConnection<sqlx::Any>),
    Postgres(PoolConnection<sqlx::Postgres>),
}

impl BulkConnection {
    pub(crate) async fn acquire(
        pool: &sqlx::AnyPool,
        postgres: Option<&sqlx::PgPool>,
    ) -> Result<Self> {
        Ok(match postgres {
            Some(p) => Self::Postgres(p.acquire().await?),
            None => Self::Any(pool.acquire().await?),
        })
    }

    /// [`following_of`] on this connection (on PostgreSQL each part's series bound as one
    /// array: one statement text whatever their number).
    pub(crate) async fn following_of(
        &mut self,
        ids: &[i64],
        after: i64,
        end: i64,
        limit: i64,
        resume: Option<i64>,
    ) -> Result<BlockPage> {
        let conn = match self {
            Self::Any(conn) => {
                return Ok(BlockPage::Any(
                    following_of(conn, ids, after, end, limit, resume).await?,
                ));
            }
            Self::Postgres(conn) => conn,
        };
        let parts = parts_of(ids, after, resume);
        let mut next = 3;
        let sql = following_sql(&parts, |_| {
            next += 3;
            (format!("= ANY(${})", next - 3), next - 2)
        });
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(end).bind(limit);
        for (ids, after) in parts {
            q = q
                .bind(ids)
                .bind(reach_of(after.saturating_add(1)))
                .bind(after);
        }
        Ok(BlockPage::Postgres(q.fetch_all(&mut **conn).await?))
    }
}

/// The blocks a bulk read answered, as its rows.
pub(crate) enum BlockPage {
    Any(Vec<(i64, StoredBlock)>),
    Postgres(Vec<sqlx::postgres::PgRow>),
}

/// A block of a [`BlockPage`]: its series, time span, point count and encoded points.
pub(crate) struct BlockRef<'a> {
    pub series: i64,
    pub start: i64,
    pub end: i64,
    pub count: i64,
    pub data: &'a [u8],
}

impl BlockPage {
    /// Its blocks, in order, each row's columns read once.
    pub(crate) fn blocks(&self) -> Result<Vec<BlockRef<'_>>> {
        match self {
            Self::Any(rows) => Ok(rows
                .iter()
                .map(|(series, b)| BlockRef {
                    series: *series,
                    start: b.start,
                    end: b.end,
                    count: b.count,
                    data: &b.data,
                })
                .collect()),
            // By position: series_id, then COLUMNS.
            Self::Postgres(rows) => rows
                .iter()
                .map(|r| {
                    Ok(BlockRef {
                        series: r.try_get(0)?,
                        start: r.try_get(1)?,
                        end: r.try_get(2)?,
                        count: r.try_get(3)?,
                        data: r.try_get(5)?,
                    })
                })
                .collect(),
        }
    }
}

/// Points `blocks` add to a read that wants `wanted` more: all of theirs, or as far as the block
/// that reaches `wanted` (a reader's columns then grow once a page, not by doubling).
pub(crate) fn points_until(blocks: &[BlockRef<'_>], wanted: usize) -> usize {
    let mut points = 0usize;
    for b in blocks {
        if points >= wanted {
            break;
        }
        points += b.count.max(0) as usize;
    }
    points
}

/// The points of `series` with `lo <= ts < hi`, by time (the whole range in memory: for edges
/// and buckets, not for exports).
pub(crate) async fn points(
    conn: &mut AnyConnection,
    series: i64,
    lo: i64,
    hi: i64,
) -> Result<Columns> {
    let mut out = Columns::default();
    if hi <= lo {
        return Ok(out);
    }
    for b in overlapping(conn, series, lo, hi - 1).await? {
        let mut c = b.columns()?;
        if b.start < lo || b.end >= hi {
            c.retain_range(lo, hi);
        }
        out.extend(c);
    }
    Ok(out)
}

/// The points of `stored` (one series' blocks, by time) as one block, encoded: what sealing and
/// compaction write in their place.
pub(crate) fn merged(series: i64, stored: &[StoredBlock], sealed: bool) -> Result<EncodedBlock> {
    let mut columns = Columns::default();
    for b in stored {
        columns.extend(b.columns()?);
    }
    NewBlock {
        series,
        columns,
        sealed,
    }
    .encode()
}

/// Whether `stored`, read again under the write lock, are byte for byte the blocks `read`
/// (start and bytes of each) outside it: if not, a flush changed them meanwhile.
pub(crate) fn unchanged(stored: &[StoredBlock], read: &[(i64, Vec<u8>)]) -> bool {
    stored.len() == read.len()
        && stored
            .iter()
            .zip(read)
            .all(|(b, (start, data))| b.start == *start && b.data == *data)
}

/// Every block of `series` starting in the window starting at `window`, by time.
pub(crate) async fn of_window(
    conn: &mut AnyConnection,
    series: i64,
    window: i64,
) -> Result<Vec<StoredBlock>> {
    starting_in(conn, series, window, window + WINDOW).await
}

/// Every block of `series` starting in `[from, to)`, by time.
pub(crate) async fn starting_in(
    conn: &mut AnyConnection,
    series: i64,
    from: i64,
    to: i64,
) -> Result<Vec<StoredBlock>> {
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM telemetry_block WHERE series_id = $1 AND start_ts >= $2 AND start_ts < $3 ORDER BY start_ts"
    )))
    .bind(series)
    .bind(from)
    .bind(to)
    .fetch_all(&mut *conn)
    .await?;
    rows.iter().map(stored).collect()
}

/// The newest stored timestamp of each of `series` that has points.
pub(crate) async fn newest(
    conn: &mut AnyConnection,
    sqlite: bool,
    series: &[i64],
) -> Result<HashMap<i64, i64>> {
    const PER_STATEMENT: usize = 400;
    let mut out = HashMap::new();
    for chunk in series.chunks(PER_STATEMENT) {
        // Blocks never overlap, so the last by start holds the newest point.
        let sql = cached_sql(Statement::ProbeNewest, 0, sqlite, chunk.len(), || {
            let values = value_rows(sqlite, chunk.len(), 1, "", true);
            format!(
                "WITH k (id) AS (VALUES {values}) SELECT k.id AS id, \
                 (SELECT b.end_ts FROM telemetry_block b WHERE b.series_id = k.id ORDER BY b.start_ts DESC LIMIT 1) AS newest FROM k"
            )
        });
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for s in chunk {
            q = q.bind(*s);
        }
        for row in q.fetch_all(&mut *conn).await? {
            if let Some(n) = row.try_get::<Option<i64>, _>("newest")? {
                out.insert(row.try_get("id")?, n);
            }
        }
    }
    Ok(out)
}

/// A block to write: its series, points (sorted, at least one) and whether it is sealed.
pub(crate) struct NewBlock {
    pub series: i64,
    pub columns: Columns,
    pub sealed: bool,
}

/// A block encoded, ready to write.
pub(crate) struct EncodedBlock {
    series: i64,
    start: i64,
    end: i64,
    count: i64,
    sealed: bool,
    data: Vec<u8>,
}

impl EncodedBlock {
    /// Its bytes' length.
    pub(crate) fn len(&self) -> usize {
        self.data.len()
    }

    /// Its points.
    pub(crate) fn count(&self) -> i64 {
        self.count
    }

    /// The block as a read would find it once written.
    pub(crate) fn stored(&self) -> StoredBlock {
        StoredBlock {
            start: self.start,
            end: self.end,
            count: self.count,
            sealed: self.sealed,
            data: self.data.clone(),
        }
    }
}

impl NewBlock {
    /// The block's bytes: sealed ones compressed, head ones plain while small.
    pub(crate) fn encode(&self) -> Result<EncodedBlock> {
        let c = &self.columns;
        Ok(EncodedBlock {
            series: self.series,
            start: c.ts[0],
            end: c.ts[c.len() - 1],
            count: c.len() as i64,
            sealed: self.sealed,
            data: block::encode(c, self.sealed)?,
        })
    }
}

/// Writes blocks: sealed ones compressed, head ones plain while small.
pub(crate) async fn insert(
    conn: &mut AnyConnection,
    sqlite: bool,
    blocks: &[NewBlock],
) -> Result<()> {
    let encoded = blocks
        .iter()
        .map(NewBlock::encode)
        .collect::<Result<Vec<_>>>()?;
    insert_encoded(conn, sqlite, &encoded).await
}

/// Writes blocks encoded beforehand.
pub(crate) async fn insert_encoded(
    conn: &mut AnyConnection,
    sqlite: bool,
    blocks: &[EncodedBlock],
) -> Result<()> {
    const PER_STATEMENT: usize = 100;
    for chunk in blocks.chunks(PER_STATEMENT) {
        let sql = cached_sql(Statement::InsertBlocks, 0, sqlite, chunk.len(), || {
            let values = value_rows(sqlite, chunk.len(), 6, "", false);
            format!(
                "INSERT INTO telemetry_block (series_id, start_ts, end_ts, count, sealed, data) VALUES {values}"
            )
        });
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for b in chunk {
            q = q
                .bind(b.series)
                .bind(b.start)
                .bind(b.end)
                .bind(b.count)
                .bind(i16::from(b.sealed))
                .bind(b.data.as_slice());
        }
        q.execute(&mut *conn).await?;
    }
    Ok(())
}

/// Deletes the blocks of `series` starting in `[first, last]` (callers pass the first and last
/// of blocks they read under the write lock, which are then exactly the blocks deleted).
pub(crate) async fn delete_span(
    conn: &mut AnyConnection,
    series: i64,
    first: i64,
    last: i64,
) -> Result<()> {
    sqlx::query(
        "DELETE FROM telemetry_block WHERE series_id = $1 AND start_ts >= $2 AND start_ts <= $3",
    )
    .bind(series)
    .bind(first)
    .bind(last)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Rewrites what a background pass finds due: `due_sql` lists `(org_id, series_id, w)` (a
/// series and window or hour), binding `binds` and then the limit of rows per read, which is
/// read again while it comes back full. `prepare` runs on each outside any transaction (reads
/// and computing that need not hold the write lock) and tells how many bytes what it prepared
/// holds; then `work` runs with it, up to [`DUE_PER_TX`] (or [`PREPARED_BYTES`]) to a
/// transaction holding their organizations' locks, so that ingest waits for the write lock only
/// briefly. `work` returns whether it rewrote (it may find that ingest changed what was
/// prepared, and leave it to a later pass). Returns how many were rewritten.
pub(crate) async fn rewrite_due<P: Send + 'static>(
    store: &plantd_store::Store,
    due_sql: String,
    binds: Vec<i64>,
    mut prepare: impl FnMut(i64, i64) -> Prepare<P> + Send,
    mut work: impl FnMut(&mut plantd_store::WriteTx, i64, i64, P) -> Rewrite<'_> + Send,
) -> Result<usize> {
    let mut done = 0;
    loop {
        let mut q = sqlx::query(sqlx::AssertSqlSafe(due_sql.clone()));
        for b in &binds {
            q = q.bind(*b);
        }
        let rows = q.bind(DUE_PER_READ).fetch_all(store.pool()).await?;
        let full = rows.len() as i64 == DUE_PER_READ;
        let due: Vec<(String, i64, i64)> = rows
            .iter()
            .map(|r| {
                Ok((
                    r.try_get("org_id")?,
                    r.try_get("series_id")?,
                    r.try_get("w")?,
                ))
            })
            .collect::<std::result::Result<_, sqlx::Error>>()?;
        let mut rewritten = 0;
        let mut batch = Vec::new();
        let mut held = 0;
        for (org, series, w) in &due {
            let (p, bytes) = prepare(*series, *w).await?;
            batch.push((org.as_str(), *series, *w, p));
            held += bytes;
            if batch.len() == DUE_PER_TX || held >= PREPARED_BYTES {
                rewritten += apply(store, std::mem::take(&mut batch), &mut work).await?;
                held = 0;
            }
        }
        if !batch.is_empty() {
            rewritten += apply(store, batch, &mut work).await?;
        }
        done += rewritten;
        // A page whose every entry was left to a later pass would come back the same.
        if !full || due.is_empty() || rewritten == 0 {
            return Ok(done);
        }
    }
}

/// Runs `work` on what was prepared, in one transaction holding the organizations' locks;
/// returns how many were rewritten.
async fn apply<P>(
    store: &plantd_store::Store,
    batch: Vec<(&str, i64, i64, P)>,
    work: &mut (impl FnMut(&mut plantd_store::WriteTx, i64, i64, P) -> Rewrite<'_> + Send),
) -> Result<usize> {
    let mut tx = store.begin_write().await?;
    if store.backend() == plantd_store::Backend::Postgres {
        lock_orgs(&mut tx, batch.iter().map(|(o, _, _, _)| *o)).await?;
    }
    let mut rewritten = 0;
    for (_, series, w, p) in batch {
        if work(&mut tx, series, w, p).await? {
            rewritten += 1;
        }
    }
    tx.commit().await?;
    Ok(rewritten)
}

/// What a background pass prepares for one due series-window, outside the write lock, with the
/// bytes it holds.
pub(crate) type Prepare<P> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(P, usize)>> + Send>>;

/// The rewrite of one due series-window, in the pass's transaction: whether it rewrote.
pub(crate) type Rewrite<'t> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<bool>> + Send + 't>>;

/// Bytes a pass holds prepared before it writes them (one window more may exceed it).
const PREPARED_BYTES: usize = 16 << 20;
/// Series-windows rewritten per transaction by a background pass.
const DUE_PER_TX: usize = 64;
/// Due series-windows read per query (a pass reads again while there are more).
const DUE_PER_READ: i64 = 10_000;

/// Takes the organizations' write locks for the transaction (PostgreSQL): ingest, sealing and
/// retention rewrite blocks and recompute buckets from what their transaction sees, so two of them
/// must not work on one organization's series at once, on any node. Locks are taken in one order,
/// so that transactions never deadlock. SQLite needs none: its write gate already serializes
/// whole transactions.
pub(crate) async fn lock_orgs<'a>(
    conn: &mut AnyConnection,
    orgs: impl Iterator<Item = &'a str>,
) -> Result<()> {
    let keys: std::collections::BTreeSet<i64> = orgs.map(org_lock_key).collect();
    for key in keys {
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(key)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// A stable 64-bit key for an organization's write lock (FNV-1a of its id).
fn org_lock_key(org_id: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in org_id.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h as i64
}
