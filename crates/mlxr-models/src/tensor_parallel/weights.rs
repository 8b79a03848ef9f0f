//! A rank's weights: a model's tensors cut by a [`ShardPlan`] as the layers
//! ask for them, in their stored form. Column-parallel weights (q, k, v,
//! gate, up, the LM head) keep whole rows; row-parallel ones (the attention
//! output, down) keep whole quantization blocks of every row, so nothing is
//! dequantized.
//!
//! Fused matrices (Phi-3's QKV and gate/up) are served as their parts, the
//! embedding table and the norms whole. A row-parallel layer's bias is added
//! by rank 0 alone (the all-reduce sums the ranks' outputs). The parts come
//! from a [`ShardSource`]: a GGUF file (every GGML type) or a folder of
//! float safetensors ([`super::sources`]).

use std::ops::Range;

use candle_core::Tensor;

use super::ShardPlan;
use crate::backend::cpu::kernels::RowOrder;
use crate::config::ModelConfig;
use crate::layers::{Embedding, Linear};
use crate::weights::Weights;
use crate::{ModelError, Result};

/// A model's whole weights, able to hand out part of a matrix in its
/// stored form. Names are llama.cpp's, as [`Weights`] takes them.
pub trait ShardSource: Weights {
    /// The stored shape of tensor `name`; an error when it is missing or
    /// this source cannot cut it.
    fn shape(&self, name: &str) -> Result<Vec<usize>>;

    /// Rows `rows` and columns `cols` of the matrix `name` (within its
    /// shape) as a linear layer without bias.
    fn part(&self, name: &str, rows: Range<usize>, cols: Range<usize>) -> Result<Linear>;

    /// The rows `parts` (`(name, rows)`, each of `inp` columns) stacked into
    /// one layer, where the source computes the stack exactly as the parts
    /// (see [`Weights::stacked_linear`]); `None` otherwise.
    fn stacked_parts(
        &self,
        parts: &[(String, Range<usize>)],
        inp: usize,
    ) -> Result<Option<Linear>> {
        let _ = (parts, inp);
        Ok(None)
    }
}

/// How a rank gets the tensor a layer asks for.
enum Cut {
    /// The whole tensor (norms, the embedding table).
    Whole,
    /// Rows of `tensor` (column-parallel).
    Rows { tensor: String, rows: Range<usize> },
    /// Columns of `tensor` (row-parallel).
    Cols { tensor: String, cols: Range<usize> },
    /// A fused matrix, served as its parts.
    Hidden,
}

/// The weights of one rank (see the module doc).
pub struct ShardedWeights<S> {
    inner: S,
    plan: ShardPlan,
    /// The whole model's widths, where the parts of fused matrices start.
    q_dim: usize,
    kv_dim: usize,
    intermediate: usize,
}

impl<S: ShardSource> ShardedWeights<S> {
    /// `plan`'s part of `inner`, the weights of `config`'s (whole) model.
    pub fn new(inner: S, config: &ModelConfig, plan: ShardPlan) -> Self {
        Self {
            inner,
            plan,
            q_dim: config.n_heads * config.head_dim,
            kv_dim: config.kv_dim(),
            intermediate: config.intermediate_size,
        }
    }

    fn has(&self, prefix: &str, kind: &str) -> bool {
        self.inner.contains(&format!("{prefix}.{kind}.weight"))
    }

    fn cut(&self, name: &str) -> Cut {
        let p = &self.plan;
        if let Some(suffix) = name.strip_prefix("output.") {
            // A tied head is the embedding table's rows.
            let tensor = if suffix == "weight" && !self.inner.contains(name) {
                "token_embd.weight".to_string()
            } else {
                name.to_string()
            };
            let rows = p.vocab.clone();
            return Cut::Rows { tensor, rows };
        }
        let Some((prefix, kind, suffix)) = layer_tensor(name) else {
            return Cut::Whole;
        };
        let rows = |source: &str, offset: usize, rows: Range<usize>| Cut::Rows {
            tensor: format!("{prefix}.{source}.{suffix}"),
            rows: rows.start + offset..rows.end + offset,
        };
        let fused_qkv = !self.has(prefix, "attn_q") && self.has(prefix, "attn_qkv");
        let fused_gate_up = !self.has(prefix, "ffn_gate") && self.has(prefix, "ffn_up");
        match kind {
            "attn_q" | "attn_k" | "attn_v" => {
                let (range, offset) = match kind {
                    "attn_q" => (p.q_rows(), 0),
                    "attn_k" => (p.kv_rows(), self.q_dim),
                    _ => (p.kv_rows(), self.q_dim + self.kv_dim),
                };
                if fused_qkv {
                    rows("attn_qkv", offset, range)
                } else {
                    rows(kind, 0, range)
                }
            }
            "attn_qkv" => Cut::Hidden,
            "ffn_gate" | "ffn_up" if fused_gate_up => {
                let offset = if kind == "ffn_up" {
                    self.intermediate
                } else {
                    0
                };
                rows("ffn_up", offset, p.intermediate.clone())
            }
            "ffn_gate" | "ffn_up" => rows(kind, 0, p.intermediate.clone()),
            "attn_output" | "ffn_down" => Cut::Cols {
                tensor: name.to_string(),
                cols: match kind {
                    "attn_output" => p.q_rows(),
                    _ => p.intermediate.clone(),
                },
            },
            _ => Cut::Whole,
        }
    }

