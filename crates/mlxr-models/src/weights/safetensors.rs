//! Weights of a Hugging Face or MLX model folder: one `model.safetensors`, or
//! shards listed by `model.safetensors.index.json`, memory-mapped.
//!
//! Float tensors (F32, F16, BF16) are read as f32, except F16/BF16 matrices
//! (linear layers, embeddings), which stay 16-bit: for the CPU widened
//! inside the matmul ([`HalfWeight`]), on CUDA as stored (its 16-bit
//! kernels and cuBLAS). A linear layer with
//! `scales` and `biases` beside its `weight` is MLX affine-quantized: the
//! `uint32` weight holds `bits`-bit integers, and `bits` and the group size
//! follow from the shapes (`in·bits/32` words and `in/group` scales per row),
//! which also covers MLX's per-layer overrides. MLX's floating-point modes
//! (mxfp4, mxfp8, nvfp4: `U8` scales, no biases, [`super::mlx_quant`]) are
//! read in the mode `config.json` gives the layer and kept in their codes
//! like FP8 and 4-bit weights.
//!
//! FP8 (`quant_method: fp8`, compressed-tensors) and bitsandbytes 4-bit
//! linear weights, as `config.json`'s `quantization_config` declares them
//! ([`super::hf_quant`]), stay in their codes for the CPU's and CUDA's
//! kernels, or are dequantized to f32 for other devices.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use candle_core::safetensors::MmapedSafetensors;
use candle_core::{DType, Device, Tensor};

use mlxr_formats::float8::Float8;
use safetensors::Dtype;

use super::hf_names::hf_name;
use super::hf_quant::{
    Absmax, Bnb4Kind, Bnb4State, HfQuantization, MlxMode, ScaleStrategy, NF4_CODE,
};
use super::mlx_quant::{mlx_fp_weight, MlxFpWeight};
use super::Weights;
use crate::backend::cpu::kernels::affine::AffineWeight;
use crate::backend::cpu::kernels::bnb4::Bnb4Weight;
use crate::backend::cpu::kernels::decoded::RowDecode;
use crate::backend::cpu::kernels::float16::{HalfFormat, HalfWeight};
use crate::backend::cpu::kernels::fp8::Fp8Weight;
use crate::layers::{Embedding, Linear};
use crate::{ModelError, Result};

/// An FP8 or 4-bit weight's codes and scales.
enum HfCodes {
    Fp8(Box<Fp8Weight>),
    Bnb4(Bnb4Weight),
}

impl From<MlxFpWeight> for HfCodes {
    fn from(w: MlxFpWeight) -> Self {
        match w {
            MlxFpWeight::Fp8(w) => HfCodes::Fp8(w),
            MlxFpWeight::Fp4(w) => HfCodes::Bnb4(w),
        }
    }
}

impl HfCodes {
    fn dequantize(&self) -> Vec<f32> {
        match self {
            HfCodes::Fp8(w) => w.dequantize(),
            HfCodes::Bnb4(w) => w.dequantize(),
        }
    }
}

/// An MLX quantized matrix: affine, or in a floating-point mode's codes.
enum MlxWeight {
    Affine(AffineWeight),
    Coded(HfCodes),
}

pub struct SafetensorsWeights {
    files: MmapedSafetensors,
    /// What the decoder layers are under (`model.`, or
    /// `language_model.model.` in multimodal checkpoints).
    prefix: String,
    post_norms: bool,
    device: Device,
    quantization: Option<HfQuantization>,
}

fn files_error(msg: impl Into<String>) -> ModelError {
    ModelError::Files(msg.into())
}

/// The safetensors files of a model folder, checked to exist.
pub fn safetensors_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let names = mlxr_formats::safetensors_folder::folder_weights(dir).map_err(files_error)?;
    Ok(names.iter().map(|n| dir.join(n)).collect())
}

