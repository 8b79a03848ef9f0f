use candle_core::{DType, Tensor};

use crate::kernels::ops::RmsNormOp;

use crate::weights::GgufWeights;
use crate::Result;

/// RMSNorm over the last dimension. On the CPU (f32) it computes what ggml
/// computes, bit for bit (`kernels::ggml_f32::rms_norm`).
pub struct RmsNorm {
    weight: Tensor,
    eps: f32,
}

impl RmsNorm {
    pub fn load(w: &GgufWeights, name: &str, dim: usize, eps: f32) -> Result<Self> {
        Ok(Self {
            weight: w.tensor(name, &[dim])?,
            eps,
        })
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
