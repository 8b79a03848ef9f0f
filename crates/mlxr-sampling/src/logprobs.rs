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
    fn all_masked_gives_neg_infinity() {
        let scores = [f32::NEG_INFINITY; 3];
        let lse = log_sum_exp(&scores);
        assert_eq!(logprob(f32::NEG_INFINITY, lse), f32::NEG_INFINITY);
    }
}
