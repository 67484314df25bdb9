//! The telemetry log: thousands of series exact through it, a flush stopped between slices written again exactly.

use super::*;

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
    // Every point of every series as a BI scan reads them: many series a statement, pages of
    // blocks ending inside a series, reads stopped by their limit inside a series.
    let mut ids: Vec<(i64, i64)> = tsdb
        .series_of(&org, &all, &[])
        .await
        .unwrap()
        .into_iter()
        .map(|(id, asset, tag)| {
            let n = |s: &str| s[1..].parse::<i64>().unwrap();
            (id, n(&asset) * 10 + n(&tag))
        })
        .collect();
    ids.sort_unstable();
    let series: Vec<i64> = ids.iter().map(|(id, _)| *id).collect();
    let (mut next, mut resume, mut reads) = (0, None, 0);
    let mut scanned: BTreeMap<(i64, i64), f64> = BTreeMap::new();
    while next < series.len() {
        let (slice, after) = match resume {
            Some(t) => (&series[next..=next], t),
            None => (&series[next..], b - 1),
        };
        let read = tsdb
            .points_of_series(slice, (after, b + HOUR), 5_000, crate::PointFields::ALL)
            .await
            .unwrap();
        reads += 1;
        // Whole blocks: a read stops at the first block that reaches its limit.
        assert!(read.points < 5_000 + 24, "{} points read", read.points);
        assert_eq!(
            (read.ts.len(), read.values.len(), read.quality.len()),
            (read.points, read.points, read.points)
        );
        let (mut at, mut row) = (next, 0);
        for (id, n) in &read.runs {
            at += series[at..].iter().position(|x| x == id).expect("in order");
            for k in row..row + n {
                assert_eq!(
                    scanned.insert((ids[at].1, read.ts[k]), read.values[k]),
                    None,
                    "read once"
                );
            }
            row += n;
        }
        assert_eq!(row, read.points);
        match read.stopped {
            Some((id, t)) => {
                next += series[next..].iter().position(|x| *x == id).unwrap();
                resume = Some(t);
            }
            None => {
                next += slice.len();
                resume = None;
            }
        }
    }
    assert_eq!(scanned, expected, "every point scanned, once");
    assert!(reads >= 48_000 / 5_000, "{reads} reads");
    // Values only, over a range that cuts blocks: no timestamp or quality decoded, the values
    // those in the range, series after series.
    let (lo, hi) = (b + 5 * 20_000, b + 20 * 20_000);
    let read = tsdb
        .points_of_series(
            &series,
            (lo - 1, hi),
            usize::MAX,
            crate::PointFields {
                timestamps: false,
                values: true,
                quality: false,
            },
        )
        .await
        .unwrap();
    assert!(read.ts.is_empty() && read.quality.is_empty() && read.stopped.is_none());
    let want: Vec<f64> = ids
        .iter()
        .flat_map(|(_, s)| {
            expected
                .range((*s, lo)..(*s, hi))
                .map(|(_, v)| *v)
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(read.values, want);
    assert_eq!(read.points, want.len());
    let latest = tsdb.latest(&org, "A0", None).await.unwrap();
    assert_eq!(latest.len(), 10);
    assert_eq!(tsdb.log_backlog(), 0, "reads flushed the log");
    if let Some(d) = dir {
        let _ = std::fs::remove_dir_all(d);
    }
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