    /// Rows `rows` and columns `cols` of the matrix `tensor` (all of either
    /// when `None`), checked to be `[out, inp]`.
    fn part(
        &self,
        tensor: &str,
        rows: Option<Range<usize>>,
        cols: Option<Range<usize>>,
        [out, inp]: [usize; 2],
    ) -> Result<Linear> {
        let shape = self.inner.shape(tensor)?;
        let &[n_rows, n_cols] = shape.as_slice() else {
            return Err(ModelError::ShapeMismatch {
                tensor: tensor.to_string(),
                expected: vec![out, inp],
                found: shape,
            });
        };
        let (rows, cols) = (rows.unwrap_or(0..n_rows), cols.unwrap_or(0..n_cols));
        if rows.end > n_rows || cols.end > n_cols {
            return Err(ModelError::InvalidConfig(format!(
                "'{tensor}' ({shape:?}) has no rows {rows:?}, columns {cols:?}"
            )));
        }
        ModelError::check_shape(tensor, &[out, inp], &[rows.len(), cols.len()])?;
        self.inner.part(tensor, rows, cols)
    }
}

impl<S: ShardSource> Weights for ShardedWeights<S> {
    fn contains(&self, name: &str) -> bool {
        match self.cut(name) {
            Cut::Whole => self.inner.contains(name),
            Cut::Rows { tensor, .. } | Cut::Cols { tensor, .. } => self.inner.contains(&tensor),
            Cut::Hidden => false,
        }
    }

    fn linear(&self, name: &str, out: usize, inp: usize) -> Result<Linear> {
        match self.cut(name) {
            Cut::Whole => self.inner.linear(name, out, inp),
            Cut::Rows { tensor, rows } => self.part(&tensor, Some(rows), None, [out, inp]),
            Cut::Cols { tensor, cols } => self.part(&tensor, None, Some(cols), [out, inp]),
            Cut::Hidden => Err(ModelError::MissingTensor(name.to_string())),
        }
    }

    fn stacked_linear(
        &self,
        names: &[String],
        outs: &[usize],
        inp: usize,
    ) -> Result<Option<Linear>> {
        let mut parts = Vec::with_capacity(names.len());
        for (name, &out) in names.iter().zip(outs) {
            match self.cut(name) {
                Cut::Rows { tensor, rows } if rows.len() == out => parts.push((tensor, rows)),
                _ => return Ok(None),
            }
        }
        if !parts.iter().all(|(t, _)| {
            self.inner
                .shape(t)
                .is_ok_and(|s| s.len() == 2 && s[1] == inp)
        }) {
            return Ok(None);
        }
        self.inner.stacked_parts(&parts, inp)
    }

    fn vector(&self, name: &str, len: usize) -> Result<Tensor> {
        match self.cut(name) {
            Cut::Whole => self.inner.vector(name, len),
            Cut::Rows { tensor, rows } => {
                let shape = self.inner.shape(&tensor)?;
                let full = shape.iter().product();
                ModelError::check_shape(name, &[len], &[rows.len()])?;
                let whole = self.inner.vector(&tensor, full)?;
                Ok(whole.narrow(0, rows.start, rows.len())?)
            }
            // Added once: by rank 0.
            Cut::Cols { tensor, .. } if self.plan.rank == 0 => self.inner.vector(&tensor, len),
            Cut::Cols { tensor, .. } => Ok(self.inner.vector(&tensor, len)?.zeros_like()?),
            Cut::Hidden => Err(ModelError::MissingTensor(name.to_string())),
        }
    }

    fn embedding(&self, name: &str, vocab: usize, hidden: usize) -> Result<Embedding> {
        self.inner.embedding(name, vocab, hidden)
    }

    fn kernels(&self) -> Option<RowOrder> {
        self.inner.kernels()
    }
}

/// `blk.{i}.{kind}.{suffix}` as (`blk.{i}`, kind, suffix).
fn layer_tensor(name: &str) -> Option<(&str, &str, &str)> {
    let rest = name.strip_prefix("blk.")?;
    let (layer, rest) = rest.split_once('.')?;
    let (kind, suffix) = rest.rsplit_once('.')?;
    Some((&name[..4 + layer.len()], kind, suffix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_layer_tensors() {
        assert_eq!(
            layer_tensor("blk.12.attn_q.weight"),
            Some(("blk.12", "attn_q", "weight"))
        );
        assert_eq!(layer_tensor("output_norm.weight"), None);
    }
}
