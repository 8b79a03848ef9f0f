//! Which tokens of which sequences go into the next forward pass.
//!
//! One loop, one token budget per step (`max_num_batched_tokens`):
//! 1. running sequences that decode get their one token each, oldest first;
//!    when the KV blocks run out, the newest running sequence is preempted
//!    (its blocks freed, its KV recomputed later); then those that speculate
//!    add their draft tokens where budget and free blocks allow (a draft
//!    never preempts anyone), unless more than `spec_disable_batch`
//!    sequences decode (the step is big enough already: verifying drafts
//!    would only cost);
//! 2. running sequences still reading a long prompt get the next chunk (at
//!    most `long_prefill_token_threshold` tokens while others wait, so a
//!    short request that arrives meanwhile starts at the next step);
//! 3. waiting sequences are admitted in priority, then arrival order, while
//!    budget, blocks and `max_num_seqs` allow, reusing cached prefix blocks.
//!
//! Prefill chunks and decode tokens share the pass, so a long prompt delays
//! the running sequences by one chunk per step, not by the whole prompt.

use std::collections::{HashMap, VecDeque};

use crate::config::EngineConfig;
use crate::kv::{BlockId, BlockManager, ExtraKey, KvError, SeqId};
use crate::sequence::{SeqStatus, Sequence};
use crate::spec::cost::StepCosts;

/// One sequence's share of a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScheduledChunk {
    pub seq: SeqId,
    pub start_pos: usize,
    pub len: usize,
    /// Of `len`, the draft tokens at the end (after the last sampled token)
    /// that this step verifies.
    pub draft: usize,
    /// The chunk reaches the end of the sequence: its logits give the next token.
    pub samples: bool,
}

pub struct Scheduler {
    max_num_batched_tokens: usize,
    max_num_seqs: usize,
    long_prefill_token_threshold: usize,
    prefix_caching: bool,
    spec_disable_batch: usize,
    /// Free blocks kept back when admitting while others run, so running
    /// sequences can grow a little before anyone is preempted.
    watermark_blocks: usize,
    blocks: BlockManager,
    seqs: HashMap<SeqId, Sequence>,
    /// Ordered by priority (high first), then arrival.
    waiting: VecDeque<SeqId>,
    /// Admission order.
    running: Vec<SeqId>,
    preemptions: u64,
}

impl Scheduler {
    pub fn new(config: &EngineConfig, num_blocks: usize) -> Self {
        Self {
            max_num_batched_tokens: config.max_num_batched_tokens.max(1),
            max_num_seqs: config.max_num_seqs.max(1),
            long_prefill_token_threshold: config.long_prefill_token_threshold.max(1),
            prefix_caching: config.prefix_caching,
            spec_disable_batch: config.spec_disable_batch,
            watermark_blocks: num_blocks / 100,
            blocks: BlockManager::new(num_blocks, config.block_size),
            seqs: HashMap::new(),
            waiting: VecDeque::new(),
            running: Vec::new(),
            preemptions: 0,
        }
    }

    pub fn blocks(&self) -> &BlockManager {
        &self.blocks
    }

    pub fn num_waiting(&self) -> usize {
        self.waiting.len()
    }

    pub fn num_running(&self) -> usize {
        self.running.len()
    }

    pub fn num_preemptions(&self) -> u64 {
        self.preemptions
    }

    pub fn is_idle(&self) -> bool {
        self.seqs.is_empty()
    }

    pub fn seq(&self, id: SeqId) -> Option<&Sequence> {
        self.seqs.get(&id)
    }

    pub fn seq_mut(&mut self, id: SeqId) -> Option<&mut Sequence> {
        self.seqs.get_mut(&id)
    }

    /// Every sequence, waiting or running.
    pub fn seqs_mut(&mut self) -> impl Iterator<Item = &mut Sequence> {
        self.seqs.values_mut()
    }

    /// The sequences of the chunks that sample this step and that `keep`
    /// takes, each with its chunk's index in `chunks`.
    pub fn sampling_seqs_mut(
        &mut self,
        chunks: &[ScheduledChunk],
        keep: impl Fn(&ScheduledChunk) -> bool,
    ) -> Vec<(usize, &mut Sequence)> {
        let mut index: Vec<(SeqId, usize)> = chunks
            .iter()
            .enumerate()
            .filter(|(_, c)| c.samples && keep(c))
            .map(|(i, c)| (c.seq, i))
            .collect();
        index.sort_unstable();
        self.seqs
            .values_mut()
            .filter_map(|s| {
                let at = index.binary_search_by_key(&s.id, |&(id, _)| id).ok()?;
                Some((index[at].1, s))
            })
            .collect()
    }

