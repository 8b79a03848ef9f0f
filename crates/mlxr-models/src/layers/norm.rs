use candle_core::{DType, Tensor};

use crate::weights::Weights;
use crate::Result;

/// RMSNorm weights over the last dimension: a tensor on the weights' device
/// and its values on the host (the CPU backend computes ggml's arithmetic
/// with them, bit for bit: `kernels::ggml_f32::rms_norm`).
pub struct RmsNorm {
    weight: Tensor,
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
        Self::new(weight, eps)
    }

    /// A norm with `weight` (`[dim]`, on the device it runs on).
    pub fn new(weight: Tensor, eps: f32) -> Result<Self> {
        let values = weight.to_dtype(DType::F32)?.to_vec1()?;
        Ok(Self {
            weight,
            values,
            eps,
        })
    }

    pub fn weight(&self) -> &Tensor {
        &self.weight
    }

    pub fn values(&self) -> &[f32] {
        &self.values
    }

    pub fn eps(&self) -> f32 {
        self.eps
    }

    /// The width of the rows it norms.
    pub fn dim(&self) -> usize {
        self.values.len()
    }
}
