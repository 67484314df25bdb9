//! The BI SQL engine: Apache DataFusion over plantd's tables, built for one query of one
//! organization. The caller (the application) reads storage through [`Source`]; every table a
//! query can name is a scan of that source, already limited to the organization, with the
//! caller's row-level-security clauses evaluated inside the scan, so no plan the user's SQL
//! makes can see another organization's rows or a row a clause hides. Read-only by
//! construction: DDL, DML and statements are refused before planning, and no table reads files
//! or the network. This file only declares and re-exports.

mod convert;
mod engine;
mod error;
mod pushdown;
mod scan;
mod source;
mod tables;

pub use engine::{Limits, QueryOutput, Rls, check_clause, run};
pub use error::BiError;
pub use source::{
    PointColumns, PointFields, PointRead, RollupRow, Series, SeriesScope, Source, SourceError,
};
pub use tables::{ColumnInfo, Kind, TABLES, Table, TableInfo};
