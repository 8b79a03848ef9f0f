//! Truncation of the candidate set: top-k, top-p (nucleus), min-p.
//!
//! Candidates are `(token, logit)` pairs. "More likely" means a higher
//! logit, ties going to the lower token id, so every step is deterministic.
//! Nothing here sorts the whole vocabulary.

use std::cmp::Ordering;

use crate::fastexp;
use crate::TokenId;

pub(crate) type Candidate = (TokenId, f32);

/// Ranges up to this size are simply sorted.
const SMALL: usize = 256;
/// Above this k, partial selection over all candidates beats insertion.
const SCAN_MAX_K: usize = 256;

pub(crate) fn by_likelihood(a: &Candidate, b: &Candidate) -> Ordering {
    b.1.total_cmp(&a.1).then(a.0.cmp(&b.0))
}

/// Fills `out` with every token whose logit is above -inf.
pub(crate) fn collect_finite(scores: &[f32], out: &mut Vec<Candidate>) {
    out.clear();
    out.extend(
        scores
            .iter()
            .enumerate()
            .filter(|(_, &l)| l > f32::NEG_INFINITY)
            .map(|(i, &l)| (i as TokenId, l)),
    );
}

/// Fills `out` with the `k` most likely tokens (above -inf), most likely
/// first. `k == 0` keeps every token above -inf, unordered.
pub(crate) fn collect_top_k(scores: &[f32], k: usize, out: &mut Vec<Candidate>) {
    if k == 0 || k > SCAN_MAX_K {
        collect_finite(scores, out);
        if k > 0 && k < out.len() {
            out.select_nth_unstable_by(k - 1, by_likelihood);
            out.truncate(k);
        }
        if k > 0 {
            out.sort_unstable_by(by_likelihood);
        }
        return;
    }
    // One pass keeping a sorted list of the best k: most tokens lose a
    // single comparison against the current k-th best.
    out.clear();
    for (i, &l) in scores.iter().enumerate() {
        if l == f32::NEG_INFINITY || (out.len() == k && l <= out[k - 1].1) {
            continue;
        }
        // After the equal ones, which have lower ids.
        let at = out.partition_point(|c| c.1 >= l);
        if out.len() == k {
            out.pop();
        }
        out.insert(at, (i as TokenId, l));
    }
}

/// Keeps the smallest most-likely set whose probability (softmax over the
/// current candidates) reaches `p`; the kept candidates are left unordered.
///
/// Finds the cut like quickselect, by probability mass: partition around a
/// pivot, keep the more likely side whole if its mass is not enough yet, and
/// continue in the side where the cut lies. Linear time on average; equal to
/// cutting the fully sorted list (up to the rounding of the sums).
/// `weights` is scratch space.
pub(crate) fn top_p(cands: &mut Vec<Candidate>, p: f32, weights: &mut Vec<f32>) {
    if p >= 1.0 || cands.len() <= 1 {
        return;
    }
    let max = max_logit(cands);
    weights.clear();
    weights.extend(cands.iter().map(|&(_, l)| fastexp::exp(l - max)));
    let target = f64::from(p) * fastexp::sum(weights);
    let (mut lo, mut hi) = (0, cands.len());
    // Mass of cands[..lo], all more likely than anything in cands[lo..].
    let mut kept = 0.0;
    let mut rounds = 0;
    while hi - lo > SMALL && rounds < 64 {
        rounds += 1;
        let split = lo + partition_around_pivot(&mut cands[lo..hi], &mut weights[lo..hi]);
        let upper = fastexp::sum(&weights[lo..split]);
        if kept + upper >= target {
            hi = split;
            continue;
        }
        kept += upper + f64::from(weights[split]);
        if kept >= target {
            cands.truncate(split + 1);
            return;
        }
        lo = split + 1;
    }
    cands[lo..hi].sort_unstable_by(by_likelihood);
    for i in lo..hi {
        kept += f64::from(fastexp::exp(cands[i].1 - max));
        if kept >= target {
            cands.truncate(i + 1);
            return;
        }
    }
    cands.truncate(hi);
}

