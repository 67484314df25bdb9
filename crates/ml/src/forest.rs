//! An isolation forest after Liu, Ting and Zhou (2008), scoring as scikit-learn's
//! `-score_samples` means: s(x, n) = 2^(-E(h(x)) / c(n)), with the exact c(n) (c(0) = c(1) = 0,
//! c(2) = 1, else 2H(n-1) - 2(n-1)/n with the harmonic number summed, not approximated), a leaf
//! still holding k > 1 samples adding c(k), trees grown to ceil(log2(max_samples)), and the
//! average path normalised by c(max_samples).
//!
//! Trees are flat arrays of nodes; a leaf keeps its whole path length (its depth plus c(k)),
//! so scoring walks a row down each tree and adds one number, without allocation; a batch walks
//! 8 rows side by side through each tree, laid out complete when it is at most 10 deep (a fixed
//! number of steps without a leaf test: twice as fast). Fit and score use every core given
//! (`threads`): trees, then rows, are split between threads, and each tree draws from its own
//! generator seeded by the forest's seed and its index, so a seed gives the same forest on any
//! number of threads. Missing values (NaN) are replaced by the feature's
//! median in the training rows (over at most 2,048 of them, evenly spaced), at fit and at
//! scoring.

use crate::evaluate::percentile;
use complete::{Complete, layouts};
use rand::rngs::SmallRng;
use rand::seq::index;
use rand::{Rng, SeedableRng};

mod complete;

/// Hyperparameters, checked by [`Params::check`].
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    pub n_estimators: usize,
    /// Rows drawn (without replacement) for each tree; `None`: min(256, n).
    pub max_samples: Option<usize>,
    /// Share of the features each tree may split on, (0, 1].
    pub max_features: f64,
    /// The expected share of anomalies, (0, 0.5]: the threshold is the score above which that
    /// share of the training rows lies.
    pub contamination: f64,
    pub seed: u64,
}

impl Default for Params {
    fn default() -> Self {
        Self {
            n_estimators: 100,
            max_samples: None,
            max_features: 1.0,
            contamination: 0.1,
            seed: 0,
        }
    }
}

impl Params {
    /// Why the parameters do not fit `rows` training rows: `(field, message)`.
    pub fn check(&self, rows: usize) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if !(1..=10_000).contains(&self.n_estimators) {
            out.push(("hyperparameters.n_estimators", "must be 1 to 10000".into()));
        }
        if let Some(m) = self.max_samples
            && (m < 2 || m > rows.max(2))
        {
            out.push((
                "hyperparameters.max_samples",
                format!("must be 2 to the dataset's {rows} rows"),
            ));
        }
        if !(self.max_features > 0.0 && self.max_features <= 1.0) {
            out.push((
                "hyperparameters.max_features",
                "must be a share of the features in (0, 1]".into(),
            ));
        }
        if !(self.contamination > 0.0 && self.contamination <= 0.5) {
            out.push((
                "hyperparameters.contamination",
                "must be in (0, 0.5]".into(),
            ));
        }
        out
    }
}

/// c(n): the average path length of an unsuccessful search in a binary search tree of n
/// points, exactly.
pub fn c(n: usize) -> f64 {
    match n {
        0 | 1 => 0.0,
        2 => 1.0,
        _ => {
            let h: f64 = (1..n).map(|i| 1.0 / i as f64).sum();
            2.0 * h - 2.0 * (n - 1) as f64 / n as f64
        }
    }
}

/// c(k) for k in 0..=n, summed once.
fn c_table(n: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(n + 1);
    let mut h = 0.0;
    for k in 0..=n {
        out.push(match k {
            0 | 1 => 0.0,
            2 => 1.0,
            _ => 2.0 * h - 2.0 * (k - 1) as f64 / k as f64,
        });
        if k >= 1 {
            h += 1.0 / k as f64;
        }
    }
    out
}

/// A node (16 bytes): a split on `feature` at `value` whose left child (below the value) is
/// the next node and whose right child is `right`; or a leaf (`feature` = [`LEAF`]) whose
/// `value` is its whole path length.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Node {
    pub value: f64,
    pub feature: u32,
    pub right: u32,
}

