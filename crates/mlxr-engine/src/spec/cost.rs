//! Draft lengths chosen by goodput (Liu et al., "Optimizing Speculative
//! Decoding for Serving Large Language Models Using Goodput", 2406.14066):
//! the engine measures what its steps cost, each sequence estimates how
//! often its drafts stand, and a sequence drafts the k that gives the most
//! tokens per second, none when no k beats plain decoding.
//!
//! With a per-token acceptance rate α, a step that verifies k drafts emits
//! (1 − α^(k+1)) / (1 − α) tokens on average, and costs k draft-model
//! passes (none for prompt lookup) plus a target step with k more query
//! rows. On a CPU, those rows are far from free (a 1.5B target verifying
//! 8 drafts takes more than twice a plain decode on two cores), so a long
//! draft can lose even when most of it stands.

/// A least-squares line y = a + b·x over exponentially weighted samples
/// (recent steps count most: the load and the context length move).
#[derive(Clone, Debug, Default)]
struct DecayingFit {
    samples: u64,
    w: f64,
    sx: f64,
    sy: f64,
    sxx: f64,
    sxy: f64,
    /// The last well-determined slope: while x stays the same, the fit
    /// cannot tell the slope, and this one stands.
    slope: Option<f64>,
}

/// Weight kept by older samples per new one (about the last 50 count).
const DECAY: f64 = 0.98;

impl DecayingFit {
    fn observe(&mut self, x: f64, y: f64) {
        self.samples += 1;
        self.w = self.w * DECAY + 1.0;
        self.sx = self.sx * DECAY + x;
        self.sy = self.sy * DECAY + y;
        self.sxx = self.sxx * DECAY + x * x;
        self.sxy = self.sxy * DECAY + x * y;
        let var = self.w * self.sxx - self.sx * self.sx;
        // x spread by at least one row over the weighted samples.
        if var > self.w * self.w * 0.25 {
            self.slope = Some(((self.w * self.sxy - self.sx * self.sy) / var).max(0.0));
        }
    }

    /// The fitted y at `x`; `None` before the slope is known.
    fn predict(&self, x: f64) -> Option<f64> {
        let b = self.slope?;
        let a = (self.sy - b * self.sx) / self.w;
        Some((a + b * x).max(f64::MIN_POSITIVE))
    }
}

/// Verification steps with more query rows than this are prefill-bound
/// and say little about the cost of a few draft rows: they are not fitted.
const FIT_MAX_ROWS: usize = 64;

/// How long each step's draft is (`speculative.draft_length`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DraftLength {
    /// The length with the best expected goodput ([`StepCosts`]).
    #[default]
    Goodput,
    /// Always the most the request allows (`n_max`), as vLLM and
    /// llama-server draft.
    Max,
}

impl std::str::FromStr for DraftLength {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "goodput" => Ok(Self::Goodput),
            "max" => Ok(Self::Max),
            _ => Err(format!("'{s}' is not a draft length (goodput, max)")),
        }
    }
}

impl std::fmt::Display for DraftLength {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Goodput => "goodput",
            Self::Max => "max",
        })
    }
}

/// What the engine's steps cost, measured as they run.
#[derive(Clone, Debug, Default)]
pub struct StepCosts {
    /// Seconds of a target step against its query rows.
    target: DecayingFit,
    /// Seconds of one draft-model pass (one draft token for every drafting
    /// sequence).
    draft_pass: Option<f64>,
    /// Target steps since the draft model last ran. Past
    /// [`DRAFT_STALE_STEPS`] its cost counts as unknown: drafting measures
    /// it afresh. Else a draft pass timed while the host was busy could
    /// keep drafting off for good (only drafting updates the cost): on a
    /// 2-core host, a 0.5B draft measured beside a compiler turned it off
    /// for a whole benchmark run.
    steps_since_draft: usize,
}

/// Target steps after which an unused draft cost is measured again, by
/// [`STALE_DRAFT_LEN`] draft tokens (the first pass of a round is not
/// timed: it feeds the draft model the tokens since its last draft).
const DRAFT_STALE_STEPS: usize = 256;
const STALE_DRAFT_LEN: usize = 2;

impl StepCosts {
    /// A target step of `rows` query rows took `secs`.
    pub fn observe_target(&mut self, rows: usize, secs: f64) {
        if (1..=FIT_MAX_ROWS).contains(&rows) {
            self.target.observe(rows as f64, secs);
        }
        self.steps_since_draft = self.steps_since_draft.saturating_add(1);
    }

    fn draft_stale(&self) -> bool {
        self.steps_since_draft > DRAFT_STALE_STEPS
    }

