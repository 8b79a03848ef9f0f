//! Verification of a speculative step (Leviathan et al. 2211.17192, Chen et
//! al. 2302.01318): the target model's logits at the k + 1 positions of
//! [last token, x1..xk] decide which of the k draft tokens stand, and one
//! more token is sampled, so that every step emits 1..=k + 1 tokens
//! distributed exactly as sampling from the target alone.
//!
//! Each position's distribution is the request's full sampling transform
//! (bias, penalties over the history including the drafts accepted so far,
//! top-k, top-p, min-p, temperature): [`Sampler::distribution`]. Draft i
//! stands with probability min(1, p_i(x_i) / q_i(x_i)); at the first that
//! does not, a token is drawn from max(0, p_i − q_i) normalized, and the
//! step ends; when all stand, a bonus token is drawn from p_{k+1}. Without
//! the draft's distributions (prompt lookup, a greedy draft) q_i is one-hot
//! on x_i. Greedy requests draw nothing: a draft stands where it equals the
//! target's argmax.

use crate::sampler::{pick, Sampled, Sampler, TokenFilter};
use crate::TokenId;

/// The draft tokens of one step and, for a draft model that sampled them,
/// the distributions it sampled from.
#[derive(Clone, Copy, Debug)]
pub struct Draft<'a> {
    pub tokens: &'a [TokenId],
    /// Per draft token, the draft model's distribution over the vocabulary
    /// (after its own sampling transform, summing to 1). `None`: one-hot on
    /// each token.
    pub probs: Option<&'a [Vec<f32>]>,
}

/// What one speculative step emits.
#[derive(Clone, Debug, PartialEq)]
pub struct Verified {
    /// The accepted draft tokens, then the recovered or bonus token.
    pub tokens: Vec<Sampled>,
    /// How many of the draft tokens stand (`tokens.len() - 1`).
    pub accepted: usize,
}

impl Sampler {
    /// `logits`: the target's logits at each of the `draft.tokens.len() + 1`
    /// positions; `history`: the sequence before the step (prompt and
    /// generated tokens, the step's first query token included).
    ///
    /// # Panics
    /// When `logits` does not hold one row more than the draft has tokens,
    /// or `draft.probs` not one row per token.
    pub fn verify(&mut self, logits: &[&[f32]], history: &[TokenId], draft: Draft) -> Verified {
        self.verify_with(logits, history, draft, None)
    }

    /// [`Self::verify`] where `filter` (a grammar) says which tokens may
    /// come next: each position's distribution is restricted to what the
    /// filter allows after the drafts that stood before it (told to it with
    /// [`TokenFilter::accept`]), so the step emits exactly what sampling
    /// under the filter alone would.
    pub fn verify_filtered(
        &mut self,
        logits: &[&[f32]],
        history: &[TokenId],
        draft: Draft,
        filter: &mut dyn TokenFilter,
    ) -> Verified {
        self.verify_with(logits, history, draft, Some(filter))
    }

    fn verify_with(
        &mut self,
        logits: &[&[f32]],
        history: &[TokenId],
        draft: Draft,
        mut filter: Option<&mut dyn TokenFilter>,
    ) -> Verified {
        let k = draft.tokens.len();
        assert_eq!(
            logits.len(),
            k + 1,
            "one logits row per draft token, and one more"
        );
        if let Some(q) = draft.probs {
            assert_eq!(q.len(), k, "one draft distribution per draft token");
        }
        let mut seen = history.to_vec();
        let mut tokens = Vec::with_capacity(k + 1);
        let mut p = Vec::new();
        for (i, row) in logits.iter().enumerate() {
            self.prepare(row, &seen);
            if let Some(f) = filter.as_deref_mut() {
                self.restrict(f);
            }
            self.distribution(&mut p);
            let Some(&x) = draft.tokens.get(i) else {
                // Every draft stood: the bonus token.
                let token = self.draw_from(&p);
                tokens.push(self.report(token));
                break;
            };
            let q = draft.probs.map(|q| q[i].as_slice());
            let px = p.get(x as usize).copied().unwrap_or(0.0);
            let qx = q.map_or(1.0, |q| q.get(x as usize).copied().unwrap_or(0.0));
            let stands = if self.params().is_greedy() {
                px == 1.0
            } else {
                qx > 0.0 && self.uniform() < f64::from(px) / f64::from(qx)
            };
            if stands {
                tokens.push(self.report(x));
                seen.push(x);
                if let Some(f) = filter.as_deref_mut() {
                    f.accept(x);
                }
                continue;
            }
            // The residual max(0, p - q); where rounding leaves it empty, p.
            let mut residual = p.clone();
            match q {
                Some(q) => residual
                    .iter_mut()
                    .zip(q)
                    .for_each(|(r, &q)| *r = (*r - q).max(0.0)),
                None => {
                    if let Some(r) = residual.get_mut(x as usize) {
                        *r = 0.0;
                    }
                }
            }
            let from = if residual.iter().any(|&r| r > 0.0) {
                &residual
            } else {
                &p
            };
            let token = self.draw_from(from);
            tokens.push(self.report(token));
            break;
        }
        Verified {
            accepted: tokens.len() - 1,
            tokens,
        }
    }

    /// A token drawn from `weights` (greedy: their argmax, drawing nothing).
    fn draw_from(&mut self, weights: &[f32]) -> TokenId {
        if self.params().is_greedy() {
            return crate::sampler::argmax(weights);
        }
        let u = self.uniform();
        pick(weights, u).map_or(0, |i| i as TokenId)
    }
}