/// Moves the candidates more likely than a median-of-three pivot to the
/// front and the pivot right after them, carrying `weights` along; returns
/// the pivot's index.
fn partition_around_pivot(range: &mut [Candidate], weights: &mut [f32]) -> usize {
    let last = range.len() - 1;
    let mid = range.len() / 2;
    let mut three = [(0, range[0]), (mid, range[mid]), (last, range[last])];
    three.sort_by(|a, b| by_likelihood(&a.1, &b.1));
    range.swap(three[1].0, last);
    weights.swap(three[1].0, last);
    let pivot = range[last];
    let mut split = 0;
    for i in 0..last {
        if by_likelihood(&range[i], &pivot) == Ordering::Less {
            range.swap(i, split);
            weights.swap(i, split);
            split += 1;
        }
    }
    range.swap(split, last);
    weights.swap(split, last);
    split
}

/// Drops candidates whose probability is below `min_p` times the best one's,
/// i.e. whose logit is below `max + ln(min_p)`. Keeps the order.
pub(crate) fn min_p(cands: &mut Vec<Candidate>, min_p: f32) {
    if min_p <= 0.0 || cands.len() <= 1 {
        return;
    }
    let floor = max_logit(cands) + min_p.ln();
    cands.retain(|&(_, l)| l >= floor);
}

