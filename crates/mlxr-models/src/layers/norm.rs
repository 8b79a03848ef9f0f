use candle_core::{DType, Tensor};

use crate::kernels::ops::{rms_norm_rows, RmsNormOp};

use crate::weights::Weights;
use crate::Result;

/// RMSNorm over the last dimension. On the CPU (f32) it computes what ggml
/// computes, bit for bit (`kernels::ggml_f32::rms_norm`).
pub struct RmsNorm {
    weight: Tensor,
    /// The weight's values, for [`Self::forward_into`].
    values: Vec<f32>,
    eps: f32,
}

impl RmsNorm {
    /// `offset` is added to the stored weight (Gemma's `1 + w`).
    pub fn load(w: &dyn Weights, name: &str, dim: usize, eps: f32, offset: f32) -> Result<Self> {
        let mut weight = w.vector(name, dim)?;
        if offset != 0.0 {
            weight = (weight + offset as f64)?;
        }
        let values = weight.to_dtype(DType::F32)?.to_vec1()?;
        Ok(Self {
            weight,
            values,
            eps,
        })
    }

    /// [`Self::forward`] over buffers: rows of `x` into `out` (alike long).
    pub fn forward_into(&self, x: &[f32], out: &mut [f32]) {
        rms_norm_rows(x, &self.values, self.eps, out)
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if x.device().is_cpu() && x.dtype() == DType::F32 && self.weight.dtype() == DType::F32 {
            return Ok(x
                .contiguous()?
                .apply_op2_no_bwd(&self.weight, &RmsNormOp { eps: self.eps })?);
        }
        Ok(candle_nn::ops::rms_norm(
            &x.contiguous()?,
            &self.weight,
            self.eps,
        )?)
    }
}
