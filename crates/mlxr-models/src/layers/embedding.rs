use std::sync::Arc;

use candle_core::quantized::QTensor;
use candle_core::{DType, Device, Tensor};

use crate::backend::cpu::kernels::affine::AffineWeight;
use crate::backend::cpu::kernels::bnb4::Bnb4Weight;
use crate::backend::cpu::kernels::decoded::RowDecode;
use crate::backend::cpu::kernels::float16::HalfWeight;
use crate::backend::cpu::kernels::fp8::Fp8Weight;
use crate::backend::cpu::kernels::{QuantMatMul, RowOrder};
use crate::layers::Linear;
use crate::Result;

/// The token embedding table `[vocab, hidden]`, in its stored form.
pub enum Embedding {
    Ggml(Arc<QTensor>),
    /// Rows read from the tied LM head's tiles (see [`Embedding::tie`]).
    Tiled(Arc<QuantMatMul>),
    Dense(Tensor),
    Affine(Arc<AffineWeight>),
    /// F16/BF16 rows widened as they are read; a tied head multiplies the
    /// same values.
    Half(Arc<HalfWeight>),
    /// FP8 codes with block scales (MLX mxfp8), decoded as rows are read;
    /// a tied head multiplies the same codes.
    Fp8(Arc<Fp8Weight>),
    /// 4-bit codes of a 16-entry book times block scales (MLX mxfp4,
    /// nvfp4), likewise.
    Bnb4(Arc<Bnb4Weight>),
}

impl Embedding {
    /// The rows of `ids`, `[ids.len(), hidden]` f32.
    pub fn forward(&self, ids: &[u32], device: &Device) -> Result<Tensor> {
        match self {
            Embedding::Ggml(_) | Embedding::Dense(_) => {
                self.forward_ids(&Tensor::new(ids, device)?)
            }
            Embedding::Affine(w) => gather(ids, w.rows(), w.cols(), device, |r, row| {
                w.dequantize_row(r, row)
            }),
            Embedding::Tiled(op) => gather(ids, op.rows(), op.cols(), device, |r, row| {
                op.dequantize_row(r, row);
            }),
            Embedding::Half(w) => gather(ids, w.rows(), w.cols(), device, |r, row| {
                w.decode_row(r, row)
            }),
            Embedding::Fp8(w) => gather(ids, w.rows(), w.cols(), device, |r, row| {
                w.decode_row(r, row)
            }),
            Embedding::Bnb4(w) => gather(ids, w.rows(), w.cols(), device, |r, row| {
                w.decode_row(r, row)
            }),
        }
    }

    /// Whether [`Self::forward_ids`] takes ids on the table's device.
    pub fn gathers_on_device(&self) -> bool {
        matches!(self, Embedding::Ggml(_) | Embedding::Dense(_))
    }

    /// The rows of `ids` (u32 on the table's device), for tables that
    /// [`Self::gathers_on_device`].
    pub fn forward_ids(&self, ids: &Tensor) -> Result<Tensor> {
        match self {
            Embedding::Ggml(t) => Ok(t.embedding(ids)?),
            // 16-bit tables on a GPU give f32 rows like every other.
            Embedding::Dense(t) => Ok(t.embedding(ids)?.to_dtype(DType::F32)?),
            _ => Err(crate::ModelError::InvalidBatch(
                "this embedding table gathers rows on the host".into(),
            )),
        }
    }

    /// The width of a row (the hidden size).
    pub fn cols(&self) -> usize {
        match self {
            Embedding::Ggml(t) => t.shape().dims().last().copied().unwrap_or(0),
            Embedding::Tiled(op) => op.cols(),
            Embedding::Dense(t) => t.dims().last().copied().unwrap_or(0),
            Embedding::Affine(w) => w.cols(),
            Embedding::Half(w) => w.cols(),
            Embedding::Fp8(w) => w.cols(),
            Embedding::Bnb4(w) => w.cols(),
        }
    }

