//! Reading telemetry: raw points, and aggregates per series and UTC-aligned bucket computed from
//! the coarsest level that answers each part of the range exactly.

use plantd_model::Timestamp;
use plantd_model::page::{Page, Paged};
use plantd_model::telemetry::{Aggregation, Quality};
use serde::Serialize;
use sqlx::Row;
use std::collections::HashMap;

use crate::block::{self, Columns, PointFields};
use crate::blocks::{self, reach_of};
use crate::error::Result;
use crate::levels::{BucketStats, LEVELS, floor_to};
use crate::rollups;

/// Which series and time range a query covers: `[start, end)`.
#[derive(Clone, Debug)]
pub struct TelemetryFilter {
    pub data_source_id: Option<String>,
    pub asset_id: Option<String>,
    pub tag_name: Option<String>,
    pub start: Timestamp,
    pub end: Timestamp,
}

/// Appends `from[range]` to `into` (nothing where `from` is shorter: a column not read).
fn extend_range<T: Copy>(into: &mut Vec<T>, from: &[T], range: std::ops::Range<usize>) {
    if let Some(part) = from.get(range) {
        into.extend_from_slice(part);
    }
}

/// Points of several series, series after series (a step of a BI scan).
#[derive(Clone, Debug, Default)]
pub struct SeriesPoints {
    /// Each series' run of points, in order: its id and how many.
    pub runs: Vec<(i64, usize)>,
    /// How many points in all.
    pub points: usize,
    /// The columns asked for, of every point (a column not asked for is empty).
    pub ts: Vec<i64>,
    pub values: Vec<f64>,
    pub quality: Vec<i16>,
    /// Where the read stopped before the end (its limit reached): the series, and the end of
    /// its last block read (the next read of that series goes on after it).
    pub stopped: Option<(i64, i64)>,
}

impl SeriesPoints {
    fn with(mut self, c: Columns) -> Self {
        (self.ts, self.values, self.quality) = (c.ts, c.values, c.quality);
        self
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct RawRow {
    pub timestamp: Timestamp,
    pub asset_id: String,
    pub tag_name: String,
    pub value: f64,
    pub quality: Quality,
}

#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct AggregatedRow {
    /// Start of the bucket (of the range when no interval was asked).
    pub timestamp: Timestamp,
    pub asset_id: String,
    pub tag_name: String,
    pub value: f64,
    /// Number of raw points the value summarises.
    pub count: u64,
}

/// Series filter shared by every query: `(sql, arguments)` to append after a WHERE on `s`.
fn series_where(org_id: &str, f: &TelemetryFilter, first: usize) -> (String, Vec<String>) {
    let mut sql = format!("s.org_id = ${first}");
    let mut args = vec![org_id.to_string()];
    for (col, v) in [
        ("s.data_source_id", &f.data_source_id),
        ("s.asset_id", &f.asset_id),
        ("s.tag_name", &f.tag_name),
    ] {
        if let Some(v) = v {
            args.push(v.clone());
            sql.push_str(&format!(" AND {col} = ${}", first + args.len() - 1));
        }
    }
    (sql, args)
}

/// One series' bucket.
#[derive(Clone, Debug, PartialEq)]
pub struct Bucket {
    pub asset_id: String,
    pub tag_name: String,
    /// Start of the bucket (of the range when no width was asked).
    pub start: Timestamp,
    pub stats: BucketStats,
}

/// A part of the range answered by one level: `None` is raw points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Piece {
    pub level: Option<(i16, i64)>,
    pub lo: i64,
    pub hi: i64,
}

/// Splits `[lo, hi)` into pieces: the aligned middle from the coarsest usable level, edges from
/// finer ones. A level is usable when its width divides the output bucket width.
pub(crate) fn pieces(lo: i64, hi: i64, bucket: Option<i64>) -> Vec<Piece> {
    let usable: Vec<(i16, i64)> = LEVELS
        .iter()
        .rev()
        .copied()
        .filter(|(_, w)| bucket.is_none_or(|b| b % w == 0))
        .collect();
    let mut out = Vec::new();
    split(lo, hi, &usable, &mut out);
    out
}

