//! A rank's weights: the tensors of a GGUF file cut by a [`ShardPlan`] as
//! the layers ask for them, in their stored type. Column-parallel weights
//! (q, k, v, gate, up, the LM head) keep whole rows; row-parallel ones
//! (the attention output, down) keep whole quantization blocks of every
//! row, so nothing is dequantized and every GGML type cuts the same way.
//!
//! Fused matrices (Phi-3's QKV and gate/up) are served as their parts, the
//! embedding table and the norms whole. A row-parallel layer's bias is added
//! by rank 0 alone (the all-reduce sums the ranks' outputs).

use std::ops::Range;
use std::sync::Arc;

use candle_core::quantized::ggml_file::qtensor_from_ggml;
use candle_core::quantized::GgmlDType;
use candle_core::{DType, Tensor};
use mlxr_formats::gguf::{GgmlType, GgufFile};

use super::{ShardError, ShardPlan};
use crate::backend::cpu::kernels::RowOrder;
use crate::config::ModelConfig;
use crate::layers::{Embedding, Linear};
use crate::weights::{GgufWeights, Weights};
use crate::{ModelError, Result};

impl ShardPlan {
    /// Rank `rank`'s part of `config`'s model in `file` in a world of
    /// `world`, its row-parallel cuts on whole blocks of the file's types.
    pub fn for_gguf(
        config: &ModelConfig,
        file: &GgufFile,
        rank: usize,
        world: usize,
    ) -> Result<Self, ShardError> {
        let blocks = [
            largest_block(file, ".attn_output.weight"),
            largest_block(file, ".ffn_down.weight"),
        ];
        Self::with_blocks(config, rank, world, blocks)
    }
}

/// The largest quantization block of `file`'s tensors named `*{suffix}`.
fn largest_block(file: &GgufFile, suffix: &str) -> usize {
    file.tensors()
        .iter()
        .filter(|t| t.name.ends_with(suffix))
        .map(|t| t.ggml_type.block_size() as usize)
        .max()
        .unwrap_or(1)
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

/// The GGUF weights of one rank (see the module doc).
pub struct ShardedWeights<'a> {
    inner: GgufWeights<'a>,
    plan: ShardPlan,
    /// The whole model's widths, where the parts of fused matrices start.
    q_dim: usize,
    kv_dim: usize,
    intermediate: usize,
}

impl<'a> ShardedWeights<'a> {
    /// `plan`'s part of `inner`, the weights of `config`'s (whole) model.
    pub fn new(inner: GgufWeights<'a>, config: &ModelConfig, plan: ShardPlan) -> Self {
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

    /// The type and bytes of rows `rows` and columns `cols` of the matrix
    /// `tensor` (all of either when `None`), checked to be `[out, inp]`.
    fn part(
        &self,
        tensor: &str,
        rows: Option<Range<usize>>,
        cols: Option<Range<usize>>,
        [out, inp]: [usize; 2],
    ) -> Result<(GgmlDType, Vec<u8>)> {
        let info = self
            .inner
            .file()
            .tensor(tensor)
            .ok_or_else(|| ModelError::MissingTensor(tensor.to_string()))?;
        let shape = info.shape();
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
        let ty = info.ggml_type;
        let (dtype, bytes) = self.inner.stored(tensor, &shape)?;
        Ok((dtype, cut_bytes(bytes, ty, n_cols, rows, cols)?))
    }

    fn ggml(&self, dtype: GgmlDType, bytes: &[u8], shape: [usize; 2]) -> Result<Linear> {
        let device = self.inner.device();
        let t = qtensor_from_ggml(dtype, bytes, shape.to_vec(), device)
            .map_err(|e| ModelError::candle("loading a rank's part of a weight", e))?;
        Linear::ggml(Arc::new(t), self.inner.kernels())
    }
}

impl Weights for ShardedWeights<'_> {
    fn contains(&self, name: &str) -> bool {
        match self.cut(name) {
            Cut::Whole => self.inner.contains(name),
            Cut::Rows { tensor, .. } | Cut::Cols { tensor, .. } => self.inner.contains(&tensor),
            Cut::Hidden => false,
        }
    }

