use std::sync::Arc;

use candle_core::quantized::QTensor;
use candle_core::{Device, Tensor};

use crate::kernels::affine::AffineWeight;
use crate::kernels::{QuantMatMul, RowOrder};
use crate::layers::Linear;
use crate::Result;

/// The token embedding table `[vocab, hidden]`, in its stored form.
pub enum Embedding {
    Ggml(Arc<QTensor>),
    /// Rows read from the tied LM head's tiles (see [`Embedding::tie`]).
    Tiled(Arc<QuantMatMul>),
    Dense(Tensor),
    Affine(Arc<AffineWeight>),
}

impl Embedding {
    /// The rows of `ids`, `[ids.len(), hidden]` f32.
    pub fn forward(&self, ids: &[u32], device: &Device) -> Result<Tensor> {
        match self {
            Embedding::Ggml(t) => Ok(t.embedding(&Tensor::new(ids, device)?)?),
            Embedding::Dense(t) => Ok(t.embedding(&Tensor::new(ids, device)?)?),
            Embedding::Affine(w) => gather(ids, w.rows(), w.cols(), device, |r, row| {
                w.dequantize_row(r, row)
            }),
            Embedding::Tiled(op) => gather(ids, op.rows(), op.cols(), device, |r, row| {
                op.dequantize_row(r, row);
            }),
        }
    }

    /// Whether [`Self::row_into`] works (rows read from kernel tiles).
    pub fn has_rows(&self) -> bool {
        matches!(self, Embedding::Tiled(_))
    }

    /// Row `id` into `out` (`hidden` values), as [`Self::forward`] gives it;
    /// an error for ids outside the table or tables without
    /// [`Self::has_rows`].
    pub fn row_into(&self, id: u32, out: &mut [f32]) -> Result<()> {
        let Embedding::Tiled(op) = self else {
            return Err(crate::ModelError::InvalidBatch(
                "this embedding table has no rows for buffered passes".into(),
            ));
        };
        if !op.dequantize_row(id as usize, out) {
            return Err(crate::ModelError::InvalidBatch(format!(
                "token id {id} is outside the embedding table of {}",
                op.rows()
            )));
        }
        Ok(())
    }

    /// The table and a tied LM head over the same weights. When the head's
    /// kernel keeps the table in tiles it can read rows from, the embedding
    /// reads them there and the file's copy is dropped (Gemma 3's 262k-row
    /// table would otherwise be in memory twice).
    pub fn tie(self, order: RowOrder) -> Result<(Embedding, Linear)> {
        let head = self.as_linear(order)?;
        match (&self, head.row_source()) {
            (Embedding::Ggml(_), Some(rows)) => Ok((Embedding::Tiled(rows), head)),
            _ => Ok((self, head)),
        }
    }

    /// The same table as an output projection (tied LM head).
    pub fn as_linear(&self, order: RowOrder) -> Result<Linear> {
        match self {
            Embedding::Ggml(t) => Linear::ggml(t.clone(), order),
            Embedding::Tiled(op) => Ok(Linear::tiled(op.clone())),
            Embedding::Dense(t) => Ok(Linear::dense(t.clone())),
            Embedding::Affine(w) => Ok(Linear::affine(w.clone())),
        }
    }
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
