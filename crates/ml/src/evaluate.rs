//! How scores are judged: numpy's percentile (the threshold of a contamination) and the ROC AUC
//! against labels (a training job's metrics, the benchmark beside scikit-learn).

/// numpy's `percentile(v, q)` with linear interpolation, `q` in [0, 100].
pub fn percentile(v: &[f64], q: f64) -> f64 {
    percentiles(v, &[q])[0]
}

/// [`percentile`] at each of `qs`, sorting `v` once.
pub fn percentiles(v: &[f64], qs: &[f64]) -> Vec<f64> {
    if v.is_empty() {
        return vec![f64::NAN; qs.len()];
    }
    let mut s = v.to_vec();
    s.sort_unstable_by(f64::total_cmp);
    qs.iter()
        .map(|q| {
            let pos = q / 100.0 * (s.len() - 1) as f64;
            let lo = pos.floor() as usize;
            let hi = pos.ceil() as usize;
            s[lo] + (s[hi] - s[lo]) * (pos - lo as f64)
        })
        .collect()
}

/// ROC AUC of `scores` against `positive` (higher scores should be the positives): the
/// probability that a positive outscores a negative, ties counting half. `None` without both.
pub fn roc_auc(scores: &[f64], positive: &[bool]) -> Option<f64> {
    let mut pairs: Vec<(f64, bool)> = scores
        .iter()
        .copied()
        .zip(positive.iter().copied())
        .collect();
    pairs.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
    let pos = pairs.iter().filter(|p| p.1).count();
    let neg = pairs.len() - pos;
    if pos == 0 || neg == 0 {
        return None;
    }
    // Sum of the positives' ranks (1-based, ties averaged).
    let mut rank_sum = 0.0;
    let mut i = 0;
    while i < pairs.len() {
        let mut j = i;
        while j + 1 < pairs.len() && pairs[j + 1].0 == pairs[i].0 {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        rank_sum += rank * pairs[i..=j].iter().filter(|p| p.1).count() as f64;
        i = j + 1;
    }
    let u = rank_sum - (pos * (pos + 1)) as f64 / 2.0;
    Some(u / (pos as f64 * neg as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auc_counts_ties_half() {
        assert_eq!(roc_auc(&[0.1, 0.9], &[false, true]), Some(1.0));
        assert_eq!(roc_auc(&[0.5, 0.5], &[false, true]), Some(0.5));
        assert_eq!(roc_auc(&[0.5], &[true]), None);
    }
}
