//! Tests of the telemetry store called directly (no HTTP), on SQLite, and on PostgreSQL when
//! `PLANTD_TEST_DATABASE_URL` is set (CI runs them both ways): rollup exactness under late,
//! out-of-order and replaced points, group commits, retention, latest values across nodes.

use plantd_model::page::Page;
use plantd_model::telemetry::{Aggregation, Point, Quality};
use plantd_model::{Tier, Timestamp};
use plantd_store::Store;
use plantd_store::testing::{TEST_DATABASE_ENV, fresh_database};
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::{HOUR, Retention, TelemetryFilter, Tsdb};

const DAY: i64 = crate::DAY;

/// A fresh database with one organization: the store, the organization's id, and the
/// temporary directory to remove (SQLite).
async fn fresh(retention: Retention) -> (Tsdb, Store, String, Option<std::path::PathBuf>) {
    let (url, dir) = fresh_database().await;
    let store = Store::connect(&url).await.unwrap();
    let org = store.create_org("T", Tier::Enterprise).await.unwrap();
    (Tsdb::new(store.clone(), retention), store, org.id, dir)
}

fn points(asset: &str, values: impl IntoIterator<Item = (i64, f64)>) -> Arc<Vec<Point>> {
    Arc::new(
        values
            .into_iter()
            .map(|(t, v)| Point {
                asset_id: asset.into(),
                tag_name: "V".into(),
                value: v,
                timestamp: Timestamp::from_millis(t),
                quality: Quality::Good,
                data_source_id: None,
            })
            .collect(),
    )
}

fn filter(asset: &str, start: i64, end: i64) -> TelemetryFilter {
    TelemetryFilter {
        data_source_id: None,
        asset_id: Some(asset.into()),
        tag_name: None,
        start: Timestamp::from_millis(start),
        end: Timestamp::from_millis(end),
    }
}

/// Every series of the organization from `start` to `end`.
fn every_series(start: i64, end: i64) -> TelemetryFilter {
    TelemetryFilter {
        asset_id: None,
        ..filter("", start, end)
    }
}

/// What an aggregation of `values` must give.
fn aggregate(agg: Aggregation, values: &[f64]) -> f64 {
    match agg {
        Aggregation::Avg => values.iter().sum::<f64>() / values.len() as f64,
        Aggregation::Min => values.iter().copied().fold(f64::INFINITY, f64::min),
        Aggregation::Max => values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        Aggregation::Sum => values.iter().sum(),
        Aggregation::Count => values.len() as f64,
    }
}

