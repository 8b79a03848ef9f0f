//! A step's sampling: each sequence that samples draws its next token (or
//! verifies its draft) from its logit rows, on several threads where the
//! forward pass runs on a GPU. A sequence's sampling touches only its own
//! state (sampler, grammar, tokens), so the split changes no token; on the
//! CPU the kernel threads own the cores and one thread samples.

use std::time::Instant;

use mlxr_tokenizer::Tokenizer;
use rayon::prelude::*;

use crate::scheduler::{ScheduledChunk, Scheduler};
use crate::sequence::{Sequence, Step};

/// One sequence's sampling in a step.
pub(crate) struct Sampled {
    pub steps: Vec<Step>,
    /// Draft tokens that stood.
    pub accepted: usize,
    /// When its previous token came (none: this is its first).
    pub previous: Option<Instant>,
    /// It verified a proposer's draft (not one the grammar forced).
    pub speculated: bool,
}

/// What the step's forward pass gives each sampling chunk and the
/// sequences sample with.
pub(crate) struct SampleInputs<'a> {
    pub chunks: &'a [ScheduledChunk],
    /// Per chunk: its logit rows (`1 + draft` of them).
    pub rows: &'a [Vec<&'a [f32]>],
    pub tokenizer: &'a Tokenizer,
    pub context_limit: usize,
}

/// Samples every chunk that `samples`, on rayon's threads where `threads`
/// is more than one; per chunk index, `None` where the chunk samples
/// nothing (or its sequence is gone).
pub(crate) fn sample_all(
    scheduler: &mut Scheduler,
    inputs: &SampleInputs,
    threads: usize,
) -> Vec<Option<Sampled>> {
    let mut seqs = scheduler.sampling_seqs_mut(inputs.chunks, |_| true);
    let sampled: Vec<(usize, Sampled)> = if threads > 1 && seqs.len() > 1 {
        // Rayon's threads: idle while the model runs on a GPU. A panic
        // fails the step as one on this thread would.
        seqs.par_iter_mut()
            .map(|(i, seq)| (*i, sample_one(seq, *i, inputs)))
            .collect()
    } else {
        seqs.iter_mut()
            .map(|(i, seq)| (*i, sample_one(seq, *i, inputs)))
            .collect()
    };
    let mut out: Vec<Option<Sampled>> = (0..inputs.chunks.len()).map(|_| None).collect();
    for (i, s) in sampled {
        out[i] = Some(s);
    }
    out
}

fn sample_one(seq: &mut Sequence, i: usize, inputs: &SampleInputs) -> Sampled {
    let (chunk, rows) = (&inputs.chunks[i], &inputs.rows[i]);
    let previous = seq.last_token_at();
    let speculated = chunk.draft > 0 && !seq.draft_is_forced();
    let (steps, accepted) = if chunk.draft == 0 {
        let step = seq.sample(rows[0], inputs.tokenizer, inputs.context_limit);
        (vec![step], 0)
    } else {
        seq.verify(rows, inputs.tokenizer, inputs.context_limit)
    };
    Sampled {
        steps,
        accepted,
        previous,
        speculated,
    }
}