    /// The draft model made `passes` passes in `secs`.
    pub fn observe_draft(&mut self, passes: usize, secs: f64) {
        if passes == 0 {
            return;
        }
        let per_pass = secs / passes as f64;
        self.draft_pass = Some(match self.draft_pass {
            Some(t) if !self.draft_stale() => t * DECAY + per_pass * (1.0 - DECAY),
            _ => per_pass,
        });
        self.steps_since_draft = 0;
    }

    /// The draft length with the most expected tokens per second for a
    /// sequence whose drafts stand with probability `alpha` each, from 0
    /// (plain decoding is best) to `most`; `most` while the costs are not
    /// measured yet (half of it every other step until the cost per row
    /// is known: steps of one size cannot tell it). `with_model`: the
    /// drafts cost draft-model passes. `others`: the step's other query
    /// rows, each counted as one token emitted: the whole step waits for
    /// the drafts and their verification, so in a full batch (a CPU step
    /// whose cost grows with every row) a draft pays only when it emits
    /// more than the time it adds would give every sequence.
    pub fn best_draft_len(
        &self,
        alpha: f64,
        most: usize,
        with_model: bool,
        others: usize,
    ) -> usize {
        let rows = (others + 1) as f64;
        let Some(plain) = self.target.predict(rows) else {
            return if self.target.samples % 2 == 1 {
                most.div_ceil(2)
            } else {
                most
            };
        };
        let per_draft = match (with_model, self.draft_pass) {
            (false, _) => 0.0,
            (true, None) => return most,
            (true, Some(_)) if self.draft_stale() => return most.min(STALE_DRAFT_LEN),
            (true, Some(t)) => t,
        };
        let alpha = alpha.clamp(0.0, 0.999);
        let (mut best, mut best_rate) = (0, rows / plain);
        let mut emitted = rows;
        let mut alpha_pow = 1.0;
        for k in 1..=most {
            alpha_pow *= alpha;
            emitted += alpha_pow;
            let secs = self.target.predict(rows + k as f64).unwrap_or(plain) + k as f64 * per_draft;
            let rate = emitted / secs;
            if rate > best_rate {
                (best, best_rate) = (k, rate);
            }
        }
        best
    }
}

/// One sequence's estimate of how often a draft token stands: accepted and
/// rejected draft tokens, exponentially weighted per step, from a prior of
/// [`PRIOR_ACCEPTANCE`] worth two tokens.
#[derive(Clone, Copy, Debug)]
pub struct Acceptance {
    stood: f64,
    fell: f64,
}

pub const PRIOR_ACCEPTANCE: f64 = 0.7;

/// Weight an earlier step keeps per step (a sequence's text changes kind:
/// code copied from the prompt, then new prose).
const ACCEPTANCE_DECAY: f64 = 0.8;

impl Default for Acceptance {
    fn default() -> Self {
        Self {
            stood: 2.0 * PRIOR_ACCEPTANCE,
            fell: 2.0 * (1.0 - PRIOR_ACCEPTANCE),
        }
    }
}

impl Acceptance {
    /// A step verified `drafted` tokens and `accepted` stood: each stood
    /// with α, and the first that did not (if any) fell with 1 − α.
    pub fn record(&mut self, drafted: usize, accepted: usize) {
        self.stood = self.stood * ACCEPTANCE_DECAY + accepted as f64;
        self.fell = self.fell * ACCEPTANCE_DECAY + f64::from(u8::from(accepted < drafted));
    }

