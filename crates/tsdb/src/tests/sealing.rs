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

/// Hour rollups stored: (packed days, hour rows).
async fn hour_state(store: &Store) -> (i64, i64) {
    use sqlx::Row;
    let row = sqlx::query(
        "SELECT (SELECT COUNT(*) FROM telemetry_hour_block) AS blocks, \
         (SELECT COUNT(*) FROM telemetry_rollup WHERE level = 2) AS rows",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    (row.try_get("blocks").unwrap(), row.try_get("rows").unwrap())
}

/// Blocks of one series: (count, how many span more than one window).
async fn series_blocks(store: &Store, asset: &str) -> (i64, i64) {
    use sqlx::Row;
    let row = sqlx::query(
        "SELECT COUNT(*) AS n, CAST(COALESCE(SUM(CASE WHEN b.start_ts / 3600000 <> b.end_ts / 3600000 THEN 1 ELSE 0 END), 0) AS BIGINT) AS spanning \
         FROM telemetry_block b JOIN telemetry_series s ON s.id = b.series_id WHERE s.asset_id = $1",
    )
    .bind(asset)
    .fetch_one(store.pool())
    .await
    .unwrap();
    (row.try_get("n").unwrap(), row.try_get("spanning").unwrap())
}

/// A closed day of a sparse series (a point every 2 minutes) is compacted into one block, one
/// of a point every 5 s into blocks of at most 10,000 points, a dense one (every second) keeps
/// its hour blocks; every read answers the same before and after;
/// a late and a replaced point in the compacted day split it back into hours and unpack its
/// packed hour rollups (which stay exact), and the next pass compacts and packs it again; retention cuts a compacted day in its middle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_sparse_days_are_compacted_and_read_the_same() {
    let (tsdb, store, org, dir) = fresh(Retention::default()).await;
    let now = Timestamp::now().millis();
    let day = now - now.rem_euclid(DAY) - 3 * DAY;
    let mut expected: BTreeMap<i64, f64> = BTreeMap::new();
    for i in 0..720 {
        // Starting 30 s into the day, so the day's block starts inside its first window.
        expected.insert(day + 30_000 + i * 120_000, value_at(i));
    }
    let sparse: Vec<(i64, f64)> = expected.iter().map(|(t, v)| (*t, *v)).collect();
    for part in sparse.chunks(100) {
        tsdb.ingest(&org, points("P", part.iter().copied()), None)
            .await
            .unwrap();
    }
    // A point every 5 s (720 an hour): merged into blocks of at most 10,000 points; a point a
    // second (3,600 an hour): hour blocks left alone.
    let medium: Vec<(i64, f64)> = (0..DAY / 5_000).map(|i| (day + i * 5_000, 1.0)).collect();
    let dense: Vec<(i64, f64)> = (0..3 * HOUR / 1_000)
        .map(|i| (day + i * 1_000, 2.0))
        .collect();
    for (asset, series) in [("M", &medium), ("D", &dense)] {
        for part in series.chunks(5_000) {
            tsdb.ingest(&org, points(asset, part.iter().copied()), None)
                .await
                .unwrap();
        }
    }
    tsdb.flush().await.unwrap();
    let f = filter("P", day, day + DAY);
    let hourly_before = all_aggregates(&tsdb, &org, &f, Aggregation::Avg, Some(HOUR)).await;
    tsdb.seal_at(Timestamp::from_millis(now)).await.unwrap();
    assert_eq!(
        series_blocks(&store, "P").await,
        (1, 1),
        "one block for the day"
    );
    assert_eq!(
        series_blocks(&store, "M").await,
        (2, 2),
        "13 hours, then 11"
    );
    assert_eq!(
        series_blocks(&store, "D").await,
        (3, 0),
        "dense: hour blocks"
    );
    assert_eq!(hour_state(&store).await, (3, 0), "each day's hours packed");
    for (lo, hi) in [
        (day, day + DAY),
        (day + 5 * HOUR + 7_000, day + 5 * HOUR + 600_000),
        (day + 13 * HOUR, day + 2 * DAY),
        (day - HOUR, day + 30_001),
    ] {
        assert_raw_equals(&tsdb, &org, &expected, lo, hi).await;
    }
    assert_eq!(
        all_aggregates(&tsdb, &org, &f, Aggregation::Avg, Some(HOUR)).await,
        hourly_before
    );

    // A point replaced at noon and one added between two: the day becomes hours again.
    let noon = day + 12 * HOUR + 30_000;
    let late = [(noon, 1234.5), (noon + 60_000, -3.25)];
    tsdb.ingest(&org, points("P", late), None).await.unwrap();
    tsdb.flush().await.unwrap();
    expected.extend(late);
    let (blocks, spanning) = series_blocks(&store, "P").await;
    assert_eq!((blocks, spanning), (24, 0), "split into its hours");
    assert_eq!(hour_state(&store).await, (2, 24), "its hours unpacked");
    assert_raw_equals(&tsdb, &org, &expected, day, day + DAY).await;
    let noon_hour: Vec<f64> = expected
        .range(day + 12 * HOUR..day + 13 * HOUR)
        .map(|(_, v)| *v)
        .collect();
    let hourly = all_aggregates(&tsdb, &org, &f, Aggregation::Avg, Some(HOUR)).await;
    assert!((hourly[12].value - aggregate(Aggregation::Avg, &noon_hour)).abs() < 1e-9);
    assert_eq!(hourly[12].count, noon_hour.len() as u64);
    tsdb.seal_at(Timestamp::from_millis(now)).await.unwrap();
    assert_eq!(series_blocks(&store, "P").await, (1, 1), "compacted again");
    assert_eq!(hour_state(&store).await, (3, 0), "packed again");
    assert_eq!(
        all_aggregates(&tsdb, &org, &f, Aggregation::Avg, Some(HOUR)).await,
        hourly
    );
    let daily = all_aggregates(&tsdb, &org, &f, Aggregation::Count, Some(DAY)).await;
    assert_eq!(daily[0].count, expected.len() as u64);
    assert_raw_equals(&tsdb, &org, &expected, day, day + DAY).await;

    // Retention whose raw cut falls at noon of the compacted day.
    let cut = day + 12 * HOUR;
    let raw_days = Retention::default().raw_days;
    tsdb.enforce_retention(Timestamp::from_millis(cut + raw_days * DAY))
        .await
        .unwrap();
    let kept: BTreeMap<i64, f64> = expected.range(cut..).map(|(t, v)| (*t, *v)).collect();
    assert_raw_equals(&tsdb, &org, &kept, day, day + DAY).await;
    if let Some(d) = dir {
        let _ = std::fs::remove_dir_all(d);
    }
}
