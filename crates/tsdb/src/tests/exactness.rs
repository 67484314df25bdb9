//! Rollups stay exact under late, out-of-order and replaced points, and a group commit writes what committing its batches in turn would have written.

use super::*;

/// Rollups answer exactly what the raw points give, for every aggregation and interval, after
/// points arrived shuffled (later batches carrying earlier times), late and replaced.
#[tokio::test]
async fn rollups_are_exact_under_late_out_of_order_and_replaced_points() {
    let (tsdb, _store, org, dir) = fresh(Retention::default()).await;
    let b = (Timestamp::now().millis() / DAY) * DAY - 2 * DAY;
    let mut expected: BTreeMap<i64, f64> = BTreeMap::new();
    // Three hours and more across a day boundary, every 20 s, sent in shuffled batches.
    let times: Vec<i64> = (0..600)
        .map(|i| b + 22 * HOUR + i * 20_000 + (i % 3) * 7)
        .collect();
    let mut order: Vec<usize> = (0..times.len()).collect();
    order.sort_by_key(|&i| (i * 7_919) % times.len());
    for chunk in order.chunks(97) {
        let batch: Vec<(i64, f64)> = chunk
            .iter()
            .map(|&i| (times[i], value_at(i as i64)))
            .collect();
        expected.extend(batch.iter().copied());
        let n = batch.len();
        assert_eq!(
            tsdb.ingest(&org, points("P", batch), None).await.unwrap(),
            n
        );
    }
    // The windows are closed: sealing merges their head blocks into one compressed block each,
    // then each day's two hours (180 points each) into one block.
    tsdb.seal().await.unwrap();
    assert_eq!(
        block_count(&_store).await,
        (2, 0),
        "one sealed block per day"
    );
    let minutes = minute_state(&_store).await;
    assert_eq!((minutes.0, minutes.1), (4, 0), "minutes packed per hour");
    assert_raw_equals(&tsdb, &org, &expected, b, b + 2 * DAY).await;
    // Replace every 13th point, late, with a new value: the days' blocks are split into their
    // hours, which are rewritten.
    let replaced: Vec<(i64, f64)> = times
        .iter()
        .step_by(13)
        .map(|&t| (t, 500.0 + (t % 100) as f64))
        .collect();
    expected.extend(replaced.iter().copied());
    tsdb.ingest(&org, points("P", replaced), None)
        .await
        .unwrap();
    assert_raw_equals(&tsdb, &org, &expected, b, b + 2 * DAY).await;
    // The packed hours the replacements touched were unpacked (until the sealer packs them again).
    assert_aggregates_exact(&tsdb, &org, &expected, b).await;
    // One more point between stored ones, in a window of its own neighbours, then sealing again.
    let between = b + 23 * HOUR + 10_001;
    expected.insert(between, -1.5);
    tsdb.ingest(&org, points("P", [(between, -1.5)]), None)
        .await
        .unwrap();
    tsdb.seal().await.unwrap();
    assert_eq!(block_count(&_store).await, (2, 0));
    let minutes = minute_state(&_store).await;
    assert_eq!((minutes.0, minutes.1), (4, 0), "minutes packed again");
    assert_raw_equals(&tsdb, &org, &expected, b, b + 2 * DAY).await;
    assert_aggregates_exact(&tsdb, &org, &expected, b).await;
    if let Some(d) = dir {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// Every aggregation at every interval over whole, ragged and wide ranges of asset `P` (written
/// around `b + 22 h`) is what the `expected` points give.
async fn assert_aggregates_exact(tsdb: &Tsdb, org: &str, expected: &BTreeMap<i64, f64>, b: i64) {
    let ranges = [
        (b + 22 * HOUR, b + 26 * HOUR),
        // Ragged edges: the middle from coarse rollups, the ends from finer levels.
        (
            b + 22 * HOUR + 30 * 60_000 + 15_000,
            b + 25 * HOUR + 45 * 60_000 + 500,
        ),
        (b, b + 48 * HOUR),
    ];
    for (start, end) in ranges {
        let f = filter("P", start, end);
        for width in [Some(60_000), Some(300_000), Some(HOUR), Some(DAY), None] {
            let mut buckets: BTreeMap<i64, Vec<f64>> = BTreeMap::new();
            for (&t, &v) in expected.range(start..end) {
                let bucket = width.map_or(start, |w| t.div_euclid(w) * w);
                buckets.entry(bucket).or_default().push(v);
            }
            for agg in [
                Aggregation::Avg,
                Aggregation::Min,
                Aggregation::Max,
                Aggregation::Sum,
                Aggregation::Count,
            ] {
                let got = all_aggregates(tsdb, org, &f, agg, width).await;
                let what = format!("{agg:?} per {width:?} over {start}..{end}");
                assert_eq!(got.len(), buckets.len(), "{what}");
                for (row, (bucket, values)) in got.iter().zip(&buckets) {
                    assert_eq!(row.timestamp.millis(), *bucket, "{what}");
                    assert_eq!(row.count as usize, values.len(), "{what} at {bucket}");
                    let want = aggregate(agg, values);
                    assert!(
                        (row.value - want).abs() <= 1e-9 * want.abs().max(1.0),
                        "{what} at {bucket}: {} != {want}",
                        row.value
                    );
                }
            }
        }
    }
}

/// Batches that meet in one group commit are stored exactly as if committed one after the other
/// in arrival order: later batches win repeated keys, and every rollup matches the raw points.
#[tokio::test]
async fn a_group_commit_equals_batches_committed_in_turn() {
    let (url, dir) = fresh_database().await;
    let store = Store::connect(&url).await.unwrap();
    let tsdb = crate::Tsdb::new(store.clone(), crate::Retention::default());
    let org = store.create_org("G", Tier::Enterprise).await.unwrap();
    let start = (Timestamp::now().millis() / HOUR) * HOUR - 3 * HOUR;
    let batch = |asset: &str, from: i64, to: i64, base: f64| -> Arc<Vec<Point>> {
        Arc::new(
            (from..to)
                .map(|i| Point {
                    asset_id: asset.into(),
                    tag_name: "T".into(),
                    value: base + i as f64,
                    timestamp: Timestamp::from_millis(start + i * 10_000),
                    quality: Quality::Good,
                    data_source_id: None,
                })
                .collect(),
        )
    };
    assert_eq!(
        tsdb.ingest(&org.id, batch("A", 0, 30, 0.0), None)
            .await
            .unwrap(),
        30
    );
    // On this single-threaded runtime the four batches queue before the writer runs, so they
    // form one group: replacing stored points, each other's new points, and (B) a series the
    // cache does not know yet.
    let (a1, a2, b1, b2) = tokio::join!(
        tsdb.ingest(&org.id, batch("A", 20, 50, 100.0), None),
        tsdb.ingest(&org.id, batch("A", 40, 70, 200.0), None),
        tsdb.ingest(&org.id, batch("B", 0, 40, 300.0), None),
        tsdb.ingest(&org.id, batch("B", 30, 60, 400.0), None),
    );
    assert_eq!(
        (a1.unwrap(), a2.unwrap(), b1.unwrap(), b2.unwrap()),
        (30, 30, 40, 30)
    );
    let expected = |asset: &str| -> Vec<(i64, f64)> {
        let (n, rule): (i64, &dyn Fn(i64) -> f64) = if asset == "A" {
            (70, &|i| match i {
                0..20 => i as f64,
                20..40 => 100.0 + i as f64,
                _ => 200.0 + i as f64,
            })
        } else {
            (60, &|i| {
                if i < 30 {
                    300.0 + i as f64
                } else {
                    400.0 + i as f64
                }
            })
        };
        (0..n).map(|i| (start + i * 10_000, rule(i))).collect()
    };
    let page = Page::new(None, Some(100)).unwrap();
    for asset in ["A", "B"] {
        let filter = filter(asset, start - 86_400_000, start + 86_400_000);
        let raw: Vec<(i64, f64)> = tsdb
            .query_raw(&org.id, &filter, page)
            .await
            .unwrap()
            .items
            .iter()
            .map(|r| (r.timestamp.millis(), r.value))
            .collect();
        let want = expected(asset);
        assert_eq!(raw, want, "raw {asset}");
        for width in [60_000, HOUR, 86_400_000] {
            let mut buckets: std::collections::BTreeMap<i64, Vec<f64>> = Default::default();
            for (t, v) in &want {
                buckets.entry(t - t.rem_euclid(width)).or_default().push(*v);
            }
            for (agg, f) in [
                (
                    Aggregation::Count,
                    (|v: &[f64]| v.len() as f64) as fn(&[f64]) -> f64,
                ),
                (Aggregation::Sum, |v| v.iter().sum()),
                (Aggregation::Min, |v| {
                    v.iter().copied().fold(f64::INFINITY, f64::min)
                }),
                (Aggregation::Max, |v| {
                    v.iter().copied().fold(f64::NEG_INFINITY, f64::max)
                }),
            ] {
                let got: Vec<(i64, f64)> = tsdb
                    .query_aggregated(&org.id, &filter, agg, Some(width), page)
                    .await
                    .unwrap()
                    .items
                    .iter()
                    .map(|r| (r.timestamp.millis(), r.value))
                    .collect();
                let wanted: Vec<(i64, f64)> = buckets.iter().map(|(b, vs)| (*b, f(vs))).collect();
                assert_eq!(got, wanted, "{asset} {agg:?} per {width} ms");
            }
        }
    }
    if let Some(d) = dir {
        let _ = std::fs::remove_dir_all(d);
    }
}
