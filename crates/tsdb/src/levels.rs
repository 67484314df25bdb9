//! Rollup levels, bucket arithmetic and what a bucket holds.

use plantd_model::telemetry::Aggregation;

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

/// What a bucket of one series holds: its points' count, sum, minimum and maximum.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BucketStats {
    pub count: i64,
    pub sum: f64,
    pub min: f64,
    pub max: f64,
}

impl BucketStats {
    /// One point's bucket.
    pub(crate) fn of(v: f64) -> Self {
        BucketStats {
            count: 1,
            sum: v,
            min: v,
            max: v,
        }
    }
    pub(crate) fn merge(&mut self, o: BucketStats) {
        if self.count == 0 {
            *self = o;
        } else if o.count > 0 {
            self.count += o.count;
            self.sum += o.sum;
            self.min = self.min.min(o.min);
            self.max = self.max.max(o.max);
        }
    }
    pub fn value(self, agg: Aggregation) -> f64 {
        match agg {
            // A sum past the range of a double (points near ±1.8e308) gives no mean: a chart
            // draws the middle of the bucket's range; the aggregate query reads the points again
            // for the exact mean.
            Aggregation::Avg if !self.sum.is_finite() => self.min / 2.0 + self.max / 2.0,
            Aggregation::Avg => self.sum / self.count as f64,
            Aggregation::Min => self.min,
            Aggregation::Max => self.max,
            Aggregation::Sum => self.sum,
            Aggregation::Count => self.count as f64,
        }
    }
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
