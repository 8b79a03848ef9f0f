use crate::{SamplingParams, TokenId};

/// Maps a raw logit to one the chain can order and exponentiate: NaN
/// becomes -inf (never chosen), +inf the largest finite value.
pub(crate) fn clean(logit: f32) -> f32 {
    if logit.is_nan() {
        f32::NEG_INFINITY
    } else if logit == f32::INFINITY {
        f32::MAX
    } else {
        logit
    }
}

/// Adds each bias to its token's logit; ids outside the vocabulary are
/// ignored.
pub(crate) fn apply_logit_bias(scores: &mut [f32], bias: &[(TokenId, f32)]) {
    for &(token, b) in bias {
        if let Some(s) = scores.get_mut(token as usize) {
            *s = clean(*s + b);
        }
    }
}

/// Repetition (llama.cpp), presence and frequency (OpenAI) penalties over the
/// last `repeat_last_n` tokens of `history`. `window` is scratch space kept
/// by the caller so no step allocates.
pub(crate) fn apply_penalties(
    scores: &mut [f32],
    history: &[TokenId],
    params: &SamplingParams,
    window: &mut Vec<TokenId>,
) {
    if !params.has_penalties() {
        return;
    }
    let start = history.len().saturating_sub(params.repeat_last_n);
    window.clear();
    window.extend_from_slice(&history[start..]);
    window.sort_unstable();
    for run in window.chunk_by(|a, b| a == b) {
        let token = run[0] as usize;
        let Some(score) = scores.get_mut(token) else {
            continue;
        };
        let count = run.len() as f32;
        let mut s = *score;
        if s <= 0.0 {
            s *= params.repeat_penalty;
        } else {
            s /= params.repeat_penalty;
        }
        s -= count * params.frequency_penalty + params.presence_penalty;
        *score = clean(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(repeat: f32, last_n: usize, presence: f32, frequency: f32) -> SamplingParams {
        SamplingParams {
            repeat_penalty: repeat,
            repeat_last_n: last_n,
            presence_penalty: presence,
            frequency_penalty: frequency,
            ..SamplingParams::default()
        }
    }

    #[test]
    fn repeat_penalty_divides_positive_and_multiplies_negative() {
        let mut scores = vec![2.0, -2.0, 2.0, -2.0, 0.0];
        let mut scratch = Vec::new();
        apply_penalties(
            &mut scores,
            &[0, 1, 4, 0],
            &params(2.0, 64, 0.0, 0.0),
            &mut scratch,
        );
        // Repeats do not compound: llama.cpp applies the factor once per token.
        assert_eq!(scores, vec![1.0, -4.0, 2.0, -2.0, 0.0]);
    }

    #[test]
    fn only_the_window_is_penalised() {
        let mut scores = vec![1.0; 6];
        let mut scratch = Vec::new();
        // Window of 3: tokens 3, 4, 4; tokens 0..=2 are older and untouched.
        apply_penalties(
            &mut scores,
            &[0, 1, 2, 3, 4, 4],
            &params(2.0, 3, 0.0, 0.0),
            &mut scratch,
        );
        assert_eq!(scores, vec![1.0, 1.0, 1.0, 0.5, 0.5, 1.0]);

        let mut scores = vec![1.0; 3];
        apply_penalties(
            &mut scores,
            &[0, 1, 2],
            &params(2.0, 0, 1.0, 1.0),
            &mut scratch,
        );
        assert_eq!(
            scores,
            vec![1.0; 3],
            "repeat_last_n = 0 disables every penalty"
        );

        let mut scores = vec![1.0; 3];
        apply_penalties(
            &mut scores,
            &[0, 1, 2],
            &params(2.0, usize::MAX, 0.0, 0.0),
            &mut scratch,
        );
        assert_eq!(scores, vec![0.5; 3], "usize::MAX covers the whole history");
    }

    #[test]
    fn presence_counts_once_frequency_counts_each_occurrence() {
        let history = [1, 1, 1, 2];
        let mut scratch = Vec::new();

        let mut scores = vec![0.0; 4];
        apply_penalties(
            &mut scores,
            &history,
            &params(1.0, 64, 0.5, 0.0),
            &mut scratch,
        );
        assert_eq!(scores, vec![0.0, -0.5, -0.5, 0.0]);

        let mut scores = vec![0.0; 4];
        apply_penalties(
            &mut scores,
            &history,
            &params(1.0, 64, 0.0, 0.5),
            &mut scratch,
        );
        assert_eq!(scores, vec![0.0, -1.5, -0.5, 0.0]);

        let mut scores = vec![4.0; 4];
        apply_penalties(
            &mut scores,
            &history,
            &params(2.0, 64, 0.5, 0.25),
            &mut scratch,
        );
        // token 1: 4 / 2 - 3 * 0.25 - 0.5; token 2: 4 / 2 - 0.25 - 0.5
        assert_eq!(scores, vec![4.0, 0.75, 1.25, 4.0]);
    }

    #[test]
    fn out_of_vocabulary_ids_are_ignored() {
        let mut scores = vec![1.0, 1.0];
        let mut scratch = Vec::new();
        apply_penalties(
            &mut scores,
            &[7, 1_000_000],
            &params(2.0, 64, 1.0, 1.0),
            &mut scratch,
        );
        apply_logit_bias(&mut scores, &[(9, 5.0)]);
        assert_eq!(scores, vec![1.0, 1.0]);
    }

    #[test]
    fn bias_adds_and_can_ban() {
        let mut scores = vec![1.0, 1.0, 1.0];
        apply_logit_bias(&mut scores, &[(0, 2.5), (2, f32::NEG_INFINITY), (0, -0.5)]);
        assert_eq!(scores, vec![3.0, 1.0, f32::NEG_INFINITY]);
    }

    #[test]
    fn clean_handles_non_finite() {
        assert_eq!(clean(f32::NAN), f32::NEG_INFINITY);
        assert_eq!(clean(f32::INFINITY), f32::MAX);
        assert_eq!(clean(f32::NEG_INFINITY), f32::NEG_INFINITY);
        assert_eq!(clean(1.5), 1.5);
    }
}
