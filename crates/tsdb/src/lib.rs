//! Telemetry storage: raw points per series plus minute, hour and day rollups (count, sum, min,
//! max) recomputed exactly for the buckets each batch touches, so late, out-of-order and replaced
//! points never leave a rollup wrong. Queries split their time range so that aligned middle parts
//! come from the coarsest rollup that answers exactly and the ragged edges from finer levels.
//! Latest values are kept in memory. Retention deletes each level after its configured age.

mod ingest;
mod latest;
mod query;
mod retention;
mod storage;

pub use latest::LatestValue;
pub use query::{AggregatedRow, RawRow, TelemetryFilter};
pub use retention::{Retention, RetentionReport};
pub use storage::{RAW_POINT_BYTES, ROLLUP_ROW_BYTES, over_quota};

use plantd_store::{Backend, Store};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

pub const MINUTE: i64 = 60_000;
pub const HOUR: i64 = 3_600_000;
pub const DAY: i64 = 86_400_000;

/// Rollup levels as stored: (level, bucket width in ms), finest first.
pub(crate) const LEVELS: [(i16, i64); 3] = [(1, MINUTE), (2, HOUR), (3, DAY)];

#[derive(Debug, thiserror::Error)]
pub enum TsdbError {
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("storage error: {0}")]
    Store(String),
}

impl TsdbError {
    pub(crate) fn from_store(e: plantd_store::StoreError) -> Self {
        match e {
            plantd_store::StoreError::Database(d) => TsdbError::Database(d),
            other => TsdbError::Store(other.to_string()),
        }
    }
}

pub type Result<T> = std::result::Result<T, TsdbError>;

/// Series ids by (organization, asset, tag), with the data source each is linked to.
pub(crate) type SeriesKey = (String, String, String);
/// A series' id and the data source it is linked to.
pub(crate) type SeriesEntry = (i64, Option<String>);

pub struct Tsdb {
    shared: Arc<Shared>,
    /// The ingest writer's queue, started with the first batch.
    writer: OnceLock<tokio::sync::mpsc::Sender<ingest::Job>>,
}

/// What the ingest writer task shares with the handle.
pub(crate) struct Shared {
    store: Store,
    retention: Retention,
    series: Mutex<HashMap<SeriesKey, SeriesEntry>>,
    latest: Arc<latest::LatestCache>,
    storage: storage::StorageUsage,
}

impl Tsdb {
    pub fn new(store: Store, retention: Retention) -> Self {
        // Latest values are served from memory. On SQLite this process sees every write; on
        // PostgreSQL the cache is trusted once its listener hears the other nodes' writes.
        let trusted = store.backend() == Backend::Sqlite;
        Self {
            shared: Arc::new(Shared {
                store,
                retention,
                series: Mutex::default(),
                latest: Arc::new(latest::LatestCache::new(trusted)),
                storage: Default::default(),
            }),
            writer: OnceLock::new(),
        }
    }

    pub fn retention(&self) -> &Retention {
        &self.shared.retention
    }

    pub(crate) fn pool(&self) -> &sqlx::AnyPool {
        self.shared.store.pool()
    }
}

/// Floor of `t` to a multiple of `w` (timestamps are never negative here).
pub(crate) fn floor_to(t: i64, w: i64) -> i64 {
    t.div_euclid(w) * w
}

/// Groups sorted, distinct bucket starts into ranges `[lo, hi)`, splitting where the gap is wide,
/// so one statement recomputes a contiguous stretch without rereading a long empty span.
pub(crate) fn runs(buckets: &[i64], width: i64) -> Vec<(i64, i64)> {
    let mut out: Vec<(i64, i64)> = Vec::new();
    for &b in buckets {
        match out.last_mut() {
            Some((_, hi)) if b - *hi <= 60 * width => *hi = b + width,
            _ => out.push((b, b + width)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_split_on_wide_gaps() {
        assert_eq!(runs(&[0, 60_000, 120_000], MINUTE), vec![(0, 180_000)]);
        assert_eq!(
            runs(&[0, 100 * MINUTE], MINUTE),
            vec![(0, MINUTE), (100 * MINUTE, 101 * MINUTE)]
        );
        assert_eq!(floor_to(3_599_999, HOUR), 0);
    }
}
