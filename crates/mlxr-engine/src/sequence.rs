//! One request inside the engine: its tokens, how far its KV is computed,
//! and the per-request sampling and text state that turns sampled ids into
//! events.

use std::time::Instant;

use mlxr_sampling::{Draft, Sampled, Sampler, StopMatcher, TokenFilter};
use mlxr_structured::TokenConstraint;
use mlxr_tokenizer::{StreamDecoder, TokenId, Tokenizer};

use crate::events::{Event, FinishReason, Timings, TokenEvent, TokenLogprob, Usage};
use crate::kv::SeqId;
use crate::request::GenerateRequest;
use crate::spec::cost::StepCosts;
use crate::spec::{SpecState, SpecType, Speculation};

/// Where a sequence stands with the scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqStatus {
    /// Queued (new, or preempted and waiting to recompute its KV).
    Waiting,
    /// Holds KV blocks and is prefilling or decoding.
    Running,
}

pub struct Sequence {
    pub id: SeqId,
    pub status: SeqStatus,
    pub priority: i32,
    /// Prompt then generated tokens. The last generated token's KV is not
    /// computed yet: it is the input of the next decode step.
    pub tokens: Vec<TokenId>,
    pub prompt_len: usize,
    /// Leading tokens whose KV is in the cache.
    pub num_computed: usize,
    pub max_tokens: usize,
    pub ignore_eos: bool,
    sampler: Sampler,
    /// `None` when the request does not speculate.
    spec: Option<SpecState>,
    /// The draft tokens of the step being scheduled (after the last token).
    pub draft: Vec<TokenId>,
    /// The draft is what the grammar forces, not a proposer's.
    draft_forced: bool,
    stop: StopMatcher,
    /// What the output must be; moves on with each kept token.
    constraint: Option<Grammar>,
    decoder: StreamDecoder,
    /// Prompt tokens served by the prefix cache at first admission.
    pub cached_tokens: Option<usize>,
    arrived: Instant,
    first_scheduled: Option<Instant>,
    first_token: Option<Instant>,
    last_token: Option<Instant>,
}

/// A sequence's constraint as the sampler's filter; a failure of the
/// grammar is kept to end the sequence with.
struct Grammar {
    c: TokenConstraint,
    error: Option<String>,
    /// The grammar refused the token drawn for this position (so far).
    refusing: bool,
    /// It refused the one drawn for the last position: the next position
    /// will likely need its mask too ([`Sequence::mask_ahead`]).
    refused: bool,
}

impl TokenFilter for Grammar {
    fn allows(&mut self, token: TokenId) -> bool {
        self.c.allows(token)
    }

    fn restrict(&mut self, scores: &mut [f32]) {
        self.refusing = true;
        if let Err(e) = self.c.mask(scores) {
            self.error.get_or_insert(e.to_string());
        }
    }

    fn accept(&mut self, token: TokenId) {
        self.refused = std::mem::take(&mut self.refusing);
        if let Err(e) = self.c.commit(token) {
            self.error.get_or_insert(e.to_string());
        }
    }
}

/// What the engine does after a token was sampled.
pub enum Step {
    Continue(Event),
    /// The sequence ended: its token event (if any) and its final event.
    Finished(Option<Event>, Event),
}

impl Sequence {
    pub fn new(
        id: SeqId,
        req: &GenerateRequest,
        prompt: Vec<TokenId>,
        max_tokens: usize,
        speculation: Speculation,
    ) -> Result<Self, mlxr_sampling::SamplingError> {
        Ok(Self {
            id,
            status: SeqStatus::Waiting,
            priority: req.priority,
            prompt_len: prompt.len(),
            tokens: prompt,
            num_computed: 0,
            max_tokens,
            ignore_eos: req.ignore_eos,
            sampler: Sampler::new(req.sampling.clone())?,
            spec: SpecState::new(speculation),
            draft: Vec::new(),
            draft_forced: false,
            stop: StopMatcher::new(req.stop.clone()),
            constraint: None,
            decoder: StreamDecoder::new(),
            cached_tokens: None,
            arrived: Instant::now(),
            first_scheduled: None,
            first_token: None,
            last_token: None,
        })
    }