impl SafetensorsWeights {
    pub fn open(dir: &Path, post_norms: bool, device: &Device) -> Result<Self> {
        let paths = safetensors_files(dir)?;
        // SAFETY: the files are mapped read-only; like every mmap reader we
        // rely on nobody truncating them while the model is loaded.
        let files = unsafe { MmapedSafetensors::multi(&paths) }
            .map_err(|e| ModelError::candle(format!("opening {}", dir.display()), e))?;
        let prefix = ["model.", "model.language_model.", "language_model.model."]
            .into_iter()
            .find(|p| files.get(&format!("{p}embed_tokens.weight")).is_ok())
            .ok_or_else(|| {
                files_error(format!(
                    "{}: no embed_tokens.weight found (is this a decoder checkpoint?)",
                    dir.display()
                ))
            })?
            .to_string();
        Ok(Self {
            files,
            prefix,
            post_norms,
            device: device.clone(),
            quantization: quantization_of(dir)?,
        })
    }

    fn has(&self, name: &str) -> bool {
        self.files.get(name).is_ok()
    }

    fn name(&self, canonical: &str) -> Result<String> {
        let lm_head_prefix = self.prefix.strip_suffix("model.").unwrap_or("");
        let name = hf_name(canonical, &self.prefix, self.post_norms, &|n| self.has(n))
            .ok_or_else(|| ModelError::MissingTensor(canonical.to_string()))?;
        Ok(if name.starts_with("lm_head") {
            format!("{lm_head_prefix}{name}")
        } else {
            name
        })
    }

    /// A float tensor as f32, checked against `shape`.
    fn float(&self, name: &str, shape: &[usize]) -> Result<Tensor> {
        self.check_float(name)?;
        let t = self.stored(name, shape)?;
        match t.dtype() {
            DType::F32 | DType::F16 | DType::BF16 => Ok(t.to_dtype(DType::F32)?),
            other => Err(files_error(format!(
                "tensor '{name}' is {other:?}; float weights must be F32, F16 or BF16"
            ))),
        }
    }

    /// The MLX quantized matrix stored under `{stem}.weight/.scales/.biases`.
    /// `w` as an f32 `[rows, cols]` tensor on this folder's device.
    fn dequantized(&self, w: &AffineWeight) -> Result<Tensor> {
        Ok(Tensor::from_vec(
            w.dequantize(),
            (w.rows(), w.cols()),
            &self.device,
        )?)
    }

    /// The MLX quantized matrix `{stem}` (U32 `weight`, `scales`, and
    /// `biases` if affine) of `out` rows of `inp` values in the mode
    /// `config.json` gives it, dequantized to f32 row-major. For converters
    /// (`mlxr convert`).
    pub fn dequantized_mlx(&self, stem: &str, out: usize, inp: usize) -> Result<Vec<f32>> {
        Ok(match self.mlx(stem, out, inp)? {
            MlxWeight::Affine(w) => w.dequantize(),
            MlxWeight::Coded(codes) => codes.dequantize(),
        })
    }

    /// The MLX matrix `{stem}` in its layer's mode (affine where
    /// `config.json` names none).
    fn mlx(&self, stem: &str, out: usize, inp: usize) -> Result<MlxWeight> {
        let mode = self
            .quantization
            .as_ref()
            .and_then(|q| q.mlx_mode(stem))
            .unwrap_or(MlxMode::Affine);
        if mode == MlxMode::Affine {
            return Ok(MlxWeight::Affine(self.affine(stem, out, inp)?));
        }
        for extra in ["biases", "global_scale"] {
            if self.has(&format!("{stem}.{extra}")) {
                return Err(files_error(format!(
                    "MLX {} tensor '{stem}' has '{stem}.{extra}', which that mode does not \
                     store (affine has biases; nvfp4 global scales are not supported)",
                    mode.name()
                )));
            }
        }
        let weight = self.view(&format!("{stem}.weight"))?;
        let scales = self.view(&format!("{stem}.scales"))?;
        Ok(MlxWeight::Coded(
            mlx_fp_weight(mode, stem, out, inp, &weight, &scales)?.into(),
        ))
    }

