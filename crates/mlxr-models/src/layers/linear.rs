use std::sync::Arc;

use candle_core::quantized::{QMatMul, QTensor};
use candle_core::{DType, Module, Tensor};

use crate::kernels::{QuantMatMul, RowOrder};
use crate::weights::GgufWeights;
use crate::Result;

/// `y = x Wᵀ` with `W` kept in its stored (usually quantized) type.
///
/// Q4_1, Q5_0, Q8_0, Q6_K and Q4_K (row count a multiple of 8) weights on the
/// CPU go through [`QuantMatMul`] (ggml's exact x86 arithmetic, SIMD) for f32
/// activations; everything else through candle's `QMatMul`.
pub struct QLinear {
    inner: QMatMul,
    fast: Option<QuantMatMul>,
}

impl QLinear {
    /// `W` has shape `[out_features, in_features]`.
    pub fn load(
        w: &GgufWeights,
        name: &str,
        out_features: usize,
        in_features: usize,
    ) -> Result<Self> {
        Self::from_qtensor(
            Arc::new(w.qtensor(name, &[out_features, in_features])?),
            w.row_order(),
        )
    }

    pub fn from_qtensor(t: Arc<QTensor>, order: RowOrder) -> Result<Self> {
        let inner = QMatMul::from_arc(t.clone())?;
        // candle dequantizes when asked to (CANDLE_DEQUANTIZE_ALL); keep that.
        let fast = match inner {
            QMatMul::QTensor(_) => QuantMatMul::new(t, order),
            _ => None,
        };
        Ok(Self { inner, fast })
    }

    /// Whether `W` stays quantized (false when candle dequantizes it, e.g.
    /// with `CANDLE_DEQUANTIZE_ALL`).
    pub fn is_quantized(&self) -> bool {
        matches!(self.inner, QMatMul::QTensor(_))
    }

    /// `x`: `[tokens, in_features]` → `[tokens, out_features]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if let Some(fast) = &self.fast {
            if x.device().is_cpu() && x.dtype() == DType::F32 {
                return Ok(fast.forward(x)?);
            }
        }
        Ok(self.inner.forward(&x.contiguous()?)?)
    }
}