    /// The sequence's output must follow `constraint` (its drafts too, as
    /// they are verified), and ends when the constraint is complete.
    pub fn constrained(mut self, constraint: Option<TokenConstraint>) -> Self {
        if let Some(c) = constraint {
            self.constraint = Some(Grammar {
                c,
                error: None,
                refusing: false,
                refused: false,
            });
            self.ignore_eos = false;
        }
        self
    }

    /// Whether to compute the grammar's next mask ahead: where it refused
    /// the token drawn for the last position (inside a JSON string, say,
    /// it refuses few, and a mask nobody asks for only costs).
    pub fn wants_mask_ahead(&self) -> bool {
        self.constraint.as_ref().is_some_and(|g| g.refused)
    }

    /// Computes the grammar's mask for the next token before the logits
    /// come ([`crate::grammar_masks`]); a failure ends the sequence when it
    /// samples.
    pub fn mask_ahead(&mut self) {
        if let Some(grammar) = &mut self.constraint {
            if let Err(e) = grammar.c.mask_ahead() {
                grammar.error.get_or_insert(e.to_string());
            }
        }
    }

    pub fn num_generated(&self) -> usize {
        self.tokens.len() - self.prompt_len
    }

    /// Tokens whose KV still has to be computed before the next sample.
    pub fn num_uncomputed(&self) -> usize {
        self.tokens.len() - self.num_computed
    }

    /// Called when a step first includes this sequence.
    pub fn mark_scheduled(&mut self) {
        self.first_scheduled.get_or_insert_with(Instant::now);
    }

    /// Forget the computed KV (preempted by recompute): the whole sequence,
    /// generated tokens included, is prefilled again when readmitted.
    pub fn reset_for_recompute(&mut self) {
        self.num_computed = 0;
        self.set_draft_computed(0);
        self.status = SeqStatus::Waiting;
    }

    /// Samples the next token from `logits` (the last computed token's) and
    /// turns it into events. `context_limit` caps prompt + generated tokens.
    pub fn sample(&mut self, logits: &[f32], tokenizer: &Tokenizer, context_limit: usize) -> Step {
        let sampled = match &mut self.constraint {
            None => self.sampler.sample(logits, &self.tokens),
            Some(grammar) => self.sampler.sample_filtered(logits, &self.tokens, grammar),
        };
        let complete = match self.advance_grammar(sampled.token, tokenizer) {
            Ok(complete) => complete,
            Err(message) => return Step::Finished(None, Event::Error(message)),
        };
        let step = self.emit(sampled, tokenizer, context_limit);
        self.end_if_complete(step, complete)
    }

    /// Moves the grammar (if any) past `last`, a step's last token (drafts
    /// that stood before it moved it on as they were verified). `Ok(true)`:
    /// the output is complete; `Err`: the grammar failed.
    fn advance_grammar(&mut self, last: TokenId, tokenizer: &Tokenizer) -> Result<bool, String> {
        let Some(grammar) = &mut self.constraint else {
            return Ok(false);
        };
        if !tokenizer.is_eog(last) {
            grammar.accept(last);
        }
        match grammar.error.take() {
            Some(message) => Err(message),
            None => Ok(grammar.c.is_finished()),
        }
    }

    /// `step`, the last of a step, as the end of the reply when the grammar
    /// is complete: nothing may follow, as after an end-of-generation token.
    fn end_if_complete(&mut self, step: Step, complete: bool) -> Step {
        match step {
            Step::Continue(event) if complete => {
                Step::Finished(Some(event), self.finish(FinishReason::Stop, true))
            }
            step => step,
        }
    }

