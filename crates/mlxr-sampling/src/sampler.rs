use crate::candidates::{self, collect_top_k, max_logit, Candidate};
use crate::fastexp;
use crate::logprobs::{log_sum_exp, logprob, top_logprobs};
use crate::penalties::{apply_logit_bias, apply_penalties, clean};
use crate::rng::Rng;
use crate::{SamplingError, SamplingParams, TokenId};

/// One sampled token.
#[derive(Clone, Debug, PartialEq)]
pub struct Sampled {
    pub token: TokenId,
    /// With `logprobs` set: the log-probability of `token` under the
    /// log-softmax of the logits after bias and penalties, before temperature
    /// and truncation (what vLLM and OpenAI report). `None` otherwise, which
    /// spares a pass over the vocabulary per token.
    pub logprob: Option<f32>,
    /// With `logprobs: Some(k)`, the k most likely tokens and their
    /// logprobs (same distribution), most likely first; ties by lower id.
    pub top_logprobs: Vec<(TokenId, f32)>,
}

/// Which tokens may come next (a grammar's view of the output so far).
pub trait TokenFilter {
    /// Whether `token` may come next; cheap, asked of the token drawn.
    fn allows(&mut self, token: TokenId) -> bool;
    /// Sets the score of every token that may not come next to -inf.
    fn restrict(&mut self, scores: &mut [f32]);
    /// `token` comes next (a draft that stood, while verifying).
    fn accept(&mut self, token: TokenId);
}

/// Picks tokens from logits with one sequence's parameters and random stream.
pub struct Sampler {
    params: SamplingParams,
    seed: u64,
    rng: Rng,
    /// Reused per step so a step does not allocate (beyond the result).
    scores: Vec<f32>,
    candidates: Vec<Candidate>,
    scratch: Vec<Candidate>,
    weights: Vec<f32>,
    window: Vec<TokenId>,
}

impl std::fmt::Debug for Sampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sampler")
            .field("params", &self.params)
            .field("seed", &self.seed)
            .finish_non_exhaustive()
    }
}

impl Sampler {
    pub fn new(params: SamplingParams) -> Result<Sampler, SamplingError> {
        params.validate()?;
        let seed = params.seed.unwrap_or_else(rand::random);
        Ok(Sampler {
            params,
            seed,
            rng: Rng::new(seed),
            scores: Vec::new(),
            candidates: Vec::new(),
            scratch: Vec::new(),
            weights: Vec::new(),
            window: Vec::new(),
        })
    }

    pub fn params(&self) -> &SamplingParams {
        &self.params
    }

    /// The seed in use: the requested one, or the one drawn from the OS, so a
    /// generation can be replayed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// `history`: every token of the sequence so far (prompt + generated),
    /// oldest first.
    ///
    /// Never panics: NaN logits count as -inf and +inf as the largest finite
    /// value. With no logit above -inf (or none at all) the result is token 0
    /// with logprob -inf.
    pub fn sample(&mut self, logits: &[f32], history: &[TokenId]) -> Sampled {
        if self.is_plain_greedy() {
            // The argmax of the logits as they are: no copy to prepare.
            return self.report(argmax(logits));
        }
        self.prepare(logits, history);
        let token = self.draw();
        self.report(token)
    }

    /// [`Self::sample`] under `filter` (a grammar): the token drawn as
    /// without it when the filter allows it, else one drawn again with the
    /// refused tokens removed, after penalties and before truncation (as
    /// llama.cpp's grammar sampling does; greedy picks the allowed argmax).
    pub fn sample_filtered(
        &mut self,
        logits: &[f32],
        history: &[TokenId],
        filter: &mut dyn TokenFilter,
    ) -> Sampled {
        self.prepare(logits, history);
        let mut token = self.draw();
        if !filter.allows(token) {
            filter.restrict(&mut self.scores);
            token = self.draw();
        }
        self.report(token)
    }

    /// Greedy with nothing that changes the logits and no logprobs to report.
    fn is_plain_greedy(&self) -> bool {
        let p = &self.params;
        p.is_greedy() && p.logit_bias.is_empty() && !p.has_penalties() && p.logprobs.is_none()
    }

    /// `filter`'s refusals on the prepared scores.
    pub(crate) fn restrict(&mut self, filter: &mut dyn TokenFilter) {
        filter.restrict(&mut self.scores);
    }

    /// Logit bias and penalties on `logits`, into `self.scores`.
    pub(crate) fn prepare(&mut self, logits: &[f32], history: &[TokenId]) {
        self.scores.clear();
        self.scores.extend(logits.iter().map(|&l| clean(l)));
        apply_logit_bias(&mut self.scores, &self.params.logit_bias);
        apply_penalties(&mut self.scores, history, &self.params, &mut self.window);
    }

    /// `token` with its logprobs (when asked for) under the prepared scores.
    pub(crate) fn report(&mut self, token: TokenId) -> Sampled {
        let Some(k) = self.params.logprobs else {
            return Sampled {
                token,
                logprob: None,
                top_logprobs: Vec::new(),
            };
        };
        let lse = log_sum_exp(&self.scores);
        let chosen = self
            .scores
            .get(token as usize)
            .copied()
            .unwrap_or(f32::NEG_INFINITY);
        Sampled {
            token,
            logprob: Some(logprob(chosen, lse)),
            top_logprobs: top_logprobs(&self.scores, k, lse, &mut self.scratch),
        }
    }

