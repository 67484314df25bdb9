//! Sealing, in the background: the head blocks that ingest writes (a few points each, plain) are
//! merged per series and window into one compressed block once the window is closed, and earlier
//! when an open window has gathered [`OPEN_WINDOW_BLOCKS`] of them, so that reads stay a few
//! blocks per window. Sealing changes no point, so rollups, latest values and everything read are
//! the same before and after. The same pass packs closed hours' minutes and ended days' hours
//! (`rollups.rs`) and compacts the sealed hours of sparse series into day blocks (`compact.rs`).

use plantd_store::{Backend, Store};
use std::sync::Arc;
use std::time::Duration;

use crate::block;
use crate::blocks::{self, EncodedBlock, GRACE, WINDOW, window_of};
use crate::error::Result;
use crate::state::Shared;

/// Head blocks an open window gathers before they are merged.
pub(crate) const OPEN_WINDOW_BLOCKS: usize = 32;

/// A pass waits until ingest has committed nothing for this long...
const QUIET: Duration = Duration::from_secs(1);
/// ...or, under ingest that never pauses, at most this long.
const MAX_DELAY: Duration = Duration::from_secs(10);

/// The sealer: a pass once a burst of ingest is over (at least every [`MAX_DELAY`] while it
/// lasts) and every few seconds (windows close with time).
///
/// Sealing while a burst writes into the same windows (a backfill of closed hours, say) would
/// compress a window again after each group, and pack an hour's minutes that the next group
/// unpacks: work thrown away that also holds the write lock the groups wait for. So a pass waits
/// for ingest to pause, as InfluxDB compacts a shard only once writes to it have gone cold.
pub(crate) async fn run(shared: Arc<Shared>) {
    loop {
        tokio::select! {
            _ = shared.seal_wake.notified() => {}
            _ = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
        let deadline = tokio::time::Instant::now() + MAX_DELAY;
        loop {
            let until = (tokio::time::Instant::now() + QUIET).min(deadline);
            match tokio::time::timeout_at(until, shared.seal_wake.notified()).await {
                // Another commit: wait on, unless the pass is overdue.
                Ok(()) if tokio::time::Instant::now() < deadline => {}
                _ => break,
            }
        }
        let now = plantd_model::Timestamp::now().millis();
        match seal_pending(&shared.store, now).await {
            Ok(rewritten) => {
                use std::sync::atomic::Ordering::{Relaxed, Release};
                // Rewrites first: a reader that sees the pass counted sees what it rewrote.
                shared.sealer_rewrites.fetch_add(rewritten as u64, Relaxed);
                shared.sealer_passes.fetch_add(1, Release);
            }
            Err(_) if shared.store.is_closed() => {
                // The server stopped and closed its store: the next start seals.
                return;
            }
            Err(e) => {
                tracing::warn!(error = %plantd_model::error_chain(&e), "sealing telemetry blocks failed; will try again");
            }
        }
    }
}

/// Seals every window that is due at `now` and packs the minute rollups of the closed hours;
/// returns how many windows and hours were rewritten.
pub(crate) async fn seal_pending(store: &Store, now: i64) -> Result<usize> {
    let sqlite = store.backend() == Backend::Sqlite;
    // A window is closed when `window + WINDOW + GRACE <= now`: its blocks start before the
    // end of the newest closed window.
    let closed_before = window_of(now - WINDOW - GRACE) + WINDOW;
    // The due windows, counted by the database over the partial index of the head: an open
    // window with few head blocks costs nothing here, however many there are.
    // Grouped in the index's order and only then joined to the series for their
    // organizations (as `rollups::pack_due`'s), so that the database streams the index and
    // stops at the limit.
    let due = format!(
        "SELECT s.org_id, d.series_id, d.w FROM (SELECT b.series_id, (b.start_ts / {WINDOW}) * {WINDOW} AS w \
         FROM telemetry_block b WHERE b.sealed = 0 \
         GROUP BY b.series_id, (b.start_ts / {WINDOW}) * {WINDOW} \
         HAVING COUNT(*) >= $1 OR MAX(b.start_ts) < $2 \
         ORDER BY b.series_id, (b.start_ts / {WINDOW}) * {WINDOW} LIMIT $3) d \
         JOIN telemetry_series s ON s.id = d.series_id"
    );
    let binds = vec![OPEN_WINDOW_BLOCKS as i64, closed_before];
    // The blocks are read, merged and compressed outside the write lock (compressing a busy
    // window takes tens of milliseconds); under it, the window is read again and rewritten
    // only if nothing changed meanwhile.
    let reader = store.clone();
    let mut sealed = blocks::rewrite_due(
        store,
        due,
        binds,
        move |series, window| {
            let store = reader.clone();
            Box::pin(async move {
                let merge = prepare(&store, series, window, closed(window, now)).await?;
                let bytes = merge.bytes();
                Ok((merge, bytes))
            })
        },
        |tx, series, window, merge| Box::pin(seal_window(tx, sqlite, series, window, merge)),
    )
    .await?;
    // The closed hours' minutes and ended days' hours, packed the same way; then the days of
    // sparse series, their sealed hours compacted.
    sealed += crate::rollups::pack_due(store, now).await?;
    sealed += crate::compact::compact_due(store).await?;
    if sealed > 0 && sqlite {
        // Give the pages of the merged head blocks back to the file system (a file created
        // with auto_vacuum; a no-op on older files, whose free pages are reused instead), on
        // the write connection, whose page cache another connection's write would void.
        let mut tx = store.begin_write().await?;
        sqlx::query("PRAGMA incremental_vacuum")
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
    }
    Ok(sealed)
}

fn closed(window: i64, now: i64) -> bool {
    window + WINDOW + GRACE <= now
}

/// A window's blocks as read outside the write lock (start and bytes of each, by time), whether
/// the window was closed, and the block they merge into (`None` when they are one compressed
/// block already).
pub(crate) struct Merge {
    read: Vec<(i64, Vec<u8>)>,
    closed: bool,
    into: Option<EncodedBlock>,
}

impl Merge {
    /// The bytes it holds.
    fn bytes(&self) -> usize {
        let read: usize = self.read.iter().map(|(_, d)| d.len()).sum();
        read + self.into.as_ref().map_or(0, EncodedBlock::len)
    }
}

/// Reads a window's blocks and merges them into one block, compressed, off the runtime's
/// threads.
pub(crate) async fn prepare(
    store: &Store,
    series: i64,
    window: i64,
    closed: bool,
) -> Result<Merge> {
    let mut conn = store.pool().acquire().await?;
    let stored = blocks::of_window(&mut conn, series, window).await?;
    drop(conn);
    let merge = tokio::task::spawn_blocking(move || -> Result<Merge> {
        let into = match stored.as_slice() {
            [] => None,
            [only] if block::is_compressed(&only.data) => None,
            _ => Some(blocks::merged(series, &stored, closed)?),
        };
        Ok(Merge {
            read: stored.into_iter().map(|b| (b.start, b.data)).collect(),
            closed,
            into,
        })
    })
    .await
    .map_err(|e| crate::error::TsdbError::Block {
        context: "merging a window stopped",
        source: Some(Box::new(e)),
    })??;
    Ok(merge)
}

/// Replaces one window's blocks with the block they were merged into (compressed, and sealed
/// when the window was closed), unless ingest changed them since they were read: then a later
/// pass merges them. Returns whether it rewrote.
pub(crate) async fn seal_window(
    tx: &mut plantd_store::WriteTx,
    sqlite: bool,
    series: i64,
    window: i64,
    merge: Merge,
) -> Result<bool> {
    let stored = blocks::of_window(tx, series, window).await?;
    let unchanged = blocks::unchanged(&stored, &merge.read);
    let (true, Some(first), Some(last)) = (unchanged, stored.first(), stored.last()) else {
        return Ok(false);
    };
    let points = merge.into.as_ref().map_or(first.count, EncodedBlock::count);
    let rewrote = match merge.into {
        None if merge.closed && !first.sealed => {
            sqlx::query(
                "UPDATE telemetry_block SET sealed = 1 WHERE series_id = $1 AND start_ts = $2",
            )
            .bind(series)
            .bind(first.start)
            .execute(&mut **tx)
            .await?;
            true
        }
        None => false,
        Some(block) => {
            blocks::delete_span(tx, series, first.start, last.start).await?;
            blocks::insert_encoded(tx, sqlite, &[block]).await?;
            true
        }
    };
    if rewrote && merge.closed {
        // Its day's sealed blocks may now be compacted.
        crate::compact::mark(tx, series, window, points).await?;
    }
    Ok(rewrote)
}
