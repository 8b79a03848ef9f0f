//! Where a rank's parts come from: a GGUF file (every GGML type, cut in its
//! blocks) or a folder of float safetensors (F32, F16, BF16).

use std::ops::Range;
use std::sync::Arc;

use candle_core::quantized::ggml_file::qtensor_from_ggml;
use mlxr_formats::gguf::{GgmlType, GgufFile};

use super::{ShardError, ShardPlan, ShardSource};
use crate::config::ModelConfig;
use crate::layers::Linear;
use crate::weights::{GgufWeights, SafetensorsWeights, Weights};
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

impl GgufWeights<'_> {
    /// The GGML type and bytes of rows `rows`, columns `cols` of `name`.
    fn part_bytes(
        &self,
        name: &str,
        rows: Range<usize>,
        cols: Range<usize>,
    ) -> Result<(candle_core::quantized::GgmlDType, Vec<u8>)> {
        let info = self
            .file()
            .tensor(name)
            .ok_or_else(|| ModelError::MissingTensor(name.to_string()))?;
        let shape = info.shape();
        let n_cols = shape.last().copied().unwrap_or(0);
        let (dtype, bytes) = self.stored(name, &shape)?;
        Ok((dtype, cut_bytes(bytes, info.ggml_type, n_cols, rows, cols)?))
    }

    fn ggml_part(
        &self,
        dtype: candle_core::quantized::GgmlDType,
        bytes: &[u8],
        shape: [usize; 2],
    ) -> Result<Linear> {
        let t = qtensor_from_ggml(dtype, bytes, shape.to_vec(), self.device())
            .map_err(|e| ModelError::candle("loading a rank's part of a weight", e))?;
        Linear::ggml(Arc::new(t), self.kernels())
    }
}

impl ShardSource for GgufWeights<'_> {
    fn shape(&self, name: &str) -> Result<Vec<usize>> {
        let info = self.file().tensor(name);
        let info = info.ok_or_else(|| ModelError::MissingTensor(name.to_string()))?;
        Ok(info.shape())
    }

    fn part(&self, name: &str, rows: Range<usize>, cols: Range<usize>) -> Result<Linear> {
        let shape = [rows.len(), cols.len()];
        let (dtype, bytes) = self.part_bytes(name, rows, cols)?;
        self.ggml_part(dtype, &bytes, shape)
    }

    fn stacked_parts(
        &self,
        parts: &[(String, Range<usize>)],
        inp: usize,
    ) -> Result<Option<Linear>> {
        let names: Vec<String> = parts.iter().map(|(name, _)| name.clone()).collect();
        let Some(dtype) = self.common_kernel_type(&names) else {
            return Ok(None);
        };
        // Rows are stored one after another, so the stack is the concatenation.
        let mut bytes = Vec::new();
        for (name, rows) in parts {
            bytes.extend(self.part_bytes(name, rows.clone(), 0..inp)?.1);
        }
        let rows = parts.iter().map(|(_, r)| r.len()).sum();
        Ok(Some(self.ggml_part(dtype, &bytes, [rows, inp])?))
    }
}

impl ShardSource for SafetensorsWeights {
    fn shape(&self, name: &str) -> Result<Vec<usize>> {
        self.float_shape(name)
    }

    fn part(&self, name: &str, rows: Range<usize>, cols: Range<usize>) -> Result<Linear> {
        self.linear_part(name, rows, cols)
    }
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