    fn affine(&self, stem: &str, out: usize, inp: usize) -> Result<AffineWeight> {
        let packed = self
            .files
            .load(&format!("{stem}.weight"), &Device::Cpu)
            .map_err(|e| ModelError::candle(format!("loading '{stem}.weight'"), e))?;
        let scales = self.float_any(&format!("{stem}.scales"))?;
        let biases = self.float_any(&format!("{stem}.biases"))?;
        let bad = |why: String| files_error(format!("quantized tensor '{stem}': {why}"));
        if packed.dtype() != DType::U32 {
            return Err(bad(format!("weight is {:?}, expected U32", packed.dtype())));
        }
        let (rows, words) = packed.dims2()?;
        let (srows, groups) = scales.dims2()?;
        if rows != out || srows != out || biases.dims() != scales.dims() || groups == 0 {
            return Err(bad(format!(
                "shapes weight {:?}, scales {:?}, biases {:?} do not fit [{out}, {inp}]",
                packed.dims(),
                scales.dims(),
                biases.dims()
            )));
        }
        if (words * 32) % inp != 0 || !inp.is_multiple_of(groups) {
            return Err(bad(format!(
                "{words} words and {groups} groups per row do not divide {inp} columns"
            )));
        }
        let bits = (words * 32 / inp) as u32;
        AffineWeight::new(
            out,
            inp,
            bits,
            inp / groups,
            packed.flatten_all()?.to_vec1::<u32>()?,
            scales.flatten_all()?.to_vec1::<f32>()?,
            biases.flatten_all()?.to_vec1::<f32>()?,
        )
        .map_err(bad)
    }

    fn float_any(&self, name: &str) -> Result<Tensor> {
        self.check_float(name)?;
        let t = self
            .files
            .load(name, &self.device)
            .map_err(|_| ModelError::MissingTensor(name.to_string()))?;
        Ok(t.to_dtype(DType::F32)?)
    }

    /// Whether `{stem}` is an MLX quantized matrix (it has `scales`); an
    /// error for `U32` words without them.
    fn is_quantized(&self, stem: &str) -> Result<bool> {
        let scales = format!("{stem}.scales");
        if self.has(&scales) {
            return Ok(true);
        }
        let weight = format!("{stem}.weight");
        if self.has(&weight) && self.dtype(&weight)? == Dtype::U32 {
            return Err(files_error(format!(
                "tensor '{weight}' is U32 (MLX quantized codes) but '{scales}' is missing"
            )));
        }
        Ok(false)
    }

