//! The SQL of rollups: bucket rows of `telemetry_rollup` (added to, or set), and rollups packed
//! per series and span: a closed hour's minutes (`telemetry_minute_block`) and a closed day's
//! hours (`telemetry_hour_block`). A row per series-minute was the largest cost on disk once raw
//! points were packed (~55 bytes a minute, ~0.9 byte a point at 1 Hz), and a row per series-hour
//! the largest cost of reading a week of hours of many series (a row each through the
//! database's thread), so the sealer packs a closed span's buckets into one row, compressed
//! with pco like raw blocks (bucket starts by delta, counts, sums, minima and maxima).
//!
//! Invariant: for a series and span, the buckets of the packed level are either rows of
//! `telemetry_rollup` or one packed block, never both. Ingest that touches a packed span (a
//! late or replaced point) unpacks it into rows first, so adding deltas and recomputing buckets
//! from the level below all see rows, as before; the sealer packs the span again later.

use plantd_store::{Store, WriteTx};
use sqlx::Row;

use crate::block::{Reader, codec, corrupt};
use crate::blocks::{self, GRACE};
use crate::error::Result;
use crate::levels::{BucketStats, DAY, HOUR, MINUTE, floor_to};
use crate::sql::{Statement, cached_sql, value_rows};

/// Minutes compressed with pco, column by column.
const PACKED: u8 = 1;
/// Minutes as little-endian numbers, 40 bytes each: smaller than pco's framing for an hour
/// with a few minutes (a series that reported for one minute of it).
const PLAIN: u8 = 2;
/// Bucket deltas per statement (6 parameters each).
pub(crate) const DELTAS_PER_STATEMENT: usize = 150;
/// Series-spans probed per statement when ingest looks for packed spans (2 parameters each).
const PROBES_PER_STATEMENT: usize = 300;

/// A bucket: its start and what its points add up to.
pub(crate) type Minute = (i64, BucketStats);

/// A packed level: its table, the bucket level and width it packs, the span a block holds, and
/// how long after a span's end the sealer packs it.
#[derive(Clone, Copy)]
pub(crate) struct Packing {
    table: &'static str,
    /// The column of the span's start, and of the number of buckets.
    start: &'static str,
    buckets: &'static str,
    pub(crate) level: i16,
    width: i64,
    pub(crate) span: i64,
    after: i64,
}

/// Minutes, packed per closed hour ([`GRACE`] after its end, as raw windows).
pub(crate) const MINUTES: Packing = Packing {
    table: "telemetry_minute_block",
    start: "hour",
    buckets: "minutes",
    level: 1,
    width: MINUTE,
    span: HOUR,
    after: GRACE,
};

/// Hours, packed per day an hour after its end. A flush looks for packed days only among the
/// days that have ended by its clock ([`Packing::may_be_packed`]), so live ingest pays no probe
/// and nodes' clocks may differ by up to that hour.
pub(crate) const HOURS: Packing = Packing {
    table: "telemetry_hour_block",
    start: "day",
    buckets: "hours",
    level: 2,
    width: HOUR,
    span: DAY,
    after: HOUR,
};

impl Packing {
    /// The packing of a rollup level, if it is packed.
    pub(crate) fn of_level(level: i16) -> Option<Packing> {
        [MINUTES, HOURS].into_iter().find(|p| p.level == level)
    }

    /// Whether the span starting at `start` may be packed at `now`: minutes are probed always
    /// (an hour closes a minute after its end), hours only once their day has ended.
    pub(crate) fn may_be_packed(&self, start: i64, now: i64) -> bool {
        self.level == MINUTES.level || start + self.span <= now
    }

