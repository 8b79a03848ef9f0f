//! Speculative decoding: a proposer drafts a few tokens, the target model
//! verifies them in the sequence's next step (its last token and the drafts
//! as `1 + k` query tokens), and [`mlxr_sampling::Sampler::verify`] keeps
//! the drafts that stand and samples one token more, losslessly.
//!
//! - [`Speculation`]: how a request speculates, with llama-server's names
//!   (`speculative.type`, `speculative.n_max`, `speculative.n_min`,
//!   `speculative.p_min`): the engine's configuration, with the values a
//!   request gives ([`SpecOverrides`]) in place of its own.
//! - [`SpecState`]: one sequence's proposer, its acceptance rate and its
//!   counts.
//! - [`cost`]: the draft length each step, by goodput: measured step costs
//!   and the sequence's acceptance rate.
//! - [`prompt_lookup`]: drafts copied from the sequence itself.
//! - [`draft_model`]: drafts from a smaller model with the same vocabulary
//!   (`--model-draft`), scoring only [`frequent_tokens`].

pub mod cost;
pub mod draft_model;
pub mod frequent_tokens;
pub mod prompt_lookup;

use std::fmt;
use std::str::FromStr;

use crate::TokenId;
use cost::{Acceptance, DraftLength, StepCosts};
use prompt_lookup::PromptLookup;

/// The most draft tokens one step verifies (vLLM's `MAX_SPEC_LEN`).
pub const MAX_DRAFT_TOKENS: usize = 32;

/// Which proposer drafts (llama-server's `--spec-type`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SpecType {
    #[default]
    None,
    /// Prompt lookup: n-gram matches within the sequence.
    Ngram,
    /// A smaller model with the same vocabulary (`--model-draft`).
    Draft,
}

impl FromStr for SpecType {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "none" | "off" => Ok(Self::None),
            "ngram" | "prompt-lookup" | "lookup" => Ok(Self::Ngram),
            "draft" => Ok(Self::Draft),
            _ => Err(format!(
                "'{s}' is not a speculative decoding type (none, ngram, draft)"
            )),
        }
    }
}

impl fmt::Display for SpecType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::None => "none",
            Self::Ngram => "ngram",
            Self::Draft => "draft",
        })
    }
}

/// How a request speculates.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Speculation {
    pub spec_type: SpecType,
    /// The most draft tokens a step verifies (`speculative.n_max`,
    /// `--draft-max`); 0 turns speculation off.
    pub n_max: usize,
    /// Shorter drafts are not verified (`speculative.n_min`, `--draft-min`).
    pub n_min: usize,
    /// A draft model stops drafting once its token is less likely than this
    /// (`speculative.p_min`, `--draft-p-min`).
    pub p_min: f32,
    /// Prompt lookup's n-gram lengths: the longest recurring suffix of at
    /// least `ngram_min` and at most `ngram_max` tokens is matched.
    pub ngram_min: usize,
    pub ngram_max: usize,
    /// How long each step's draft is (`speculative.draft_length`).
    pub draft_length: DraftLength,
}

impl Default for Speculation {
    fn default() -> Self {
        Self {
            spec_type: SpecType::None,
            n_max: 8,
            n_min: 0,
            p_min: 0.75,
            ngram_min: 2,
            ngram_max: 4,
            draft_length: DraftLength::Goodput,
        }
    }
}

/// The speculation values one request (or a command line, or a model's
/// parameters) sets; the others stay as configured.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SpecOverrides {
    pub spec_type: Option<SpecType>,
    pub n_max: Option<usize>,
    pub n_min: Option<usize>,
    pub p_min: Option<f32>,
    pub ngram_min: Option<usize>,
    pub ngram_max: Option<usize>,
    pub draft_length: Option<DraftLength>,
}

impl SpecOverrides {
    /// Prompt lookup with `n_max` draft tokens.
    pub fn ngram(n_max: usize) -> Self {
        Self {
            spec_type: Some(SpecType::Ngram),
            n_max: Some(n_max),
            ..Self::default()
        }
    }

    /// No speculation.
    pub fn off() -> Self {
        Self {
            spec_type: Some(SpecType::None),
            ..Self::default()
        }
    }
}

impl Speculation {
    /// Prompt lookup with `n_max` draft tokens, the other values default.
    pub fn ngram(n_max: usize) -> Self {
        Self::default().with(&SpecOverrides::ngram(n_max))
    }

