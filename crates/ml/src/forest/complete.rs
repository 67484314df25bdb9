//! The complete layout a batch is scored in (see [`Complete`]).

use super::{LANES, LEAF, Node};

/// A tree laid out complete for scoring: node `k`'s children are `2k + 1` (below the split)
/// and `2k + 2`, every row takes exactly `depth` steps, and the last level holds the path
/// lengths. A leaf above the last level is carried down by splits that send every row right
/// (a NaN split value: `v < NaN` is false for every `v`), so a walk is a fixed loop without a
/// leaf test, the same for rows walked side by side.
#[derive(Clone, Debug)]
pub(super) struct Complete {
    depth: usize,
    feature: Vec<u32>,
    value: Vec<f64>,
    leaf: Vec<f64>,
}

/// The deepest tree scored in the complete layout (2^10 leaves, 24 KB); deeper ones (a
/// `max_samples` over 1,024) walk their nodes.
pub(super) const COMPLETE_DEPTH: usize = 10;

/// Equal when laid out alike (split values compared by their bits: the carried-down splits are
/// NaN).
impl PartialEq for Complete {
    fn eq(&self, other: &Self) -> bool {
        self.depth == other.depth
            && self.feature == other.feature
            && self.leaf == other.leaf
            && self
                .value
                .iter()
                .map(|v| v.to_bits())
                .eq(other.value.iter().map(|v| v.to_bits()))
    }
}

impl Complete {
    /// [`Forest::paths`](super::Forest) through this tree: rows `first..first + LANES` side by
    /// side, a missing value taking its feature's `fill`.
    pub(super) fn paths(
        &self,
        fill: &[f64],
        values: &[f64],
        d: usize,
        first: usize,
    ) -> [f64; LANES] {
        let mut at = [0usize; LANES];
        for _ in 0..self.depth {
            for (k, at) in at.iter_mut().enumerate() {
                let f = self.feature[*at] as usize;
                let x = values[(first + k) * d + f];
                let v = if x.is_nan() { fill[f] } else { x };
                *at = 2 * *at + 2 - usize::from(v < self.value[*at]);
            }
        }
        let base = self.feature.len();
        at.map(|k| self.leaf[k - base])
    }

    fn of(tree: &[Node], depth: usize) -> Complete {
        let internal = (1usize << depth) - 1;
        let mut c = Complete {
            depth,
            feature: vec![0; internal],
            value: vec![f64::NAN; internal],
            leaf: vec![0.0; internal + 1],
        };
        c.place(tree, 0, 0, 0);
        c
    }

    fn place(&mut self, tree: &[Node], src: usize, k: usize, level: usize) {
        let n = tree[src];
        if level == self.depth {
            // Only leaves reach the last level (trees are grown to `depth` at most).
            self.leaf[k - self.feature.len()] = n.value;
        } else if n.feature == LEAF {
            // Carried down the right side (the split value stays NaN).
            self.place(tree, src, 2 * k + 2, level + 1);
        } else {
            self.feature[k] = n.feature;
            self.value[k] = n.value;
            self.place(tree, src + 1, 2 * k + 1, level + 1);
            self.place(tree, n.right as usize, 2 * k + 2, level + 1);
        }
    }
}

/// The depth of a tree's deepest leaf.
pub(super) fn depth_of(tree: &[Node], at: usize) -> usize {
    let n = tree[at];
    if n.feature == LEAF {
        0
    } else {
        1 + depth_of(tree, at + 1).max(depth_of(tree, n.right as usize))
    }
}

/// The complete layouts of `trees` (those not too deep).
pub(super) fn layouts(trees: &[Vec<Node>]) -> Vec<Option<Complete>> {
    trees
        .iter()
        .map(|t| {
            let depth = depth_of(t, 0);
            (depth <= COMPLETE_DEPTH).then(|| Complete::of(t, depth))
        })
        .collect()
}