    /// Whether [`Self::row_into`] works: rows from kernel tiles, or from
    /// GGML blocks on the CPU.
    pub fn has_rows(&self) -> bool {
        match self {
            Embedding::Tiled(_) | Embedding::Half(_) | Embedding::Fp8(_) | Embedding::Bnb4(_) => {
                true
            }
            Embedding::Ggml(t) => t.device().is_cpu() && t.shape().dims().len() == 2,
            Embedding::Dense(_) | Embedding::Affine(_) => false,
        }
    }

    /// Row `id` into `out` (`hidden` values), as [`Self::forward`] gives it,
    /// without allocating; an error for ids outside the table or tables
    /// without [`Self::has_rows`].
    pub fn row_into(&self, id: u32, out: &mut [f32]) -> Result<()> {
        let outside = |rows: usize| {
            crate::ModelError::InvalidBatch(format!(
                "token id {id} is outside the embedding table of {rows}"
            ))
        };
        match self {
            Embedding::Tiled(op) if op.dequantize_row(id as usize, out) => Ok(()),
            Embedding::Tiled(op) => Err(outside(op.rows())),
            Embedding::Half(w) if (id as usize) < w.rows() => {
                w.decode_row(id as usize, out);
                Ok(())
            }
            Embedding::Half(w) => Err(outside(w.rows())),
            Embedding::Fp8(w) => decoded_row(w.as_ref(), id, out).ok_or_else(|| outside(w.rows())),
            Embedding::Bnb4(w) => decoded_row(w.as_ref(), id, out).ok_or_else(|| outside(w.rows())),
            Embedding::Ggml(t) if self.has_rows() => {
                let (rows, hidden) = t.shape().dims2()?;
                if id as usize >= rows {
                    return Err(outside(rows));
                }
                ggml_row(t, id as usize, hidden, out)
            }
            _ => Err(crate::ModelError::InvalidBatch(
                "this embedding table has no rows for buffered passes".into(),
            )),
        }
    }

    /// The table and a tied LM head over the same weights. When the head's
    /// kernel keeps the table in tiles it can read rows from, the embedding
    /// reads them there and the file's copy is dropped (Gemma 3's 262k-row
    /// table would otherwise be in memory twice).
    pub fn tie(self, kernels: Option<RowOrder>) -> Result<(Embedding, Linear)> {
        let head = self.as_linear(kernels)?;
        match (&self, head.row_source()) {
            (Embedding::Ggml(_), Some(rows)) => Ok((Embedding::Tiled(rows), head)),
            _ => Ok((self, head)),
        }
    }

    /// The same table as an output projection (tied LM head).
    pub fn as_linear(&self, kernels: Option<RowOrder>) -> Result<Linear> {
        match self {
            Embedding::Ggml(t) => Linear::ggml(t.clone(), kernels),
            Embedding::Tiled(op) => Ok(Linear::tiled(op.clone())),
            Embedding::Dense(t) => Ok(Linear::dense(t.clone())),
            Embedding::Affine(w) => Ok(Linear::affine(w.clone())),
            Embedding::Half(w) => Ok(Linear::half(w.clone())),
            Embedding::Fp8(w) => Ok(Linear::fp8(w.clone())),
            Embedding::Bnb4(w) => Ok(Linear::bnb4(w.clone())),
        }
    }
}

/// Row `id` of `w` into `out`; `None` for ids outside the table.
fn decoded_row<W: RowDecode>(w: &W, id: u32, out: &mut [f32]) -> Option<()> {
    let r = id as usize;
    (r < w.rows()).then(|| w.decode_row(r, out))
}

/// `[ids.len(), cols]` from `row(id, out)`, refusing ids outside `rows`.
fn gather(
    ids: &[u32],
    rows: usize,
    cols: usize,
    device: &Device,
    row: impl Fn(usize, &mut [f32]),
) -> Result<Tensor> {
    let mut out = vec![0.0f32; ids.len() * cols];
    for (dst, &id) in out.chunks_exact_mut(cols).zip(ids) {
        if id as usize >= rows {
            return Err(crate::ModelError::InvalidBatch(format!(
                "token id {id} is outside the embedding table of {rows}"
            )));
        }
        row(id as usize, dst);
    }
    Ok(Tensor::from_vec(out, (ids.len(), cols), device)?)
}

