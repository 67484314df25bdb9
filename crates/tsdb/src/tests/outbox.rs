//! The edge agent's outbox: while forwarding is on, every acknowledged batch is kept there too
//! (with its points' names and quality), read oldest first in id ranges, deleted once
//! forwarded, and dropped by the raw retention; with forwarding off nothing is kept.

use super::*;

#[tokio::test]
async fn acknowledged_batches_wait_in_the_outbox_until_forwarded() {
    let (tsdb, _store, org, dir) = fresh(Retention::default()).await;
    let now = Timestamp::now().millis();
    // Off: nothing kept.
    tsdb.ingest(&org, points("Before", [(now - 5_000, 1.0)]), None)
        .await
        .unwrap();
    assert_eq!(tsdb.outbox_count().await.unwrap().records, 0);

    tsdb.set_forwarding(true);
    let mut bad = (*points("Pump", [(now - 3_000, 2.0), (now - 2_000, 3.0)])).clone();
    bad[1].quality = Quality::Bad;
    tsdb.ingest(&org, Arc::new(bad), None).await.unwrap();
    tsdb.ingest(&org, points("Motor", [(now - 1_000, 4.0)]), None)
        .await
        .unwrap();
    let count = tsdb.outbox_count().await.unwrap();
    assert_eq!((count.records, count.points), (2, 3));
    // The flusher writes the log into blocks; the outbox is not touched.
    tsdb.flush().await.unwrap();
    assert_eq!(tsdb.outbox_count().await.unwrap(), count);

    let all = tsdb.outbox_oldest(0, None, &[], 10_000).await.unwrap();
    assert_eq!(all.len(), 2);
    assert!(all[0].id < all[1].id);
    assert_eq!(all[0].org_id, org);
    let p = &all[0].points;
    assert_eq!(
        (p[0].asset_id.as_str(), p[0].tag_name.as_str(), p[0].value),
        ("Pump", "V", 2.0)
    );
    assert_eq!(p[1].quality, Quality::Bad);
    assert_eq!(p[1].timestamp.millis(), now - 2_000);
    // Ranges and skips: the backlog up to an id, the live records after it, in-flight ones left out.
    let first = all[0].id;
    let up_to = tsdb
        .outbox_oldest(0, Some(first), &[], 10_000)
        .await
        .unwrap();
    assert_eq!(up_to.len(), 1);
    let after = tsdb.outbox_oldest(first, None, &[], 10_000).await.unwrap();
    assert_eq!(after[0].points[0].asset_id, "Motor");
    let skipped = tsdb.outbox_oldest(0, None, &[first], 10_000).await.unwrap();
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].id, all[1].id);
    // At most about max_points, but always one record.
    assert_eq!(tsdb.outbox_oldest(0, None, &[], 1).await.unwrap().len(), 1);

    tsdb.outbox_forwarded(&[first]).await.unwrap();
    let count = tsdb.outbox_count().await.unwrap();
    assert_eq!(
        (count.records, count.points, count.newest_id),
        (1, 1, all[1].id)
    );

    // A batch older than the raw retention's reach is dropped unsent.
    let later = Timestamp::from_millis(now + 8 * DAY);
    let report = tsdb.enforce_retention(later).await.unwrap();
    assert_eq!(
        (report.outbox_records_deleted, report.outbox_points_deleted),
        (1, 1)
    );
    assert_eq!(tsdb.outbox_count().await.unwrap().records, 0);
    if let Some(d) = dir {
        let _ = std::fs::remove_dir_all(d);
    }
}
