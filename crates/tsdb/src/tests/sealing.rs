//! Sealing: head blocks of an open window merged, a window changed while it was merged left to the next pass.

use super::*;

/// The head of the open window: single-point batches become head blocks when the log is
/// flushed, which sealing merges (still open, so still head) once 32 have gathered; nothing read
/// changes. (The background
/// sealer may merge first, by the same rule: the assertions hold either way.)
#[tokio::test]
async fn an_open_window_merges_its_head_blocks_without_sealing_them() {
    let (tsdb, store, org, dir) = fresh(Retention::default()).await;
    let now = Timestamp::now().millis();
    let hour = now - now.rem_euclid(HOUR);
    let mut expected: BTreeMap<i64, f64> = BTreeMap::new();
    // 40 points, one per batch, the first ones at the hour's start so all are in this window.
    for i in 0..40 {
        let t = hour + i * 10;
        expected.insert(t, i as f64 / 4.0);
        tsdb.ingest(&org, points("P", [(t, i as f64 / 4.0)]), None)
            .await
            .unwrap();
    }
    // Sealing as of the window's start + 1 s: the window is open.
    tsdb.seal_at(Timestamp::from_millis(hour + 1_000))
        .await
        .unwrap();
    let (blocks, head) = block_count(&store).await;
    assert_eq!(blocks, head, "an open window is never sealed");
    assert!(
        blocks < crate::seal::OPEN_WINDOW_BLOCKS as i64,
        "{blocks} head blocks"
    );
    assert_raw_equals(&tsdb, &org, &expected, hour, hour + HOUR).await;
    let latest = tsdb.latest(&org, "P", None).await.unwrap();
    assert_eq!(latest[0].value, 39.0 / 4.0);
    // Once the window is closed the block is compressed and sealed.
    tsdb.seal_at(Timestamp::from_millis(hour + 2 * HOUR))
        .await
        .unwrap();
    assert_eq!(block_count(&store).await, (1, 0));
    assert_raw_equals(&tsdb, &org, &expected, hour, hour + HOUR).await;
    if let Some(d) = dir {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// Sealing merges a window outside the write lock, then rewrites it only if a flush of the
/// telemetry log changed nothing meanwhile: a point replaced in between (same blocks, same bounds, another value) or a
/// point added leaves the window to a later pass, and nothing written meanwhile is lost.
#[tokio::test]
async fn a_window_changed_while_it_was_merged_is_left_to_the_next_pass() {
    let (tsdb, store, org, dir) = fresh(Retention::default()).await;
    let now = Timestamp::now().millis();
    let hour = now - now.rem_euclid(HOUR);
    let mut expected: BTreeMap<i64, f64> = BTreeMap::new();
    for i in 0..5 {
        let t = hour + i * 10;
        expected.insert(t, i as f64);
        tsdb.ingest(&org, points("P", [(t, i as f64)]), None)
            .await
            .unwrap();
    }
    let series: i64 = {
        use sqlx::Row;
        sqlx::query("SELECT id FROM telemetry_series WHERE asset_id = 'P'")
            .fetch_one(store.pool())
            .await
            .unwrap()
            .try_get("id")
            .unwrap()
    };
    let sqlite = store.backend() == plantd_store::Backend::Sqlite;
    let later = hour + 2 * HOUR;
    for change in [(hour + 20, 42.5), (hour + 25, 7.25)] {
        // Merged as of two hours later, then a point replaced (then added) before the rewrite.
        let merge = crate::seal::prepare(&store, series, hour, true)
            .await
            .unwrap();
        tsdb.ingest(&org, points("P", [change]), None)
            .await
            .unwrap();
        tsdb.flush().await.unwrap();
        expected.insert(change.0, change.1);
        let mut tx = store.begin_write().await.unwrap();
        let rewrote = crate::seal::seal_window(&mut tx, sqlite, series, hour, merge)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        assert!(!rewrote, "the stale merge of {change:?} was not written");
        assert_raw_equals(&tsdb, &org, &expected, hour, hour + HOUR).await;
    }
    // Unchanged since it was read: rewritten, the same points.
    let merge = crate::seal::prepare(&store, series, hour, true)
        .await
        .unwrap();
    let mut tx = store.begin_write().await.unwrap();
    assert!(
        crate::seal::seal_window(&mut tx, sqlite, series, hour, merge)
            .await
            .unwrap()
    );
    tx.commit().await.unwrap();
    assert_eq!(block_count(&store).await, (1, 0));
    assert_raw_equals(&tsdb, &org, &expected, hour, hour + HOUR).await;
    tsdb.seal_at(Timestamp::from_millis(later)).await.unwrap();
    assert_raw_equals(&tsdb, &org, &expected, hour, hour + HOUR).await;
    if let Some(d) = dir {
        let _ = std::fs::remove_dir_all(d);
    }
}
