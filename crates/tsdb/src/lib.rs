//! Telemetry storage: raw points per series plus minute, hour and day rollups (count, sum, min,
//! max) recomputed exactly for the buckets each batch touches, so late, out-of-order and replaced
//! points never leave a rollup wrong. Queries split their time range so that aligned middle parts
//! come from the coarsest rollup that answers exactly and the ragged edges from finer levels.
//! Latest values are kept in memory. Retention deletes each level after its configured age.
//! This crate holds all telemetry SQL; this file only declares and re-exports.

mod block;
mod blocks;
mod compact;
mod decoded;
mod error;
mod flush;
mod ingest;
mod latest;
mod levels;
mod log;
mod outbox;
mod query;
mod retention;
mod rollups;
mod seal;
mod sql;
mod state;
mod storage;
#[cfg(test)]
mod tests;
mod tsdb;
mod upgrade;

pub use block::PointFields;
pub use decoded::{SCAN_CACHE_BYTES, ScanCacheStats};
pub use error::{Result, TsdbError};
pub use latest::LatestValue;
pub use levels::{BucketStats, DAY, HOUR, MINUTE};
pub use outbox::{OutboxCount, OutboxRecord};
pub use query::{AggregatedRow, Bucket, RawRow, SeriesPoints, TelemetryFilter};
pub use retention::{Retention, RetentionReport};
pub use storage::{BLOCK_ROW_BYTES, RAW_POINT_BYTES, ROLLUP_ROW_BYTES, over_quota};
pub use tsdb::Tsdb;
