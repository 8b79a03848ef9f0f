//! Weights of a Hugging Face or MLX model folder: one `model.safetensors`, or
//! shards listed by `model.safetensors.index.json`, memory-mapped.
//!
//! Float tensors (F32, F16, BF16) are read as f32. A linear layer with
//! `scales` and `biases` beside its `weight` is MLX affine-quantized: the
//! `uint32` weight holds `bits`-bit integers, and `bits` and the group size
//! follow from the shapes (`in·bits/32` words and `in/group` scales per row),
//! which also covers MLX's per-layer overrides.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use candle_core::safetensors::MmapedSafetensors;
use candle_core::{DType, Device, Tensor};

use super::hf_names::hf_name;
use super::Weights;
use crate::backend::cpu::kernels::affine::AffineWeight;
use crate::layers::{Embedding, Linear};
use crate::{ModelError, Result};

pub struct SafetensorsWeights {
    files: MmapedSafetensors,
    /// What the decoder layers are under (`model.`, or
    /// `language_model.model.` in multimodal checkpoints).
    prefix: String,
    post_norms: bool,
    device: Device,
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
        let t = self
            .files
            .load(name, &self.device)
            .map_err(|_| ModelError::MissingTensor(name.to_string()))?;
        if t.dims() != shape {
            return Err(ModelError::ShapeMismatch {
                tensor: name.to_string(),
                expected: shape.to_vec(),
                found: t.dims().to_vec(),
            });
        }
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
        let t = self
            .files
            .load(name, &self.device)
            .map_err(|_| ModelError::MissingTensor(name.to_string()))?;
        Ok(t.to_dtype(DType::F32)?)
    }

    fn is_quantized(&self, stem: &str) -> bool {
        self.has(&format!("{stem}.scales"))
    }
}

impl Weights for SafetensorsWeights {
    fn contains(&self, name: &str) -> bool {
        self.name(name).is_ok_and(|n| self.has(&n))
    }

    fn linear(&self, name: &str, out: usize, inp: usize) -> Result<Linear> {
        let hf = self.name(name)?;
        let stem = hf.strip_suffix(".weight").unwrap_or(&hf);
        if self.is_quantized(stem) {
            let w = self.affine(stem, out, inp)?;
            // The affine kernels are the CPU backend's; other devices get
            // the weights dequantized (f32, 8x a 4-bit weight's memory).
            if !self.device.is_cpu() {
                return Ok(Linear::dense(self.dequantized(&w)?));
            }
            return Ok(Linear::affine(Arc::new(w)));
        }
        Ok(Linear::dense(self.float(&hf, &[out, inp])?))
    }

    fn vector(&self, name: &str, len: usize) -> Result<Tensor> {
        self.float(&self.name(name)?, &[len])
    }

    fn embedding(&self, name: &str, vocab: usize, hidden: usize) -> Result<Embedding> {
        let hf = self.name(name)?;
        let stem = hf.strip_suffix(".weight").unwrap_or(&hf);
        if self.is_quantized(stem) {
            let w = self.affine(stem, vocab, hidden)?;
            if !self.device.is_cpu() {
                return Ok(Embedding::Dense(self.dequantized(&w)?));
            }
            return Ok(Embedding::Affine(Arc::new(w)));
        }
        Ok(Embedding::Dense(self.float(&hf, &[vocab, hidden])?))
    }
}