    /// The statement reading a level's packed blocks of the series `packed` selects (`s`), for
    /// buckets in `[$1, $2)`, with the columns of a rollup read and `data`.
    pub(crate) fn union_read(&self, packed: &str) -> String {
        let (table, start, span) = (self.table, self.start, self.span);
        format!(
            " UNION ALL SELECT m.series_id AS sid, CAST(0 AS BIGINT) AS b, CAST(0 AS BIGINT) AS n, \
             CAST(0 AS DOUBLE PRECISION) AS total, CAST(0 AS DOUBLE PRECISION) AS lo, \
             CAST(0 AS DOUBLE PRECISION) AS hi, m.data AS data \
             FROM {table} m JOIN telemetry_series s ON s.id = m.series_id \
             WHERE m.{start} >= ($1 / {span}) * {span} AND m.{start} < $2 AND {packed}"
        )
    }
}

/// Encodes minute buckets (in time order, at least one): compressed, or plain where that is
/// smaller.
pub(crate) fn encode(minutes: &[Minute]) -> Result<Vec<u8>> {
    let n = u32::try_from(minutes.len()).map_err(|_| corrupt("too many minutes in a block"))?;
    let packed = encode_packed(minutes, n)?;
    if packed.len() <= 5 + 40 * minutes.len() {
        return Ok(packed);
    }
    let mut out = Vec::with_capacity(5 + 40 * minutes.len());
    out.push(PLAIN);
    out.extend_from_slice(&n.to_le_bytes());
    for (start, d) in minutes {
        out.extend_from_slice(&start.to_le_bytes());
        out.extend_from_slice(&d.count.to_le_bytes());
        for f in [d.sum, d.min, d.max] {
            out.extend_from_slice(&f.to_bits().to_le_bytes());
        }
    }
    Ok(out)
}

fn encode_packed(minutes: &[Minute], n: u32) -> Result<Vec<u8>> {
    let config = crate::block::values_config();
    let starts: Vec<i64> = minutes.iter().map(|(b, _)| *b).collect();
    let counts: Vec<i64> = minutes.iter().map(|(_, d)| d.count).collect();
    let floats =
        |f: fn(&BucketStats) -> f64| -> Vec<f64> { minutes.iter().map(|(_, d)| f(d)).collect() };
    let parts = [
        pco::standalone::simple_compress(&starts, &crate::block::times_config()).map_err(codec)?,
        pco::standalone::simple_compress(&counts, &config).map_err(codec)?,
        pco::standalone::simple_compress(&floats(|d| d.sum), &config).map_err(codec)?,
        pco::standalone::simple_compress(&floats(|d| d.min), &config).map_err(codec)?,
        pco::standalone::simple_compress(&floats(|d| d.max), &config).map_err(codec)?,
    ];
    let mut out = Vec::with_capacity(5 + parts.iter().map(|p| 4 + p.len()).sum::<usize>());
    out.push(PACKED);
    out.extend_from_slice(&n.to_le_bytes());
    for part in &parts {
        out.extend_from_slice(&(part.len() as u32).to_le_bytes());
        out.extend_from_slice(part);
    }
    Ok(out)
}

/// Decodes a packed block's minutes.
pub(crate) fn decode(bytes: &[u8]) -> Result<Vec<Minute>> {
    let mut r = Reader(bytes);
    let tag = r.take(1)?[0];
    let n = r.u32()? as usize;
    if tag == PLAIN {
        let body = r.take(
            n.checked_mul(40)
                .ok_or_else(|| corrupt("too many minutes"))?,
        )?;
        let word = |c: &[u8], i: usize| -> [u8; 8] {
            let mut w = [0; 8];
            w.copy_from_slice(&c[i * 8..i * 8 + 8]);
            w
        };
        return Ok(body
            .chunks_exact(40)
            .map(|c| {
                (
                    i64::from_le_bytes(word(c, 0)),
                    BucketStats {
                        count: i64::from_le_bytes(word(c, 1)),
                        sum: f64::from_bits(u64::from_le_bytes(word(c, 2))),
                        min: f64::from_bits(u64::from_le_bytes(word(c, 3))),
                        max: f64::from_bits(u64::from_le_bytes(word(c, 4))),
                    },
                )
            })
            .collect());
    }
    if tag != PACKED {
        return Err(corrupt("unknown minute block encoding"));
    }
    let starts: Vec<i64> = pco::standalone::simple_decompress(r.part()?).map_err(codec)?;
    let counts: Vec<i64> = pco::standalone::simple_decompress(r.part()?).map_err(codec)?;
    let sums: Vec<f64> = pco::standalone::simple_decompress(r.part()?).map_err(codec)?;
    let mins: Vec<f64> = pco::standalone::simple_decompress(r.part()?).map_err(codec)?;
    let maxs: Vec<f64> = pco::standalone::simple_decompress(r.part()?).map_err(codec)?;
    if [
        counts.len(),
        sums.len(),
        mins.len(),
        maxs.len(),
        starts.len(),
    ] != [n; 5]
    {
        return Err(corrupt("minute block columns of different lengths"));
    }
    Ok((0..n)
        .map(|i| {
            (
                starts[i],
                BucketStats {
                    count: counts[i],
                    sum: sums[i],
                    min: mins[i],
                    max: maxs[i],
                },
            )
        })
        .collect())
}

