//! Compacting days: the sealed hour blocks of a sparse series are merged into one block for
//! their UTC day (consecutive sealed blocks holding at most [`DAY_POINTS`] points together), the
//! current day's closed hours too, each merged into the day's block as it closes.
//!
//! A sparse series (one point a minute, say) fills an hour block with 60 points; reading a week
//! of a thousand such series meant 168,000 rows, each a handoff to the database's thread and a
//! decoder's setup, for 10,000,000 points (a BI scan, an export). One block a day cuts the rows
//! 24 times and leaves the points the same. Dense series (a point a second: 3,600 an hour) keep
//! their hour blocks, which are already large.
//!
//! Which days to look at: the sealer marks a series' day in `telemetry_day_pending` when it seals
//! one of its small windows (and a flush that splits a compacted day marks it again), so a pass
//! reads only days that changed, never the whole table. Readers need nothing more than the invariant
//! of `blocks.rs` (a block within one day; [`blocks::reach_of`]); a write into a compacted day
//! splits it back into hours first (`flush.rs`).

use plantd_store::{Store, WriteTx};

use crate::blocks::{self, NewBlock, StoredBlock};
use crate::error::Result;
use crate::levels::{DAY, floor_to};

/// Consecutive sealed blocks of a day are merged while together they hold at most this many
/// points (a point every 9 s for a whole day): a read of a moment of the day decodes at most
/// this many, tens of microseconds.
pub(crate) const DAY_POINTS: i64 = 10_000;

/// Windows holding more points than this are not marked: their day could not merge them (a
/// point a second fills an hour block with 3,600 points, already large).
const MARK_POINTS: i64 = DAY_POINTS / 4;