pub const LEAF: u32 = u32::MAX;

/// A fitted forest (made by [`Forest::fit`] or [`Forest::from_json`]; its fields are for
/// reading: the scoring layout is built from `trees` when it is made).
#[derive(Clone, Debug, PartialEq)]
pub struct Forest {
    pub n_features: usize,
    pub max_samples: usize,
    /// Each tree's nodes, the root first.
    pub trees: Vec<Vec<Node>>,
    /// What a missing value is taken for, per feature (the training median).
    pub fill: Vec<f64>,
    /// A score above it is an anomaly.
    pub threshold: f64,
    /// Each tree in the complete layout when it is at most 10 deep (`complete.rs`), for
    /// scoring batches (built with the forest, from `trees`).
    layout: Vec<Option<Complete>>,
}

/// Rows, row-major: `values[row * n_features + feature]`.
pub struct Rows<'a> {
    pub values: &'a [f64],
    pub n_features: usize,
}

impl Rows<'_> {
    pub fn len(&self) -> usize {
        self.values.len().checked_div(self.n_features).unwrap_or(0)
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn get(&self, row: usize, feature: usize) -> f64 {
        self.values[row * self.n_features + feature]
    }
}

/// The median of the finite values, 0 when there is none.
fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return 0.0;
    }
    let m = v.len() / 2;
    let odd = v.len() % 2 == 1;
    let (below, mid, _) = v.select_nth_unstable_by(m, f64::total_cmp);
    let mid = *mid;
    if odd {
        mid
    } else {
        // The largest value below the middle one.
        let lower = below.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lower + mid) / 2.0
    }
}

struct Grower<'a> {
    rows: &'a Rows<'a>,
    fill: &'a [f64],
    features: Vec<usize>,
    /// Scratch: the features left to try at a node.
    order: Vec<usize>,
    limit: usize,
    c: &'a [f64],
    rng: SmallRng,
    nodes: Vec<Node>,
}

impl Grower<'_> {
    fn value(&self, row: usize, feature: usize) -> f64 {
        let v = self.rows.get(row, feature);
        if v.is_nan() { self.fill[feature] } else { v }
    }

    fn leaf(&mut self, depth: usize, k: usize) -> u32 {
        self.nodes.push(Node {
            feature: LEAF,
            value: depth as f64 + self.c[k],
            right: 0,
        });
        (self.nodes.len() - 1) as u32
    }

    /// Grows the subtree of `idx` at `depth`; answers its node.
    fn grow(&mut self, idx: &mut [usize], depth: usize) -> u32 {
        if depth >= self.limit || idx.len() <= 1 {
            return self.leaf(depth, idx.len());
        }
        // A random feature that still varies among these rows, tried in a random order.
        let mut order = std::mem::take(&mut self.order);
        order.clear();
        order.extend_from_slice(&self.features);
        let mut chosen = None;
        while !order.is_empty() {
            let f = order.swap_remove(self.rng.random_range(0..order.len()));
            let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
            for &r in idx.iter() {
                let v = self.value(r, f);
                lo = lo.min(v);
                hi = hi.max(v);
            }
            if lo < hi {
                chosen = Some((f, lo, hi));
                break;
            }
        }
        self.order = order;
        let Some((f, lo, hi)) = chosen else {
            return self.leaf(depth, idx.len());
        };
        let mut split = self.rng.random_range(lo..hi);
        if split <= lo {
            split = (lo + hi) / 2.0;
        }
        // Partition: below the split to the left.
        let mut i = 0;
        for j in 0..idx.len() {
            if self.value(idx[j], f) < split {
                idx.swap(i, j);
                i += 1;
            }
        }
        let at = self.nodes.len();
        self.nodes.push(Node {
            feature: f as u32,
            value: split,
            right: 0,
        });
        let (left_idx, right_idx) = idx.split_at_mut(i);
        // The left subtree follows its parent; the right one after it.
        self.grow(left_idx, depth + 1);
        let right = self.grow(right_idx, depth + 1);
        self.nodes[at].right = right;
        at as u32
    }
}

