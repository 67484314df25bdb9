//! The tables of one query: each a scan of the organization's [`Source`] that evaluates the
//! caller's row-level-security condition on every batch before it leaves the scan. Nothing
//! above the scan (the user's filters, joins, aggregates, errors) ever sees a row the
//! condition hides, because no such row is produced.

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::catalog::memory::MemorySourceConfig;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::DFSchema;
use datafusion::datasource::TableType;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_expr::LexOrdering;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::{PartitionStream, StreamingTableExec};
use std::sync::Arc;

use crate::convert::{PointRows, keep, records_batch, rollup_batch};
use crate::pushdown::narrow;
use crate::source::{Series, Source};
use crate::tables::Table;

/// Rows a telemetry batch gathers (from one series or several) before it goes up the plan.
const BATCH_ROWS: usize = 8192;

/// Points a scan asks a source for at a time (it answers whole blocks, only the columns the
/// batch needs: a read ends at the first block that reaches this many points).
const READ_ROWS: usize = 65_536;

/// One table of one query: the organization's source, and the row-level-security condition
/// of the caller on this table (`None`: every row of the organization).
pub(crate) struct ScopedTable {
    pub table: Table,
    pub source: Arc<dyn Source>,
    pub rls: Option<Expr>,
    /// The query's partitions (cores); a telemetry scan reads at least 4 in parallel.
    pub partitions: usize,
}

impl std::fmt::Debug for ScopedTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ScopedTable({}, rls: {:?})", self.table.name(), self.rls)
    }
}

fn external(e: crate::source::SourceError) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

/// The condition, compiled for batches of the table.
type Condition = Option<Arc<dyn PhysicalExpr>>;

fn filtered(batch: RecordBatch, rls: &Condition) -> Result<RecordBatch> {
    match rls {
        None => Ok(batch),
        Some(cond) => {
            let mask = cond.evaluate(&batch)?.into_array(batch.num_rows())?;
            keep(&batch, &mask)
        }
    }
}

#[async_trait]
impl TableProvider for ScopedTable {
    fn schema(&self) -> SchemaRef {
        self.table.schema()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    /// Every filter narrows the read where it can and is still applied above the scan.
    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if self.table == Table::Telemetry {
            return self.telemetry_scan(state, projection, filters, limit).await;
        }
        let schema = self.table.schema();
        let rls = self.condition(state, &schema)?;
        let batch = if let Some(width) = self.table.rollup_width() {
            let n = narrow(filters, "bucket");
            // Whole buckets: from the one holding `lo` to the one after `hi`, within the
            // years storage can hold.
            let lo = n.lo.max(0).div_euclid(width) * width;
            let hi =
                n.hi.min(4_102_444_800_000)
                    .saturating_add(width - 1)
                    .div_euclid(width)
                    * width;
            let rows = self
                .source
                .rollups(width, &n.scope, lo, hi)
                .await
                .map_err(external)?;
            rollup_batch(&schema, &rows)?
        } else {
            let records = self.source.records(self.table).await.map_err(external)?;
            records_batch(&schema, self.table.columns(), &records)?
        };
        let batch = filtered(batch, &rls)?;
        Ok(MemorySourceConfig::try_new_exec(
            &[vec![batch]],
            schema,
            projection.cloned(),
        )?)
    }
}

impl ScopedTable {
    /// The caller's condition compiled for batches of `schema`.
    fn condition(&self, state: &dyn Session, schema: &SchemaRef) -> Result<Condition> {
        Ok(match &self.rls {
            Some(e) => {
                Some(state.create_physical_expr(
                    e.clone(),
                    &DFSchema::try_from(schema.as_ref().clone())?,
                )?)
            }
            None => None,
        })
    }

