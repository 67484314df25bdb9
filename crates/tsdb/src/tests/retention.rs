//! Retention deletes each level and the rollups keep answering.

use super::*;

/// Retention per level, and queries older than the raw retention answered from rollups.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_deletes_each_level_and_rollups_keep_answering() {
    let (url, dir) = fresh_database().await;
    let store = Store::connect(&url).await.unwrap();
    let retention = crate::Retention {
        raw_days: 1,
        minute_days: 2,
        hour_days: 3,
        day_days: 4,
        predictions_days: None,
    };
    let tsdb = crate::Tsdb::new(store.clone(), retention);
    let org = store.create_org("R", Tier::Enterprise).await.unwrap();
    let day = 86_400_000;
    let start = (Timestamp::now().millis() / day) * day - 2 * HOUR;
    let points: Vec<Point> = (0..120)
        .map(|i| Point {
            asset_id: "A".into(),
            tag_name: "T".into(),
            value: i as f64,
            timestamp: Timestamp::from_millis(start + i * 60_000),
            quality: Quality::Good,
            data_source_id: None,
        })
        .collect();
    assert_eq!(
        tsdb.ingest(&org.id, std::sync::Arc::new(points.clone()), None)
            .await
            .unwrap(),
        120
    );
    // The two hours are closed: their minutes are packed, a block per hour; their day ended an
    // hour ago: its hours are packed into a block too, and its raw blocks compacted into one.
    tsdb.seal_at(Timestamp::from_millis(start + 3 * HOUR))
        .await
        .unwrap();
    assert_eq!(minute_state(&store).await, (2, 0, 120));
    assert_eq!(block_count(&store).await, (1, 0));
    // Storage for the quota: the points' block, the packed minutes and hours and the day row,
    // counted from the database.
    let used = tsdb.storage_bytes(&org.id).await.unwrap();
    let rollups = 1;
    let packed = packed_bytes(&store, "telemetry_minute_block").await
        + packed_bytes(&store, "telemetry_hour_block").await
        + 3 * crate::BLOCK_ROW_BYTES;
    assert!(
        used > rollups * crate::ROLLUP_ROW_BYTES + packed + crate::BLOCK_ROW_BYTES,
        "{used}"
    );
    let filter = filter("A", start, start + 2 * HOUR);
    let page = Page::new(None, Some(100)).unwrap();
    let before = tsdb
        .query_aggregated(&org.id, &filter, Aggregation::Avg, Some(HOUR), page)
        .await
        .unwrap()
        .items;
    assert_eq!(before.len(), 2);
    assert_eq!(before[0].value, 29.5);
    // 1.5 days later: raw points are gone, minutes and hours still answer exactly.
    let later = |days_x10: i64| Timestamp::from_millis(start + 2 * HOUR + days_x10 * day / 10);
    let r = tsdb.enforce_retention(later(15)).await.unwrap();
    assert_eq!(r.raw_deleted, 120);
    assert_eq!(
        tsdb.storage_bytes(&org.id).await.unwrap(),
        rollups * crate::ROLLUP_ROW_BYTES + packed,
        "retention frees quota: only the rollups are left"
    );
    assert_eq!(
        tsdb.query_raw(&org.id, &filter, page).await.unwrap().total,
        0
    );
    assert_eq!(
        tsdb.query_aggregated(&org.id, &filter, Aggregation::Avg, Some(HOUR), page)
            .await
            .unwrap()
            .items,
        before
    );
    // Minute retention passing through a packed hour keeps that hour's later minutes.
    let r = tsdb
        .enforce_retention(Timestamp::from_millis(start + 30 * 60_000 + 2 * day))
        .await
        .unwrap();
    assert_eq!(r.rollups_deleted, 30);
    assert_eq!(minute_state(&store).await, (2, 0, 90));
    let per_minute = tsdb
        .query_aggregated(&org.id, &filter, Aggregation::Count, Some(60_000), page)
        .await
        .unwrap()
        .items;
    assert_eq!(per_minute.len(), 90);
    assert_eq!(per_minute[0].timestamp.millis(), start + 30 * 60_000);
    // 3.5 days later: minutes and hours gone; the day rollup still counts every point.
    tsdb.enforce_retention(later(35)).await.unwrap();
    let whole = crate::TelemetryFilter {
        start: Timestamp::from_millis((start / day) * day - day),
        end: Timestamp::from_millis((start / day) * day + day),
        ..filter.clone()
    };
    let daily = tsdb
        .query_aggregated(&org.id, &whole, Aggregation::Count, Some(day), page)
        .await
        .unwrap()
        .items;
    assert_eq!(daily.iter().map(|r| r.count).sum::<u64>(), 120);
    // 4.5 days later: everything is gone.
    tsdb.enforce_retention(later(45)).await.unwrap();
    assert!(
        tsdb.query_aggregated(&org.id, &whole, Aggregation::Count, None, page)
            .await
            .unwrap()
            .items
            .is_empty()
    );
    if let Some(d) = dir {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// The edge's prediction retention: a model's score series loses every level after
/// `predictions_days`, while another tag keeps its hours and days.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn predictions_are_kept_only_their_days() {
    let (url, dir) = fresh_database().await;
    let store = Store::connect(&url).await.unwrap();
    let retention = crate::Retention {
        raw_days: 1,
        minute_days: 2,
        hour_days: 30,
        day_days: 60,
        predictions_days: Some(3),
    };
    let tsdb = crate::Tsdb::new(store.clone(), retention);
    let org = store.create_org("P", Tier::Enterprise).await.unwrap();
    let day = 86_400_000;
    let start = (Timestamp::now().millis() / day) * day - 2 * HOUR;
    let score = plantd_model::ml_models::score_tag("m1");
    let points: Vec<Point> = ["T", score.as_str()]
        .into_iter()
        .flat_map(|tag| {
            (0..60).map(move |i| Point {
                asset_id: "A".into(),
                tag_name: tag.into(),
                value: i as f64,
                timestamp: Timestamp::from_millis(start + i * 60_000),
                quality: Quality::Good,
                data_source_id: None,
            })
        })
        .collect();
    tsdb.ingest(&org.id, std::sync::Arc::new(points), None)
        .await
        .unwrap();
    tsdb.seal_at(Timestamp::from_millis(start + 3 * HOUR))
        .await
        .unwrap();
    tsdb.enforce_retention(Timestamp::from_millis(start + 5 * day))
        .await
        .unwrap();
    assert_eq!(
        hour_counts(&tsdb, &org.id, "T", start).await,
        60,
        "another tag keeps its hours"
    );
    assert_eq!(
        hour_counts(&tsdb, &org.id, &score, start).await,
        0,
        "the predictions are gone"
    );
    if let Some(d) = dir {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// Points counted by the hour rollups of one series of asset `A` around `start`.
async fn hour_counts(tsdb: &crate::Tsdb, org: &str, tag: &str, start: i64) -> u64 {
    let day = 86_400_000;
    let f = crate::TelemetryFilter {
        tag_name: Some(tag.to_string()),
        ..filter("A", start - day, start + day)
    };
    let page = Page::new(None, Some(100)).unwrap();
    tsdb.query_aggregated(org, &f, Aggregation::Count, Some(HOUR), page)
        .await
        .unwrap()
        .items
        .iter()
        .map(|r| r.count)
        .sum()
}