/// Row `row` of a CPU `QTensor` `[rows, hidden]` into `out`, dequantized by
/// candle's own block code (what `QTensor::embedding` runs).
fn ggml_row(t: &QTensor, row: usize, hidden: usize, out: &mut [f32]) -> Result<()> {
    use candle_core::quantized::{k_quants::*, GgmlDType as D};
    let data = t.data()?;
    match t.dtype() {
        D::F32 => blocks_row::<f32>(&data, row, hidden, out),
        D::F16 => blocks_row::<half::f16>(&data, row, hidden, out),
        D::BF16 => blocks_row::<half::bf16>(&data, row, hidden, out),
        D::Q4_0 => blocks_row::<BlockQ4_0>(&data, row, hidden, out),
        D::Q4_1 => blocks_row::<BlockQ4_1>(&data, row, hidden, out),
        D::Q5_0 => blocks_row::<BlockQ5_0>(&data, row, hidden, out),
        D::Q5_1 => blocks_row::<BlockQ5_1>(&data, row, hidden, out),
        D::Q8_0 => blocks_row::<BlockQ8_0>(&data, row, hidden, out),
        D::Q8_1 => blocks_row::<BlockQ8_1>(&data, row, hidden, out),
        D::Q2K => blocks_row::<BlockQ2K>(&data, row, hidden, out),
        D::Q3K => blocks_row::<BlockQ3K>(&data, row, hidden, out),
        D::Q4K => blocks_row::<BlockQ4K>(&data, row, hidden, out),
        D::Q5K => blocks_row::<BlockQ5K>(&data, row, hidden, out),
        D::Q6K => blocks_row::<BlockQ6K>(&data, row, hidden, out),
        D::Q8K => blocks_row::<BlockQ8K>(&data, row, hidden, out),
    }
}

fn blocks_row<T: candle_core::quantized::k_quants::GgmlType>(
    bytes: &[u8],
    row: usize,
    hidden: usize,
    out: &mut [f32],
) -> Result<()> {
    let per_row = hidden / T::BLCK_SIZE;
    let size = std::mem::size_of::<T>();
    let aligned = (bytes.as_ptr() as usize).is_multiple_of(std::mem::align_of::<T>());
    if !hidden.is_multiple_of(T::BLCK_SIZE)
        || out.len() != hidden
        || !aligned
        || !bytes.len().is_multiple_of(size)
    {
        return Err(crate::ModelError::InvalidBatch(format!(
            "embedding rows of {hidden} values cannot be read from these blocks"
        )));
    }
    // SAFETY: candle keeps CPU blocks as a `Vec<T>` (aligned, checked) and
    // hands out its bytes; every byte pattern is a valid block.
    let blocks =
        unsafe { std::slice::from_raw_parts(bytes.as_ptr() as *const T, bytes.len() / size) };
    let Some(src) = blocks.get(row * per_row..(row + 1) * per_row) else {
        return Err(crate::ModelError::InvalidBatch(format!(
            "embedding row {row} is missing"
        )));
    };
    T::to_float(src, out);
    Ok(())
}

#[cfg(test)]
mod tests {
    use candle_core::quantized::GgmlDType;

    use super::*;

    #[test]
    fn rows_equal_the_tensor_lookup_for_every_ggml_type() {
        use GgmlDType::*;
        let values: Vec<f32> = (0..5 * 512)
            .map(|i| ((i * 37) % 101) as f32 / 50.0 - 1.0)
            .collect();
        let table = Tensor::from_vec(values, (5, 512), &Device::Cpu).unwrap();
        for dtype in [
            F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2K, Q3K, Q4K, Q5K, Q6K,
        ] {
            let q = Arc::new(QTensor::quantize(&table, dtype).unwrap());
            let embedding = Embedding::Ggml(q);
            assert!(embedding.has_rows());
            let want = embedding.forward(&[3, 0, 4], &Device::Cpu).unwrap();
            let want = want.to_vec2::<f32>().unwrap();
            for (id, want) in [3, 0, 4].into_iter().zip(want) {
                let mut row = vec![0.0; 512];
                embedding.row_into(id, &mut row).unwrap();
                assert_eq!(row, want, "{dtype:?} row {id}");
            }
            assert!(embedding.row_into(5, &mut vec![0.0; 512]).is_err());
        }
    }
}