    /// Tensor `name`'s stored bytes, type and shape.
    fn view(&self, name: &str) -> Result<safetensors::tensor::TensorView<'_>> {
        self.files
            .get(name)
            .map_err(|_| ModelError::MissingTensor(name.to_string()))
    }

    fn dtype(&self, name: &str) -> Result<Dtype> {
        Ok(self.view(name)?.dtype())
    }

    fn check_float(&self, name: &str) -> Result<()> {
        match self.dtype(name)? {
            Dtype::F32 | Dtype::F16 | Dtype::BF16 => Ok(()),
            other => Err(files_error(format!(
                "tensor '{name}' is {other:?}; float weights must be F32, F16 or BF16"
            ))),
        }
    }

    /// A float tensor's values as f32, and its shape.
    fn f32s(&self, name: &str) -> Result<(Vec<f32>, Vec<usize>)> {
        let t = self.float_any(name)?;
        Ok((t.flatten_all()?.to_vec1::<f32>()?, t.dims().to_vec()))
    }

    fn bytes(&self, name: &str) -> Result<&[u8]> {
        Ok(self.view(name)?.data())
    }

    /// The FP8 or bitsandbytes 4-bit weight `{stem}.weight` (`hf`) as a
    /// linear layer: the codes for the CPU's or CUDA's kernels, or f32 on
    /// other devices (and on CUDA for widths its kernels do not take);
    /// `None` when it is stored as floats.
    fn hf_quantized(&self, stem: &str, hf: &str, out: usize, inp: usize) -> Result<Option<Linear>> {
        let Some(codes) = self.hf_quantized_codes(stem, hf, out, inp)? else {
            return Ok(None);
        };
        self.coded_linear(codes).map(Some)
    }

    /// FP8 or 4-bit codes as a linear layer: for the CPU's or CUDA's
    /// kernels, or f32 on other devices (and on CUDA for widths its kernels
    /// do not take).
    fn coded_linear(&self, codes: HfCodes) -> Result<Linear> {
        #[cfg(feature = "cuda")]
        if self.device.is_cuda() {
            use crate::backend::cuda::CodedWeight;
            let coded = match &codes {
                HfCodes::Fp8(w) => CodedWeight::fp8(w, &self.device)?,
                HfCodes::Bnb4(w) => CodedWeight::bnb4(w, &self.device)?,
            };
            if let Some(coded) = coded {
                return Ok(Linear::coded(Arc::new(coded)));
            }
        }
        match codes {
            HfCodes::Fp8(w) => self.on_device(*w, Linear::fp8),
            HfCodes::Bnb4(w) => self.on_device(w, Linear::bnb4),
        }
    }

    /// The FP8 or bitsandbytes 4-bit weight `{stem}.weight` dequantized to
    /// f32, row-major, with its `[out, inp]` shape (from the FP8 tensor or
    /// the 4-bit quant state); `None` when it is stored as floats. For
    /// converters (`mlxr convert`): the values the model runs with.
    pub fn dequantized_weight(&self, stem: &str) -> Result<Option<(Vec<f32>, [usize; 2])>> {
        let Some(shape) = self.quantized_weight_shape(stem)? else {
            return Ok(None);
        };
        let hf = format!("{stem}.weight");
        Ok(self
            .hf_quantized_codes(stem, &hf, shape[0], shape[1])?
            .map(|codes| (codes.dequantize(), shape)))
    }

    /// The `[out, inp]` shape of the FP8 or 4-bit weight `{stem}.weight`;
    /// `None` when it is stored as floats.
    pub fn quantized_weight_shape(&self, stem: &str) -> Result<Option<[usize; 2]>> {
        let hf = format!("{stem}.weight");
        Ok(Some(match self.dtype(&hf)? {
            Dtype::F8_E4M3 | Dtype::F8_E5M2 => match self.view(&hf)?.shape() {
                &[out, inp] => [out, inp],
                other => {
                    return Err(files_error(format!(
                        "FP8 tensor '{hf}' has shape {other:?}; only 2-D weights are FP8"
                    )))
                }
            },
            Dtype::U8 => {
                let Some(HfQuantization::Bnb4 { kind, .. }) = self.quantization.as_ref() else {
                    return Err(files_error(format!(
                        "tensor '{hf}' is U8, but config.json has no bitsandbytes 4-bit \
                         quantization_config"
                    )));
                };
                let (state_name, state) = self.bnb4_state(&hf, *kind)?;
                match state.shape[..] {
                    [out, inp] => [out, inp],
                    _ => {
                        return Err(files_error(format!(
                            "'{state_name}' has shape {:?}; only 2-D weights are 4-bit",
                            state.shape
                        )))
                    }
                }
            }
            _ => return Ok(None),
        }))
    }

    /// The codes and scales of an FP8 or 4-bit weight, checked.
    fn hf_quantized_codes(
        &self,
        stem: &str,
        hf: &str,
        out: usize,
        inp: usize,
    ) -> Result<Option<HfCodes>> {
        let dtype = self.dtype(hf)?;
        let stored = match dtype {
            Dtype::F8_E4M3 => Some(Float8::E4M3),
            Dtype::F8_E5M2 => Some(Float8::E5M2),
            Dtype::U8 => None,
            _ => return Ok(None),
        };
        let quant = self.quantization.as_ref();
        if let Some(q) = quant.filter(|q| q.leaves_float(stem)) {
            return Err(files_error(format!(
                "tensor '{hf}' is {dtype:?}, but quantization_config lists '{stem}' as not \
                 converted ({q:?})"
            )));
        }
        let codes = match (stored, quant) {
            (
                Some(format),
                Some(HfQuantization::Fp8 {
                    format: fmt, block, ..
                }),
            ) => {
                if format != *fmt {
                    return Err(files_error(format!(
                        "tensor '{hf}' is {dtype:?}, but quantization_config's fmt is {fmt:?}"
                    )));
                }
                let scale = format!("{stem}.weight_scale_inv");
                HfCodes::Fp8(Box::new(match block {
                    Some(b) => self.fp8(hf, format, out, inp, &scale, *b)?,
                    None if self.has(&scale) => {
                        self.fp8(hf, format, out, inp, &scale, [out, inp])?
                    }
                    None => {
                        let scale = format!("{stem}.weight_scale");
                        self.fp8(hf, format, out, inp, &scale, [out, inp])?
                    }
                }))
            }
            (Some(format), Some(HfQuantization::CompressedFp8 { strategy, .. })) => {
                let block = match strategy {
                    ScaleStrategy::Tensor => [out, inp],
                    ScaleStrategy::Channel => [1, inp],
                    ScaleStrategy::Block(b) => *b,
                };
                HfCodes::Fp8(Box::new(self.fp8(
                    hf,
                    format,
                    out,
                    inp,
                    &format!("{stem}.weight_scale"),
                    block,
                )?))
            }
            (None, Some(HfQuantization::Bnb4 { kind, .. })) => {
                HfCodes::Bnb4(self.bnb4(hf, *kind, out, inp)?)
            }
            (Some(_), _) => {
                return Err(files_error(format!(
                    "tensor '{hf}' is {dtype:?}, but config.json has no FP8 quantization_config"
                )))
            }
            (None, _) => {
                return Err(files_error(format!(
                    "tensor '{hf}' is U8, but config.json has no bitsandbytes 4-bit \
                     quantization_config"
                )))
            }
        };
        Ok(Some(codes))
    }

    /// The stored shape of the float tensor `name` (llama.cpp's name); an
    /// error for a quantized one (a tensor-parallel rank's part of it is not
    /// supported).
    pub(crate) fn float_shape(&self, name: &str) -> Result<Vec<usize>> {
        let hf = self.name(name)?;
        let stem = hf.strip_suffix(".weight").unwrap_or(&hf);
        let view = self.view(&hf)?;
        let quantized = match view.dtype() {
            Dtype::F32 | Dtype::F16 | Dtype::BF16 => self.is_quantized(stem)?,
            _ => true,
        };
        if quantized {
            return Err(files_error(format!(
                "tensor '{hf}' is quantized: a rank's part of a quantized safetensors weight \
                 is not supported (float folders and GGUF files are)"
            )));
        }
        Ok(view.shape().to_vec())
    }

    /// Rows `rows` and columns `cols` of the float matrix `name` (a
    /// tensor-parallel rank's part) as a linear layer, kept as
    /// [`Weights::linear`] keeps a whole one: F16/BF16 16-bit for the CPU
    /// kernels or as stored on CUDA, else f32.
    pub(crate) fn linear_part(
        &self,
        name: &str,
        rows: Range<usize>,
        cols: Range<usize>,
    ) -> Result<Linear> {
        let shape = self.float_shape(name)?;
        let hf = self.name(name)?;
        let view = self.view(&hf)?;
        let half = match view.dtype() {
            Dtype::F16 => Some(HalfFormat::F16),
            Dtype::BF16 => Some(HalfFormat::Bf16),
            _ => None,
        };
        let n_cols = shape.get(1).copied().unwrap_or(0);
        if let (Some(format), true) = (half, self.device.is_cpu()) {
            let bytes = view.data();
            let mut part = Vec::with_capacity(2 * rows.len() * cols.len());
            for row in rows.clone() {
                let at = row * n_cols;
                part.extend_from_slice(&bytes[2 * (at + cols.start)..2 * (at + cols.end)]);
            }
            let w = HalfWeight::from_le_bytes(format, rows.len(), cols.len(), &part)
                .map_err(|e| files_error(format!("tensor '{hf}': {e}")))?;
            return Ok(Linear::half(Arc::new(w)));
        }
        let t = self.stored(&hf, &shape)?;
        let t = t.narrow(0, rows.start, rows.len())?;
        let t = t.narrow(1, cols.start, cols.len())?.contiguous()?;
        if half.is_some() && self.device.is_cuda() {
            return Ok(Linear::dense(t));
        }
        Ok(Linear::dense(t.to_dtype(DType::F32)?))
    }

    /// The F16/BF16 matrix `name` kept 16-bit for the CPU kernels; `None`
    /// for other types and devices (read as f32 by [`Self::float`]).
    fn half(&self, name: &str, shape: [usize; 2]) -> Result<Option<HalfWeight>> {
        let format = match self.dtype(name)? {
            Dtype::F16 => HalfFormat::F16,
            Dtype::BF16 => HalfFormat::Bf16,
            _ => return Ok(None),
        };
        if !self.device.is_cpu() {
            return Ok(None);
        }
        let view = self.view(name)?;
        ModelError::check_shape(name, &shape, view.shape())?;
        HalfWeight::from_le_bytes(format, shape[0], shape[1], view.data())
            .map(Some)
            .map_err(|e| files_error(format!("tensor '{name}': {e}")))
    }

    /// The F16/BF16 matrix `name` as stored, on a CUDA device (its kernels
    /// and cuBLAS take 16-bit weights); `None` for other types and devices.
    fn half_on_gpu(&self, name: &str, shape: &[usize]) -> Result<Option<Tensor>> {
        if !self.device.is_cuda() || !matches!(self.dtype(name)?, Dtype::F16 | Dtype::BF16) {
            return Ok(None);
        }
        self.stored(name, shape).map(Some)
    }

    /// Tensor `name` on this folder's device in its stored type, checked
    /// to have `shape`.
    fn stored(&self, name: &str, shape: &[usize]) -> Result<Tensor> {
        let t = self
            .files
            .load(name, &self.device)
            .map_err(|_| ModelError::MissingTensor(name.to_string()))?;
        ModelError::check_shape(name, shape, t.dims())?;
        Ok(t)
    }

    /// `w` for the CPU kernels, or dequantized to f32 for another device.
    fn on_device<W: RowDecode>(&self, w: W, cpu: fn(Arc<W>) -> Linear) -> Result<Linear> {
        if self.device.is_cpu() {
            return Ok(cpu(Arc::new(w)));
        }
        let values = w.dequantize();
        Ok(Linear::dense(Tensor::from_vec(
            values,
            (w.rows(), w.cols()),
            &self.device,
        )?))
    }

    /// `hf` (FP8 `[out, inp]`) times its scales `scale`, one per `block`.
    fn fp8(
        &self,
        hf: &str,
        format: Float8,
        out: usize,
        inp: usize,
        scale: &str,
        block: [usize; 2],
    ) -> Result<Fp8Weight> {
        let view = self.view(hf)?;
        ModelError::check_shape(hf, &[out, inp], view.shape())?;
        if !self.has(scale) {
            return Err(files_error(format!(
                "FP8 tensor '{hf}' has no scale tensor '{scale}'"
            )));
        }
        let (scales, shape) = self.f32s(scale)?;
        let grid = [out.div_ceil(block[0]), inp.div_ceil(block[1])];
        // A single scale may be stored as a scalar or [1]; a channel's as
        // [out] or [out, 1].
        let fits = shape == grid
            || (shape.iter().product::<usize>() == grid[0] * grid[1]
                && (grid[1] == 1 && shape == [grid[0]] || grid == [1, 1] && shape.len() <= 1));
        if !fits {
            return Err(ModelError::ShapeMismatch {
                tensor: scale.to_string(),
                expected: grid.to_vec(),
                found: shape,
            });
        }
        Fp8Weight::new(format, out, inp, view.data().to_vec(), scales, block)
            .map_err(|e| files_error(format!("FP8 tensor '{hf}': {e}")))
    }

    /// The quant state stored beside the 4-bit weight `hf`, and its name.
    fn bnb4_state(&self, hf: &str, kind: Bnb4Kind) -> Result<(String, Bnb4State)> {
        let kind_name = match kind {
            Bnb4Kind::Nf4 => "nf4",
            Bnb4Kind::Fp4 => "fp4",
        };
        let state_name = format!("{hf}.quant_state.bitsandbytes__{kind_name}");
        if !self.has(&state_name) {
            return Err(files_error(format!(
                "4-bit tensor '{hf}' has no '{state_name}' (bitsandbytes quant state)"
            )));
        }
        let state = Bnb4State::parse(self.bytes(&state_name)?, &state_name, kind)?;
        Ok((state_name, state))
    }

    /// A bitsandbytes 4-bit weight `hf` with its quant state beside it.
    fn bnb4(&self, hf: &str, kind: Bnb4Kind, out: usize, inp: usize) -> Result<Bnb4Weight> {
        let (state_name, state) = self.bnb4_state(hf, kind)?;
        ModelError::check_shape(&state_name, &[out, inp], &state.shape)?;
        let n = out * inp;
        let packed = self.bytes(hf)?;
        if packed.len() != n.div_ceil(2) {
            return Err(files_error(format!(
                "4-bit tensor '{hf}' holds {} bytes, expected {} for [{out}, {inp}]",
                packed.len(),
                n.div_ceil(2)
            )));
        }
        let blocks = n.div_ceil(state.blocksize);
        let code_name = format!("{hf}.quant_map");
        let code: [f32; 16] = if self.has(&code_name) {
            let (code, _) = self.f32s(&code_name)?;
            code.try_into().map_err(|c: Vec<f32>| {
                files_error(format!("'{code_name}' has {} values, expected 16", c.len()))
            })?
        } else if kind == Bnb4Kind::Nf4 {
            NF4_CODE
        } else {
            return Err(ModelError::MissingTensor(code_name));
        };
        let absmax_name = format!("{hf}.absmax");
        let expect_len = |name: &str, len: usize, want: usize| -> Result<()> {
            if len != want {
                return Err(files_error(format!(
                    "'{name}' has {len} values, expected {want} for [{out}, {inp}] in blocks \
                     of {}",
                    state.blocksize
                )));
            }
            Ok(())
        };
        let absmax = match (state.nested_offset, state.nested_blocksize) {
            (Some(offset), Some(nested_blocksize)) => {
                if self.dtype(&absmax_name)? != Dtype::U8 {
                    return Err(files_error(format!(
                        "'{absmax_name}' is {:?}; double-quantized absmax is U8",
                        self.dtype(&absmax_name)?
                    )));
                }
                let codes = self.bytes(&absmax_name)?;
                expect_len(&absmax_name, codes.len(), blocks)?;
                let nested = format!("{hf}.nested_absmax");
                let (absmax, _) = self.f32s(&nested)?;
                expect_len(&nested, absmax.len(), blocks.div_ceil(nested_blocksize))?;
                let map = format!("{hf}.nested_quant_map");
                let (quant_map, _) = self.f32s(&map)?;
                expect_len(&map, quant_map.len(), 256)?;
                Absmax::Nested {
                    codes,
                    quant_map,
                    absmax,
                    blocksize: nested_blocksize,
                    offset,
                }
            }
            _ => {
                let (absmax, _) = self.f32s(&absmax_name)?;
                expect_len(&absmax_name, absmax.len(), blocks)?;
                Absmax::Plain(absmax)
            }
        };
        Bnb4Weight::new(
            out,
            inp,
            state.blocksize,
            packed.to_vec(),
            code,
            absmax.resolve(),
        )
        .map_err(|e| files_error(format!("4-bit tensor '{hf}': {e}")))
    }
}

