//! The text of this crate's multi-row statements: placeholder lists, and a cache of texts that
//! depend only on their row count.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

/// The statements whose text depends only on their row count, built once per count.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Statement {
    AddDeltas,
    Recompute,
    InsertBlocks,
    ProbeNewest,
    ProbePacked,
    ProbeOverlaps,
    ReadLog,
    DeleteLog,
    UpsertSeries,
}

/// The text of a bulk statement, built on first use and then copied from a cache (formatting
/// thousands of placeholders per batch cost more than the statement's execution).
pub(crate) fn cached_sql(
    kind: Statement,
    variant: i64,
    sqlite: bool,
    rows: usize,
    build: impl FnOnce() -> String,
) -> String {
    type Cache = HashMap<(Statement, i64, bool, usize), String>;
    static CACHE: LazyLock<Mutex<Cache>> = LazyLock::new(Mutex::default);
    let key = (kind, variant, sqlite, rows);
    if let Some(sql) = CACHE.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return sql.clone();
    }
    let sql = build();
    CACHE
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key, sql.clone());
    sql
}

/// The `n`-th bind placeholder. SQLite gets bare `?`: with `$N`, binding looks every name up in
/// a linear list, which made a 2,000-parameter statement spend most of its time binding.
pub(crate) fn placeholder(sqlite: bool, n: usize) -> String {
    if sqlite {
        "?".to_string()
    } else {
        format!("${n}")
    }
}

/// A VALUES list of `rows` tuples of `width` placeholders, numbered in order from 1. Each tuple
/// starts with `lead` (constant columns, or nothing); with `bigint` each placeholder is cast to
/// BIGINT (a VALUES list in a WITH clause must say its types).
pub(crate) fn value_rows(
    sqlite: bool,
    rows: usize,
    width: usize,
    lead: &str,
    bigint: bool,
) -> String {
    (0..rows)
        .map(|i| {
            let cells: Vec<String> = (1..=width)
                .map(|k| {
                    let p = placeholder(sqlite, i * width + k);
                    if bigint {
                        format!("CAST({p} AS BIGINT)")
                    } else {
                        p
                    }
                })
                .collect();
            format!("({lead}{})", cells.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn value_rows_number_placeholders_in_order() {
        assert_eq!(
            super::value_rows(false, 2, 2, "1, ", false),
            "(1, $1, $2), (1, $3, $4)"
        );
        assert_eq!(
            super::value_rows(true, 1, 2, "", true),
            "(CAST(? AS BIGINT), CAST(? AS BIGINT))"
        );
    }
}