    /// The distribution [`Self::draw`] samples from (greedy: all on the
    /// argmax) over the prepared scores, dense and normalized, into `out`.
    pub(crate) fn distribution(&mut self, out: &mut Vec<f32>) {
        out.clear();
        match self.support() {
            Support::One(token) => {
                out.resize(self.scores.len(), 0.0);
                if let Some(x) = out.get_mut(token as usize) {
                    *x = 1.0;
                }
            }
            Support::Vocab => out.extend_from_slice(&self.weights),
            Support::Candidates => {
                out.resize(self.scores.len(), 0.0);
                for (&(id, _), &w) in self.candidates.iter().zip(&self.weights) {
                    out[id as usize] = w;
                }
            }
        }
        let total = fastexp::sum(out) as f32;
        if total > 0.0 {
            out.iter_mut().for_each(|w| *w /= total);
        }
    }

    /// A uniform in [0, 1) from this sequence's stream.
    pub(crate) fn uniform(&mut self) -> f64 {
        self.rng.uniform()
    }

    /// A token from the prepared scores (see [`Self::support`]).
    fn draw(&mut self) -> TokenId {
        match self.support() {
            Support::One(token) => token,
            Support::Vocab => {
                let u = self.rng.uniform();
                pick(&self.weights, u).map_or(0, |i| i as TokenId)
            }
            Support::Candidates => {
                let u = self.rng.uniform();
                let cands = &self.candidates;
                pick(&self.weights, u).map_or(cands[0].0, |i| cands[i].0)
            }
        }
    }

    /// top-k -> top-p -> min-p -> temperature on `self.scores`: the tokens
    /// a draw can pick and their unnormalized weights in `self.weights`.
    fn support(&mut self) -> Support {
        let p = &self.params;
        let inv_t = 1.0 / p.temperature;
        // A subnormal temperature: the limit is greedy.
        if p.is_greedy() || !inv_t.is_finite() {
            return Support::One(argmax(&self.scores));
        }
        if p.top_k == 0 && p.top_p >= 1.0 && p.min_p <= 0.0 {
            // Nothing to truncate: weights straight from the scores.
            let max = self
                .scores
                .iter()
                .copied()
                .fold(f32::NEG_INFINITY, f32::max);
            if max == f32::NEG_INFINITY {
                return Support::One(0);
            }
            tempered_weights(&self.scores, max, inv_t, &mut self.weights);
            return Support::Vocab;
        }
        let cands = &mut self.candidates;
        collect_top_k(&self.scores, p.top_k, cands);
        if cands.is_empty() {
            return Support::One(0);
        }
        candidates::top_p(cands, p.top_p, &mut self.weights);
        candidates::min_p(cands, p.min_p);
        let max = max_logit(cands);
        self.weights.clear();
        self.weights
            .extend(cands.iter().map(|&(_, l)| fastexp::exp((l - max) * inv_t)));
        Support::Candidates
    }
}

/// What [`Sampler::support`] leaves a draw: one token, or weights in
/// `Sampler::weights` per vocabulary id or per `Sampler::candidates` entry.
enum Support {
    One(TokenId),
    Vocab,
    Candidates,
}

/// Softmax weights at temperature 1/inv_t, unnormalised: exp((l - max) * inv_t).
fn tempered_weights(scores: &[f32], max: f32, inv_t: f32, out: &mut Vec<f32>) {
    out.clear();
    out.extend(scores.iter().map(|&l| fastexp::exp((l - max) * inv_t)));
}

/// Index drawn with probability proportional to `weights`, `u` uniform in
/// [0, 1). `None` only when every weight is 0.
pub(crate) fn pick(weights: &[f32], u: f64) -> Option<usize> {
    let target = u * fastexp::sum(weights);
    let mut cumulative = 0.0;
    let mut last_positive = None;
    for (i, &w) in weights.iter().enumerate() {
        if w > 0.0 {
            cumulative += f64::from(w);
            last_positive = Some(i);
            if cumulative > target {
                return Some(i);
            }
        }
    }
    // The running sum can end a rounding error short of the target.
    last_positive
}

/// Index of the largest score after [`clean`], the lowest index among
/// equals; 0 when none is above -inf. Two passes that the compiler
/// vectorizes (the maximum over eight lanes, NaN never taken, then its first
/// position): 8× faster than one compare-and-branch per token.
pub(crate) fn argmax(scores: &[f32]) -> TokenId {
    let mut lanes = [f32::NEG_INFINITY; 8];
    let mut chunks = scores.chunks_exact(8);
    for chunk in &mut chunks {
        for (m, &s) in lanes.iter_mut().zip(chunk) {
            *m = if s > *m { s } else { *m };
        }
    }
    let rest = chunks.remainder().iter().chain(&lanes);
    let max = clean(rest.fold(f32::NEG_INFINITY, |m, &s| if s > m { s } else { m }));
    if max == f32::NEG_INFINITY {
        return 0;
    }
    scores
        .iter()
        .position(|&s| clean(s) == max)
        .map_or(0, |i| i as TokenId)
}
