use std::sync::Arc;

use candle_core::quantized::{QMatMul, QTensor};
use candle_core::{Module, Tensor};

use crate::weights::GgufWeights;
use crate::Result;

/// `y = x Wᵀ` with `W` kept in its stored (usually quantized) type.
pub struct QLinear {
    inner: QMatMul,
}

impl QLinear {
    /// `W` has shape `[out_features, in_features]`.
    pub fn load(
        w: &GgufWeights,
        name: &str,
        out_features: usize,
        in_features: usize,
    ) -> Result<Self> {
        Self::from_qtensor(Arc::new(w.qtensor(name, &[out_features, in_features])?))
    }

    pub fn from_qtensor(t: Arc<QTensor>) -> Result<Self> {
        Ok(Self {
            inner: QMatMul::from_arc(t)?,
        })
    }

    /// `x`: `[tokens, in_features]` → `[tokens, out_features]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(self.inner.forward(&x.contiguous()?)?)
    }
}
