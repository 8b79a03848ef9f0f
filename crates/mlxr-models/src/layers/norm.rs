use candle_core::Tensor;

use crate::weights::GgufWeights;
use crate::Result;

/// RMSNorm over the last dimension.
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
        Ok(candle_nn::ops::rms_norm(
            &x.contiguous()?,
            &self.weight,
            self.eps,
        )?)
    }
}