pub(crate) fn max_logit(cands: &[Candidate]) -> f32 {
    cands
        .iter()
        .map(|&(_, l)| l)
        .fold(f32::NEG_INFINITY, f32::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(cands: &[Candidate]) -> Vec<TokenId> {
        let mut ids: Vec<TokenId> = cands.iter().map(|c| c.0).collect();
        ids.sort_unstable();
        ids
    }

    fn from_probs(probs: &[f64]) -> Vec<Candidate> {
        probs
            .iter()
            .enumerate()
            .map(|(i, &p)| (i as TokenId, p.ln() as f32))
            .collect()
    }

    /// Pseudo-random logits with a few sharp peaks, like a language model's.
    fn lm_like(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| {
                let x = ((i as u32).wrapping_mul(2_654_435_761) ^ seed) as f32 / u32::MAX as f32;
                if i % 9973 == 0 {
                    12.0 + x
                } else {
                    x * 6.0
                }
            })
            .collect()
    }

    #[test]
    fn top_k_keeps_the_k_best_with_low_ids_winning_ties() {
        let scores = [1.0, 3.0, 2.0, 3.0, 2.0, f32::NEG_INFINITY];
        let mut out = Vec::new();
        collect_top_k(&scores, 3, &mut out);
        assert_eq!(out, vec![(1, 3.0), (3, 3.0), (2, 2.0)]);
        collect_top_k(&scores, 0, &mut out);
        assert_eq!(
            ids(&out),
            vec![0, 1, 2, 3, 4],
            "0 disables; -inf is dropped"
        );
        collect_top_k(&scores, 100, &mut out);
        assert_eq!(out.len(), 5);
    }

    #[test]
    fn scan_and_selection_agree() {
        let scores = lm_like(50_000, 7);
        let (mut scan, mut select) = (Vec::new(), Vec::new());
        for k in [1, 5, 40, SCAN_MAX_K] {
            collect_top_k(&scores, k, &mut scan);
            collect_finite(&scores, &mut select);
            select.sort_by(by_likelihood);
            select.truncate(k);
            assert_eq!(scan, select, "k = {k}");
        }
        collect_top_k(&scores, SCAN_MAX_K + 1, &mut scan);
        assert_eq!(scan, {
            collect_finite(&scores, &mut select);
            select.sort_by(by_likelihood);
            select.truncate(SCAN_MAX_K + 1);
            select.clone()
        });
    }

    #[test]
    fn top_p_keeps_the_minimal_nucleus() {
        let probs = [0.5, 0.2, 0.15, 0.1, 0.05];
        // Cumulative: 0.5, 0.7, 0.85, 0.95, 1.0 (thresholds kept off the boundaries).
        for (p, want) in [
            (0.49, 1),
            (0.51, 2),
            (0.69, 2),
            (0.71, 3),
            (0.86, 4),
            (0.94, 4),
            (0.96, 5),
            (1.0, 5),
        ] {
            let mut c = from_probs(&probs);
            top_p(&mut c, p, &mut Vec::new());
            assert_eq!(ids(&c), (0..want as TokenId).collect::<Vec<_>>(), "p = {p}");
        }
    }

    /// The kept set is a most-likely prefix of the sorted candidates, cut
    /// where the sorted running sum reaches p (give or take the rounding of
    /// sums taken in another order: a few tokens out of 262k).
    #[test]
    fn top_p_on_a_large_vocabulary_matches_a_full_sort() {
        for seed in [1, 2, 3] {
            let scores = lm_like(262_144, seed);
            let mut sorted = Vec::new();
            collect_finite(&scores, &mut sorted);
            let max = max_logit(&sorted);
            let weight = |l: f32| f64::from(fastexp::exp(l - max));
            let total: f64 = sorted.iter().map(|&(_, l)| weight(l)).sum();
            sorted.sort_by(by_likelihood);
            for p in [0.05_f32, 0.3, 0.5, 0.9, 0.95, 0.999] {
                let mut fast = Vec::new();
                collect_finite(&scores, &mut fast);
                top_p(&mut fast, p, &mut Vec::new());
                fast.sort_by(by_likelihood);
                assert!(
                    sorted.starts_with(&fast),
                    "seed {seed}, p = {p}: not a most-likely prefix"
                );

                let mut cum = 0.0;
                let want = sorted
                    .iter()
                    .position(|&(_, l)| {
                        cum += weight(l);
                        cum >= f64::from(p) * total
                    })
                    .map_or(sorted.len(), |i| i + 1);
                let slack = 2 + want / 10_000;
                assert!(
                    fast.len().abs_diff(want) <= slack,
                    "seed {seed}, p = {p}: kept {}, want {want}",
                    fast.len()
                );
            }
        }
    }

    #[test]
    fn top_p_handles_ties_and_sorted_input() {
        // All equal: the nucleus is the lowest ids.
        let mut c: Vec<Candidate> = (0..10_000).map(|i| (i, 1.0)).collect();
        top_p(&mut c, 0.25, &mut Vec::new());
        assert_eq!(ids(&c), (0..2500).collect::<Vec<_>>());
        // Already sorted ascending and descending.
        for reverse in [false, true] {
            let mut c: Vec<Candidate> = (0..10_000).map(|i| (i, i as f32 * 1e-3)).collect();
            if reverse {
                c.reverse();
            }
            top_p(&mut c, 0.5, &mut Vec::new());
            let min_kept = c.iter().map(|x| x.0).min().unwrap();
            assert_eq!(c.len(), 10_000 - min_kept as usize);
        }
    }

    #[test]
    fn min_p_is_relative_to_the_best_token() {
        let mut c = from_probs(&[0.4, 0.3, 0.2, 0.041, 0.039]);
        // Threshold 0.1 * 0.4 = 0.04.
        min_p(&mut c, 0.1);
        assert_eq!(ids(&c), vec![0, 1, 2, 3]);
        let mut c = from_probs(&[0.4, 0.3, 0.2, 0.1]);
        min_p(&mut c, 0.6);
        assert_eq!(ids(&c), vec![0, 1]);
        let mut c = from_probs(&[0.4, 0.3]);
        min_p(&mut c, 1.0);
        assert_eq!(ids(&c), vec![0]);
    }
}
