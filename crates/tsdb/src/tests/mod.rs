//! Tests of the telemetry store called directly (no HTTP), on SQLite, and on PostgreSQL when
//! `PLANTD_TEST_DATABASE_URL` is set (CI runs them both ways), a file per concept: rollup
//! exactness and group commits, retention, two nodes, the upgrade in place, sealing, the
//! telemetry log. This file holds what they share.

use plantd_model::page::Page;
use plantd_model::telemetry::{Aggregation, Point, Quality};
use plantd_model::{Tier, Timestamp};
use plantd_store::Store;
use plantd_store::testing::{TEST_DATABASE_ENV, fresh_database};
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::{HOUR, Retention, TelemetryFilter, Tsdb};

const DAY: i64 = crate::DAY;

mod exactness;
mod log;
mod nodes;
mod outbox;
mod retention;
mod sealing;
mod upgrade;

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

/// The bytes of the packed rollup blocks of `table` (`telemetry_minute_block`,
/// `telemetry_hour_block`).
async fn packed_bytes(store: &Store, table: &str) -> u64 {
    use sqlx::Row;
    let sql = format!("SELECT CAST(COALESCE(SUM(LENGTH(data)), 0) AS BIGINT) AS n FROM {table}");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
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