/// Marks the day holding `window` of `series` for the next compaction pass, when the window's
/// sealed block of `points` points is small enough to be merged.
pub(crate) async fn mark(
    tx: &mut sqlx::AnyConnection,
    series: i64,
    window: i64,
    points: i64,
) -> Result<()> {
    if points > MARK_POINTS {
        return Ok(());
    }
    sqlx::query(
        "INSERT INTO telemetry_day_pending (series_id, day) VALUES ($1, $2) ON CONFLICT DO NOTHING",
    )
    .bind(series)
    .bind(floor_to(window, DAY))
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// A run of a day's consecutive sealed blocks as read outside the write lock (start and bytes
/// of each), and the block they merge into.
pub(crate) struct Run {
    read: Vec<(i64, Vec<u8>)>,
    into: blocks::EncodedBlock,
}

/// Compacts every marked day (the closed windows of the current day too, which merge into the
/// day's block as each closes); returns how many marks were settled.
pub(crate) async fn compact_due(store: &Store) -> Result<usize> {
    let due = "SELECT s.org_id, p.series_id, p.day AS w FROM telemetry_day_pending p \
               JOIN telemetry_series s ON s.id = p.series_id LIMIT $1"
        .to_string();
    let sqlite = store.backend() == plantd_store::Backend::Sqlite;
    let reader = store.clone();
    blocks::rewrite_due(
        store,
        due,
        Vec::new(),
        move |series, day| {
            let store = reader.clone();
            Box::pin(async move {
                let runs = prepare(&store, series, day).await?;
                let bytes = runs
                    .iter()
                    .map(|r| r.read.iter().map(|(_, d)| d.len()).sum::<usize>() + r.into.len())
                    .sum();
                Ok((runs, bytes))
            })
        },
        move |tx, series, day, runs| Box::pin(apply(tx, sqlite, series, day, runs)),
    )
    .await
}

/// Reads a day's blocks (their sizes first, the points of those to merge then) and merges each
/// run of at least two consecutive sealed blocks holding at most [`DAY_POINTS`] points, off the
/// runtime's threads.
pub(crate) async fn prepare(store: &Store, series: i64, day: i64) -> Result<Vec<Run>> {
    use sqlx::Row;
    let mut conn = store.pool().acquire().await?;
    let sizes: Vec<(i64, i64, bool)> = sqlx::query(
        "SELECT start_ts, count, sealed FROM telemetry_block \
         WHERE series_id = $1 AND start_ts >= $2 AND start_ts < $3 ORDER BY start_ts",
    )
    .bind(series)
    .bind(day)
    .bind(day + DAY)
    .fetch_all(&mut *conn)
    .await?
    .iter()
    .map(|r| {
        let sealed: i16 = r.try_get("sealed")?;
        Ok((r.try_get("start_ts")?, r.try_get("count")?, sealed != 0))
    })
    .collect::<std::result::Result<_, sqlx::Error>>()?;
    // Runs of consecutive sealed blocks, each within the points a block may hold.
    let mut spans: Vec<(i64, i64)> = Vec::new();
    let mut i = 0;
    while i < sizes.len() {
        let (first, mut points, mut j) = (sizes[i].0, 0, i);
        while j < sizes.len() && sizes[j].2 && points + sizes[j].1 <= DAY_POINTS {
            points += sizes[j].1;
            j += 1;
        }
        if j >= i + 2 {
            spans.push((first, sizes[j - 1].0));
        }
        i = j.max(i + 1);
    }
    let mut read = Vec::new();
    for (first, last) in spans {
        read.push(blocks::starting_in(&mut conn, series, first, last + 1).await?);
    }
    drop(conn);
    tokio::task::spawn_blocking(move || -> Result<Vec<Run>> {
        let mut runs = Vec::new();
        for stored in read {
            let into = blocks::merged(series, &stored, true)?;
            runs.push(Run {
                read: stored.into_iter().map(|b| (b.start, b.data)).collect(),
                into,
            });
        }
        Ok(runs)
    })
    .await
    .map_err(|e| crate::error::TsdbError::Block {
        context: "compacting a day stopped",
        source: Some(Box::new(e)),
    })?
}

/// Under the write lock: replaces each run with its merge unless a flush changed its blocks
/// since they were read (then the mark stays for a later pass), and settles the mark.
async fn apply(
    tx: &mut WriteTx,
    sqlite: bool,
    series: i64,
    day: i64,
    runs: Vec<Run>,
) -> Result<bool> {
    let mut changed = false;
    for run in runs {
        let (Some((first, _)), Some((last, _))) = (run.read.first(), run.read.last()) else {
            continue;
        };
        let stored = blocks::starting_in(tx, series, *first, *last + 1).await?;
        if !blocks::unchanged(&stored, &run.read) {
            changed = true;
            continue;
        }
        blocks::delete_span(tx, series, *first, *last).await?;
        blocks::insert_encoded(tx, sqlite, &[run.into]).await?;
    }
    if changed {
        return Ok(false);
    }
    sqlx::query("DELETE FROM telemetry_day_pending WHERE series_id = $1 AND day = $2")
        .bind(series)
        .bind(day)
        .execute(&mut **tx)
        .await?;
    Ok(true)
}

/// Splits a compacted block back into one sealed block per window (a write is about to land in
/// its day), written in its place, and marks its day; returns the pieces as stored, by time.
pub(crate) async fn split(
    tx: &mut sqlx::AnyConnection,
    sqlite: bool,
    series: i64,
    block: &StoredBlock,
) -> Result<Vec<StoredBlock>> {
    let columns = block.columns()?;
    let mut pieces = Vec::new();
    let mut i = 0;
    while i < columns.len() {
        let window = blocks::window_of(columns.ts[i]);
        let mut piece = crate::block::Columns::default();
        while i < columns.len() && blocks::window_of(columns.ts[i]) == window {
            piece.push(columns.ts[i], columns.values[i], columns.quality[i]);
            i += 1;
        }
        pieces.push(
            NewBlock {
                series,
                columns: piece,
                sealed: true,
            }
            .encode()?,
        );
    }
    blocks::delete_span(tx, series, block.start, block.start).await?;
    blocks::insert_encoded(tx, sqlite, &pieces).await?;
    mark(tx, series, block.start, 0).await?;
    Ok(pieces.iter().map(blocks::EncodedBlock::stored).collect())
}
