use std::sync::Arc;

use candle_core::quantized::{QMatMul, QTensor};
use candle_core::{DType, Module, Tensor};

use crate::kernels::affine::{AffineMatMul, AffineWeight};
use crate::kernels::{MatmulScratch, QuantMatMul, RowOrder};
use crate::weights::Weights;
use crate::Result;

/// `y = x Wᵀ (+ b)` with `W` kept in the form the file stores it.
pub struct Linear {
    weight: LinearWeight,
    bias: Option<Tensor>,
    /// The bias values, for [`Self::forward_into`].
    bias_values: Option<Vec<f32>>,
}

enum LinearWeight {
    /// A GGML tensor. Types with a kernel here (see [`QuantMatMul::new`]) go
    /// through [`QuantMatMul`] (ggml's exact x86 arithmetic, SIMD) for f32
    /// activations; everything else through candle's `QMatMul`.
    Ggml {
        inner: QMatMul,
        fast: Option<QuantMatMul>,
    },
    /// A GGML tensor regrouped into our kernels' tiles; candle's copy is
    /// dropped so the weight is in memory once (shared with a tied
    /// embedding that reads its rows from the same tiles).
    Tiled(Arc<QuantMatMul>),
    /// A float matrix `[out, in]` (safetensors F32/F16/BF16, read as f32).
    Dense(Tensor),
    /// MLX affine-quantized integers with per-group scales and biases.
    Affine(Arc<AffineWeight>),
}

impl Linear {
    /// Loads `{prefix}.weight` (`[out_features, in_features]`) and, when the
    /// file has it, `{prefix}.bias`.
    pub fn load(
        w: &dyn Weights,
        prefix: &str,
        out_features: usize,
        in_features: usize,
    ) -> Result<Self> {
        let mut linear = w.linear(&format!("{prefix}.weight"), out_features, in_features)?;
        let bias = format!("{prefix}.bias");
        if w.contains(&bias) {
            linear.set_bias(w.vector(&bias, out_features)?)?;
        }
        Ok(linear)
    }

    /// The layers `(prefix, out_features)` stacked into one
    /// `[Σ out_features, in_features]` layer (biases too), when the weights
    /// allow it (see [`Weights::stacked_linear`]) and either all or none of
    /// them have a bias.
    pub fn load_stacked(
        w: &dyn Weights,
        layers: &[(String, usize)],
        in_features: usize,
    ) -> Result<Option<Self>> {
        let biases: Vec<String> = layers.iter().map(|(p, _)| format!("{p}.bias")).collect();
        let with_bias = biases.iter().filter(|b| w.contains(b)).count();
        if with_bias != 0 && with_bias != biases.len() {
            return Ok(None);
        }
        let names: Vec<String> = layers.iter().map(|(p, _)| format!("{p}.weight")).collect();
        let outs: Vec<usize> = layers.iter().map(|(_, out)| *out).collect();
        let Some(mut linear) = w.stacked_linear(&names, &outs, in_features)? else {
            return Ok(None);
        };
        if with_bias != 0 {
            let parts = biases
                .iter()
                .zip(&outs)
                .map(|(b, &out)| w.vector(b, out))
                .collect::<Result<Vec<_>>>()?;
            linear.set_bias(Tensor::cat(&parts, 0)?)?;
        }
        Ok(Some(linear))
    }

    pub fn ggml(t: Arc<QTensor>, order: RowOrder) -> Result<Self> {
        let inner = QMatMul::from_arc(t.clone())?;
        // candle dequantizes when asked to (CANDLE_DEQUANTIZE_ALL); keep that.
        let fast = match inner {
            QMatMul::QTensor(_) => QuantMatMul::new(t, order),
            _ => None,
        };
        Ok(Self::new(match fast {
            Some(fast) if fast.replaces_blocks() => LinearWeight::Tiled(Arc::new(fast)),
            fast => LinearWeight::Ggml { inner, fast },
        }))
    }

