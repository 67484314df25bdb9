//! A database of the first layout (a row per point) is converted, read and written.

use super::*;

/// Telemetry written by schema version 6 reads the same after the upgrade, and new points
/// update its rollups.
#[tokio::test]
async fn telemetry_of_a_version_6_database_reads_and_grows_after_the_upgrade() {
    let (url, dir, _) = plantd_store::testing::version_6_database().await;
    let store = Store::connect(&url).await.unwrap();
    let org = store.first_org().await.unwrap().unwrap().id;
    let tsdb = Tsdb::new(store.clone(), Retention::default());
    // At first use the rows of version 6 become blocks, once.
    assert_eq!(tsdb.upgrade().await.unwrap(), 240);
    assert_eq!(block_count(&store).await, (4, 0));
    let start = Timestamp::parse("2026-11-23T12:00:00Z").unwrap().millis();
    let mut f = filter("Pump_01", start - DAY, start + DAY);
    f.tag_name = Some("Flow_Rate".into());
    let hourly = |rows: Vec<crate::AggregatedRow>| -> Vec<(i64, f64, u64)> {
        rows.iter()
            .map(|r| (r.timestamp.millis(), r.value, r.count))
            .collect()
    };
    let got = all_aggregates(&tsdb, &org, &f, Aggregation::Avg, Some(HOUR)).await;
    assert_eq!(
        hourly(got),
        [(start, 237.375, 60), (start + HOUR, 252.375, 60)]
    );
    let raw = tsdb
        .query_raw(
            &org,
            &filter("Pump_01", start, start + 2 * HOUR),
            Page::default(),
        )
        .await
        .unwrap();
    assert_eq!(raw.total, 240);
    let latest = tsdb
        .latest(&org, "Pump_01", Some(&["Flow_Rate".to_string()]))
        .await
        .unwrap();
    assert_eq!(latest[0].value, 259.75);
    // A replaced point recomputes the hour from the upgraded rows.
    let last = start + HOUR + 59 * 60_000;
    let mut replaced = (*points("Pump_01", [(last, 319.75)])).clone();
    replaced[0].tag_name = "Flow_Rate".into();
    tsdb.ingest(&org, Arc::new(replaced), None).await.unwrap();
    let got = all_aggregates(&tsdb, &org, &f, Aggregation::Avg, Some(HOUR)).await;
    assert_eq!(
        hourly(got),
        [(start, 237.375, 60), (start + HOUR, 253.375, 60)]
    );
    if let Some(d) = dir {
        let _ = std::fs::remove_dir_all(d);
    }
}