fn split(lo: i64, hi: i64, levels: &[(i16, i64)], out: &mut Vec<Piece>) {
    if lo >= hi {
        return;
    }
    for (i, &(level, w)) in levels.iter().enumerate() {
        let a = floor_to(lo + w - 1, w);
        let b = floor_to(hi, w);
        if a < b {
            split(lo, a, &levels[i + 1..], out);
            out.push(Piece {
                level: Some((level, w)),
                lo: a,
                hi: b,
            });
            split(b, hi, &levels[i + 1..], out);
            return;
        }
    }
    out.push(Piece {
        level: None,
        lo,
        hi,
    });
}

/// One series' points of a raw query, read a chunk at a time.
struct Cursor<'a> {
    series: i64,
    asset: &'a String,
    tag: &'a String,
    after: i64,
    buffered: std::collections::VecDeque<(i64, f64, Quality)>,
    done: bool,
}

impl Cursor<'_> {
    async fn next(&mut self, q: &Queries<'_>, end: i64) -> Result<Option<(i64, f64, Quality)>> {
        const CHUNK: i64 = 4096;
        if self.buffered.is_empty() && !self.done {
            let read = q.raw_of_series(self.series, self.after, end, CHUNK).await?;
            self.done = (read.len() as i64) < CHUNK;
            if let Some(last) = read.last() {
                self.after = last.0;
            }
            self.buffered.extend(read);
        }
        Ok(self.buffered.pop_front())
    }
}

/// Queries over a pool (the telemetry tables of either backend), and on PostgreSQL the pool
/// of its own driver for bulk reads of blocks.
pub(crate) struct Queries<'a>(
    pub(crate) &'a sqlx::AnyPool,
    pub(crate) Option<&'a sqlx::PgPool>,
);

impl<'a> Queries<'a> {
    pub(crate) fn of(store: &'a plantd_store::Store) -> Self {
        Self(store.pool(), store.postgres_pool())
    }
}

