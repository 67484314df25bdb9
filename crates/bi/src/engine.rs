//! Running one query: a session built for the caller (its organization's tables, its
//! row-level-security conditions inside their scans), the SQL refused unless it is a query,
//! the answer cut at the row limit and the work cancelled at the time limit.

use datafusion::common::DFSchema;
use datafusion::execution::context::SQLOptions;
use datafusion::execution::disk_manager::{DiskManagerBuilder, DiskManagerMode};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::logical_expr::{Expr, ExprSchemable};
use datafusion::prelude::{SessionConfig, SessionContext};
use futures::StreamExt;
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::convert::rows_of;
use crate::error::BiError;
use crate::scan::ScopedTable;
use crate::source::Source;
use crate::tables::{TABLES, Table};

/// The limits of one query.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Rows the answer holds at most (`truncated` says when there were more).
    pub rows: usize,
    /// The query is cancelled after this long.
    pub timeout: Duration,
    /// Memory the query's operators may hold (sorts, aggregates, joins); past it the query
    /// fails with the engine's message. Nothing spills to disk.
    pub memory_bytes: usize,
    /// Partitions scans and operators run in parallel.
    pub partitions: usize,
}

/// A row-level-security condition on a table: a SQL boolean expression over its columns.
/// Several on one table are ANDed.
#[derive(Clone, Debug, PartialEq)]
pub struct Rls {
    pub table: Table,
    pub clause: String,
}

/// The answer to a query.
#[derive(Clone, Debug, PartialEq)]
pub struct QueryOutput {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Value>>,
    /// The query had more rows than the limit.
    pub truncated: bool,
}

/// Only queries: no DDL (`CREATE EXTERNAL TABLE ... LOCATION` would read files), no DML, no
/// statements (`SET`, transactions).
fn read_only() -> SQLOptions {
    SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false)
}

fn session(limits: &Limits) -> Result<SessionContext, BiError> {
    let config = SessionConfig::new()
        .with_target_partitions(limits.partitions.max(1))
        .with_default_catalog_and_schema("plantd", "public")
        .with_information_schema(false);
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_limit(limits.memory_bytes, 1.0)
        .with_disk_manager_builder(
            DiskManagerBuilder::default().with_mode(DiskManagerMode::Disabled),
        )
        .build_arc()?;
    let ctx = SessionContext::new_with_config_rt(config, runtime);
    // Functions that make one value of any size the SQL asks for, outside the memory limit
    // (`repeat('x', 2000000000)` is 2 GB): not offered.
    for name in UNBOUNDED_FUNCTIONS {
        ctx.deregister_udf(name);
    }
    Ok(ctx)
}

/// String functions whose result size is the caller's number (docs/api.md, "BI").
const UNBOUNDED_FUNCTIONS: [&str; 3] = ["repeat", "lpad", "rpad"];

/// Parses `clause` as a condition over `table`'s columns.
fn condition(ctx: &SessionContext, table: Table, clause: &str) -> Result<Expr, BiError> {
    let schema = DFSchema::try_from(table.schema().as_ref().clone())?;
    let expr = ctx.parse_sql_expr(clause, &schema)?;
    let data_type = expr.get_type(&schema)?;
    if !matches!(data_type, datafusion::arrow::datatypes::DataType::Boolean) {
        return Err(BiError::Query(format!(
            "the clause is a {data_type}, not a condition"
        )));
    }
    Ok(expr)
}

/// Checks that `clause` is a condition over `table`'s columns (a rule is checked when it is
/// saved); the error is the engine's message.
pub fn check_clause(table: Table, clause: &str) -> Result<(), BiError> {
    let ctx = SessionContext::new();
    condition(&ctx, table, clause).map(|_| ())
}

/// Runs `sql` over the organization `source` reads, with the caller's `rls` conditions.
pub async fn run(
    source: Arc<dyn Source>,
    rls: &[Rls],
    sql: &str,
    limits: Limits,
) -> Result<QueryOutput, BiError> {
    let ctx = session(&limits)?;
    for table in TABLES {
        let mut cond: Option<Expr> = None;
        for r in rls.iter().filter(|r| r.table == table) {
            let e = condition(&ctx, table, &r.clause)?;
            cond = Some(match cond {
                Some(c) => c.and(e),
                None => e,
            });
        }
        ctx.register_table(
            table.name(),
            Arc::new(ScopedTable {
                table,
                source: source.clone(),
                rls: cond,
                partitions: limits.partitions,
            }),
        )?;
    }
    let started = Instant::now();
    let work = async {
        let df = ctx.sql_with_options(sql, read_only()).await?;
        let columns: Vec<String> = df
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        let mut stream = df.execute_stream().await?;
        let mut rows = Vec::new();
        let mut truncated = false;
        while let Some(batch) = stream.next().await {
            let batch = batch?;
            let room = limits.rows - rows.len();
            if batch.num_rows() > room {
                truncated = true;
            }
            rows_of(&batch, &mut rows, room)?;
            if truncated {
                // Dropping the stream stops the rest of the work.
                break;
            }
        }
        Ok::<_, BiError>(QueryOutput {
            columns,
            rows,
            truncated,
        })
    };
    let left = limits.timeout.saturating_sub(started.elapsed());
    match tokio::time::timeout(left, work).await {
        Ok(answer) => answer,
        Err(_) => Err(BiError::Timeout(limits.timeout.as_secs())),
    }
}