    fn linear(&self, name: &str, out: usize, inp: usize) -> Result<Linear> {
        let (dtype, bytes) = match self.cut(name) {
            Cut::Whole => return self.inner.linear(name, out, inp),
            Cut::Rows { tensor, rows } => self.part(&tensor, Some(rows), None, [out, inp])?,
            Cut::Cols { tensor, cols } => self.part(&tensor, None, Some(cols), [out, inp])?,
            Cut::Hidden => return Err(ModelError::MissingTensor(name.to_string())),
        };
        self.ggml(dtype, &bytes, [out, inp])
    }

    fn stacked_linear(
        &self,
        names: &[String],
        outs: &[usize],
        inp: usize,
    ) -> Result<Option<Linear>> {
        let mut parts = Vec::with_capacity(names.len());
        for name in names {
            match self.cut(name) {
                Cut::Rows { tensor, rows } => parts.push((tensor, rows)),
                _ => return Ok(None),
            }
        }
        let sources: Vec<String> = parts.iter().map(|(t, _)| t.clone()).collect();
        let Some(dtype) = self.inner.common_kernel_type(&sources) else {
            return Ok(None);
        };
        // Rows are stored one after another, so the stack is the concatenation.
        let mut bytes = Vec::new();
        for ((tensor, rows), &out) in parts.into_iter().zip(outs) {
            bytes.extend(self.part(&tensor, Some(rows), None, [out, inp])?.1);
        }
        let rows = outs.iter().sum();
        Ok(Some(self.ggml(dtype, &bytes, [rows, inp])?))
    }

    fn vector(&self, name: &str, len: usize) -> Result<Tensor> {
        match self.cut(name) {
            Cut::Whole => self.inner.vector(name, len),
            Cut::Rows { tensor, rows } => {
                let info = self.inner.file().tensor(&tensor);
                let full = info.map_or(0, |i| i.n_elements() as usize);
                ModelError::check_shape(name, &[len], &[rows.len()])?;
                let whole = self.inner.vector(&tensor, full)?;
                Ok(whole.narrow(0, rows.start, rows.len())?)
            }
            // Added once: by rank 0.
            Cut::Cols { tensor, .. } if self.plan.rank == 0 => self.inner.vector(&tensor, len),
            Cut::Cols { .. } => Ok(Tensor::zeros(len, DType::F32, self.inner.device())?),
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

/// Rows `rows` and columns `cols` of a row-major `[_, n_cols]` GGML matrix
/// of type `ty`: whole rows, and whole blocks of each.
fn cut_bytes(
    bytes: &[u8],
    ty: GgmlType,
    n_cols: usize,
    rows: Range<usize>,
    cols: Range<usize>,
) -> Result<Vec<u8>, ShardError> {
    let (block, block_bytes) = (ty.block_size() as usize, ty.type_size() as usize);
    if !cols.start.is_multiple_of(block) || !cols.end.is_multiple_of(block) {
        return Err(ShardError::Blocks {
            what: "a row-parallel weight",
            columns: cols.len(),
            block,
        });
    }
    let row_bytes = n_cols / block * block_bytes;
    let (from, to) = (
        cols.start / block * block_bytes,
        cols.end / block * block_bytes,
    );
    if from == 0 && to == row_bytes {
        return Ok(bytes[rows.start * row_bytes..rows.end * row_bytes].to_vec());
    }
    let mut out = Vec::with_capacity(rows.len() * (to - from));
    for row in rows {
        out.extend_from_slice(&bytes[row * row_bytes + from..row * row_bytes + to]);
    }
    Ok(out)
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

    #[test]
    fn rows_and_whole_blocks_of_a_q8_0_matrix() {
        // 2 rows of 64 columns: 2 blocks of 34 bytes a row.
        let bytes: Vec<u8> = (0..4 * 34).map(|i| i as u8).collect();
        let row1 = cut_bytes(&bytes, GgmlType::Q8_0, 64, 1..2, 0..64).unwrap();
        assert_eq!(row1, &bytes[68..136]);
        let second_block = cut_bytes(&bytes, GgmlType::Q8_0, 64, 0..2, 32..64).unwrap();
        assert_eq!(second_block, [&bytes[34..68], &bytes[102..136]].concat());
        assert_eq!(
            cut_bytes(&bytes, GgmlType::Q8_0, 64, 0..2, 16..64),
            Err(ShardError::Blocks {
                what: "a row-parallel weight",
                columns: 48,
                block: 32
            })
        );
    }
}
