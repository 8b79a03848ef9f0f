//! The draft-model proposer: a smaller model with the same vocabulary
//! drafts greedily, a few batched forward passes per step for every
//! sequence that speculates with it (llama.cpp's `draft-simple`).
//!
//! Its KV cache has the target's block count and is addressed through the
//! target's block tables (vLLM's drafter does the same), so it needs no
//! bookkeeping of its own: a sequence's draft KV covers its first
//! `draft_computed` tokens, the draft's passes write up to the slots the
//! scheduler reserved for the drafts, and what the target rejects is simply
//! overwritten later. A sequence admitted with a cached prefix, or
//! recomputed after preemption, has its draft KV computed from the start.
//!
//! Drafts are greedy (the target treats them as one-hot: lossless for any
//! sampling); a sequence stops drafting once the draft's token is less
//! likely than `p_min`, and a draft shorter than `n_min` is dropped.
//!
//! With a [`PartialHead`] the draft scores only its vocabulary's most
//! frequent tokens ([`super::frequent_tokens`]); `p_min` then compares a
//! probability among those.

use std::sync::Arc;
use std::time::Instant;

use mlxr_models::{PartialHead, Step as ForwardStep, StepRunner};
use mlxr_sampling::top_probability;

use crate::scheduler::{ScheduledChunk, Scheduler};
use crate::{EngineError, LoadedModel};

/// Vocabularies may differ in size by this much (llama.cpp's
/// `SPEC_VOCAB_MAX_SIZE_DIFFERENCE`), their first tokens (often control
/// tokens) excepted.
const VOCAB_SIZE_SLACK: usize = 128;
const VOCAB_CHECK_FROM: u32 = 5;

pub struct DraftModel {
    pub model: Arc<LoadedModel>,
    runner: Box<dyn StepRunner>,
    /// The tokens the draft scores, when not all.
    head: Option<PartialHead>,
    step: ForwardStep,
    tokens: Vec<u32>,
}

/// A readable error unless `draft` tokenizes text exactly as `target` does.
pub fn check_compatible(target: &LoadedModel, draft: &LoadedModel) -> Result<(), EngineError> {
    let (t, d) = (&target.tokenizer, &draft.tokenizer);
    let refuse = |why: String| {
        Err(EngineError::Speculation(format!(
            "the draft model {} cannot draft for {}: {why}",
            draft.path.display(),
            target.path.display()
        )))
    };
    let (tn, dn) = (t.vocab_size(), d.vocab_size());
    if tn.abs_diff(dn) > VOCAB_SIZE_SLACK {
        return refuse(format!("vocabularies of {dn} and {tn} tokens"));
    }
    if t.bos() != d.bos() || t.eos() != d.eos() || t.add_bos() != d.add_bos() {
        return refuse("different BOS/EOS tokens".into());
    }
    if let Some(id) =
        (VOCAB_CHECK_FROM..tn.min(dn) as u32).find(|&id| t.token_text(id) != d.token_text(id))
    {
        return refuse(format!(
            "token {id} is {:?} in the draft and {:?} in the target",
            d.token_text(id).unwrap_or_default(),
            t.token_text(id).unwrap_or_default()
        ));
    }
    Ok(())
}

impl DraftModel {
    /// The head's tokens, when the draft scores only some.
    pub fn head_tokens(&self) -> Option<&[u32]> {
        self.head.as_ref().map(|h| h.tokens())
    }

    pub fn new(
        model: Arc<LoadedModel>,
        runner: Box<dyn StepRunner>,
        head: Option<PartialHead>,
    ) -> Self {
        Self {
            model,
            runner,
            head,
            step: ForwardStep::default(),
            tokens: Vec::new(),
        }
    }

    /// Fills the drafts of `chunks` whose sequences draft with this model
    /// (the scheduler reserved `chunk.draft` slots, holding placeholders):
    /// real tokens replace the placeholders, and a chunk whose draft came
    /// out shorter gives the rest of its slots back. Returns what the
    /// passes after the first cost.
    pub fn draft(
        &mut self,
        scheduler: &mut Scheduler,
        chunks: &mut [ScheduledChunk],
        block_size: usize,
    ) -> Result<DraftPasses, EngineError> {
        let mut timing = DraftPasses::default();
        // (chunk index, drafts made so far, still drafting)
        let mut active: Vec<(usize, usize, bool)> = chunks
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                c.draft > 0 && scheduler.seq(c.seq).is_some_and(|s| s.drafts_with_model())
            })
            .map(|(i, _)| (i, 0, true))
            .collect();
        let head = self.head.as_ref();
        let width = head.map_or(self.model.model.config().vocab_size, |h| h.tokens().len());
        let mut passes = 0;
        while active.iter().any(|a| a.2) {
            passes += 1;
            let started = Instant::now();
            self.step.clear();
            for &(i, made, drafting) in &active {
                if !drafting {
                    continue;
                }
                let c = &chunks[i];
                let seq = scheduler.seq(c.seq).expect("scheduled");
                let from = seq.draft_computed();
                self.tokens.clear();
                let committed = &seq.tokens[from.min(seq.tokens.len())..];
                self.tokens.extend_from_slice(committed);
                let drafted_from = from.saturating_sub(seq.tokens.len());
                self.tokens
                    .extend_from_slice(&seq.draft[drafted_from..made]);
                let table = scheduler.block_table(c.seq).iter().map(|b| b.0);
                self.step.push(&self.tokens, from, table);
            }
            self.step.finish(block_size)?;
            let logits = self
                .runner
                .execute_head(&self.model.model, head, &self.step)?;
            if passes > 1 {
                timing.steady += 1;
                timing.secs += started.elapsed().as_secs_f64();
            }
            let mut rows = logits.chunks_exact(width);
            for (i, made, drafting) in active.iter_mut() {
                if !*drafting {
                    continue;
                }
                let row = rows.next().expect("one row per drafting chunk");
                let c = &chunks[*i];
                let seq = scheduler.seq_mut(c.seq).expect("scheduled");
                let fed = seq.tokens.len() + *made - seq.draft_computed();
                seq.set_draft_computed(seq.draft_computed() + fed);
                let (column, p) = top_probability(row);
                let token = head.map_or(column, |h| h.tokens()[column as usize]);
                if p < seq.draft_p_min() {
                    *drafting = false;
                    continue;
                }
                seq.draft[*made] = token;
                *made += 1;
                *drafting = *made < c.draft;
            }
        }
        for (i, made, _) in active {
            let c = &mut chunks[i];
            scheduler.set_draft(c, made);
        }
        Ok(timing)
    }
}

/// What one round of drafting cost, without its first pass: that one also
/// feeds the draft model every token since its last draft (after a pause,
/// the whole prompt or a long stretch of text), which would make drafting
/// look dear exactly when it has been off.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DraftPasses {
    /// Passes after the first.
    pub steady: usize,
    pub secs: f64,
}
