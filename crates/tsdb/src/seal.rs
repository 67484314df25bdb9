//! Sealing, in the background: the head blocks that ingest writes (a few points each, plain) are
//! merged per series and window into one compressed block once the window is closed, and earlier
//! when an open window has gathered [`OPEN_WINDOW_BLOCKS`] of them, so that reads stay a few
//! blocks per window. Sealing changes no point, so rollups, latest values and everything read are
//! the same before and after. The same pass packs closed hours' minute rollups (`rollups.rs`).

use plantd_store::{Backend, Store};
use std::sync::Arc;
use std::time::Duration;

use crate::block;
use crate::blocks::{self, GRACE, NewBlock, WINDOW, window_of};
use crate::error::Result;
use crate::state::Shared;

/// Head blocks an open window gathers before they are merged.
pub(crate) const OPEN_WINDOW_BLOCKS: usize = 32;

/// A pass waits until ingest has committed nothing for this long...
const QUIET: Duration = Duration::from_secs(1);
/// ...or, under ingest that never pauses, until this long after the commit that woke it...
const MAX_DELAY: Duration = Duration::from_secs(10);
/// ...or until this many more commits, so that a series written by every commit of a fast
/// stream gathers at most this many head blocks beyond [`OPEN_WINDOW_BLOCKS`] in its window.
const MAX_COMMITS: usize = 128;

/// The sealer: a pass once a burst of ingest is over (while it lasts, at least every
/// [`MAX_DELAY`] and every [`MAX_COMMITS`] commits) and every few seconds (windows close with
/// time).
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
        let mut commits = 1;
        loop {
            let until = (tokio::time::Instant::now() + QUIET).min(deadline);
            match tokio::time::timeout_at(until, shared.seal_wake.notified()).await {
                // Another commit: wait again, unless the pass is due.
                Ok(()) if commits < MAX_COMMITS && tokio::time::Instant::now() < deadline => {
                    commits += 1;
                }
                _ => break,
            }
        }
        let now = plantd_model::Timestamp::now().millis();
        if let Err(e) = seal_pending(&shared.store, now).await {
            tracing::warn!(error = %plantd_model::error_chain(&e), "sealing telemetry blocks failed; will try again");
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
    let due = format!(
        "SELECT s.org_id, b.series_id, (b.start_ts / {WINDOW}) * {WINDOW} AS w FROM telemetry_block b \
         JOIN telemetry_series s ON s.id = b.series_id WHERE b.sealed = 0 \
         GROUP BY s.org_id, b.series_id, (b.start_ts / {WINDOW}) * {WINDOW} \
         HAVING COUNT(*) >= $1 OR MAX(b.start_ts) < $2 LIMIT $3"
    );
    let binds = vec![OPEN_WINDOW_BLOCKS as i64, closed_before];
    let mut sealed = blocks::rewrite_due(store, due, binds, |tx, series, window| {
        Box::pin(seal_window(tx, sqlite, series, window, closed(window, now)))
    })
    .await?;
    // The closed hours' minute rollups, packed the same way.
    sealed += crate::rollups::pack_due(store, now).await?;
    if sealed > 0 && sqlite {
        // Give the pages of the merged head blocks back to the file system (a file created
        // with auto_vacuum; a no-op on older files, whose free pages are reused instead).
        let _gate = store.write_guard().await;
        sqlx::query("PRAGMA incremental_vacuum")
            .execute(store.pool())
            .await?;
    }
    Ok(sealed)
}

fn closed(window: i64, now: i64) -> bool {
    window + WINDOW + GRACE <= now
}

/// Merges one window's blocks into one (compressed, and sealed when the window is closed).
async fn seal_window(
    tx: &mut plantd_store::WriteTx,
    sqlite: bool,
    series: i64,
    window: i64,
    closed: bool,
) -> Result<()> {
    let stored = blocks::of_window(tx, series, window).await?;
    let (Some(first), Some(last)) = (stored.first(), stored.last()) else {
        return Ok(());
    };
    if stored.len() == 1 && block::is_compressed(&first.data) {
        if closed {
            sqlx::query(
                "UPDATE telemetry_block SET sealed = 1 WHERE series_id = $1 AND start_ts = $2",
            )
            .bind(series)
            .bind(first.start)
            .execute(&mut **tx)
            .await?;
        }
        return Ok(());
    }
    let mut columns = block::Columns::default();
    for b in &stored {
        columns.extend(b.columns()?);
    }
    blocks::delete_span(tx, series, first.start, last.start).await?;
    blocks::insert(
        tx,
        sqlite,
        &[NewBlock {
            series,
            columns,
            sealed: closed,
        }],
    )
    .await
}
