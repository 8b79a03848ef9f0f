//! The buffers of a forward pass, on any backend.

use crate::backend::Backend;

/// Every intermediate of [`crate::DecoderModel::forward`], kept between
/// steps so a backend can reuse their memory.
pub struct Activations<B: Backend> {
    /// The residual stream `[tokens, hidden]`.
    pub x: B::Act,
    /// A normed copy of `x`, the input of the next block.
    pub normed: B::Act,
    /// A block's output `[tokens, hidden]` before it joins `x`.
    pub branch: B::Act,
    pub q: B::Act,
    pub k: B::Act,
    pub v: B::Act,
    /// QK-norm's output before it replaces `q` or `k`.
    pub head_norm: B::Act,
    pub attn: B::Act,
    pub gate: B::Act,
    pub up: B::Act,
    pub act: B::Act,
    /// A stacked matmul's rows before they are split.
    pub stacked: B::Act,
    /// `[rows, vocab]`: the logits of the step's `logit_rows`.
    pub logits: B::Act,
}

impl<B: Backend> Default for Activations<B> {
    fn default() -> Self {
        Self {
            x: Default::default(),
            normed: Default::default(),
            branch: Default::default(),
            q: Default::default(),
            k: Default::default(),
            v: Default::default(),
            head_norm: Default::default(),
            attn: Default::default(),
            gate: Default::default(),
            up: Default::default(),
            act: Default::default(),
            stacked: Default::default(),
            logits: Default::default(),
        }
    }
}