    /// The tiled kernel behind this projection when it can also hand out
    /// rows (for a tied embedding table).
    pub fn row_source(&self) -> Option<Arc<QuantMatMul>> {
        match &self.weight {
            LinearWeight::Tiled(op) if op.has_rows() => Some(op.clone()),
            _ => None,
        }
    }

    /// A projection through an already tiled kernel (a tied head).
    pub fn tiled(op: Arc<QuantMatMul>) -> Self {
        Self::new(LinearWeight::Tiled(op))
    }

    /// `w`: `[out, in]`, f32.
    pub fn dense(w: Tensor) -> Self {
        Self::new(LinearWeight::Dense(w))
    }

    pub fn affine(w: Arc<AffineWeight>) -> Self {
        Self::new(LinearWeight::Affine(w))
    }

    fn new(weight: LinearWeight) -> Self {
        Self {
            weight,
            bias: None,
            bias_values: None,
        }
    }

    fn set_bias(&mut self, bias: Tensor) -> Result<()> {
        self.bias_values = Some(bias.to_dtype(DType::F32)?.to_vec1()?);
        self.bias = Some(bias);
        Ok(())
    }

    /// The kernel [`Self::forward_into`] runs, when this weight has one
    /// (GGML types with a kernel here, on the CPU).
    fn kernel(&self) -> Option<&QuantMatMul> {
        match &self.weight {
            LinearWeight::Ggml {
                fast: Some(fast), ..
            } => Some(fast),
            LinearWeight::Tiled(fast) => Some(fast),
            _ => None,
        }
    }

    /// Output features (`W`'s rows), where [`Self::forward_into`] works.
    pub fn rows(&self) -> usize {
        self.kernel().map_or(0, QuantMatMul::rows)
    }

    /// Input features (`W`'s columns), where [`Self::forward_into`] works.
    pub fn cols(&self) -> usize {
        self.kernel().map_or(0, QuantMatMul::cols)
    }

    /// Whether [`Self::forward_into`] works for this weight.
    pub fn has_kernel(&self) -> bool {
        self.kernel().is_some()
    }

    /// [`Self::forward`] over buffers: `out[m, out_features] = x[m,
    /// in_features] Wᵀ (+ b)`, the same values bit for bit.
    pub fn forward_into(
        &self,
        x: &[f32],
        out: &mut [f32],
        scratch: &mut MatmulScratch,
    ) -> Result<()> {
        let Some(op) = self.kernel() else {
            return Err(crate::ModelError::InvalidBatch(
                "this weight type has no kernel for buffered passes".into(),
            ));
        };
        op.matmul_into(x, out, scratch)?;
        if let Some(bias) = &self.bias_values {
            for row in out.chunks_exact_mut(bias.len()) {
                row.iter_mut().zip(bias).for_each(|(y, b)| *y += b);
            }
        }
        Ok(())
    }

    /// Whether `W` is a GGML-quantized tensor computed with ggml's arithmetic
    /// (false for float weights, MLX weights, or when candle dequantizes,
    /// e.g. with `CANDLE_DEQUANTIZE_ALL`).
    pub fn is_ggml_quantized(&self) -> bool {
        matches!(
            self.weight,
            LinearWeight::Ggml {
                inner: QMatMul::QTensor(_),
                ..
            } | LinearWeight::Tiled(_)
        )
    }

    /// `x`: `[tokens, in_features]` → `[tokens, out_features]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let cpu_f32 = x.device().is_cpu() && x.dtype() == DType::F32;
        let y = match &self.weight {
            LinearWeight::Ggml {
                fast: Some(fast), ..
            } if cpu_f32 => fast.forward(x)?,
            LinearWeight::Ggml { inner, .. } => inner.forward(&x.contiguous()?)?,
            LinearWeight::Tiled(fast) => fast.forward(&x.to_dtype(DType::F32)?)?,
            LinearWeight::Dense(w) => x.contiguous()?.matmul(&w.t()?)?,
            LinearWeight::Affine(w) => AffineMatMul(w).forward(x)?,
        };
        match &self.bias {
            Some(b) => Ok(y.broadcast_add(b)?),
            None => Ok(y),
        }
    }
}
