//! Executing steps: a model's forward pass on one backend, with the
//! backend's buffers kept between steps (vLLM's and nano-vllm's
//! `ModelRunner`).

use crate::backend::Backend;
use crate::pass::Activations;
use crate::step::Step;
use crate::{DecoderModel, PartialHead, Result};

pub struct ModelRunner<B: Backend> {
    backend: B,
    acts: Activations<B>,
}

impl<B: Backend> ModelRunner<B> {
    pub fn new(backend: B) -> Self {
        Self {
            backend,
            acts: Activations::default(),
        }
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// Runs `step` (built with this backend's block size) through `model`
    /// and returns the logits of its `logit_rows` (each chunk's last token,
    /// or last few for a verifying chunk), `[rows, vocab_size]` row-major,
    /// on the host.
    pub fn execute(&mut self, model: &DecoderModel, step: &Step) -> Result<&[f32]> {
        self.execute_head(model, None, step)
    }

    /// [`Self::execute`] with the logits of `head`'s tokens only, `[rows,
    /// head.tokens().len()]`, when there is one.
    pub fn execute_head(
        &mut self,
        model: &DecoderModel,
        head: Option<&PartialHead>,
        step: &Step,
    ) -> Result<&[f32]> {
        step.check_blocks(self.backend.num_blocks())?;
        let Self { backend, acts } = self;
        backend.run(|b| model.forward_head(b, step, acts, head))?;
        backend.read(&acts.logits)
    }
}

/// [`ModelRunner::execute`] behind a trait object: what an engine holds
/// whichever backend runs its model.
pub trait StepRunner: Send {
    fn execute(&mut self, model: &DecoderModel, step: &Step) -> Result<&[f32]> {
        self.execute_head(model, None, step)
    }

    fn execute_head(
        &mut self,
        model: &DecoderModel,
        head: Option<&PartialHead>,
        step: &Step,
    ) -> Result<&[f32]>;
}

impl<B: Backend + Send> StepRunner for ModelRunner<B>
where
    B::Act: Send,
{
    fn execute_head(
        &mut self,
        model: &DecoderModel,
        head: Option<&PartialHead>,
        step: &Step,
    ) -> Result<&[f32]> {
        ModelRunner::execute_head(self, model, head, step)
    }
}

/// Sequences with fixed block tables over a runner's cache (sequence `i`
/// owns blocks `i * blocks_per_seq..`), fed chunk by chunk: the pass as
/// tools and tests drive it without a scheduler.
pub struct Session<B: Backend> {
    runner: ModelRunner<B>,
    step: Step,
    tables: Vec<Vec<u32>>,
    lens: Vec<usize>,
    block_size: usize,
}

impl<B: Backend> Session<B> {
    /// `backend`'s cache must hold `n_seqs * blocks_per_seq` blocks of
    /// `block_size`.
    pub fn new(backend: B, n_seqs: usize, blocks_per_seq: usize, block_size: usize) -> Self {
        let tables = (0..n_seqs)
            .map(|s| {
                (0..blocks_per_seq)
                    .map(|b| (s * blocks_per_seq + b) as u32)
                    .collect()
            })
            .collect();
        Self::with_tables(backend, tables, block_size)
    }

    /// Sequence `i` in the blocks `tables[i]`.
    pub fn with_tables(backend: B, tables: Vec<Vec<u32>>, block_size: usize) -> Self {
        let n_seqs = tables.len();
        Self {
            runner: ModelRunner::new(backend),
            step: Step::default(),
            tables,
            lens: vec![0; n_seqs],
            block_size,
        }
    }

    /// Feeds `(sequence, tokens)` chunks in one step, each continuing its
    /// sequence, and returns each chunk's last-token logits (`[chunks,
    /// vocab]`).
    pub fn feed(&mut self, model: &DecoderModel, chunks: &[(usize, &[u32])]) -> Result<&[f32]> {
        self.step.clear();
        for &(seq, tokens) in chunks {
            let table = self
                .tables
                .get(seq)
                .ok_or_else(|| crate::ModelError::InvalidBatch(format!("no sequence {seq}")))?;
            self.step
                .push(tokens, self.lens[seq], table.iter().copied());
        }
        self.step.finish(self.block_size)?;
        let logits = self.runner.execute(model, &self.step)?;
        for &(seq, tokens) in chunks {
            self.lens[seq] += tokens.len();
        }
        Ok(logits)
    }

    /// Forgets sequence `seq`'s tokens from `len` on (a prompt that shares
    /// only a prefix continues from there).
    pub fn truncate(&mut self, seq: usize, len: usize) {
        if let Some(l) = self.lens.get_mut(seq) {
            *l = (*l).min(len);
        }
    }

    /// Treats sequence `seq`'s first `len` tokens as cached: its blocks are
    /// shared with a sequence that computed them (a prefix-cache hit).
    pub fn assume_cached(&mut self, seq: usize, len: usize) {
        if let Some(l) = self.lens.get_mut(seq) {
            *l = len;
        }
    }

    pub fn backend(&self) -> &B {
        self.runner.backend()
    }

    pub fn backend_mut(&mut self) -> &mut B {
        &mut self.runner.backend
    }
}