/// The quantization `dir/config.json` declares, if any.
fn quantization_of(dir: &Path) -> Result<Option<HfQuantization>> {
    let path = dir.join("config.json");
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(None);
    };
    let json: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| files_error(format!("{} is not valid JSON: {e}", path.display())))?;
    HfQuantization::from_config(&json)
}

impl Weights for SafetensorsWeights {
    fn contains(&self, name: &str) -> bool {
        self.name(name).is_ok_and(|n| self.has(&n))
    }

    fn linear(&self, name: &str, out: usize, inp: usize) -> Result<Linear> {
        let hf = self.name(name)?;
        let stem = hf.strip_suffix(".weight").unwrap_or(&hf);
        if self.is_quantized(stem)? {
            let w = match self.mlx(stem, out, inp)? {
                MlxWeight::Affine(w) => w,
                MlxWeight::Coded(codes) => return self.coded_linear(codes),
            };
            // The affine kernels are the CPU backend's; other devices get
            // the weights dequantized (f32, 8x a 4-bit weight's memory).
            if !self.device.is_cpu() {
                return Ok(Linear::dense(self.dequantized(&w)?));
            }
            return Ok(Linear::affine(Arc::new(w)));
        }
        if let Some(linear) = self.hf_quantized(stem, &hf, out, inp)? {
            return Ok(linear);
        }
        if let Some(w) = self.half(&hf, [out, inp])? {
            return Ok(Linear::half(Arc::new(w)));
        }
        if let Some(w) = self.half_on_gpu(&hf, &[out, inp])? {
            return Ok(Linear::dense(w));
        }
        Ok(Linear::dense(self.float(&hf, &[out, inp])?))
    }