/// Adds deltas to `level` buckets (creating them when new), or with `overwrite` sets them.
pub(crate) async fn write_buckets(
    tx: &mut plantd_store::WriteTx,
    sqlite: bool,
    level: i16,
    deltas: &[(i64, i64, BucketStats)],
    overwrite: bool,
) -> Result<()> {
    let sql = cached_sql(
        Statement::AddDeltas,
        i64::from(level) * 2 + i64::from(overwrite),
        sqlite,
        deltas.len(),
        || {
            let values = value_rows(sqlite, deltas.len(), 6, &format!("{level}, "), false);
            let (least, greatest) = if sqlite {
                ("MIN", "MAX")
            } else {
                ("LEAST", "GREATEST")
            };
            let set = if overwrite {
                "count = excluded.count, sum = excluded.sum, min = excluded.min, max = excluded.max"
                    .to_string()
            } else {
                format!(
                    "count = telemetry_rollup.count + excluded.count, \
                     sum = telemetry_rollup.sum + excluded.sum, min = {least}(telemetry_rollup.min, excluded.min), \
                     max = {greatest}(telemetry_rollup.max, excluded.max)"
                )
            };
            format!(
                "INSERT INTO telemetry_rollup (level, series_id, bucket, count, sum, min, max) VALUES {values} \
             ON CONFLICT (level, series_id, bucket) DO UPDATE SET {set}"
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

/// Unpacks into rows every packed span among `spans` (`(series, span start)`, sorted, without
/// repeats): ingest calls this before it changes the buckets of those spans.
pub(crate) async fn unpack(
    tx: &mut WriteTx,
    sqlite: bool,
    p: Packing,
    spans: &[(i64, i64)],
) -> Result<()> {
    for chunk in spans.chunks(PROBES_PER_STATEMENT) {
        let sql = cached_sql(
            Statement::ProbePacked,
            i64::from(p.level),
            sqlite,
            chunk.len(),
            || {
                let (table, start) = (p.table, p.start);
                format!(
                    "WITH touched (series_id, start) AS (VALUES {}) \
                     SELECT b.series_id, b.{start} AS start, b.data FROM {table} b \
                     JOIN touched t ON b.series_id = t.series_id AND b.{start} = t.start",
                    value_rows(sqlite, chunk.len(), 2, "", true)
                )
            },
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (s, h) in chunk {
            q = q.bind(*s).bind(*h);
        }
        let packed = q.fetch_all(&mut **tx).await?;
        for row in packed {
            let (series, start): (i64, i64) = (row.try_get("series_id")?, row.try_get("start")?);
            let data: Vec<u8> = row.try_get("data")?;
            let rows: Vec<(i64, i64, BucketStats)> = decode(&data)?
                .into_iter()
                .map(|(b, d)| (series, b, d))
                .collect();
            for part in rows.chunks(DELTAS_PER_STATEMENT) {
                write_buckets(tx, sqlite, p.level, part, true).await?;
            }
            delete(tx, p, series, start).await?;
        }
    }
    Ok(())
}

/// The packed buckets of a series and span, if that span is packed.
async fn packed(
    tx: &mut WriteTx,
    p: Packing,
    series: i64,
    start: i64,
) -> Result<Option<Vec<Minute>>> {
    let sql = format!(
        "SELECT data FROM {} WHERE series_id = $1 AND {} = $2",
        p.table, p.start
    );
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(series)
        .bind(start)
        .fetch_optional(&mut **tx)
        .await?;
    row.map(|r| decode(&r.try_get::<Vec<u8>, _>("data")?))
        .transpose()
}

async fn delete(tx: &mut WriteTx, p: Packing, series: i64, start: i64) -> Result<()> {
    let sql = format!(
        "DELETE FROM {} WHERE series_id = $1 AND {} = $2",
        p.table, p.start
    );
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(series)
        .bind(start)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Writes the block of a series and span (replacing one there), or none for no buckets.
pub(crate) async fn put(
    tx: &mut WriteTx,
    p: Packing,
    series: i64,
    start: i64,
    buckets: &[Minute],
) -> Result<()> {
    delete(tx, p, series, start).await?;
    if buckets.is_empty() {
        return Ok(());
    }
    let sql = format!(
        "INSERT INTO {} (series_id, {}, {}, data) VALUES ($1, $2, $3, $4)",
        p.table, p.start, p.buckets
    );
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(series)
        .bind(start)
        .bind(buckets.len() as i64)
        .bind(encode(buckets)?)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Packs the buckets of every span closed at `now`, minutes per hour then hours per day;
/// returns how many spans were packed.
pub(crate) async fn pack_due(store: &Store, now: i64) -> Result<usize> {
    let mut packed = 0;
    for p in [MINUTES, HOURS] {
        let (level, span) = (p.level, p.span);
        let closed_before = floor_to(now - span - p.after, span) + span;
        // Grouped in the primary key's order (level, series, bucket) and only then joined to
        // the series for their organizations: both databases stream the key and stop at the
        // limit (grouped by organization too, PostgreSQL sorted every due row first, on disk
        // past a million rows: 1.6 s a page).
        let due = format!(
            "SELECT s.org_id, d.series_id, d.w FROM (SELECT r.series_id, (r.bucket / {span}) * {span} AS w \
             FROM telemetry_rollup r WHERE r.level = {level} AND r.bucket < $1 \
             GROUP BY r.series_id, (r.bucket / {span}) * {span} \
             ORDER BY r.series_id, (r.bucket / {span}) * {span} LIMIT $2) d \
             JOIN telemetry_series s ON s.id = d.series_id"
        );
        packed += blocks::rewrite_due(
            store,
            due,
            vec![closed_before],
            |_, _| Box::pin(async { Ok(((), 0)) }),
            move |tx, series, start, ()| {
                Box::pin(async move {
                    pack_span(tx, p, series, start).await?;
                    Ok(true)
                })
            },
        )
        .await?;
    }
    Ok(packed)
}

/// Moves the bucket rows of one series and span into its block.
async fn pack_span(tx: &mut WriteTx, p: Packing, series: i64, start: i64) -> Result<()> {
    let rows = sqlx::query(
        "SELECT bucket, count, sum, min, max FROM telemetry_rollup \
         WHERE level = $1 AND series_id = $2 AND bucket >= $3 AND bucket < $4 ORDER BY bucket",
    )
    .bind(p.level)
    .bind(series)
    .bind(start)
    .bind(start + p.span)
    .fetch_all(&mut **tx)
    .await?;
    let mut buckets: Vec<Minute> = rows
        .iter()
        .map(|r| {
            Ok((
                r.try_get("bucket")?,
                BucketStats {
                    count: r.try_get("count")?,
                    sum: r.try_get("sum")?,
                    min: r.try_get("min")?,
                    max: r.try_get("max")?,
                },
            ))
        })
        .collect::<std::result::Result<_, sqlx::Error>>()?;
    // A block and rows of one span never meet (ingest unpacks first); were they to, the rows,
    // being newer, win their buckets.
    if let Some(older) = packed(tx, p, series, start).await? {
        let newer: std::collections::BTreeMap<i64, BucketStats> = buckets.into_iter().collect();
        let mut merged: std::collections::BTreeMap<i64, BucketStats> = older.into_iter().collect();
        merged.extend(newer);
        buckets = merged.into_iter().collect();
    }
    put(tx, p, series, start, &buckets).await?;
    sqlx::query(
        "DELETE FROM telemetry_rollup WHERE level = $1 AND series_id = $2 AND bucket >= $3 AND bucket < $4",
    )
    .bind(p.level)
    .bind(series)
    .bind(start)
    .bind(start + p.span)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Deletes the packed buckets of `series` that start before `before`; returns how many.
pub(crate) async fn delete_before(
    tx: &mut WriteTx,
    p: Packing,
    series: i64,
    before: i64,
) -> Result<u64> {
    // Whole blocks: their last bucket starts before `before`.
    let whole = format!(
        "FROM {} WHERE series_id = $1 AND {} + $2 < $3",
        p.table, p.start
    );
    let gone: i64 = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT CAST(COALESCE(SUM({}), 0) AS BIGINT) AS n {whole}",
        p.buckets
    )))
    .bind(series)
    .bind(p.span - p.width)
    .bind(before)
    .fetch_one(&mut **tx)
    .await?
    .try_get("n")?;
    sqlx::query(sqlx::AssertSqlSafe(format!("DELETE {whole}")))
        .bind(series)
        .bind(p.span - p.width)
        .bind(before)
        .execute(&mut **tx)
        .await?;
    let mut deleted = gone as u64;
    // The block across the edge keeps its later buckets.
    let edge = floor_to(before, p.span);
    if let Some(mut buckets) = packed(tx, p, series, edge).await? {
        let before_len = buckets.len();
        buckets.retain(|(b, _)| *b >= before);
        if buckets.len() != before_len {
            deleted += (before_len - buckets.len()) as u64;
            put(tx, p, series, edge, &buckets).await?;
        }
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hour_of_minutes(n: i64) -> Vec<Minute> {
        (0..n)
            .map(|i| {
                let v = (i * 37 % 100) as f64 / 10.0;
                (
                    1_795_435_200_000 + i * MINUTE,
                    BucketStats {
                        count: 60,
                        sum: v * 60.0 + 0.25,
                        min: v - 1.5,
                        max: v + 2.0,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn packed_minutes_read_back_bit_for_bit_and_small() {
        for n in [1, 2, 59, 60] {
            let minutes = hour_of_minutes(n);
            let bytes = encode(&minutes).unwrap();
            assert_eq!(decode(&bytes).unwrap(), minutes, "{n} minutes");
        }
        // 60 rows of ~55 bytes each before.
        let bytes = encode(&hour_of_minutes(60)).unwrap();
        assert!(bytes.len() < 60 * 55 / 3, "{} bytes", bytes.len());
        // One minute: plain, 45 bytes, not pco's framing.
        assert_eq!(encode(&hour_of_minutes(1)).unwrap().len(), 45);
    }

    #[test]
    fn damaged_minute_blocks_are_errors_not_panics() {
        let bytes = encode(&hour_of_minutes(60)).unwrap();
        for cut in [0, 1, 5, 9, 20, bytes.len() - 1] {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        assert!(decode(&[9, 0, 0, 0, 0]).is_err());
        let plain = encode(&hour_of_minutes(2)).unwrap();
        assert_eq!(plain[0], PLAIN);
        for cut in [0, 1, 5, 44, plain.len() - 1] {
            assert!(decode(&plain[..cut]).is_err(), "plain cut at {cut}");
        }
    }
}