    pub fn block_table(&self, id: SeqId) -> &[BlockId] {
        self.blocks.block_table(id).unwrap_or_default()
    }

    pub fn add(&mut self, seq: Sequence) {
        let id = seq.id;
        let key = |s: &Sequence| (-s.priority, s.id);
        let at = self
            .waiting
            .iter()
            .position(|w| key(&self.seqs[w]) > key(&seq))
            .unwrap_or(self.waiting.len());
        self.seqs.insert(id, seq);
        self.waiting.insert(at, id);
    }

    /// Removes a sequence wherever it is, freeing its blocks.
    pub fn remove(&mut self, id: SeqId) -> Option<Sequence> {
        let seq = self.seqs.remove(&id)?;
        self.waiting.retain(|&w| w != id);
        self.running.retain(|&r| r != id);
        if self.blocks.contains(id) {
            self.blocks.free(id).expect("sequence has blocks");
        }
        Some(seq)
    }

    /// After the forward pass over `chunk`: its KV is written, and of its
    /// draft tokens the first `accepted` stood. The others' slots are given
    /// back (their KV is never read: the next step overwrites it), so the
    /// prefix cache only ever sees committed tokens.
    pub fn chunk_computed(&mut self, chunk: &ScheduledChunk, accepted: usize) {
        if let Some(seq) = self.seqs.get_mut(&chunk.seq) {
            let end = chunk.start_pos + chunk.len - (chunk.draft - accepted.min(chunk.draft));
            seq.num_computed = end;
            // These only fail for an unknown sequence, and this one is known.
            if chunk.draft > 0 {
                let _ = self.blocks.truncate(chunk.seq, end);
            }
            let _ = self.blocks.mark_computed(chunk.seq, end);
        }
    }

    /// A draft model filled `chunk`'s reserved draft slots with `made`
    /// tokens (in the sequence's `draft`): the rest of the slots go back, a
    /// draft shorter than the request's `n_min` entirely, and the block
    /// hashes cover the real tokens.
    pub fn set_draft(&mut self, chunk: &mut ScheduledChunk, made: usize) {
        let Some(seq) = self.seqs.get_mut(&chunk.seq) else {
            return;
        };
        let kept = seq.draft_kept(made.min(chunk.draft));
        seq.draft.truncate(kept);
        chunk.len -= chunk.draft - kept;
        chunk.draft = kept;
        let committed = seq.tokens.len();
        // Known sequence: these cannot fail.
        let _ = self.blocks.truncate(chunk.seq, committed + kept);
        let _ = self.blocks.replace_tail(chunk.seq, committed, &seq.draft);
    }

    /// The next step's chunks; speculating sequences draft as far as
    /// goodput at the measured step `costs` says.
    pub fn schedule(&mut self, costs: &StepCosts) -> Vec<ScheduledChunk> {
        let mut budget = self.max_num_batched_tokens;
        let mut out = Vec::new();
        self.schedule_decodes(&mut budget, &mut out);
        if out.len() <= self.spec_disable_batch {
            self.add_drafts(&mut budget, &mut out, costs);
        }
        self.schedule_running_prefills(&mut budget, &mut out);
        self.admit_waiting(&mut budget, &mut out);
        for chunk in &out {
            if let Some(seq) = self.seqs.get_mut(&chunk.seq) {
                seq.mark_scheduled();
            }
        }
        out
    }

    fn schedule_decodes(&mut self, budget: &mut usize, out: &mut Vec<ScheduledChunk>) {
        let mut i = 0;
        while i < self.running.len() && *budget > 0 {
            let id = self.running[i];
            if !self.is_decoding(id) {
                i += 1;
                continue;
            }
            // Make room by preempting the newest sequences (never one that is
            // already in this step: those sit before `i`).
            while !self.blocks.can_append(id, 1).unwrap_or(false) {
                let victim = *self.running.last().expect("id is running");
                self.preempt(victim);
                if victim == id {
                    break;
                }
            }
            if !self.running.contains(&id) {
                break;
            }
            let seq = &self.seqs[&id];
            let last = *seq.tokens.last().expect("decoding sequences have tokens");
            let start_pos = seq.num_computed;
            self.blocks
                .append_slot(id, &[last])
                .expect("room was made above");
            out.push(ScheduledChunk {
                seq: id,
                start_pos,
                len: 1,
                draft: 0,
                samples: true,
            });
            *budget -= 1;
            i += 1;
        }
    }