    /// Drafts the next step's tokens into [`Self::draft`], at most `most`,
    /// never past `max_tokens`, as many as goodput at `costs` says in a step
    /// of `others` other query rows; returns how many.
    /// A draft model's draft is reserved here as placeholders (copies of
    /// the last token), which [`crate::spec::draft_model`] fills in.
    pub fn propose(&mut self, most: usize, costs: &StepCosts, others: usize) -> usize {
        self.draft.clear();
        self.draft_forced = false;
        let room = self.max_tokens.saturating_sub(self.num_generated() + 1);
        if let Some(grammar) = &mut self.constraint {
            // Tokens the grammar forces: a draft that verification under the
            // grammar always keeps (fast-forward).
            let forced = grammar.c.forced();
            if !forced.is_empty() {
                self.draft.extend(forced.iter().take(most.min(room)));
                self.draft_forced = !self.draft.is_empty();
                return self.draft.len();
            }
        }
        let Some(spec) = &mut self.spec else { return 0 };
        if spec.params().spec_type == SpecType::Draft {
            let last = *self.tokens.last().expect("decoding sequences have tokens");
            self.draft
                .resize(spec.draft_len(most.min(room), costs, others), last);
        } else {
            let draft = spec.propose(&self.tokens, most.min(room), costs, others);
            self.draft.extend_from_slice(draft);
        }
        self.draft.len()
    }

    /// Whether this sequence's drafts come from the draft model.
    pub fn drafts_with_model(&self) -> bool {
        !self.draft_forced
            && self
                .spec
                .as_ref()
                .is_some_and(|s| s.params().spec_type == SpecType::Draft)
    }

    /// The scheduled draft is what the grammar forces (not speculation).
    pub fn draft_is_forced(&self) -> bool {
        self.draft_forced
    }

    /// Leading tokens whose KV is in the draft model's cache.
    pub fn draft_computed(&self) -> usize {
        self.spec.as_ref().map_or(0, |s| s.draft_computed)
    }

    pub fn set_draft_computed(&mut self, n: usize) {
        if let Some(spec) = &mut self.spec {
            spec.draft_computed = n;
        }
    }

    /// The draft model stops drafting below this probability.
    pub fn draft_p_min(&self) -> f32 {
        self.spec.as_ref().map_or(0.0, |s| s.params().p_min)
    }

    /// Of a draft `made` tokens long, how many to verify (none when shorter
    /// than `n_min`).
    pub fn draft_kept(&self, made: usize) -> usize {
        match &self.spec {
            Some(s) if made >= s.params().n_min => made,
            _ => 0,
        }
    }

    /// After a step that scored the last token and the draft: the logits
    /// `rows` (one per draft token and one more) decide which drafts stand
    /// ([`Sampler::verify`]); those and one more token are emitted in order,
    /// up to the first that ends the sequence. Returns the steps and how
    /// many drafts stood.
    pub fn verify(
        &mut self,
        rows: &[&[f32]],
        tokenizer: &Tokenizer,
        context_limit: usize,
    ) -> (Vec<Step>, usize) {
        let draft = std::mem::take(&mut self.draft);
        let d = Draft {
            tokens: &draft,
            probs: None,
        };
        let verified = match &mut self.constraint {
            None => self.sampler.verify(rows, &self.tokens, d),
            Some(grammar) => self.sampler.verify_filtered(rows, &self.tokens, d, grammar),
        };
        if let (Some(spec), false) = (&mut self.spec, self.draft_forced) {
            spec.record(draft.len(), verified.accepted);
        }
        let last = verified.tokens.last().expect("a step emits a token").token;
        let complete = match self.advance_grammar(last, tokenizer) {
            Ok(complete) => complete,
            Err(message) => return (vec![Step::Finished(None, Event::Error(message))], 0),
        };
        let committed = self.tokens.len() + verified.accepted;
        let mut steps = Vec::with_capacity(verified.tokens.len());
        let n = verified.tokens.len();
        for (i, sampled) in verified.tokens.into_iter().enumerate() {
            let mut step = self.emit(sampled, tokenizer, context_limit);
            if i + 1 == n {
                step = self.end_if_complete(step, complete);
            }
            let finished = matches!(step, Step::Finished(..));
            steps.push(step);
            if finished {
                break;
            }
        }
        self.draft = draft;
        self.draft.clear();
        // The draft model's KV past the last committed token is stale.
        let draft_computed = self.draft_computed().min(committed);
        self.set_draft_computed(draft_computed);
        (steps, verified.accepted)
    }