    fn vector(&self, name: &str, len: usize) -> Result<Tensor> {
        self.float(&self.name(name)?, &[len])
    }

    fn embedding(&self, name: &str, vocab: usize, hidden: usize) -> Result<Embedding> {
        let hf = self.name(name)?;
        let stem = hf.strip_suffix(".weight").unwrap_or(&hf);
        if self.is_quantized(stem)? {
            let w = match self.mlx(stem, vocab, hidden)? {
                MlxWeight::Affine(w) => w,
                // Rows decoded as they are read on the CPU; elsewhere f32.
                MlxWeight::Coded(codes) if !self.device.is_cpu() => {
                    let values =
                        Tensor::from_vec(codes.dequantize(), (vocab, hidden), &self.device);
                    return Ok(Embedding::Dense(values?));
                }
                MlxWeight::Coded(HfCodes::Fp8(w)) => return Ok(Embedding::Fp8(Arc::new(*w))),
                MlxWeight::Coded(HfCodes::Bnb4(w)) => return Ok(Embedding::Bnb4(Arc::new(w))),
            };
            if !self.device.is_cpu() {
                return Ok(Embedding::Dense(self.dequantized(&w)?));
            }
            return Ok(Embedding::Affine(Arc::new(w)));
        }
        if let Some(w) = self.half(&hf, [vocab, hidden])? {
            return Ok(Embedding::Half(Arc::new(w)));
        }
        if let Some(w) = self.half_on_gpu(&hf, &[vocab, hidden])? {
            return Ok(Embedding::Dense(w));
        }
        Ok(Embedding::Dense(self.float(&hf, &[vocab, hidden])?))
    }
}
