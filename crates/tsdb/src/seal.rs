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
/// ...or, under ingest that never pauses, at most this long.
const MAX_DELAY: Duration = Duration::from_secs(10);
/// Meanwhile, every this many commits, windows that have gathered [`OPEN_WINDOW_BLOCKS`] head
/// blocks are merged (and nothing else), so that a series written by every commit of a fast
/// stream keeps a bounded head.
const MAX_COMMITS: usize = 128;

/// The sealer: a full pass once a burst of ingest is over, at least every [`MAX_DELAY`] while
/// it lasts, and every few seconds (windows close with time); a pass over crowded windows only
/// every [`MAX_COMMITS`] commits in between.
///
/// Sealing while a burst writes into the same windows (a backfill of closed hours, say) would
/// compress a window again after each group, and pack an hour's minutes that the next group
/// unpacks: work thrown away that also holds the write lock the groups wait for. So a full pass
/// waits for ingest to pause, as InfluxDB compacts a shard only once writes to it have gone
/// cold.
pub(crate) async fn run(shared: Arc<Shared>) {
    // When the next full pass is due under ingest that never pauses.
    let mut full_due: Option<tokio::time::Instant> = None;
    loop {
        tokio::select! {
            _ = shared.seal_wake.notified() => {}
            _ = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
        let deadline = *full_due.get_or_insert_with(|| tokio::time::Instant::now() + MAX_DELAY);
        let mut commits = 1;
        let full = loop {
            let until = (tokio::time::Instant::now() + QUIET).min(deadline);
            match tokio::time::timeout_at(until, shared.seal_wake.notified()).await {
                // Another commit: wait on, unless a pass is due.
                Ok(()) if tokio::time::Instant::now() < deadline => {
                    commits += 1;
                    if commits >= MAX_COMMITS {
                        break false;
                    }
                }
                _ => break true,
            }
        };
        let now = plantd_model::Timestamp::now().millis();
        let outcome = if full {
            full_due = None;
            seal_pending(&shared.store, now).await
        } else {
            merge_crowded(&shared.store, now).await
        };
        if let Err(e) = outcome {
            tracing::warn!(error = %plantd_model::error_chain(&e), "sealing telemetry blocks failed; will try again");
        }
    }
}

/// Seals every window that is due at `now` and packs the minute rollups of the closed hours;
/// returns how many windows and hours were rewritten.
pub(crate) async fn seal_pending(store: &Store, now: i64) -> Result<usize> {
    // A window is closed when `window + WINDOW + GRACE <= now`: its blocks start before the
    // end of the newest closed window.
    let closed_before = window_of(now - WINDOW - GRACE) + WINDOW;
    let mut sealed = merge_windows(store, now, closed_before).await?;
    // The closed hours' minute rollups, packed the same way.
    sealed += crate::rollups::pack_due(store, now).await?;
    give_back(store, sealed).await?;
    Ok(sealed)
}

/// Merges only the windows that have gathered [`OPEN_WINDOW_BLOCKS`] head blocks.
pub(crate) async fn merge_crowded(store: &Store, now: i64) -> Result<usize> {
    let merged = merge_windows(store, now, i64::MIN).await?;
    give_back(store, merged).await?;
    Ok(merged)
}

/// Merges the head blocks of the windows holding [`OPEN_WINDOW_BLOCKS`] of them or starting
/// before `closed_before`.
async fn merge_windows(store: &Store, now: i64, closed_before: i64) -> Result<usize> {
    let sqlite = store.backend() == Backend::Sqlite;
    // The due windows, counted by the database over the partial index of the head: an open
    // window with few head blocks costs nothing here, however many there are.
    let due = format!(
        "SELECT s.org_id, b.series_id, (b.start_ts / {WINDOW}) * {WINDOW} AS w FROM telemetry_block b \
         JOIN telemetry_series s ON s.id = b.series_id WHERE b.sealed = 0 \
         GROUP BY s.org_id, b.series_id, (b.start_ts / {WINDOW}) * {WINDOW} \
         HAVING COUNT(*) >= $1 OR MAX(b.start_ts) < $2 LIMIT $3"
    );
    let binds = vec![OPEN_WINDOW_BLOCKS as i64, closed_before];
    blocks::rewrite_due(store, due, binds, |tx, series, window| {
        Box::pin(seal_window(tx, sqlite, series, window, closed(window, now)))
    })
    .await
}

/// After blocks were rewritten, gives the freed pages back to the file system (a SQLite file
/// created with auto_vacuum; a no-op on older files, whose free pages are reused instead).
async fn give_back(store: &Store, rewritten: usize) -> Result<()> {
    if rewritten > 0 && store.backend() == Backend::Sqlite {
        // On the write connection, whose page cache another connection's write would void.
        let mut tx = store.begin_write().await?;
        sqlx::query("PRAGMA incremental_vacuum")
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
    }
    Ok(())
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
