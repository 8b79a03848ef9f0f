//! The device seam: what a forward pass asks of the hardware.
//!
//! [`crate::DecoderModel::forward`] is written once against [`Backend`];
//! each backend owns its activation buffers, its paged KV cache and the
//! kernels behind every op. Weights are loaded once in the form the file
//! stores them ([`crate::layers::Linear`], ...), and each backend picks its
//! kernel per weight kind.
//!
//! - [`cpu::CpuBackend`]: the fast CPU kernels (ggml's arithmetic bit for
//!   bit, tiles, the spin pool), host buffers, no allocation per step.
//! - [`reference::ReferenceBackend`]: plain candle ops on any candle device;
//!   the independent implementation the tests compare against.
//! - [`cuda::CudaBackend`] (`cuda` feature): candle's ops and CUDA kernels
//!   (candle's quantized matmuls, cuBLAS) with a paged KV cache in device
//!   memory and paged attention kernels of our own.

pub mod candle;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod profiled;
pub mod reference;
pub mod step_buffer;

use crate::config::Activation;
use crate::layers::{Embedding, Linear, RmsNorm, Rope};
use crate::pass::Activations;
use crate::step::Step;
use crate::Result;

/// The attention geometry of one layer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionSpec {
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub scale: f32,
    /// A query at position `p` sees keys `j` with `p - j < window` only.
    pub sliding_window: Option<usize>,
    /// Scores (after `scale`) become `cap * tanh(score / cap)` before the
    /// mask and softmax (Gemma 2).
    pub softcap: Option<f32>,
}

/// `cap * tanh(x / cap)`: the soft cap of attention scores and logits
/// (Gemma 2), as transformers computes it.
#[inline(always)]
pub fn softcap(x: f32, cap: f32) -> f32 {
    (x / cap).tanh() * cap
}

/// The gated activation of a feed-forward block: `act(gate) * up`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Glu {
    /// SiLU (SwiGLU).
    Silu,
    /// The tanh-approximated GELU as ggml computes it (an f16 table lookup,
    /// about 1e-3 relative error): for GGML-quantized weights, so the result
    /// equals llama.cpp's.
    GeluGgml,
    /// The tanh-approximated GELU in f32 (float weights, compared against
    /// transformers).
    GeluTanh,
}

impl Glu {
    pub fn new(activation: Activation, ggml_weights: bool) -> Self {
        match activation {
            Activation::Silu => Glu::Silu,
            Activation::GeluTanh if ggml_weights => Glu::GeluGgml,
            Activation::GeluTanh => Glu::GeluTanh,
        }
    }
}

/// The KV cache a backend allocates for a model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvGeometry {
    pub n_layers: usize,
    pub num_blocks: usize,
    pub block_size: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
}

impl KvGeometry {
    /// `num_blocks` blocks of `block_size` tokens for `config`'s layers.
    pub fn new(config: &crate::ModelConfig, num_blocks: usize, block_size: usize) -> Self {
        Self {
            n_layers: config.n_layers,
            num_blocks,
            block_size,
            n_kv_heads: config.n_kv_heads,
            head_dim: config.head_dim,
        }
    }
}

/// One device's buffers and ops. Activations are `[rows, cols]` f32
/// row-major; an op sizes its output itself. Every op of one step runs
/// inside [`Backend::run`], after [`Backend::begin_step`].
pub trait Backend {
    /// An activation buffer (host memory, or a device tensor).
    type Act: Default;

    /// Blocks in this backend's KV cache.
    fn num_blocks(&self) -> usize;