    /// A scan of raw points building only the columns the query and the caller's condition
    /// read: the condition sees its columns, the plan above only the projection's.
    async fn telemetry_scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let schema = self.table.schema();
        let wanted: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..schema.fields().len()).collect(),
        };
        let mut needed = wanted.clone();
        if let Some(e) = &self.rls {
            for c in e.column_refs() {
                needed.push(schema.index_of(&c.name)?);
            }
        }
        needed.sort_unstable();
        needed.dedup();
        let read = Arc::new(schema.project(&needed)?);
        let out = Arc::new(schema.project(&wanted)?);
        // Where each wanted column sits in the read batch.
        let positions: Vec<usize> = wanted
            .iter()
            .map(|w| needed.iter().position(|n| n == w).unwrap_or_default())
            .collect();
        let rls = self.condition(state, &read)?;
        let n = narrow(filters, "timestamp");
        let series = self.source.series(&n.scope).await.map_err(external)?;
        // At least 4 partitions: each waits on its own database reads, so they overlap even on
        // 2 cores.
        let parts = self.partitions.max(4).min(series.len().max(1));
        let mut shares: Vec<Vec<Series>> = vec![Vec::new(); parts];
        for (i, s) in series.into_iter().enumerate() {
            shares[i % parts].push(s);
        }
        let streams: Vec<Arc<dyn PartitionStream>> = shares
            .into_iter()
            .map(|series| {
                Arc::new(PointStream {
                    read: read.clone(),
                    out: out.clone(),
                    needed: needed.clone(),
                    positions: positions.clone(),
                    source: self.source.clone(),
                    series: Arc::new(Share::of(series)),
                    range: (n.lo, n.hi),
                    rls: rls.clone(),
                }) as Arc<dyn PartitionStream>
            })
            .collect();
        Ok(Arc::new(StreamingTableExec::try_new(
            out,
            streams,
            None,
            Vec::<LexOrdering>::new(),
            false,
            limit,
        )?))
    }
}

/// A partition's series, by id (a source reads many series a statement in that order), with
/// their asset and tag names.
struct Share {
    ids: Vec<i64>,
    names: Vec<(Arc<str>, Arc<str>)>,
}

impl Share {
    fn of(mut list: Vec<Series>) -> Self {
        list.sort_unstable_by_key(|s| s.id);
        Self {
            ids: list.iter().map(|s| s.id).collect(),
            names: list
                .into_iter()
                .map(|s| (Arc::from(s.asset_id), Arc::from(s.tag_name)))
                .collect(),
        }
    }

    fn len(&self) -> usize {
        self.ids.len()
    }
}

/// One partition of a telemetry scan: its share of the series, read many a statement, series
/// after series.
struct PointStream {
    /// The columns read (the table's at `needed`), which the condition sees.
    read: SchemaRef,
    /// The columns the plan above reads: the read batch's at `positions`.
    out: SchemaRef,
    needed: Vec<usize>,
    positions: Vec<usize>,
    source: Arc<dyn Source>,
    series: Arc<Share>,
    range: (i64, i64),
    rls: Condition,
}

impl std::fmt::Debug for PointStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PointStream({} series)", self.series.len())
    }
}

impl PartitionStream for PointStream {
    fn schema(&self) -> &SchemaRef {
        &self.out
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let (read, needed, positions) = (
            self.read.clone(),
            self.needed.clone(),
            self.positions.clone(),
        );
        let source = self.source.clone();
        let series = self.series.clone();
        let (lo, hi) = self.range;
        let rls = self.rls.clone();
        // The cursor: the first series not read whole, and the last timestamp read of it when a
        // read stopped inside it.
        let start: (usize, Option<i64>) = (0, None);
        let batches = futures::stream::try_unfold(start, move |(mut next, mut resume)| {
            let (read, needed, positions, source, series, rls) = (
                read.clone(),
                needed.clone(),
                positions.clone(),
                source.clone(),
                series.clone(),
                rls.clone(),
            );
            async move {
                let mut rows = PointRows::new(&needed);
                while next < series.len() && rows.len() < BATCH_ROWS {
                    // Many series a read; a series a read stopped inside goes on alone.
                    let (ids, after) = match resume {
                        Some(t) => (&series.ids[next..=next], t),
                        None => (&series.ids[next..], lo.saturating_sub(1)),
                    };
                    let got = source
                        .points(ids, (after, hi), READ_ROWS, rows.fields())
                        .await
                        .map_err(external)?;
                    let mut at = next;
                    let mut runs = Vec::with_capacity(got.runs.len());
                    for (id, n) in got.runs {
                        at += series.ids[at..]
                            .iter()
                            .position(|x| *x == id)
                            .unwrap_or_default();
                        let (asset, tag) = &series.names[at];
                        runs.push((n, asset.clone(), tag.clone()));
                    }
                    rows.push(runs, got.columns);
                    match got.stopped {
                        // The read stops in the series of its last run, whose place `at` is.
                        Some((_, t)) => {
                            next = at;
                            resume = Some(t);
                        }
                        None => {
                            next += ids.len();
                            resume = None;
                        }
                    }
                }
                if rows.len() == 0 {
                    return Ok(None);
                }
                let batch = filtered(rows.finish(&read)?, &rls)?.project(&positions)?;
                Ok(Some((batch, (next, resume))))
            }
        });
        Box::pin(RecordBatchStreamAdapter::new(self.out.clone(), batches))
    }
}
