//! The buffers of a buffered forward pass ([`crate::DecoderModel::forward_into`]).

use crate::kernels::{MatmulScratch, SpinPool};
use crate::paged::AttentionScratch;

/// Every intermediate of a forward pass, kept between passes: once a pass
/// of a given size has run, later passes up to that size allocate nothing.
/// One per engine (passes run one at a time).
#[derive(Default)]
pub struct Workspace {
    /// The residual stream `[tokens, hidden]`.
    pub(crate) x: Vec<f32>,
    /// A normed copy of `x`, the input of the next block.
    pub(crate) normed: Vec<f32>,
    /// A block's output `[tokens, hidden]` before it joins `x`.
    pub(crate) branch: Vec<f32>,
    pub(crate) q: Vec<f32>,
    pub(crate) k: Vec<f32>,
    pub(crate) v: Vec<f32>,
    /// QK-norm's output before it replaces `q` or `k`.
    pub(crate) head_norm: Vec<f32>,
    pub(crate) attn: Vec<f32>,
    pub(crate) gate: Vec<f32>,
    pub(crate) up: Vec<f32>,
    pub(crate) act: Vec<f32>,
    /// A stacked matmul's rows before they are split.
    pub(crate) stacked: Vec<f32>,
    pub(crate) positions: Vec<usize>,
    /// `cos`/`sin` of every token's angles per RoPE base.
    pub(crate) rope_tables: Vec<(Vec<f32>, Vec<f32>)>,
    /// Each chunk's last token (the rows that get logits).
    pub(crate) last: Vec<usize>,
    pub(crate) logits: Vec<f32>,
    pub(crate) matmul: MatmulScratch,
    pub(crate) attention: AttentionScratch,
    /// The kernels' threads (as many as rayon's pool where first used).
    pub(crate) pool: Option<SpinPool>,
}

/// `buf` resized to `len` values (a shorter length keeps the capacity).
pub(crate) fn sized(buf: &mut Vec<f32>, len: usize) -> &mut [f32] {
    buf.resize(len, 0.0);
    buf
}