/// The generator of tree `t` of a forest seeded with `seed`.
fn tree_rng(seed: u64, t: usize) -> SmallRng {
    SmallRng::seed_from_u64(seed ^ (t as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

impl Forest {
    /// Fits a forest on `rows` (at least two; finite numbers, NaN for a missing value) with
    /// `threads` threads; `cancelled` is asked between trees (fit stops early and answers
    /// `None`), `progress` told how many trees are done. Its threshold is set by
    /// [`Forest::set_threshold`] from the training rows' scores.
    pub fn fit(
        rows: &Rows<'_>,
        p: &Params,
        threads: usize,
        cancelled: &(dyn Fn() -> bool + Sync),
        progress: &(dyn Fn(usize) + Sync),
    ) -> Option<Forest> {
        let n = rows.len();
        let d = rows.n_features;
        // The medians over at most MEDIAN_ROWS rows, evenly spaced (enough for a fill value):
        // the sampled rows read once, row by row (as they lie in memory), then each feature's
        // median selected, the features split between the threads.
        let step = n.div_ceil(MEDIAN_ROWS).max(1);
        let sampled = n.div_ceil(step);
        let mut columns: Vec<Vec<f64>> = (0..d).map(|_| Vec::with_capacity(sampled)).collect();
        for r in (0..n).step_by(step) {
            for (f, column) in columns.iter_mut().enumerate() {
                column.push(rows.get(r, f));
            }
        }
        let mut fill = vec![0.0; d];
        let per_thread = d.div_ceil(threads.max(1)).max(1);
        std::thread::scope(|s| {
            for (slots, cols) in fill
                .chunks_mut(per_thread)
                .zip(columns.chunks_mut(per_thread))
            {
                s.spawn(move || {
                    for (slot, column) in slots.iter_mut().zip(cols) {
                        *slot = median(std::mem::take(column));
                    }
                });
            }
        });
        let max_samples = p.max_samples.unwrap_or(256).min(n).max(1);
        let limit = (max_samples as f64).log2().ceil().max(0.0) as usize;
        let c = c_table(max_samples);
        let n_features_tree = ((p.max_features * d as f64).round() as usize).clamp(1, d.max(1));
        let threads = threads.clamp(1, p.n_estimators.max(1));
        let done = std::sync::atomic::AtomicUsize::new(0);
        let mut trees: Vec<Option<Vec<Node>>> = vec![None; p.n_estimators];
        std::thread::scope(|s| {
            let per = p.n_estimators.div_ceil(threads);
            for (part, slots) in trees.chunks_mut(per).enumerate() {
                let (fill, c, done) = (&fill, &c, &done);
                s.spawn(move || {
                    for (i, slot) in slots.iter_mut().enumerate() {
                        if cancelled() {
                            return;
                        }
                        let t = part * per + i;
                        let mut rng = tree_rng(p.seed, t);
                        let mut idx = index::sample(&mut rng, n, max_samples).into_vec();
                        let features = if n_features_tree == d {
                            (0..d).collect()
                        } else {
                            index::sample(&mut rng, d, n_features_tree).into_vec()
                        };
                        let mut g = Grower {
                            rows,
                            fill,
                            order: Vec::with_capacity(d),
                            features,
                            limit,
                            c,
                            rng,
                            nodes: Vec::with_capacity(2 * max_samples),
                        };
                        g.grow(&mut idx, 0);
                        *slot = Some(g.nodes);
                        let k = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                        progress(k);
                    }
                });
            }
        });
        let trees: Option<Vec<Vec<Node>>> = trees.into_iter().collect();
        let trees = trees?;
        Some(Forest {
            n_features: d,
            max_samples,
            layout: layouts(&trees),
            trees,
            fill,
            threshold: f64::NAN,
        })
    }

    /// Sets the threshold from the training rows' `scores`: the score above which
    /// `contamination` of them lie (numpy's linear percentile, as scikit-learn's `offset_`).
    pub fn set_threshold(&mut self, scores: &[f64], contamination: f64) {
        self.threshold = percentile(scores, 100.0 * (1.0 - contamination));
    }

    /// The path length of a row through one tree.
    fn path(&self, tree: &[Node], row: &[f64]) -> f64 {
        let mut at = 0usize;
        loop {
            let n = tree[at];
            if n.feature == LEAF {
                return n.value;
            }
            let f = n.feature as usize;
            let x = row[f];
            let v = if x.is_nan() { self.fill[f] } else { x };
            // Without a branch: which way a row goes is a coin toss the predictor loses.
            let below = usize::from(v < n.value);
            at = below * (at + 1) + (1 - below) * n.right as usize;
        }
    }

    /// The path lengths of rows `first..first + LANES` through one tree, walked side by side.
    fn paths(&self, tree: &[Node], values: &[f64], d: usize, first: usize) -> [f64; LANES] {
        let mut at = [0usize; LANES];
        let mut out = [f64::NAN; LANES];
        let mut left = LANES;
        while left > 0 {
            for k in 0..LANES {
                if !out[k].is_nan() {
                    continue;
                }
                let n = tree[at[k]];
                if n.feature == LEAF {
                    out[k] = n.value;
                    left -= 1;
                    continue;
                }
                let f = n.feature as usize;
                let x = values[(first + k) * d + f];
                let v = if x.is_nan() { self.fill[f] } else { x };
                at[k] = if v < n.value {
                    at[k] + 1
                } else {
                    n.right as usize
                };
            }
        }
        out
    }

    /// The anomaly score of one row (`n_features` values; NaN for a missing one).
    pub fn score_row(&self, row: &[f64]) -> f64 {
        let total: f64 = self.trees.iter().map(|t| self.path(t, row)).sum();
        self.score_of(total, c(self.max_samples))
    }

    /// The score of a row whose paths through the trees add up to `total` (`norm`: c of
    /// `max_samples`), the same arithmetic for one row and for a batch.
    fn score_of(&self, total: f64, norm: f64) -> f64 {
        if norm == 0.0 {
            return 0.5;
        }
        2f64.powf(-(total / self.trees.len() as f64) / norm)
    }

    /// The scores of many rows, on `threads` threads. Rows go through the trees in blocks of
    /// [`BLOCK`]: each tree stays in the cache while the block's rows walk it, and the sums live
    /// on the stack.
    pub fn score(&self, rows: &Rows<'_>, threads: usize) -> Vec<f64> {
        let n = rows.len();
        let d = rows.n_features;
        let mut out = vec![0.0; n];
        let threads = threads.clamp(1, n.max(1));
        let per = n.div_ceil(threads).max(1);
        let norm = c(self.max_samples);
        // Trees of a usual depth are walked in the complete layout.
        let complete = &self.layout;
        // Scores rows `first..` into `slots`.
        let work = move |first: usize, slots: &mut [f64]| {
            for (b, block) in slots.chunks_mut(BLOCK).enumerate() {
                let start = first + b * BLOCK;
                let mut sums = [0.0f64; BLOCK];
                let n = block.len();
                for (tree, complete) in self.trees.iter().zip(complete) {
                    // Rows walk the tree LANES at a time: independent walks overlap their
                    // memory reads.
                    let mut i = 0;
                    while i + LANES <= n {
                        let paths = match complete {
                            Some(t) => t.paths(&self.fill, rows.values, d, start + i),
                            None => self.paths(tree, rows.values, d, start + i),
                        };
                        for (k, p) in paths.iter().enumerate() {
                            sums[i + k] += p;
                        }
                        i += LANES;
                    }
                    for (k, sum) in sums.iter_mut().enumerate().take(n).skip(i) {
                        let r = start + k;
                        *sum += self.path(tree, &rows.values[r * d..(r + 1) * d]);
                    }
                }
                for (slot, sum) in block.iter_mut().zip(sums) {
                    *slot = self.score_of(sum, norm);
                }
            }
        };
        if threads == 1 {
            // On the caller's thread (the live scorer's small batches: no thread to start).
            work(0, &mut out);
        } else {
            std::thread::scope(|s| {
                for (part, slots) in out.chunks_mut(per).enumerate() {
                    s.spawn(move || work(part * per, slots));
                }
            });
        }
        out
    }
}

/// Rows a feature's fill value (its median) is taken over, at most.
const MEDIAN_ROWS: usize = 2_048;

/// Rows walking one tree side by side.
const LANES: usize = 8;

/// Rows a scoring thread takes through the trees together.
const BLOCK: usize = 8192;

/// The name and version of the download format (docs/ml-model-format.md).
pub const FORMAT: &str = "plantd-isolation-forest";
pub const FORMAT_VERSION: u64 = 1;

impl Forest {
    /// The forest in the download format: per tree the arrays `feature` (-1 for a leaf),
    /// `value` (a split's value, a leaf's whole path length), `left` and `right` (node
    /// indexes); with `features`, `fill`, `max_samples`, `c_max_samples` and `threshold`.
    pub fn to_json(&self, features: &[String]) -> serde_json::Value {
        let trees: Vec<serde_json::Value> = self
            .trees
            .iter()
            .map(|t| {
                serde_json::json!({
                    "feature": t.iter().map(|n| if n.feature == LEAF { -1 } else { i64::from(n.feature) }).collect::<Vec<_>>(),
                    "value": t.iter().map(|n| n.value).collect::<Vec<_>>(),
                    "left": t.iter().enumerate().map(|(i, n)| if n.feature == LEAF { 0 } else { i as u32 + 1 }).collect::<Vec<_>>(),
                    "right": t.iter().map(|n| n.right).collect::<Vec<_>>(),
                })
            })
            .collect();
        serde_json::json!({
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "features": features,
            "fill": self.fill,
            "max_samples": self.max_samples,
            "c_max_samples": c(self.max_samples),
            "threshold": self.threshold,
            "trees": trees,
        })
    }

    /// Reads the download format back; why not, when it is not one.
    pub fn from_json(v: &serde_json::Value) -> Result<Forest, String> {
        if v["format"] != FORMAT || v["format_version"] != FORMAT_VERSION {
            return Err(format!("not {FORMAT} version {FORMAT_VERSION}"));
        }
        let floats = |x: &serde_json::Value, what: &str| -> Result<Vec<f64>, String> {
            x.as_array()
                .ok_or(format!("{what} is not an array"))?
                .iter()
                .map(|n| n.as_f64().ok_or(format!("{what} holds a non-number")))
                .collect()
        };
        let ints = |x: &serde_json::Value, what: &str| -> Result<Vec<i64>, String> {
            x.as_array()
                .ok_or(format!("{what} is not an array"))?
                .iter()
                .map(|n| n.as_i64().ok_or(format!("{what} holds a non-integer")))
                .collect()
        };
        let fill = floats(&v["fill"], "fill")?;
        let mut trees = Vec::new();
        for t in v["trees"].as_array().ok_or("trees is not an array")? {
            let feature = ints(&t["feature"], "feature")?;
            let value = floats(&t["value"], "value")?;
            let left = ints(&t["left"], "left")?;
            let right = ints(&t["right"], "right")?;
            let n = feature.len();
            if value.len() != n || left.len() != n || right.len() != n || n == 0 {
                return Err("a tree's arrays differ in length".into());
            }
            let mut nodes = Vec::with_capacity(n);
            for i in 0..n {
                let leaf = feature[i] < 0;
                let (l, r) = (left[i], right[i]);
                if !leaf
                    && (feature[i] as usize >= fill.len()
                        || l != i as i64 + 1
                        || r <= l
                        || r as usize >= n)
                {
                    return Err(format!(
                        "node {i}: a split's left child must be the next node and its right child after it, in the tree"
                    ));
                }
                nodes.push(Node {
                    feature: if leaf { LEAF } else { feature[i] as u32 },
                    value: value[i],
                    right: r.max(0) as u32,
                });
            }
            trees.push(nodes);
        }
        if trees.is_empty() {
            return Err("the forest has no tree".into());
        }
        Ok(Forest {
            n_features: fill.len(),
            max_samples: v["max_samples"].as_u64().ok_or("max_samples is missing")? as usize,
            layout: layouts(&trees),
            trees,
            fill,
            threshold: v["threshold"].as_f64().ok_or("threshold is missing")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evaluate::roc_auc;

    #[test]
    fn c_is_exact() {
        assert_eq!(c(0), 0.0);
        assert_eq!(c(1), 0.0);
        assert_eq!(c(2), 1.0);
        // 2 H(2) - 2 * 2/3 = 2 * 1.5 - 4/3
        assert!((c(3) - (3.0 - 4.0 / 3.0)).abs() < 1e-15);
        let t = c_table(300);
        for k in [0, 1, 2, 3, 10, 256, 300] {
            assert!((t[k] - c(k)).abs() < 1e-12, "{k}");
        }
    }

    fn planted(n: usize, seed: u64) -> (Vec<f64>, Vec<bool>) {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut values = Vec::new();
        let mut labels = Vec::new();
        for i in 0..n {
            let anomaly = i % 50 == 0;
            for _ in 0..4 {
                let x: f64 = rng.random_range(-1.0..1.0);
                values.push(if anomaly { x * 0.5 + 6.0 } else { x });
            }
            labels.push(anomaly);
        }
        (values, labels)
    }

    #[test]
    fn finds_planted_anomalies_deterministically() {
        let (values, labels) = planted(5000, 7);
        let rows = Rows {
            values: &values,
            n_features: 4,
        };
        let p = Params {
            seed: 42,
            contamination: 0.02,
            ..Params::default()
        };
        let mut f1 = Forest::fit(&rows, &p, 1, &|| false, &|_| {}).unwrap();
        let mut f2 = Forest::fit(&rows, &p, 2, &|| false, &|_| {}).unwrap();
        f1.set_threshold(&f1.score(&rows, 1), p.contamination);
        f2.set_threshold(&f2.score(&rows, 2), p.contamination);
        assert_eq!(
            f1, f2,
            "the same seed gives the same forest on any number of threads"
        );
        let scores = f1.score(&rows, 2);
        // Blocks and threads give each row's own score, exactly.
        for r in [0, 1, 255, 256, 4999] {
            assert_eq!(scores[r], f1.score_row(&values[r * 4..r * 4 + 4]));
        }
        let auc = roc_auc(&scores, &labels).unwrap();
        assert!(auc > 0.99, "{auc}");
        let flagged = scores.iter().filter(|s| **s > f1.threshold).count();
        assert!((90..=110).contains(&flagged), "{flagged}");
        // Missing values take the median.
        let mut row = values[4..8].to_vec();
        let s = f1.score_row(&row);
        row[0] = f64::NAN;
        assert!(f1.score_row(&row).is_finite());
        assert!(s > 0.0 && s < 1.0);
        // The download format reads back into the same forest.
        let names: Vec<String> = (0..4).map(|i| format!("f{i}")).collect();
        let back = Forest::from_json(&f1.to_json(&names)).unwrap();
        assert_eq!(back, f1);
    }

    #[test]
    fn every_row_of_a_batch_scores_as_alone_in_both_tree_layouts() {
        // Every row (all 5,003: full blocks of lanes and the rest), with missing values and
        // infinities, through shallow trees (the complete layout) and deep ones (max_samples
        // 4,096: depth 12, walked node by node).
        let (mut values, _) = planted(5003, 3);
        for r in (0..5003).step_by(7) {
            values[r * 4 + r % 4] = f64::NAN;
        }
        let rows = Rows {
            values: &values,
            n_features: 4,
        };
        // Scored (not fitted: a fit takes finite numbers and NaN) with infinities too.
        let mut scored = values.clone();
        for r in (3..5003).step_by(11) {
            scored[r * 4 + r % 4] = [f64::INFINITY, f64::NEG_INFINITY][r % 2];
        }
        let values = scored;
        for max_samples in [256, 4096] {
            let p = Params {
                n_estimators: 20,
                max_samples: Some(max_samples),
                seed: 5,
                ..Params::default()
            };
            let f = Forest::fit(&rows, &p, 2, &|| false, &|_| {}).unwrap();
            let scores = f.score(
                &Rows {
                    values: &values,
                    n_features: 4,
                },
                2,
            );
            for (r, s) in scores.iter().enumerate() {
                assert_eq!(*s, f.score_row(&values[r * 4..r * 4 + 4]), "row {r}");
            }
        }
    }

    #[test]
    fn cancel_stops_the_fit() {
        let (values, _) = planted(1000, 1);
        let rows = Rows {
            values: &values,
            n_features: 4,
        };
        assert!(Forest::fit(&rows, &Params::default(), 2, &|| true, &|_| {}).is_none());
    }
}
