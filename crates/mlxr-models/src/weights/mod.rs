//! Where a model's weights come from: a GGUF file, or a folder of
//! safetensors (Hugging Face float weights or MLX affine-quantized ones).
//!
//! Layers ask for weights by llama.cpp's tensor names (`blk.0.attn_q.weight`,
//! `token_embd.weight`, ...), whatever the file calls them; each source
//! translates and returns the layer in the form the file stores it.

mod gguf;
mod hf_names;
pub mod hf_quant;
pub mod mlx_quant;
mod safetensors;

pub use gguf::GgufWeights;
pub use safetensors::SafetensorsWeights;

use candle_core::Tensor;

use crate::backend::cpu::kernels::RowOrder;
use crate::layers::{Embedding, Linear};
use crate::Result;

pub trait Weights {
    /// Whether the tensor `name` exists.
    fn contains(&self, name: &str) -> bool;
    /// The matrix `name`, `[out, inp]`, as a linear layer without bias.
    fn linear(&self, name: &str, out: usize, inp: usize) -> Result<Linear>;
    /// A vector (norm weight, bias) as f32.
    fn vector(&self, name: &str, len: usize) -> Result<Tensor>;
    /// The token embedding table `[vocab, hidden]`.
    fn embedding(&self, name: &str, vocab: usize, hidden: usize) -> Result<Embedding>;
    /// The matrices `names` (`[outs[i], inp]` each) stacked into one
    /// `[Σ outs, inp]` layer, when this source computes the stack exactly as
    /// the parts (GGUF: the same quantized type with a CPU kernel here);
    /// `None` otherwise.
    fn stacked_linear(
        &self,
        names: &[String],
        outs: &[usize],
        inp: usize,
    ) -> Result<Option<Linear>> {
        let _ = (names, outs, inp);
        Ok(None)
    }
    /// The CPU kernels' arithmetic order for quantized matmuls (GGUF only),
    /// or `None` when the weights are prepared for candle's ops alone.
    fn kernels(&self) -> Option<RowOrder> {
        Some(RowOrder::Independent)
    }
}