    pub fn rate(&self) -> f64 {
        self.stood / (self.stood + self.fell)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Costs of a 2-core CPU host: a plain 1.5B decode 60 ms, 11 ms more
    /// per verified row, a 0.5B draft pass 29 ms.
    fn cpu_costs(draft_pass: f64) -> StepCosts {
        let mut c = StepCosts::default();
        for rows in [1, 9, 5, 3, 1, 2, 600] {
            c.observe_target(rows, 0.049 + 0.011 * rows as f64);
        }
        c.observe_draft(4, 4.0 * draft_pass);
        c
    }

    #[test]
    fn the_fit_finds_the_line_and_skips_prefills() {
        let c = cpu_costs(0.029);
        let plain = c.target.predict(1.0).unwrap();
        assert!((plain - 0.060).abs() < 1e-9, "{plain}");
        let nine = c.target.predict(9.0).unwrap();
        assert!((nine - 0.148).abs() < 1e-9, "{nine}");
        // One row count only: no slope yet.
        let mut one = DecayingFit::default();
        one.observe(1.0, 0.06);
        one.observe(1.0, 0.06);
        assert!(one.predict(2.0).is_none());
    }

    #[test]
    fn a_costly_draft_drafts_less() {
        let c = cpu_costs(0.029);
        // 93% acceptance: 8 drafts emit 6.7 tokens in 380 ms, 3 emit 3.6
        // in 180 ms.
        let k = c.best_draft_len(0.93, 8, true, 0);
        assert!((2..=4).contains(&k), "{k}");
        // Free drafts (prompt lookup) at the same acceptance: all of them.
        assert_eq!(c.best_draft_len(0.93, 8, false, 0), 8);
        // Drafts that rarely stand: plain decoding.
        assert_eq!(c.best_draft_len(0.2, 8, true, 0), 0);
        // A draft as costly as the target never pays.
        assert_eq!(cpu_costs(0.060).best_draft_len(0.9, 8, true, 0), 0);
    }

    #[test]
    fn a_full_batch_drafts_only_what_pays_for_every_sequence() {
        let c = cpu_costs(0.029);
        // Alone, near-certain drafts pay with the draft model.
        assert!(c.best_draft_len(0.99, 8, true, 0) > 0);
        // Beside 15 decoding sequences (a 225 ms step), one more row and a
        // draft pass cost 40 ms for at most one more token: never.
        assert_eq!(c.best_draft_len(0.99, 8, true, 15), 0);
        // Free drafts (prompt lookup) that nearly all stand still pay there
        // (11 ms a row for 0.99 tokens: more than the step's 71 a second);
        // half-standing ones do not (alone, they would).
        assert_eq!(c.best_draft_len(0.99, 8, false, 15), 8);
        assert_eq!(c.best_draft_len(0.5, 8, false, 15), 0);
        assert!(c.best_draft_len(0.5, 8, false, 0) > 0);
    }

    #[test]
    fn unmeasured_costs_draft_the_most() {
        let mut c = StepCosts::default();
        assert_eq!(c.best_draft_len(0.1, 5, false, 0), 5);
        // Steps of one size: every other one drafts half as much.
        c.observe_target(6, 0.1);
        assert_eq!(c.best_draft_len(0.1, 5, false, 0), 3);
        c.observe_target(6, 0.1);
        assert_eq!(c.best_draft_len(0.1, 5, false, 0), 5);
        c.observe_target(4, 0.08);
        assert_eq!(c.best_draft_len(0.1, 5, false, 0), 0);
        let mut c = cpu_costs(0.029);
        c.draft_pass = None;
        assert_eq!(c.best_draft_len(0.1, 5, true, 0), 5);
        c.observe_draft(1, 0.029);
        assert_eq!(c.best_draft_len(0.1, 5, true, 0), 0);
    }

    #[test]
    fn a_draft_cost_unused_for_long_is_measured_again() {
        // Timed on a busy host: drafting does not pay.
        let mut c = cpu_costs(0.2);
        assert_eq!(c.best_draft_len(0.99, 8, true, 0), 0);
        for _ in 0..DRAFT_STALE_STEPS {
            c.observe_target(1, 0.060);
        }
        assert_eq!(c.best_draft_len(0.99, 8, true, 0), 0);
        // Stale: the next step drafts two tokens, whatever the acceptance
        // or the batch, and its timed pass replaces the old cost rather
        // than move it a little.
        c.observe_target(1, 0.060);
        assert_eq!(c.best_draft_len(0.99, 8, true, 0), STALE_DRAFT_LEN);
        assert_eq!(c.best_draft_len(0.1, 8, true, 15), STALE_DRAFT_LEN);
        assert_eq!(c.best_draft_len(0.99, 8, false, 0), 8);
        c.observe_draft(1, 0.029);
        let k = c.best_draft_len(0.99, 8, true, 0);
        assert!(k > 0, "{k}");
        // A cost kept measured does not go stale.
        let mut c = cpu_costs(0.2);
        for _ in 0..2 * DRAFT_STALE_STEPS {
            c.observe_target(1, 0.060);
            c.observe_draft(1, 0.2);
        }
        assert_eq!(c.best_draft_len(0.99, 8, true, 0), 0);
    }

    #[test]
    fn acceptance_follows_recent_steps() {
        let mut a = Acceptance::default();
        assert!((a.rate() - PRIOR_ACCEPTANCE).abs() < 1e-12);
        for _ in 0..20 {
            a.record(4, 4);
        }
        assert!(a.rate() > 0.95, "{}", a.rate());
        for _ in 0..20 {
            a.record(4, 0);
        }
        assert!(a.rate() < 0.05, "{}", a.rate());
    }
}
