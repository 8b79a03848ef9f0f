//! Log-probabilities reported with each token: the log-softmax of the logits
//! after bias and penalties, before temperature and truncation. This is the
//! model's own distribution, which is what vLLM and the OpenAI API report;
//! after truncation most alternatives would be -inf.

use crate::candidates::{collect_top_k, Candidate};
use crate::fastexp::sum_exp_shifted;
use crate::TokenId;

/// `ln(sum(exp(scores)))`, stable against overflow. -inf when every score is
/// -inf (nothing has any probability).
pub(crate) fn log_sum_exp(scores: &[f32]) -> f64 {
    let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if max == f32::NEG_INFINITY {
        return f64::NEG_INFINITY;
    }
    f64::from(max) + sum_exp_shifted(scores, max).ln()
}

pub(crate) fn logprob(score: f32, lse: f64) -> f32 {
    if lse == f64::NEG_INFINITY {
        return f32::NEG_INFINITY;
    }
    (f64::from(score) - lse) as f32
}

/// The `k` most likely tokens with their logprobs, most likely first.
pub(crate) fn top_logprobs(
    scores: &[f32],
    k: usize,
    lse: f64,
    scratch: &mut Vec<Candidate>,
) -> Vec<(TokenId, f32)> {
    if k == 0 {
        return Vec::new();
    }
    collect_top_k(scores, k, scratch);
    scratch
        .iter()
        .map(|&(id, l)| (id, logprob(l, lse)))
        .collect()
}

/// The most likely token of raw `logits` (the lowest id among equals) and
/// its softmax probability (a greedy draft's confidence).
pub fn top_probability(logits: &[f32]) -> (TokenId, f32) {
    let best = crate::sampler::argmax(logits);
    let max = logits
        .get(best as usize)
        .copied()
        .unwrap_or(f32::NEG_INFINITY);
    if max == f32::NEG_INFINITY || max.is_nan() {
        return (best, 0.0);
    }
    (best, (1.0 / sum_exp_shifted(logits, max)) as f32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_softmax_by_hand() {
        // ln(e^1 + e^2 + e^3) = 3 + ln(1 + e^-1 + e^-2) = 3.40760596...
        let scores = [1.0, 2.0, 3.0];
        let lse = log_sum_exp(&scores);
        assert!((lse - 3.407_605_964_444_380_5).abs() < 1e-6, "{lse}");
        assert!((logprob(3.0, lse) - (-0.407_605_96)).abs() < 1e-6);
        assert!((logprob(1.0, lse) - (-2.407_606)).abs() < 1e-6);
        let mut scratch = Vec::new();
        let top = top_logprobs(&scores, 2, lse, &mut scratch);
        assert_eq!(top.iter().map(|t| t.0).collect::<Vec<_>>(), vec![2, 1]);
        assert!((top[1].1 - (-1.407_606)).abs() < 1e-6);
        // k larger than the vocabulary lists everything.
        assert_eq!(top_logprobs(&scores, 10, lse, &mut scratch).len(), 3);
    }

    #[test]
    fn large_logits_do_not_overflow() {
        let scores = [1000.0, 1000.0];
        let lse = log_sum_exp(&scores);
        assert!((logprob(1000.0, lse) - (-std::f32::consts::LN_2)).abs() < 1e-6);
    }

    #[test]
    fn top_probability_is_the_softmax_of_the_argmax() {
        // Logits like a vocabulary's: many, spread, ties at the top.
        let mut logits: Vec<f32> = (0..151_936)
            .map(|i| ((i * 7919) % 1000) as f32 / 80.0 - 6.0)
            .collect();
        logits[4242] = 9.5;
        logits[77] = 9.5;
        let max = 9.5f64;
        let exact = 1.0
            / logits
                .iter()
                .map(|&v| (f64::from(v) - max).exp())
                .sum::<f64>();
        let (token, p) = top_probability(&logits);
        assert_eq!(token, 77, "the lowest id among equals");
        assert!(
            (f64::from(p) - exact).abs() < 1e-6 * exact,
            "{p} vs {exact}"
        );
        assert_eq!(top_probability(&[f32::NEG_INFINITY; 4]), (0, 0.0));
        assert_eq!(top_probability(&[f32::NEG_INFINITY, 2.0]), (1, 1.0));
    }

    #[test]
    fn all_masked_gives_neg_infinity() {
        let scores = [f32::NEG_INFINITY; 3];
        let lse = log_sum_exp(&scores);
        assert_eq!(logprob(f32::NEG_INFINITY, lse), f32::NEG_INFINITY);
    }
}
