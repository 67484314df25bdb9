//! Rollup levels and bucket arithmetic.

pub const MINUTE: i64 = 60_000;
pub const HOUR: i64 = 3_600_000;
pub const DAY: i64 = 86_400_000;

/// Rollup levels as stored: (level, bucket width in ms), finest first.
pub(crate) const LEVELS: [(i16, i64); 3] = [(1, MINUTE), (2, HOUR), (3, DAY)];

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
