use std::sync::Arc;

use candle_core::quantized::QTensor;
use candle_core::{Device, Tensor};

use crate::kernels::affine::AffineWeight;
use crate::kernels::RowOrder;
use crate::layers::Linear;
use crate::Result;

/// The token embedding table `[vocab, hidden]`, in its stored form.
pub enum Embedding {
    Ggml(Arc<QTensor>),
    Dense(Tensor),
    Affine(Arc<AffineWeight>),
}

impl Embedding {
    /// The rows of `ids`, `[ids.len(), hidden]` f32.
    pub fn forward(&self, ids: &[u32], device: &Device) -> Result<Tensor> {
        match self {
            Embedding::Ggml(t) => Ok(t.embedding(&Tensor::new(ids, device)?)?),
            Embedding::Dense(t) => Ok(t.embedding(&Tensor::new(ids, device)?)?),
            Embedding::Affine(w) => {
                let hidden = w.cols();
                let mut out = vec![0.0f32; ids.len() * hidden];
                for (row, &id) in out.chunks_exact_mut(hidden).zip(ids) {
                    if id as usize >= w.rows() {
                        return Err(crate::ModelError::InvalidBatch(format!(
                            "token id {id} is outside the embedding table of {}",
                            w.rows()
                        )));
                    }
                    w.dequantize_row(id as usize, row);
                }
                Ok(Tensor::from_vec(out, (ids.len(), hidden), device)?)
            }
        }
    }

    /// The same table as an output projection (tied LM head).
    pub fn as_linear(&self, order: RowOrder) -> Result<Linear> {
        match self {
            Embedding::Ggml(t) => Linear::ggml(t.clone(), order),
            Embedding::Dense(t) => Ok(Linear::dense(t.clone())),
            Embedding::Affine(w) => Ok(Linear::affine(w.clone())),
        }
    }
}