    /// These values with those `overrides` sets in their place.
    pub fn with(self, overrides: &SpecOverrides) -> Self {
        Self {
            spec_type: overrides.spec_type.unwrap_or(self.spec_type),
            n_max: overrides.n_max.unwrap_or(self.n_max),
            n_min: overrides.n_min.unwrap_or(self.n_min),
            p_min: overrides.p_min.unwrap_or(self.p_min),
            ngram_min: overrides.ngram_min.unwrap_or(self.ngram_min),
            ngram_max: overrides.ngram_max.unwrap_or(self.ngram_max),
            draft_length: overrides.draft_length.unwrap_or(self.draft_length),
        }
    }

    /// A readable error for values out of range, or for a proposer this
    /// build does not have.
    pub fn validate(&self) -> Result<(), String> {
        if self.n_max > MAX_DRAFT_TOKENS {
            return Err(format!(
                "speculative.n_max is {}; at most {MAX_DRAFT_TOKENS} draft tokens are verified per step",
                self.n_max
            ));
        }
        if self.n_min > self.n_max {
            return Err(format!(
                "speculative.n_min ({}) is above speculative.n_max ({})",
                self.n_min, self.n_max
            ));
        }
        if !(0.0..=1.0).contains(&self.p_min) {
            return Err(format!(
                "speculative.p_min is {}; it is a probability, 0 to 1",
                self.p_min
            ));
        }
        if self.ngram_min == 0 || self.ngram_min > self.ngram_max || self.ngram_max > 64 {
            return Err(format!(
                "prompt lookup n-gram lengths {}..={} are not 1 <= min <= max <= 64",
                self.ngram_min, self.ngram_max
            ));
        }
        Ok(())
    }

    fn is_on(&self) -> bool {
        self.spec_type != SpecType::None && self.n_max > 0
    }
}

/// One sequence's speculation: its proposer, how often its drafts stand,
/// and how many tokens it drafted and had accepted.
#[derive(Clone, Debug)]
pub struct SpecState {
    params: Speculation,
    acceptance: Acceptance,
    /// Steps since this sequence last drafted: one that goodput keeps from
    /// drafting still tries one token after `probe_every` steps, to learn
    /// whether its drafts started to stand.
    idle_steps: usize,
    /// Doubles after each probe that does not bring drafting back (a probe
    /// of a draft model first feeds it every token since its last draft).
    probe_every: usize,
    pub drafted: usize,
    pub accepted: usize,
    /// Leading tokens whose KV is in the draft model's cache.
    pub draft_computed: usize,
}

/// A sequence that goodput keeps from drafting tries one draft token after
/// this many steps at first, and at most this many times more at last.
const PROBE_EVERY: usize = 16;
const PROBE_BACKOFF_MAX: usize = 16;

impl SpecState {
    /// `None` when `params` turns speculation off.
    pub fn new(params: Speculation) -> Option<Self> {
        params.is_on().then_some(Self {
            params,
            acceptance: Acceptance::default(),
            idle_steps: 0,
            probe_every: PROBE_EVERY,
            drafted: 0,
            accepted: 0,
            draft_computed: 0,
        })
    }

    pub fn params(&self) -> &Speculation {
        &self.params
    }

    /// How many tokens to draft now, at most `most`, in a step of `others`
    /// other query rows: the length with the best expected goodput at these
    /// `costs` (never past `n_max`), or none when it is shorter than
    /// `n_min`. A sequence kept from drafting probes with one token now and
    /// then, where drafts that all stood would pay in this step.
    pub fn draft_len(&mut self, most: usize, costs: &StepCosts, others: usize) -> usize {
        let most = most.min(self.params.n_max);
        let with_model = self.params.spec_type == SpecType::Draft;
        let goodput = |alpha| costs.best_draft_len(alpha, most, with_model, others);
        let mut k = match self.params.draft_length {
            DraftLength::Goodput => goodput(self.acceptance.rate()),
            DraftLength::Max => most,
        };
        if k > 0 {
            self.probe_every = PROBE_EVERY;
        } else if self.idle_steps >= self.probe_every && goodput(1.0) > 0 {
            k = most.min(1);
            self.probe_every = (self.probe_every * 2).min(PROBE_EVERY * PROBE_BACKOFF_MAX);
        }
        if k < self.params.n_min.max(1) {
            self.idle_steps += 1;
            0
        } else {
            self.idle_steps = 0;
            k
        }
    }