    /// Runs `f` (a whole step) on this backend's threads or stream.
    fn run<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        f(self)
    }

    /// Runs `pass` (a step's layers, after [`Self::begin_step`]) over `acts`.
    /// A backend may record the pass once for steps of one shape and replay
    /// the record for later ones (CUDA graphs); `acts.logits` holds the
    /// step's logits either way, the other activations are then stale.
    fn execute(
        &mut self,
        step: &Step,
        acts: &mut Activations<Self>,
        mut pass: impl FnMut(&mut Self, &mut Activations<Self>) -> Result<()>,
    ) -> Result<()>
    where
        Self: Sized,
    {
        let _ = step;
        pass(self, acts)
    }

    /// Waits until the device has finished every op issued so far.
    fn synchronize(&mut self) -> Result<()> {
        Ok(())
    }

    /// Uploads the step's metadata (positions, slots, block tables) and
    /// builds what every layer shares (each RoPE's tables).
    fn begin_step(&mut self, step: &Step, ropes: &[Rope]) -> Result<()>;

    /// The rows of `tokens` of `table` into `out` `[tokens, hidden]`.
    fn embed(&mut self, table: &Embedding, tokens: &[u32], out: &mut Self::Act) -> Result<()>;

    /// `x *= factor`.
    fn scale(&mut self, x: &mut Self::Act, factor: f32) -> Result<()>;

    /// RMSNorm of every row of `norm.dim()` values of `x` (a `[tokens,
    /// heads * head_dim]` buffer is normed per head when `norm.dim()` is the
    /// head dimension).
    fn rms_norm(&mut self, x: &Self::Act, norm: &RmsNorm, out: &mut Self::Act) -> Result<()>;

    /// `out[m, out_features] = x[m, in_features] Wᵀ (+ b)`.
    fn matmul(&mut self, x: &Self::Act, w: &Linear, out: &mut Self::Act) -> Result<()>;

    /// `outs[j] = x W_jᵀ (+ b_j)` for each of `ws`: projections of one
    /// input (Q, K and V; gate and up), which a backend may run together.
    fn matmuls(&mut self, x: &Self::Act, ws: &[Linear], outs: &mut [&mut Self::Act]) -> Result<()> {
        for (w, out) in ws.iter().zip(outs.iter_mut()) {
            self.matmul(x, w, out)?;
        }
        Ok(())
    }

    /// Column blocks of `widths` of `x` (`[m, Σ widths]`) into `outs`.
    fn split(&mut self, x: &Self::Act, widths: &[usize], outs: &mut [&mut Self::Act])
        -> Result<()>;

    /// The step's RoPE `index` (of the `ropes` given to [`Self::begin_step`])
    /// over the queries `q` and keys `k` (`[tokens, heads * head_dim]`), in
    /// place.
    fn rope(
        &mut self,
        q: &mut Self::Act,
        k: &mut Self::Act,
        rope: &Rope,
        index: usize,
        head_dim: usize,
    ) -> Result<()>;

    /// `out = act(gate) * up`.
    fn glu(
        &mut self,
        gate: &Self::Act,
        up: &Self::Act,
        glu: Glu,
        out: &mut Self::Act,
    ) -> Result<()>;

    /// `x += y`.
    fn add(&mut self, x: &mut Self::Act, y: &Self::Act) -> Result<()>;

    /// `x += y`, then `out` = RMSNorm of `x` (the residual add and the next
    /// layer's norm, which a backend may run as one kernel).
    fn add_rms_norm(
        &mut self,
        x: &mut Self::Act,
        y: &Self::Act,
        norm: &RmsNorm,
        out: &mut Self::Act,
    ) -> Result<()> {
        self.add(x, y)?;
        self.rms_norm(x, norm, out)
    }

    /// `x = cap * tanh(x / cap)` elementwise ([`softcap`]; Gemma 2's final
    /// logits).
    fn softcap(&mut self, x: &mut Self::Act, cap: f32) -> Result<()>;

    /// Stores `k`, `v` (`[tokens, n_kv_heads * head_dim]`) in the step's
    /// slots of `layer`, then attends: `q` `[tokens, n_heads * head_dim]`,
    /// a query at position `p` over keys `0..=p` of its own sequence
    /// (within the sliding window; scores soft-capped when `spec.softcap`
    /// says so), into `out` `[tokens, n_heads * head_dim]`.
    #[allow(clippy::too_many_arguments)]
    fn attend(
        &mut self,
        layer: usize,
        spec: &AttentionSpec,
        step: &Step,
        q: &Self::Act,
        k: &Self::Act,
        v: &Self::Act,
        out: &mut Self::Act,
    ) -> Result<()>;

    /// `x` summed over the ranks of this backend's tensor-parallel world, in
    /// place: the partial outputs of a row-parallel matmul. Only a
    /// tensor-parallel model calls it; a backend outside a world refuses.
    fn all_reduce(&mut self, x: &mut Self::Act) -> Result<()> {
        let _ = x;
        Err(outside_a_world())
    }

    /// `x`, this rank's `[rows, w]` columns, replaced by every rank's side
    /// by side in rank order (`[rows, Σ w]`): the logits of a vocab-parallel
    /// LM head. Only a tensor-parallel model calls it.
    fn all_gather_cols(&mut self, x: &mut Self::Act, rows: usize) -> Result<()> {
        let _ = (x, rows);
        Err(outside_a_world())
    }

    /// Keeps rows `rows` of `x` (`width` values each), in that order.
    fn select_rows(&mut self, x: &mut Self::Act, rows: &[usize], width: usize) -> Result<()>;

    /// `x`'s values on the host, row-major.
    fn read<'a>(&'a mut self, x: &'a Self::Act) -> Result<&'a [f32]>;
}

fn outside_a_world() -> crate::ModelError {
    crate::ModelError::InvalidConfig(
        "a tensor-parallel model on a backend without a world (no collective)".into(),
    )
}