impl Queries<'_> {
    /// Raw points, ordered by time, then asset and tag: the series' points merged by time, a
    /// few blocks of each at a time.
    pub async fn query_raw(
        &self,
        org_id: &str,
        f: &TelemetryFilter,
        page: Page,
    ) -> Result<Paged<RawRow>> {
        let (lo, hi) = (f.start.millis(), f.end.millis());
        let series = self.series_of(org_id, f, &[]).await?;
        let total = self.count_points(org_id, f).await?;
        let mut cursors = Vec::with_capacity(series.len());
        for (id, asset, tag) in &series {
            cursors.push(Cursor {
                series: *id,
                asset,
                tag,
                after: lo - 1,
                buffered: std::collections::VecDeque::new(),
                done: false,
            });
        }
        // The heap orders each cursor's next point by (time, asset, tag), as the API sorts;
        // the point itself waits in `next[i]`.
        let mut heap = std::collections::BinaryHeap::new();
        let mut next = Vec::with_capacity(cursors.len());
        for (i, c) in cursors.iter_mut().enumerate() {
            let p = c.next(self, hi).await?;
            if let Some(p) = p {
                heap.push(std::cmp::Reverse((p.0, c.asset, c.tag, i)));
            }
            next.push(p);
        }
        let mut skip = page.offset();
        let mut items = Vec::new();
        while let Some(std::cmp::Reverse((ts, asset, tag, i))) = heap.pop() {
            if items.len() as i64 >= page.limit() {
                break;
            }
            if skip > 0 {
                skip -= 1;
            } else if let Some((_, value, quality)) = next[i] {
                items.push(RawRow {
                    timestamp: Timestamp::from_millis(ts),
                    asset_id: asset.clone(),
                    tag_name: tag.clone(),
                    value,
                    quality,
                });
            }
            next[i] = cursors[i].next(self, hi).await?;
            if let Some(p) = next[i] {
                heap.push(std::cmp::Reverse((p.0, asset, tag, i)));
            }
        }
        Ok(Paged { items, total })
    }

    /// How many raw points the filter's series hold in its range: whole blocks by their count,
    /// the blocks across an edge by their points.
    async fn count_points(&self, org_id: &str, f: &TelemetryFilter) -> Result<u64> {
        let (lo, hi) = (f.start.millis(), f.end.millis());
        if hi <= lo {
            return Ok(0);
        }
        let (series, args) = series_where(org_id, f, 3);
        let inside = format!(
            "SELECT CAST(COALESCE(SUM(b.count), 0) AS BIGINT) AS n FROM telemetry_block b JOIN telemetry_series s ON s.id = b.series_id \
             WHERE b.start_ts >= $1 AND b.start_ts < $2 AND b.end_ts < $2 AND {series}"
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(inside)).bind(lo).bind(hi);
        for a in &args {
            q = q.bind(a.clone());
        }
        let mut total: i64 = q.fetch_one(self.0).await?.try_get("n")?;
        let (series, args) = series_where(org_id, f, 4);
        let edges = format!(
            "SELECT b.data FROM telemetry_block b JOIN telemetry_series s ON s.id = b.series_id \
             WHERE b.start_ts >= $3 AND b.start_ts < $2 AND ((b.start_ts < $1 AND b.end_ts >= $1) OR b.end_ts >= $2) AND {series}"
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(edges))
            .bind(lo)
            .bind(hi)
            .bind(reach_of(lo));
        for a in &args {
            q = q.bind(a.clone());
        }
        for row in q.fetch_all(self.0).await? {
            let c = crate::block::decode(&row.try_get::<Vec<u8>, _>("data")?)?;
            total += c.ts.iter().filter(|t| **t >= lo && **t < hi).count() as i64;
        }
        Ok(total as u64)
    }

    /// The series of the filter (only `tags` when not empty): id, asset and tag, by asset and
    /// tag. The first step of an export.
    pub async fn series_of(
        &self,
        org_id: &str,
        f: &TelemetryFilter,
        tags: &[String],
    ) -> Result<Vec<(i64, String, String)>> {
        let (mut series, args) = series_where(org_id, f, 1);
        if !tags.is_empty() {
            let first = args.len() + 1;
            let marks: Vec<String> = (0..tags.len()).map(|i| format!("${}", first + i)).collect();
            series.push_str(&format!(" AND s.tag_name IN ({})", marks.join(", ")));
        }
        let sql = format!(
            "SELECT s.id, s.asset_id, s.tag_name FROM telemetry_series s WHERE {series} ORDER BY s.asset_id, s.tag_name"
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for a in args.iter().chain(tags) {
            q = q.bind(a.clone());
        }
        let mut out = Vec::new();
        for r in q.fetch_all(self.0).await? {
            out.push((
                r.try_get("id")?,
                r.try_get("asset_id")?,
                r.try_get("tag_name")?,
            ));
        }
        Ok(out)
    }

    /// Up to `limit` raw points of one series with `after < ts < end`, by time: a step of an
    /// export, read a few blocks at a time by their key (series and start), so a range of any
    /// size is read in constant memory.
    pub async fn raw_of_series(
        &self,
        series_id: i64,
        after: i64,
        end: i64,
        limit: i64,
    ) -> Result<Vec<(i64, f64, Quality)>> {
        let c = self
            .following_points(series_id, after, end, limit.max(0) as usize, 8)
            .await?;
        Ok(c.iter().collect())
    }

    /// The points of the series `ids` (ascending) with `after < ts < end`, series after series,
    /// the columns `want`ed only (BI scans): whole blocks until at least `limit` points, then
    /// where it stopped. A scan reads whole series, so many series and blocks a statement
    /// (each statement crosses to the database's thread and back; at most 48 blocks in
    /// memory on SQLite, 256 on PostgreSQL), and a block wholly in the range is decoded
    /// straight into the answer without its timestamps unless they are wanted.
    pub async fn columns_of_series(
        &self,
        sqlite: bool,
        ids: &[i64],
        (after, end): (i64, i64),
        limit: usize,
        (want, kept): (PointFields, &crate::decoded::Decoded),
    ) -> Result<SeriesPoints> {
        // Blocks a statement. SQLite: fewer than the 50 rows of the channel through which
        // sqlx's SQLite thread hands rows over, so that thread never waits for the reader
        // (past 50, each row cost a thread switch each way). PostgreSQL sends rows down its
        // socket: larger pages, fewer statements (each one planned and run on its own).
        let blocks_per_read: i64 = if sqlite { 48 } else { 256 };
        // Series a statement. SQLite walks the index in the order asked for, series after
        // series, so a page of 48 blocks reaches at most 48 series that have points; sqlx
        // binds each parameter by looking its name up along the list (quadratic: not
        // hundreds). PostgreSQL (15) sorts every block of the series named before it keeps a
        // page, and a page ending inside a series reads the rest again: it is given as many
        // series as fill about three quarters of a page at the blocks a series had so far
        // (16 to start with, at most 64), and one at a time once a series fills a page by
        // itself.
        let ids_per_read = if sqlite { blocks_per_read as usize } else { 16 };
        let fitting = |blocks: usize, series: usize| -> usize {
            if sqlite || series == 0 {
                return ids_per_read;
            }
            let per_series = blocks.div_ceil(series).max(1);
            (blocks_per_read as usize * 3 / 4 / per_series).clamp(1, 64)
        };
        // Blocks read so far (for `fitting`, with the series read whole).
        let mut blocks_read = 0usize;
        let mut per_read = ids_per_read;
        let mut out = SeriesPoints::default();
        let mut into = Columns::default();
        let mut conn = blocks::BulkConnection::acquire(self.0, self.1).await?;
        // The first series not read whole (its place in `ids`), and its last block's end when
        // a page of blocks ended inside it.
        let (mut next, mut resume) = (0usize, None);
        while next < ids.len() {
            // A series a page ended inside goes on in the same statement as those after it.
            let group = &ids[next..ids.len().min(next + per_read)];
            let page = conn
                .following_of(group, after, end, blocks_per_read, resume)
                .await?;
            let read = page.blocks()?;
            into.reserve(want, blocks::points_until(&read, limit - out.points));
            for b in &read {
                let n = if after < b.start && b.end < end {
                    block::decode_kept(b.data, want, &mut into, Some(kept))?
                } else {
                    // Partly in the range: its timestamps say which points.
                    let mut c = Columns::default();
                    let want_ts = PointFields {
                        timestamps: true,
                        ..want
                    };
                    block::decode_kept(b.data, want_ts, &mut c, Some(kept))?;
                    let from = c.ts.partition_point(|t| *t <= after);
                    let to = c.ts.partition_point(|t| *t < end).max(from);
                    if want.timestamps {
                        extend_range(&mut into.ts, &c.ts, from..to);
                    }
                    extend_range(&mut into.values, &c.values, from..to);
                    extend_range(&mut into.quality, &c.quality, from..to);
                    to - from
                };
                match out.runs.last_mut() {
                    Some((last, count)) if *last == b.series => *count += n,
                    _ if n > 0 => out.runs.push((b.series, n)),
                    _ => {}
                }
                out.points += n;
                if out.points >= limit {
                    out.stopped = Some((b.series, b.end));
                    return Ok(out.with(into));
                }
            }
            blocks_read += read.len();
            match read.last() {
                // A full page: the series before its last block's are whole; that one goes on.
                Some(last) if read.len() as i64 == blocks_per_read => {
                    let whole = ids[next..]
                        .iter()
                        .position(|x| *x == last.series)
                        .unwrap_or_default();
                    next += whole;
                    per_read = if whole == 0 {
                        1
                    } else {
                        fitting(blocks_read, next)
                    };
                    resume = Some(last.end);
                }
                _ => {
                    next = ids.len().min(next + per_read);
                    per_read = fitting(blocks_read, next);
                    resume = None;
                }
            }
        }
        Ok(out.with(into))
    }

    /// Up to `limit` points of one series with `after < ts < end`, by time, reading
    /// `blocks_per_read` blocks a statement.
    async fn following_points(
        &self,
        series_id: i64,
        mut after: i64,
        end: i64,
        limit: usize,
        blocks_per_read: i64,
    ) -> Result<Columns> {
        let mut out = Columns::default();
        let mut conn = self.0.acquire().await?;
        while out.len() < limit {
            let read = blocks::following(&mut conn, series_id, after, end, blocks_per_read).await?;
            for b in &read {
                if out.len() >= limit {
                    break;
                }
                let c = b.columns()?;
                let from = c.ts.partition_point(|t| *t <= after);
                let to =
                    c.ts.partition_point(|t| *t < end)
                        .min(from + limit - out.len());
                if from < to {
                    out.ts.extend_from_slice(&c.ts[from..to]);
                    out.values.extend_from_slice(&c.values[from..to]);
                    out.quality.extend_from_slice(&c.quality[from..to]);
                }
            }
            match read.last() {
                Some(last) if (read.len() as i64) == blocks_per_read => after = last.end,
                _ => break,
            }
        }
        Ok(out)
    }

    /// One row per series and bucket (`bucket` ms wide, aligned to UTC; the whole range when
    /// `None`), ordered by time, then asset and tag.
    pub async fn query_aggregated(
        &self,
        org_id: &str,
        f: &TelemetryFilter,
        agg: Aggregation,
        bucket: Option<i64>,
        page: Page,
    ) -> Result<Paged<AggregatedRow>> {
        let buckets = self.query_buckets(org_id, f, bucket).await?;
        let total = buckets.len() as u64;
        let mut items = Vec::new();
        for b in buckets
            .into_iter()
            .skip(page.offset() as usize)
            .take(page.limit() as usize)
        {
            let mut value = b.stats.value(agg);
            if agg == Aggregation::Avg && !b.stats.sum.is_finite() {
                // The bucket's sum left the range of a double (points near ±1.8e308): its
                // mean is read again from the points, summed as x/n, which cannot overflow.
                let from = b.start.millis().max(f.start.millis());
                let to = bucket.map_or(f.end.millis(), |w| {
                    (b.start.millis() + w).min(f.end.millis())
                });
                value = self
                    .exact_mean(org_id, &b.asset_id, &b.tag_name, (from, to), b.stats.count)
                    .await?;
            }
            items.push(AggregatedRow {
                timestamp: b.start,
                asset_id: b.asset_id,
                tag_name: b.tag_name,
                value,
                count: b.stats.count as u64,
            });
        }
        Ok(Paged { items, total })
    }

    /// The mean of one series' `count` points in `[from, to)`, as the sum of each point divided
    /// by the count: no partial sum exceeds the largest point, so it never overflows.
    async fn exact_mean(
        &self,
        org_id: &str,
        asset_id: &str,
        tag_name: &str,
        (from, to): (i64, i64),
        count: i64,
    ) -> Result<f64> {
        let filter = TelemetryFilter {
            data_source_id: None,
            asset_id: Some(asset_id.to_string()),
            tag_name: Some(tag_name.to_string()),
            start: Timestamp::from_millis(from),
            end: Timestamp::from_millis(to),
        };
        let n = count.max(1) as f64;
        let mut mean = 0.0;
        for (series, _, _) in self.series_of(org_id, &filter, &[]).await? {
            let mut after = from - 1;
            loop {
                let points = self.raw_of_series(series, after, to, 10_000).await?;
                let Some(last) = points.last() else {
                    break;
                };
                after = last.0;
                mean += points.iter().map(|p| p.1 / n).sum::<f64>();
            }
        }
        Ok(mean)
    }

    /// The data source each tag of an asset is linked to, by tag name.
    pub async fn tag_sources(
        &self,
        org_id: &str,
        asset_id: &str,
    ) -> Result<HashMap<String, Option<String>>> {
        let rows = sqlx::query(
            "SELECT tag_name, data_source_id FROM telemetry_series WHERE org_id = $1 AND asset_id = $2",
        )
        .bind(org_id)
        .bind(asset_id)
        .fetch_all(self.0)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("tag_name")?, r.try_get("data_source_id")?)))
            .collect()
    }

    /// The series linked to a data source: (asset, tag).
    pub async fn series_of_source(
        &self,
        org_id: &str,
        data_source_id: &str,
    ) -> Result<Vec<(String, String)>> {
        let rows = sqlx::query(
            "SELECT asset_id, tag_name FROM telemetry_series WHERE org_id = $1 AND data_source_id = $2",
        )
        .bind(org_id)
        .bind(data_source_id)
        .fetch_all(self.0)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("asset_id")?, r.try_get("tag_name")?)))
            .collect()
    }

    /// Every series of the organization with its data source, by asset and tag name.
    pub async fn series_sources(
        &self,
        org_id: &str,
    ) -> Result<Vec<(String, String, Option<String>)>> {
        let rows = sqlx::query(
            "SELECT asset_id, tag_name, data_source_id FROM telemetry_series WHERE org_id = $1 \
             ORDER BY asset_id, tag_name",
        )
        .bind(org_id)
        .fetch_all(self.0)
        .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get("asset_id")?,
                    r.try_get("tag_name")?,
                    r.try_get("data_source_id")?,
                ))
            })
            .collect()
    }

    /// Each asset of the organization with its tag names, both in name order.
    pub async fn assets(&self, org_id: &str) -> Result<Vec<(String, Vec<String>)>> {
        let rows = sqlx::query(
            "SELECT asset_id, tag_name FROM telemetry_series WHERE org_id = $1 ORDER BY asset_id, tag_name",
        )
        .bind(org_id)
        .fetch_all(self.0)
        .await?;
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for r in rows {
            let asset: String = r.try_get("asset_id")?;
            let tag: String = r.try_get("tag_name")?;
            match out.last_mut() {
                Some((a, tags)) if *a == asset => tags.push(tag),
                _ => out.push((asset, vec![tag])),
            }
        }
        Ok(out)
    }

    /// Every non-empty bucket of every series (`bucket` ms wide, aligned to UTC; the whole
    /// range when `None`) with its count, sum, minimum and maximum, ordered by time, then asset
    /// and tag.
    pub async fn query_buckets(
        &self,
        org_id: &str,
        f: &TelemetryFilter,
        bucket: Option<i64>,
    ) -> Result<Vec<Bucket>> {
        let (series, args) = series_where(org_id, f, 3);
        // Merged by series id and bucket: names are attached once a series at the end.
        let mut merged: HashMap<(i64, i64), BucketStats> = HashMap::new();
        let mut ids: Option<Vec<(i64, String, String)>> = None;
        // The output bucket of a time: aligned to the width, or the range's start without one.
        let bucket_of = |t: i64| bucket.map_or(f.start.millis(), |w| floor_to(t, w));
        for piece in pieces(f.start.millis(), f.end.millis(), bucket) {
            let Some((level, width)) = piece.level else {
                // Raw edges: each series' points, summed here.
                if ids.is_none() {
                    ids = Some(self.series_of(org_id, f, &[]).await?);
                }
                let mut conn = self.0.acquire().await?;
                for (id, _, _) in ids.iter().flatten() {
                    let points = blocks::points(&mut conn, *id, piece.lo, piece.hi).await?;
                    for (t, v) in points.ts.iter().zip(&points.values) {
                        merged
                            .entry((*id, bucket_of(*t)))
                            .or_default()
                            .merge(BucketStats::of(*v));
                    }
                }
                continue;
            };
            // A level as wide as the output buckets is read row by row (a row per series and
            // bucket already); otherwise the statement sums a bucket's rows, and without an
            // interval the whole range is one bucket: grouped by series only.
            let (b, group) = match bucket {
                Some(w) if w == width => ("r.bucket".to_string(), String::new()),
                Some(w) => (
                    format!("(r.bucket / {w}) * {w}"),
                    format!(" GROUP BY r.series_id, (r.bucket / {w}) * {w}"),
                ),
                None => ("0".to_string(), " GROUP BY r.series_id".to_string()),
            };
            let (n, total, lo, hi) = if group.is_empty() {
                ("r.count", "r.sum", "r.min", "r.max")
            } else {
                (
                    "CAST(SUM(r.count) AS BIGINT)",
                    "SUM(r.sum)",
                    "MIN(r.min)",
                    "MAX(r.max)",
                )
            };
            let mut sql = format!(
                "SELECT r.series_id AS sid, {b} AS b, {n} AS n, {total} AS total, {lo} AS lo, {hi} AS hi, NULL AS data \
                 FROM telemetry_rollup r JOIN telemetry_series s ON s.id = r.series_id \
                 WHERE r.bucket >= $1 AND r.bucket < $2 AND r.level = {level} AND {series}{group}"
            );
            let mut binds = args.clone();
            if let Some(p) = rollups::Packing::of_level(level) {
                // Closed hours' minutes (closed days' hours) are packed, a block per series and
                // span. One statement reads rows and blocks alike (one snapshot), so a span
                // packed meanwhile is counted once.
                let (packed, more) = series_where(org_id, f, 3 + args.len());
                sql.push_str(&p.union_read(&packed));
                binds.extend(more);
            }
            let mut q = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(piece.lo)
                .bind(piece.hi);
            for a in &binds {
                q = q.bind(a.clone());
            }
            for r in q.fetch_all(self.0).await? {
                let sid: i64 = r.try_get("sid")?;
                if let Some(data) = r.try_get::<Option<Vec<u8>>, _>("data")? {
                    for (start, d) in rollups::decode(&data)? {
                        if start < piece.lo || start >= piece.hi {
                            continue;
                        }
                        merged.entry((sid, bucket_of(start))).or_default().merge(d);
                    }
                    continue;
                }
                let part = BucketStats {
                    count: r.try_get("n")?,
                    sum: r.try_get("total")?,
                    min: r.try_get("lo")?,
                    max: r.try_get("hi")?,
                };
                // Already aligned by the statement (0 without a width).
                let b: i64 = r.try_get("b")?;
                merged.entry((sid, bucket_of(b))).or_default().merge(part);
            }
        }
        // The names of the series read, read after their rows (a series exists before its
        // rows); again if one created during the read is missing. One removed meanwhile is
        // left out with its rows.
        let named = |ids: Vec<(i64, String, String)>| -> HashMap<i64, (String, String)> {
            ids.into_iter()
                .map(|(id, asset, tag)| (id, (asset, tag)))
                .collect()
        };
        let mut names = match ids {
            Some(ids) => named(ids),
            None => named(self.series_of(org_id, f, &[]).await?),
        };
        if merged.keys().any(|(sid, _)| !names.contains_key(sid)) {
            names = named(self.series_of(org_id, f, &[]).await?);
        }
        let mut rows: Vec<Bucket> = merged
            .into_iter()
            .filter(|(_, p)| p.count > 0)
            .filter_map(|((sid, ts), stats)| {
                let (asset_id, tag_name) = names.get(&sid)?.clone();
                Some(Bucket {
                    asset_id,
                    tag_name,
                    start: Timestamp::from_millis(ts),
                    stats,
                })
            })
            .collect();
        rows.sort_by(|a, b| {
            (a.start, &a.asset_id, &a.tag_name).cmp(&(b.start, &b.asset_id, &b.tag_name))
        });
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DAY, HOUR, MINUTE};

    #[test]
    fn ranges_split_into_exact_pieces() {
        // 10:30:15 .. 13:45 with hourly buckets: raw edge, minutes, hours, minutes.
        let lo = 10 * HOUR + 30 * MINUTE + 15_000;
        let hi = 13 * HOUR + 45 * MINUTE;
        let p = pieces(lo, hi, Some(HOUR));
        let levels: Vec<_> = p.iter().map(|x| x.level.map(|l| l.0)).collect();
        assert_eq!(levels, vec![None, Some(1), Some(2), Some(1)]);
        assert_eq!(p.first().unwrap().lo, lo);
        assert_eq!(p.last().unwrap().hi, hi);
        assert!(
            p.windows(2).all(|w| w[0].hi == w[1].lo),
            "contiguous: {p:?}"
        );
        // 5-minute buckets never use hours or days.
        assert!(
            pieces(0, 3 * DAY, Some(5 * MINUTE))
                .iter()
                .all(|x| x.level.is_none_or(|l| l.0 == 1))
        );
        // Whole days with daily buckets come from the day level alone.
        assert_eq!(
            pieces(DAY, 3 * DAY, Some(DAY)),
            vec![Piece {
                level: Some((3, DAY)),
                lo: DAY,
                hi: 3 * DAY
            }]
        );
    }
}
