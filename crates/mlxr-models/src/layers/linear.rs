use std::sync::Arc;

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{DType, Module, Tensor};

use crate::backend::cpu::kernels::affine::{AffineMatMul, AffineWeight};
use crate::backend::cpu::kernels::bnb4::Bnb4Weight;
use crate::backend::cpu::kernels::decoded::{DecodedMatMul, RowDecode};
use crate::backend::cpu::kernels::float16::HalfWeight;
use crate::backend::cpu::kernels::fp8::Fp8Weight;
use crate::backend::cpu::kernels::{QuantMatMul, RowOrder};
use crate::weights::Weights;
use crate::Result;

/// `y = x Wᵀ (+ b)` with `W` kept in the form the file stores it.
pub struct Linear {
    weight: LinearWeight,
    bias: Option<Tensor>,
    /// The bias values, for host kernels.
    bias_values: Option<Vec<f32>>,
}

enum LinearWeight {
    /// A GGML tensor. Types with a kernel here (see [`QuantMatMul::new`]) go
    /// through [`QuantMatMul`] (ggml's exact x86 arithmetic, SIMD) for f32
    /// activations; everything else through candle's `QMatMul`.
    Ggml {
        inner: QMatMul,
        fast: Option<QuantMatMul>,
        /// On a GPU, the weight dequantized to F16 once at load, for the
        /// steps of many rows that cuBLAS multiplies in F16
        /// ([`Linear::forward_dequantized_f16`]), when memory allows.
        f16_copy: Option<Tensor>,
    },
    /// A GGML tensor regrouped into our kernels' tiles; candle's copy is
    /// dropped so the weight is in memory once (shared with a tied
    /// embedding that reads its rows from the same tiles).
    Tiled(Arc<QuantMatMul>),
    /// A float matrix `[out, in]`: f32, or on a GPU safetensors' F16/BF16
    /// as stored.
    Dense(Tensor),
    /// MLX affine-quantized integers with per-group scales and biases.
    Affine(Arc<AffineWeight>),
    /// FP8 codes with block scales (Hugging Face FP8 checkpoints), decoded
    /// row by row inside the matmul.
    Fp8(Arc<Fp8Weight>),
    /// bitsandbytes NF4/FP4 codes with block absmax, likewise.
    Bnb4(Arc<Bnb4Weight>),
    /// F16/BF16 values (safetensors on the CPU), likewise: 2 bytes a weight.
    Half(Arc<HalfWeight>),
    /// FP8 or 4-bit codes on a CUDA device, decoded inside its kernels.
    #[cfg(feature = "cuda")]
    Coded(Arc<crate::backend::cuda::CodedWeight>),
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