    /// Extends the decode chunks of speculating sequences with their drafts,
    /// as far as the budget and the free blocks go.
    fn add_drafts(&mut self, budget: &mut usize, out: &mut [ScheduledChunk], costs: &StepCosts) {
        // The step's query rows so far (its decodes, then drafts as added).
        let mut rows: usize = out.iter().map(|c| c.len).sum();
        for chunk in out.iter_mut() {
            if *budget == 0 {
                break;
            }
            let seq = self.seqs.get_mut(&chunk.seq).expect("scheduled");
            let mut k = seq.propose(*budget, costs, rows - chunk.len);
            while k > 0 && !self.blocks.can_append(chunk.seq, k).unwrap_or(false) {
                k -= 1;
            }
            seq.draft.truncate(k);
            if k == 0 {
                continue;
            }
            self.blocks
                .append_slot(chunk.seq, &seq.draft)
                .expect("room was checked above");
            chunk.len += k;
            chunk.draft = k;
            *budget -= k;
            rows += k;
        }
    }

    fn schedule_running_prefills(&mut self, budget: &mut usize, out: &mut Vec<ScheduledChunk>) {
        let cap = if self.waiting.is_empty() {
            usize::MAX
        } else {
            self.long_prefill_token_threshold
        };
        for &id in &self.running {
            if *budget == 0 {
                break;
            }
            // Decoding sequences got their slot (and their chunk) already.
            if out.iter().any(|c| c.seq == id) {
                continue;
            }
            let mut share = (*budget).min(cap);
            let chunk = prefill_chunk(&self.seqs[&id], &mut share);
            *budget -= chunk.len;
            out.push(chunk);
        }
    }

    fn admit_waiting(&mut self, budget: &mut usize, out: &mut Vec<ScheduledChunk>) {
        while *budget > 0 && self.running.len() < self.max_num_seqs {
            let Some(&id) = self.waiting.front() else {
                break;
            };
            let extra = self.extra_key(id);
            let seq = &self.seqs[&id];
            let needed = self.blocks.blocks_needed_for_prompt(&seq.tokens, extra);
            let reserve = if self.running.is_empty() {
                0
            } else {
                self.watermark_blocks
            };
            if needed + reserve > self.blocks.num_free_blocks() {
                break;
            }
            let allocation = match self.blocks.allocate_prompt(id, &seq.tokens, extra) {
                Ok(a) => a,
                Err(KvError::OutOfBlocks { .. }) => break,
                Err(e) => unreachable!("admitting {id:?}: {e}"),
            };
            self.waiting.pop_front();
            self.running.push(id);
            let seq = self.seqs.get_mut(&id).expect("waiting sequences exist");
            seq.status = SeqStatus::Running;
            seq.num_computed = allocation.cached_tokens;
            seq.cached_tokens.get_or_insert(allocation.cached_tokens);
            out.push(prefill_chunk(seq, budget));
        }
    }

    /// A running sequence decodes when its newest token (just sampled) has
    /// no KV slot yet; while prefilling, every token has one.
    fn is_decoding(&self, id: SeqId) -> bool {
        self.blocks.num_tokens(id) < Some(self.seqs[&id].tokens.len())
    }

    fn preempt(&mut self, id: SeqId) {
        self.running.retain(|&r| r != id);
        self.blocks.free(id).expect("running sequences have blocks");
        let seq = self.seqs.get_mut(&id).expect("running sequences exist");
        seq.reset_for_recompute();
        self.preemptions += 1;
        let seq = self.seqs.remove(&id).expect("just looked up");
        self.add(seq);
    }

    /// With prefix caching off every sequence hashes into its own space,
    /// so nothing is shared.
    fn extra_key(&self, id: SeqId) -> ExtraKey {
        if self.prefix_caching {
            ExtraKey::NONE
        } else {
            ExtraKey(id.0.wrapping_add(1))
        }
    }
}

fn prefill_chunk(seq: &Sequence, budget: &mut usize) -> ScheduledChunk {
    let len = seq.num_uncomputed().min(*budget);
    *budget -= len;
    ScheduledChunk {
        seq: seq.id,
        start_pos: seq.num_computed,
        len,
        draft: 0,
        samples: seq.num_computed + len == seq.tokens.len(),
    }
}

#[cfg(test)]
#[path = "scheduler_tests.rs"]
mod tests;
