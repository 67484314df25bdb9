//! What a scan can read less of: the assets, tags and time range a query's filters fix. The
//! filters stay in the plan above the scan (pushed down as inexact), so reading more than they
//! allow is never wrong; this only narrows what is read.

use datafusion::common::ScalarValue;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};

use crate::source::SeriesScope;

/// What the filters of a scan fix: the series and `[lo, hi)` of the time column.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Narrowed {
    pub scope: SeriesScope,
    pub lo: i64,
    pub hi: i64,
}

/// Narrows a scan by its filters (each a conjunct) on `asset_id`, `tag_name` and `time_column`.
pub(crate) fn narrow(filters: &[Expr], time_column: &str) -> Narrowed {
    let mut out = Narrowed {
        scope: SeriesScope::default(),
        lo: i64::MIN,
        hi: i64::MAX,
    };
    for f in filters {
        apply(f, time_column, &mut out);
    }
    out
}

fn apply(f: &Expr, time_column: &str, out: &mut Narrowed) {
    match f {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            if *op == Operator::And {
                apply(left, time_column, out);
                apply(right, time_column, out);
                return;
            }
            // `column op literal`, or the same mirrored.
            let (col, op, lit) = match (column_of(left), literal_of(right)) {
                (Some(c), Some(l)) => (c, *op, l),
                _ => match (literal_of(left), column_of(right)) {
                    (Some(l), Some(c)) => match op.swap() {
                        Some(op) => (c, op, l),
                        None => return,
                    },
                    _ => return,
                },
            };
            if col == time_column {
                if let Some(t) = millis_of(lit) {
                    bound_time(out, op, t);
                }
            } else if op == Operator::Eq
                && let Some(text) = text_of(lit)
            {
                fix(out, col, vec![text]);
            }
        }
        Expr::InList(list) if !list.negated => {
            let Some(col) = column_of(&list.expr) else {
                return;
            };
            let texts: Option<Vec<String>> = list
                .list
                .iter()
                .map(|e| literal_of(e).and_then(text_of))
                .collect();
            if let Some(texts) = texts {
                fix(out, col, texts);
            }
        }
        Expr::Between(b) if !b.negated && column_of(&b.expr) == Some(time_column) => {
            if let Some(t) = literal_of(&b.low).and_then(millis_of) {
                bound_time(out, Operator::GtEq, t);
            }
            if let Some(t) = literal_of(&b.high).and_then(millis_of) {
                bound_time(out, Operator::LtEq, t);
            }
        }
        _ => {}
    }
}

fn bound_time(out: &mut Narrowed, op: Operator, t: i64) {
    match op {
        Operator::Eq => {
            out.lo = out.lo.max(t);
            out.hi = out.hi.min(t.saturating_add(1));
        }
        Operator::Gt => out.lo = out.lo.max(t.saturating_add(1)),
        Operator::GtEq => out.lo = out.lo.max(t),
        Operator::Lt => out.hi = out.hi.min(t),
        Operator::LtEq => out.hi = out.hi.min(t.saturating_add(1)),
        _ => {}
    }
}

/// Fixes `asset_id` or `tag_name` to `values` (intersected with what an earlier filter fixed).
fn fix(out: &mut Narrowed, col: &str, values: Vec<String>) {
    let slot = match col {
        "asset_id" => &mut out.scope.assets,
        "tag_name" => &mut out.scope.tags,
        _ => return,
    };
    *slot = Some(match slot.take() {
        Some(before) => before.into_iter().filter(|v| values.contains(v)).collect(),
        None => values,
    });
}

fn column_of(e: &Expr) -> Option<&str> {
    match e {
        Expr::Column(c) => Some(c.name.as_str()),
        // The planner casts a column to compare it with a literal of another type.
        Expr::Cast(c) => column_of(&c.expr),
        _ => None,
    }
}

fn literal_of(e: &Expr) -> Option<&ScalarValue> {
    match e {
        Expr::Literal(v, _) => Some(v),
        _ => None,
    }
}

fn text_of(v: &ScalarValue) -> Option<String> {
    match v {
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => Some(s.clone()),
        ScalarValue::Dictionary(_, inner) => text_of(inner),
        _ => None,
    }
}

/// A timestamp literal in milliseconds (floored: a bound between two milliseconds reads the
/// millisecond it falls in, and the plan's own filter decides).
fn millis_of(v: &ScalarValue) -> Option<i64> {
    match v {
        ScalarValue::TimestampSecond(Some(s), _) => s.checked_mul(1000),
        ScalarValue::TimestampMillisecond(Some(ms), _) => Some(*ms),
        ScalarValue::TimestampMicrosecond(Some(us), _) => Some(us.div_euclid(1000)),
        ScalarValue::TimestampNanosecond(Some(ns), _) => Some(ns.div_euclid(1_000_000)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::{col, lit};

    fn ts(ms: i64) -> Expr {
        lit(ScalarValue::TimestampMillisecond(
            Some(ms),
            Some("UTC".into()),
        ))
    }

    #[test]
    fn equalities_lists_and_bounds_narrow_the_scan() {
        let n = narrow(
            &[
                col("asset_id").eq(lit("A1")),
                col("tag_name").in_list(vec![lit("T1"), lit("T2")], false),
                col("timestamp").gt_eq(ts(1_000)),
                ts(5_000).gt(col("timestamp")),
            ],
            "timestamp",
        );
        assert_eq!(n.scope.assets, Some(vec!["A1".to_string()]));
        assert_eq!(n.scope.tags, Some(vec!["T1".to_string(), "T2".to_string()]));
        assert_eq!((n.lo, n.hi), (1_000, 5_000));
    }

    #[test]
    fn what_cannot_be_read_from_the_filters_reads_everything() {
        let n = narrow(
            &[
                col("asset_id")
                    .eq(lit("A1"))
                    .or(col("asset_id").eq(lit("A2"))),
                col("tag_name").in_list(vec![lit("T1")], true),
                col("value").gt(lit(3.0)),
            ],
            "timestamp",
        );
        assert_eq!(n.scope, SeriesScope::default());
        assert_eq!((n.lo, n.hi), (i64::MIN, i64::MAX));
    }

    #[test]
    fn two_equalities_on_one_column_intersect() {
        let n = narrow(
            &[col("asset_id").eq(lit("A1")), col("asset_id").eq(lit("A2"))],
            "timestamp",
        );
        assert_eq!(n.scope.assets, Some(vec![]));
    }
}
