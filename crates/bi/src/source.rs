//! What the engine reads, and from whom: the application implements [`Source`] over its
//! storage for one organization (every call answers that organization's rows only), so this
//! crate needs no database.

use async_trait::async_trait;

use crate::tables::Table;

/// A source's failure, with the message to show (the engine adds no detail).
#[derive(Debug)]
pub struct SourceError(pub String);

impl std::fmt::Display for SourceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SourceError {}

/// Which series a scan reads: every series when a list is `None`, else only those assets /
/// tags (what the query's filters fixed).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SeriesScope {
    pub assets: Option<Vec<String>>,
    pub tags: Option<Vec<String>>,
}

/// A series of the organization: its storage id, asset and tag.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub id: i64,
    pub asset_id: String,
    pub tag_name: String,
}

/// Points as columns, by time within a series (quality as its code: 0 good, 1 uncertain,
/// 2 bad).
#[derive(Clone, Debug, Default)]
pub struct PointColumns {
    pub ts: Vec<i64>,
    pub values: Vec<f64>,
    pub quality: Vec<i16>,
}

/// Which columns of the points a read fills (the others stay empty).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PointFields {
    pub timestamps: bool,
    pub values: bool,
    pub quality: bool,
}

/// Points of several series, series after series.
#[derive(Clone, Debug, Default)]
pub struct PointRead {
    /// Each series' run of rows, in order: its id and how many.
    pub runs: Vec<(i64, usize)>,
    /// The columns of every row (those not asked for are empty).
    pub columns: PointColumns,
    /// Where the read stopped before the end: the series (that of the last run), and the time
    /// after which the next read of it goes on.
    pub stopped: Option<(i64, i64)>,
}

/// One bucket of a rollup table.
#[derive(Clone, Debug, PartialEq)]
pub struct RollupRow {
    pub bucket: i64,
    pub asset_id: String,
    pub tag_name: String,
    pub count: u64,
    pub sum: f64,
    pub min: f64,
    pub max: f64,
}

/// The organization's storage as the engine reads it. Every method answers only the
/// organization the source was made for.
#[async_trait]
pub trait Source: Send + Sync + 'static {
    /// The series in `scope` (every point acknowledged before the call is readable after it).
    async fn series(&self, scope: &SeriesScope) -> Result<Vec<Series>, SourceError>;

    /// The points of the series `series` (ids [`Source::series`] gave, ascending) with
    /// `after < ts < end`, series after series, each series' by time, only the columns of
    /// `fields` filled: at least `limit` points unless every series was read whole (then
    /// `stopped` is `None`).
    async fn points(
        &self,
        series: &[i64],
        (after, end): (i64, i64),
        limit: usize,
        fields: PointFields,
    ) -> Result<PointRead, SourceError>;

    /// The buckets `width` ms wide of the series in `scope` with `lo <= bucket < hi`
    /// (`lo` and `hi` aligned to `width`).
    async fn rollups(
        &self,
        width: i64,
        scope: &SeriesScope,
        lo: i64,
        hi: i64,
    ) -> Result<Vec<RollupRow>, SourceError>;

    /// The records of a record table, each a JSON object holding (at least) the table's
    /// columns by name.
    async fn records(&self, table: Table) -> Result<Vec<serde_json::Value>, SourceError>;
}