    /// A GGML tensor; with `kernels` (their arithmetic order), prepared
    /// for the CPU kernels where they cover its type, else for candle's ops.
    pub fn ggml(t: Arc<QTensor>, kernels: Option<RowOrder>) -> Result<Self> {
        if let Some(w) = half_on_gpu(&t)? {
            return Ok(Self::new(LinearWeight::Ggml {
                inner: QMatMul::TensorF16(w),
                fast: None,
                f16_copy: None,
            }));
        }
        let inner = QMatMul::from_arc(t.clone())?;
        // candle dequantizes when asked to (CANDLE_DEQUANTIZE_ALL); keep that.
        let fast = match (&inner, kernels) {
            (QMatMul::QTensor(_), Some(order)) => QuantMatMul::new(t, order),
            _ => None,
        };
        Ok(Self::new(match fast {
            Some(fast) if fast.replaces_blocks() => LinearWeight::Tiled(Arc::new(fast)),
            fast => LinearWeight::Ggml {
                f16_copy: f16_copy_on_gpu(&inner)?,
                inner,
                fast,
            },
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

    /// `w`: `[out, in]`, f32 (or F16/BF16 on a GPU).
    pub fn dense(w: Tensor) -> Self {
        Self::new(LinearWeight::Dense(w))
    }

    pub fn affine(w: Arc<AffineWeight>) -> Self {
        Self::new(LinearWeight::Affine(w))
    }

    pub fn fp8(w: Arc<Fp8Weight>) -> Self {
        Self::new(LinearWeight::Fp8(w))
    }

    pub fn bnb4(w: Arc<Bnb4Weight>) -> Self {
        Self::new(LinearWeight::Bnb4(w))
    }

    pub fn half(w: Arc<HalfWeight>) -> Self {
        Self::new(LinearWeight::Half(w))
    }

    #[cfg(feature = "cuda")]
    pub fn coded(w: Arc<crate::backend::cuda::CodedWeight>) -> Self {
        Self::new(LinearWeight::Coded(w))
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

    /// The CPU kernel for this weight, when it has one (GGML types with a
    /// kernel here, loaded for the CPU).
    pub(crate) fn kernel(&self) -> Option<&QuantMatMul> {
        match &self.weight {
            LinearWeight::Ggml {
                fast: Some(fast), ..
            } => Some(fast),
            LinearWeight::Tiled(fast) => Some(fast),
            _ => None,
        }
    }

    /// The bias values, when there is a bias.
    pub(crate) fn bias_values(&self) -> Option<&[f32]> {
        self.bias_values.as_deref()
    }

    /// `W`'s shape: (output features, input features).
    pub fn shape(&self) -> (usize, usize) {
        let dims2 = |t: &Tensor| t.dims2().unwrap_or((0, 0));
        match &self.weight {
            LinearWeight::Ggml { inner, .. } => match inner {
                QMatMul::QTensor(t) => t.shape().dims2().unwrap_or((0, 0)),
                QMatMul::Tensor(t) | QMatMul::TensorF16(t) => dims2(t),
            },
            LinearWeight::Tiled(op) => (op.rows(), op.cols()),
            LinearWeight::Dense(w) => dims2(w),
            LinearWeight::Affine(w) => (w.rows(), w.cols()),
            LinearWeight::Fp8(w) => (w.rows(), w.cols()),
            LinearWeight::Bnb4(w) => (w.rows(), w.cols()),
            LinearWeight::Half(w) => (w.rows(), w.cols()),
            #[cfg(feature = "cuda")]
            LinearWeight::Coded(w) => (w.rows(), w.cols()),
        }
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

    /// The GGML tensor candle multiplies with, for a backend's own kernels
    /// (see [`Self::with_bias`]).
    pub fn ggml_tensor(&self) -> Option<&QTensor> {
        match &self.weight {
            LinearWeight::Ggml {
                inner: QMatMul::QTensor(t),
                ..
            } => Some(t),
            _ => None,
        }
    }

    /// The 16-bit matrix of a weight kept F16 or BF16 on a GPU (GGML F16,
    /// safetensors F16/BF16), for a backend's own kernels.
    pub fn half_weight(&self) -> Option<&Tensor> {
        match &self.weight {
            LinearWeight::Ggml {
                inner: QMatMul::TensorF16(t),
                ..
            } => Some(t),
            LinearWeight::Dense(t) if matches!(t.dtype(), DType::F16 | DType::BF16) => Some(t),
            _ => None,
        }
    }

    /// Whether a GPU weight has its F16 copy (see [`Self::forward_dequantized_f16`]).
    pub fn has_f16_copy(&self) -> bool {
        matches!(
            self.weight,
            LinearWeight::Ggml {
                f16_copy: Some(_),
                ..
            }
        )
    }

    /// `x`: `[tokens, in_features]` → `[tokens, out_features]` through
    /// candle's ops (the path of weights without a kernel of the backend).
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let y = match &self.weight {
            LinearWeight::Ggml { inner, .. } => inner.forward(&x.contiguous()?)?,
            LinearWeight::Tiled(fast) => fast.forward(&x.to_dtype(DType::F32)?)?,
            LinearWeight::Dense(w) if w.dtype() != x.dtype() => {
                // 16-bit weights on a GPU: cuBLAS in their type.
                let y = x.contiguous()?.to_dtype(w.dtype())?.matmul(&w.t()?)?;
                y.to_dtype(x.dtype())?
            }
            LinearWeight::Dense(w) => x.contiguous()?.matmul(&w.t()?)?,
            LinearWeight::Affine(w) => AffineMatMul(w).forward(x)?,
            LinearWeight::Fp8(w) => DecodedMatMul(&**w).forward(x)?,
            LinearWeight::Bnb4(w) => DecodedMatMul(&**w).forward(x)?,
            LinearWeight::Half(w) => DecodedMatMul(&**w).forward(x)?,
            #[cfg(feature = "cuda")]
            LinearWeight::Coded(w) => w.forward(&x.to_dtype(DType::F32)?.contiguous()?)?,
        };
        self.with_bias(y)
    }

    /// `x Wᵀ (+ b)` for a step of many rows on a GPU: a GGML-quantized `W`
    /// dequantized to F16 (kept from the load, or for this call) and
    /// multiplied by cuBLAS with `x` rounded to F16 (candle's q8_1 kernels
    /// were slower on a 512-token prefill and off by up to 0.2 of a row's
    /// largest logit on the Qwen 1.5B shape:
    /// bench/results/gpu-2026-12-03-s32.md); other weights as
    /// [`Self::forward`]. Both ways give the same bits.
    pub fn forward_dequantized_f16(&self, x: &Tensor) -> Result<Tensor> {
        match &self.weight {
            LinearWeight::Ggml {
                f16_copy: Some(w), ..
            } => {
                let x = x.contiguous()?;
                let y = x.to_dtype(DType::F16)?.matmul(&w.t()?)?;
                self.with_bias(y.to_dtype(x.dtype())?)
            }
            LinearWeight::Ggml {
                inner: inner @ QMatMul::QTensor(_),
                ..
            } => self.with_bias(inner.forward_via_f16(&x.contiguous()?)?),
            _ => self.forward(x),
        }
    }

    /// `y + b` when there is a bias: the end of a projection computed
    /// elsewhere from [`Self::ggml_tensor`].
    /// This layer with `bias` (`[out_features]`) added after the matmul.
    pub fn biased(mut self, bias: Tensor) -> Result<Self> {
        self.set_bias(bias)?;
        Ok(self)
    }

    /// The bias added after the matmul, when the layer has one.
    pub fn bias(&self) -> Option<&Tensor> {
        self.bias.as_ref()
    }

    pub fn with_bias(&self, y: Tensor) -> Result<Tensor> {
        match &self.bias {
            Some(b) => Ok(y.broadcast_add(b)?),
            None => Ok(y),
        }
    }
}

/// A GGML-quantized weight on a GPU dequantized to F16 once, when the
/// CUDA backend's policy keeps such copies (see
/// [`crate::backend::cuda::keep_f16_copy`]).
#[cfg(feature = "cuda")]
fn f16_copy_on_gpu(w: &QMatMul) -> Result<Option<Tensor>> {
    match w {
        QMatMul::QTensor(t) if crate::backend::cuda::keep_f16_copy(t)? => {
            Ok(Some(t.dequantize_f16(&t.device())?))
        }
        _ => Ok(None),
    }
}

#[cfg(not(feature = "cuda"))]
fn f16_copy_on_gpu(_: &QMatMul) -> Result<Option<Tensor>> {
    Ok(None)
}

/// An F16 GGML weight on a GPU, kept in F16 (candle would widen it to f32,
/// doubling the bytes every decode step reads); candle's `TensorF16` matmul
/// runs it through cuBLAS with the activations rounded to F16, as llama.cpp
/// does. Not under candle's `CANDLE_DEQUANTIZE_ALL` (f32 everywhere).
fn half_on_gpu(t: &QTensor) -> Result<Option<Tensor>> {
    let device = t.device();
    let widen = std::env::var_os("CANDLE_DEQUANTIZE_ALL").is_some();
    if t.dtype() != GgmlDType::F16 || !device.is_cuda() || widen {
        return Ok(None);
    }
    let bytes = t.data()?;
    Ok(Some(Tensor::from_raw_buffer(
        &bytes,
        DType::F16,
        t.shape().dims(),
        &device,
    )?))
}