    /// Appends a sampled token and turns it into events.
    fn emit(&mut self, sampled: Sampled, tokenizer: &Tokenizer, context_limit: usize) -> Step {
        let id = sampled.token;
        let now = Instant::now();
        self.first_token.get_or_insert(now);
        self.last_token = Some(now);
        self.tokens.push(id);

        let is_eog = tokenizer.is_eog(id) && !self.ignore_eos;
        let piece = if is_eog {
            String::new()
        } else {
            self.decoder.push(tokenizer, id)
        };
        let update = self.stop.push(&piece);
        let logprob = |id, logprob| TokenLogprob {
            id,
            token: String::from_utf8_lossy(&tokenizer.token_to_piece(id, true)).into_owned(),
            logprob,
        };
        let event = Event::Token(TokenEvent {
            id,
            text: update.emit,
            logprob: sampled.logprob.map(|lp| logprob(id, lp)),
            top_logprobs: sampled
                .top_logprobs
                .iter()
                .map(|&(t, lp)| logprob(t, lp))
                .collect(),
        });
        let finish = if is_eog || update.stopped {
            Some(FinishReason::Stop)
        } else if self.num_generated() >= self.max_tokens || self.tokens.len() >= context_limit {
            Some(FinishReason::Length)
        } else {
            None
        };
        match finish {
            None => Step::Continue(event),
            Some(reason) => {
                // A stop string swallows everything after it.
                let flush = !update.stopped;
                Step::Finished(Some(event), self.finish(reason, flush))
            }
        }
    }

    /// The final event. `flush`: release text held back for stop strings
    /// and incomplete UTF-8.
    pub fn finish(&mut self, reason: FinishReason, flush: bool) -> Event {
        let text = if flush {
            let rest = self.stop.push(&self.decoder.finish()).emit;
            rest + &self.stop.finish()
        } else {
            String::new()
        };
        Event::Done {
            finish_reason: reason,
            text,
            usage: Usage {
                prompt_tokens: self.prompt_len,
                cached_tokens: self.cached_tokens.unwrap_or(0),
                completion_tokens: self.num_generated(),
            },
            timings: self.timings(),
        }
    }

    /// When the previous token was sampled (for inter-token latency).
    pub fn last_token_at(&self) -> Option<Instant> {
        self.last_token
    }

    pub fn arrived_at(&self) -> Instant {
        self.arrived
    }

    fn timings(&self) -> Timings {
        let ms = |a: Instant, b: Instant| b.saturating_duration_since(a).as_secs_f64() * 1000.0;
        let now = Instant::now();
        let scheduled = self.first_scheduled.unwrap_or(now);
        let first = self.first_token.unwrap_or(now);
        Timings {
            queued_ms: ms(self.arrived, scheduled),
            ttft_ms: ms(self.arrived, first),
            prompt_n: self.prompt_len - self.cached_tokens.unwrap_or(0),
            prompt_ms: ms(scheduled, first),
            predicted_n: self.num_generated(),
            predicted_ms: ms(first, self.last_token.unwrap_or(first)),
            draft_n: self.spec.as_ref().map_or(0, |s| s.drafted),
            draft_n_accepted: self.spec.as_ref().map_or(0, |s| s.accepted),
        }
    }
}