    /// The prompt-lookup draft for the sequence `tokens` (prompt and output
    /// so far), at most `most` tokens and as long as goodput at `costs` says
    /// in a step of `others` other rows: empty when nothing recurs or the
    /// draft would be shorter than `n_min`.
    pub fn propose<'a>(
        &mut self,
        tokens: &'a [TokenId],
        most: usize,
        costs: &StepCosts,
        others: usize,
    ) -> &'a [TokenId] {
        let k = self.draft_len(most, costs, others);
        if k == 0 {
            return &[];
        }
        let lookup = PromptLookup {
            min_n: self.params.ngram_min,
            max_n: self.params.ngram_max,
            k,
        };
        let draft = lookup.propose(tokens);
        if draft.len() < self.params.n_min.max(1) {
            return &[];
        }
        draft
    }

    /// After a step that verified `drafted` tokens, `accepted` of which stood.
    pub fn record(&mut self, drafted: usize, accepted: usize) {
        self.drafted += drafted;
        self.accepted += accepted;
        self.acceptance.record(drafted, accepted);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_the_bad_value() {
        assert!(Speculation::ngram(8).validate().is_ok());
        let e = Speculation::ngram(33).validate().unwrap_err();
        assert!(e.contains("n_max is 33"), "{e}");
        let e = Speculation {
            n_min: 5,
            ..Speculation::ngram(4)
        }
        .validate()
        .unwrap_err();
        assert!(e.contains("n_min (5)"), "{e}");
        let e = Speculation {
            p_min: 1.5,
            ..Speculation::ngram(4)
        }
        .validate()
        .unwrap_err();
        assert!(e.contains("p_min"), "{e}");
        assert!("Ngram".parse::<SpecType>() == Ok(SpecType::Ngram));
        assert!("eagle".parse::<SpecType>().is_err());
    }

    #[test]
    fn draft_length_follows_goodput() {
        assert!(SpecState::new(Speculation::default()).is_none());
        assert!(SpecState::new(Speculation::ngram(0)).is_none());
        let unmeasured = StepCosts::default();
        let mut s = SpecState::new(Speculation::ngram(6)).unwrap();
        let t: Vec<TokenId> = [1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2].to_vec();
        assert_eq!(s.propose(&t, 99, &unmeasured, 0), &[3, 4, 5, 6, 7, 8]);
        assert_eq!(s.propose(&t, 2, &unmeasured, 0), &[3, 4]);
        s.record(6, 2);
        s.record(5, 0);
        assert_eq!((s.drafted, s.accepted), (11, 2));
        // Measured costs: a plain step 60 ms, 11 ms per extra row.
        let mut costs = StepCosts::default();
        costs.observe_target(1, 0.060);
        costs.observe_target(9, 0.148);
        for _ in 0..10 {
            s.record(4, 0);
        }
        // Drafts that never stand: none, then a one-token probe, the next
        // one twice as late.
        for _ in 0..PROBE_EVERY {
            assert!(s.propose(&t, 99, &costs, 0).is_empty());
        }
        assert_eq!(s.propose(&t, 99, &costs, 0), &[3]);
        s.record(1, 0);
        for _ in 0..2 * PROBE_EVERY {
            assert!(s.propose(&t, 99, &costs, 0).is_empty());
        }
        assert_eq!(s.propose(&t, 99, &costs, 0), &[3]);
        for _ in 0..10 {
            s.record(4, 4);
        }
        assert_eq!(s.propose(&t, 99, &costs, 0).len(), 6);
        // A draft model (29 ms a pass) beside 15 decoding sequences: even
        // drafts that all stood would cost the step more than they give, so
        // it does not probe either; alone, it does.
        let mut d = SpecState::new(Speculation {
            spec_type: SpecType::Draft,
            ..Speculation::ngram(6)
        })
        .unwrap();
        costs.observe_draft(1, 0.029);
        for _ in 0..10 {
            d.record(4, 0);
        }
        for _ in 0..4 * PROBE_EVERY {
            assert_eq!(d.draft_len(99, &costs, 15), 0);
        }
        assert_eq!(d.draft_len(99, &costs, 0), 1);
        // n_min discards short drafts.
        let mut s = SpecState::new(Speculation {
            n_min: 3,
            ..Speculation::ngram(6)
        })
        .unwrap();
        assert!(s.propose(&t, 2, &unmeasured, 0).is_empty());
    }
}