/// Telemetry blocks stored: (all, head).
async fn block_count(store: &Store) -> (i64, i64) {
    use sqlx::Row;
    let row = sqlx::query(
        "SELECT COUNT(*) AS n, CAST(COALESCE(SUM(1 - sealed), 0) AS BIGINT) AS head FROM telemetry_block",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    (row.try_get("n").unwrap(), row.try_get("head").unwrap())
}

/// Minute rollups stored: (packed hours, minute rows, minutes in the packed hours).
async fn minute_state(store: &Store) -> (i64, i64, i64) {
    use sqlx::Row;
    let row = sqlx::query(
        "SELECT (SELECT COUNT(*) FROM telemetry_minute_block) AS blocks, \
         (SELECT COUNT(*) FROM telemetry_rollup WHERE level = 1) AS rows, \
         (SELECT CAST(COALESCE(SUM(minutes), 0) AS BIGINT) FROM telemetry_minute_block) AS minutes",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    (
        row.try_get("blocks").unwrap(),
        row.try_get("rows").unwrap(),
        row.try_get("minutes").unwrap(),
    )
}

/// The bytes of the packed minute blocks.
async fn packed_minute_bytes(store: &Store) -> u64 {
    use sqlx::Row;
    let row = sqlx::query(
        "SELECT CAST(COALESCE(SUM(LENGTH(data)), 0) AS BIGINT) AS n FROM telemetry_minute_block",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    row.try_get::<i64, _>("n").unwrap() as u64
}

/// Every raw point of asset `P` in the range, through the paged query and through the export's
/// reads, is `expected` there, bit for bit.
async fn assert_raw_equals(
    tsdb: &Tsdb,
    org: &str,
    expected: &BTreeMap<i64, f64>,
    start: i64,
    end: i64,
) {
    let want: Vec<(i64, u64)> = expected
        .range(start..end)
        .map(|(t, v)| (*t, v.to_bits()))
        .collect();
    let f = filter("P", start, end);
    let mut got = Vec::new();
    for page in 1.. {
        let page = Page::new(Some(page), Some(100)).unwrap();
        let rows = tsdb.query_raw(org, &f, page).await.unwrap();
        assert_eq!(rows.total as usize, want.len());
        if rows.items.is_empty() {
            break;
        }
        got.extend(
            rows.items
                .iter()
                .map(|r| (r.timestamp.millis(), r.value.to_bits())),
        );
    }
    assert_eq!(got, want, "paged raw points");
    let series = tsdb.series_of(org, &f, &[]).await.unwrap();
    let mut after = start - 1;
    let mut exported = Vec::new();
    loop {
        let part = tsdb
            .raw_of_series(series[0].0, after, end, 77)
            .await
            .unwrap();
        let Some(last) = part.last() else { break };
        after = last.0;
        exported.extend(part.iter().map(|(t, v, _)| (*t, v.to_bits())));
    }
    assert_eq!(exported, want, "exported raw points");
}

/// Every page of an aggregated query.
async fn all_aggregates(
    tsdb: &Tsdb,
    org: &str,
    f: &TelemetryFilter,
    agg: Aggregation,
    width: Option<i64>,
) -> Vec<crate::AggregatedRow> {
    let mut out = Vec::new();
    for page in 1.. {
        let page = Page::new(Some(page), Some(100)).unwrap();
        let got = tsdb
            .query_aggregated(org, f, agg, width, page)
            .await
            .unwrap();
        let total = got.total as usize;
        out.extend(got.items);
        if out.len() >= total {
            break;
        }
    }
    out
}

/// Deterministic values without a random number crate.
fn value_at(i: i64) -> f64 {
    ((i * 7919) % 1000) as f64 / 10.0 - 20.0
}

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
    // The windows are closed: sealing merges their head blocks into one compressed block each.
    tsdb.seal().await.unwrap();
    assert_eq!(
        block_count(&_store).await,
        (4, 0),
        "one sealed block per hour"
    );
    let minutes = minute_state(&_store).await;
    assert_eq!((minutes.0, minutes.1), (4, 0), "minutes packed per hour");
    assert_raw_equals(&tsdb, &org, &expected, b, b + 2 * DAY).await;
    // Replace every 13th point, late, with a new value: the sealed blocks are rewritten.
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
    assert_eq!(block_count(&_store).await, (4, 0));
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
    // The two hours are closed: their minutes are packed, a block per hour.
    tsdb.seal_at(Timestamp::from_millis(start + 3 * HOUR))
        .await
        .unwrap();
    assert_eq!(minute_state(&store).await, (2, 0, 120));
    // Storage for the quota: the points' blocks, the packed minutes and the hour and day rows,
    // counted from the database.
    let used = tsdb.storage_bytes(&org.id).await.unwrap();
    let rollups = 2 + 1;
    let packed = packed_minute_bytes(&store).await + 2 * crate::BLOCK_ROW_BYTES;
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

/// Two nodes on one fresh PostgreSQL database and an organization; `None` (the test is
/// skipped) without one.
async fn two_nodes(org: &str) -> Option<(Tsdb, Tsdb, plantd_model::org::Organization)> {
    if std::env::var(TEST_DATABASE_ENV).is_err() {
        eprintln!(
            "skipped: set {} to run the two-node test on PostgreSQL",
            TEST_DATABASE_ENV
        );
        return None;
    }
    let (url, _) = fresh_database().await;
    let store_a = Store::connect(&url).await.unwrap();
    let store_b = Store::connect(&url).await.unwrap();
    let org = store_a.create_org(org, Tier::Enterprise).await.unwrap();
    Some((
        Tsdb::new(store_a, Retention::default()),
        Tsdb::new(store_b, Retention::default()),
        org,
    ))
}

/// Two nodes on one PostgreSQL database: each answers `latest` from memory, and one node's
/// ingest reaches the other's cache (announced with the commit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latest_values_in_memory_follow_other_nodes_on_postgresql() {
    let Some((node_a, node_b, org)) = two_nodes("L").await else {
        return;
    };
    let now = Timestamp::now().millis();
    let one = |tag: &str, value: f64, at: i64| {
        Arc::new(vec![Point {
            asset_id: "Pump".into(),
            tag_name: tag.into(),
            value,
            timestamp: Timestamp::from_millis(at),
            quality: Quality::Good,
            data_source_id: None,
        }])
    };
    let b_sees = |tag: &'static str, value: f64| {
        let (node_b, org) = (&node_b, org.id.clone());
        async move {
            // Delivery takes milliseconds; the bound only keeps a broken setup from hanging.
            for _ in 0..200 {
                let latest = node_b.latest(&org, "Pump", None).await.unwrap();
                if latest.iter().any(|l| l.tag_name == tag && l.value == value) {
                    return true;
                }
                tokio::time::sleep(std::time::Duration::from_millis(25)).await;
            }
            false
        }
    };
    node_a
        .ingest(&org.id, one("T", 1.0, now - 2000), None)
        .await
        .unwrap();
    assert!(b_sees("T", 1.0).await);
    // B's listener is up: from now on B answers from memory.
    for _ in 0..200 {
        if node_b.latest_from_memory() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(node_b.latest_from_memory());
    node_b.latest(&org.id, "Pump", None).await.unwrap();
    node_a.latest(&org.id, "Pump", None).await.unwrap();
    // A newer value, and a new tag, written by A reach B's cached entry.
    node_a
        .ingest(&org.id, one("T", 2.0, now - 1000), None)
        .await
        .unwrap();
    assert!(b_sees("T", 2.0).await, "B kept a stale latest value");
    node_a
        .ingest(&org.id, one("P", 7.0, now - 1000), None)
        .await
        .unwrap();
    assert!(b_sees("P", 7.0).await, "B missed a new tag");
    // B's own writes are in its memory at once.
    node_b
        .ingest(&org.id, one("T", 3.0, now), None)
        .await
        .unwrap();
    let latest = node_b.latest(&org.id, "Pump", None).await.unwrap();
    assert!(latest.iter().any(|l| l.tag_name == "T" && l.value == 3.0));
    // And A, which cached the asset before B wrote, follows B.
    let mut a_saw = false;
    for _ in 0..200 {
        let latest = node_a.latest(&org.id, "Pump", None).await.unwrap();
        if latest.iter().any(|l| l.tag_name == "T" && l.value == 3.0) {
            a_saw = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(a_saw, "A kept a stale latest value");
}

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

/// At plant scale, through the telemetry log: 2,000 series sent as a scan sends them (every
/// series in every batch, batches out of order, some points replaced later), flushed in many
/// small transactions while ingest goes on, with the log held to a small budget. Every series'
/// count, sum, minimum and maximum, per minute and over the whole range, is what its points
/// give; ingest waited for room rather than let the log grow past the budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_series_stay_exact_through_the_log() {
    const SERIES: i64 = 2_000;
    const SCANS: i64 = 24;
    const BUDGET: u64 = 12_000;
    let (tsdb, _store, org, dir) = fresh(Retention::default()).await;
    tsdb.set_log_limits(5_000, BUDGET);
    let b = (Timestamp::now().millis() / HOUR) * HOUR - 3 * HOUR;
    let point = |s: i64, t: i64, v: f64| Point {
        asset_id: format!("A{}", s / 10),
        tag_name: format!("T{}", s % 10),
        value: v,
        timestamp: Timestamp::from_millis(t),
        quality: Quality::Good,
        data_source_id: None,
    };
    let mut expected: BTreeMap<(i64, i64), f64> = BTreeMap::new();
    // Scans 20 s apart, sent in a shuffled order, two scans per batch.
    let mut scans: Vec<i64> = (0..SCANS).collect();
    scans.sort_by_key(|i| (i * 7) % SCANS);
    for pair in scans.chunks(2) {
        let mut batch = Vec::new();
        for &scan in pair {
            for s in 0..SERIES {
                let (t, v) = (b + scan * 20_000, value_at(s * SCANS + scan));
                expected.insert((s, t), v);
                batch.push(point(s, t, v));
            }
        }
        let n = batch.len() as u64;
        tsdb.ingest(&org, Arc::new(batch), None).await.unwrap();
        assert!(
            tsdb.log_backlog() < BUDGET + n,
            "the log holds {} points",
            tsdb.log_backlog()
        );
    }
    // Every 7th series has its third scan replaced.
    let mut late = Vec::new();
    for s in (0..SERIES).step_by(7) {
        let t = b + 2 * 20_000;
        expected.insert((s, t), -7.5 - s as f64);
        late.push(point(s, t, -7.5 - s as f64));
    }
    tsdb.ingest(&org, Arc::new(late), None).await.unwrap();

    let all = every_series(b, b + HOUR);
    for width in [None, Some(60_000)] {
        let got = tsdb.query_buckets(&org, &all, width).await.unwrap();
        let mut want: BTreeMap<(String, String, i64), Vec<f64>> = BTreeMap::new();
        for ((s, t), v) in &expected {
            let bucket = width.map_or(b, |w| t.div_euclid(w) * w);
            want.entry((format!("A{}", s / 10), format!("T{}", s % 10), bucket))
                .or_default()
                .push(*v);
        }
        assert_eq!(got.len(), want.len(), "buckets per {width:?}");
        for bucket in &got {
            let values = &want[&(
                bucket.asset_id.clone(),
                bucket.tag_name.clone(),
                bucket.start.millis(),
            )];
            let what = format!(
                "{}/{} at {}",
                bucket.asset_id,
                bucket.tag_name,
                bucket.start.millis()
            );
            assert_eq!(bucket.stats.count as usize, values.len(), "{what}");
            assert!(
                (bucket.stats.sum - values.iter().sum::<f64>()).abs() < 1e-6,
                "{what}"
            );
            assert_eq!(
                bucket.stats.min,
                aggregate(Aggregation::Min, values),
                "{what}"
            );
            assert_eq!(
                bucket.stats.max,
                aggregate(Aggregation::Max, values),
                "{what}"
            );
        }
    }
    // Raw points of one series, and the latest values, are the last written.
    let f = TelemetryFilter {
        asset_id: Some("A0".into()),
        tag_name: Some("T0".into()),
        ..all.clone()
    };
    let raw = tsdb
        .query_raw(&org, &f, Page::new(Some(1), Some(100)).unwrap())
        .await
        .unwrap();
    let want: Vec<(i64, f64)> = expected
        .range((0, 0)..(1, 0))
        .map(|((_, t), v)| (*t, *v))
        .collect();
    let got: Vec<(i64, f64)> = raw
        .items
        .iter()
        .map(|r| (r.timestamp.millis(), r.value))
        .collect();
    assert_eq!(got, want);
    let latest = tsdb.latest(&org, "A0", None).await.unwrap();
    assert_eq!(latest.len(), 10);
    assert_eq!(tsdb.log_backlog(), 0, "reads flushed the log");
    if let Some(d) = dir {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// Two nodes on one PostgreSQL database: a point acknowledged by node A is in node B's queries
/// at once (B flushes A's log records before it reads), while A's flusher may run too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_node_reads_what_one_node_acknowledged_at_once() {
    let Some((node_a, node_b, org)) = two_nodes("R").await else {
        return;
    };
    let start = (Timestamp::now().millis() / HOUR) * HOUR - HOUR;
    let mut sent = 0;
    for round in 0..20_i64 {
        let batch: Vec<(i64, f64)> = (0..50)
            .map(|i| (start + (round * 50 + i) * 1_000, (round * 50 + i) as f64))
            .collect();
        sent += batch.len();
        node_a
            .ingest(&org.id, points("P", batch), None)
            .await
            .unwrap();
        let f = filter("P", start, start + HOUR);
        let count = node_b
            .query_aggregated(
                &org.id,
                &f,
                Aggregation::Count,
                None,
                Page::new(None, None).unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(count.items[0].value as usize, sent, "round {round}");
        let raw = node_b
            .query_raw(&org.id, &f, Page::new(Some(1), Some(1)).unwrap())
            .await
            .unwrap();
        assert_eq!(raw.total as usize, sent, "round {round}");
    }
    node_a.flush().await.unwrap();
    node_b.flush().await.unwrap();
    assert_eq!(node_b.log_backlog(), 0);
}

/// A SQLite flush that stops between its slices (a crash) leaves its records in the log; the
/// next flush writes them all again, and every count, sum and value is what was sent once.
#[tokio::test]
async fn a_flush_stopped_between_slices_is_written_again_exactly() {
    let (tsdb, store, org, dir) = fresh(Retention::default()).await;
    if store.backend() != plantd_store::Backend::Sqlite {
        return;
    }
    let b = (Timestamp::now().millis() / HOUR) * HOUR - 2 * HOUR;
    // 5,000 series of 8 points: several slices.
    let mut batch = Vec::new();
    for s in 0..5_000_i64 {
        for k in 0..8_i64 {
            batch.push(Point {
                asset_id: format!("A{s}"),
                tag_name: "V".into(),
                value: (s * 8 + k) as f64,
                timestamp: Timestamp::from_millis(b + k * 1_000),
                quality: Quality::Good,
                data_source_id: None,
            });
        }
    }
    tsdb.ingest(&org, Arc::new(batch), None).await.unwrap();
    let stop = &tsdb.log_state().stop_after_slice;
    stop.store(true, std::sync::atomic::Ordering::Release);
    // This flush, or the background one if it came first, stops after the first slice.
    if tsdb.flush().await.is_err() {
        assert_eq!(tsdb.log_backlog(), 40_000, "its records stay");
    }
    assert!(
        !stop.load(std::sync::atomic::Ordering::Acquire),
        "a flush stopped between slices"
    );
    tsdb.flush().await.unwrap();
    assert_eq!(tsdb.log_backlog(), 0);
    let all = every_series(b, b + HOUR);
    let buckets = tsdb.query_buckets(&org, &all, None).await.unwrap();
    assert_eq!(buckets.len(), 5_000);
    for bucket in &buckets {
        let s: i64 = bucket.asset_id[1..].parse().unwrap();
        assert_eq!(bucket.stats.count, 8, "{}", bucket.asset_id);
        assert_eq!(
            bucket.stats.sum,
            (0..8).map(|k| (s * 8 + k) as f64).sum::<f64>()
        );
    }
    let raw = tsdb
        .query_raw(&org, &all, Page::new(Some(1), Some(1)).unwrap())
        .await
        .unwrap();
    assert_eq!(raw.total, 40_000);
    if let Some(d) = dir {
        let _ = std::fs::remove_dir_all(d);
    }
}
