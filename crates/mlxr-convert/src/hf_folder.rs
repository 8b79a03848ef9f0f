//! A Hugging Face model folder as the converter reads it: `config.json` and
//! the tensors of its safetensors files, memory-mapped, in the order
//! convert_hf_to_gguf.py visits them (files sorted by name, each file's
//! tensors sorted by name).

use std::path::Path;

use memmap2::Mmap;
use mlxr_models::weights::SafetensorsWeights;
use safetensors::{Dtype, SafeTensors};
use serde_json::Value;

use crate::ConvertError;

/// The element types a source tensor may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceDtype {
    F32,
    F16,
    BF16,
    /// An FP8 or bitsandbytes 4-bit weight, dequantized by mlxr-models as
    /// the model runs it.
    Quantized,
    /// An MLX quantized matrix (U32 words, `scales`, and `biases` if
    /// affine; mxfp4, mxfp8 and nvfp4 too), dequantized by mlxr-models.
    Mlx,
}

/// One stored tensor: where its bytes are and what they are.
#[derive(Clone, Debug)]
pub struct SourceTensor {
    pub name: String,
    pub dtype: SourceDtype,
    /// Row-major shape, as stored.
    pub shape: Vec<usize>,
    file: usize,
    start: usize,
    end: usize,
}

/// An opened folder.
pub struct HfFolder {
    pub config: serde_json::Map<String, Value>,
    pub tensors: Vec<SourceTensor>,
    maps: Vec<Mmap>,
    /// For an FP8 / 4-bit checkpoint: the model crate's reader, which
    /// decodes its weights.
    quantized: Option<SafetensorsWeights>,
}

fn input_err(message: String) -> ConvertError {
    ConvertError::Input(message)
}

/// Reads a JSON object file; `Ok(None)` when it does not exist.
pub fn read_json_object(
    path: &Path,
) -> Result<Option<serde_json::Map<String, Value>>, ConvertError> {
    if !path.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| input_err(format!("reading {}: {e}", path.display())))?;
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(map)) => Ok(Some(map)),
        Ok(_) => Err(input_err(format!(
            "{} is not a JSON object",
            path.display()
        ))),
        Err(e) => Err(input_err(format!(
            "{} is not valid JSON: {e}",
            path.display()
        ))),
    }
}

impl HfFolder {
    pub fn open(dir: &Path) -> Result<HfFolder, ConvertError> {
        if !dir.is_dir() {
            return Err(input_err(format!("{} is not a folder", dir.display())));
        }
        let config = read_json_object(&dir.join("config.json"))?.ok_or_else(|| {
            input_err(format!(
                "{} has no config.json (is it a Hugging Face model folder?)",
                dir.display()
            ))
        })?;
        let files = mlxr_formats::safetensors_folder::folder_weights(dir).map_err(input_err)?;
        // MLX's quantization (bits, group size, per-layer overrides), from
        // `quantization` (mlx-lm) or `quantization_config`.
        let mlx = config
            .get("quantization")
            .or_else(|| config.get("quantization_config"))
            .filter(|q| q.get("group_size").is_some() && q.get("bits").is_some())
            .cloned();
        // FP8, 4-bit and MLX weights (every MLX mode) are decoded by the
        // model crate's reader.
        let declared = config
            .get("quantization_config")
            .is_some_and(|v| !v.is_null());
        let quantized = match declared || mlx.is_some() {
            false => None,
            true => Some(
                SafetensorsWeights::open(dir, false, &candle_core::Device::Cpu)
                    .map_err(|e| input_err(format!("{}: {e}", dir.display())))?,
            ),
        };
        let mut maps = Vec::with_capacity(files.len());
        let mut tensors = Vec::new();
        let mut all_names = std::collections::BTreeSet::new();
        for (index, name) in files.iter().enumerate() {
            let path = dir.join(name);
            let file = std::fs::File::open(&path)
                .map_err(|e| input_err(format!("opening {}: {e}", path.display())))?;
            // SAFETY: mapped read-only; like every mmap reader we rely on
            // nobody truncating the file while it is converted.
            let map = unsafe { Mmap::map(&file) }
                .map_err(|e| input_err(format!("mapping {}: {e}", path.display())))?;
            let parsed = SafeTensors::deserialize(&map).map_err(|e| {
                input_err(format!(
                    "{}: not a valid safetensors file: {e}",
                    path.display()
                ))
            })?;
            let (header_len, _) = SafeTensors::read_metadata(&map).map_err(|e| {
                input_err(format!(
                    "{}: not a valid safetensors file: {e}",
                    path.display()
                ))
            })?;
            let data_start = 8 + header_len;
            let mut names: Vec<String> = parsed.names().into_iter().map(str::to_string).collect();
            names.sort();
            all_names.extend(names.iter().cloned());
            for tensor_name in names.clone() {
                let view = parsed.tensor(&tensor_name).map_err(|e| {
                    input_err(format!("{}: tensor {tensor_name}: {e}", path.display()))
                })?;
                if quantized.is_some()
                    && mlxr_formats::safetensors_folder::is_quantization_stat(&tensor_name)
                {
                    continue;
                }
                // An MLX matrix's scales and biases come with its weight.
                if let (Some(_), Some(stem)) = (
                    &mlx,
                    tensor_name
                        .strip_suffix(".scales")
                        .or_else(|| tensor_name.strip_suffix(".biases")),
                ) {
                    if names.iter().any(|n| *n == format!("{stem}.weight")) {
                        continue;
                    }
                }
                let mut shape = view.shape().to_vec();
                let dtype = match view.dtype() {
                    Dtype::F32 => SourceDtype::F32,
                    Dtype::F16 => SourceDtype::F16,
                    Dtype::BF16 => SourceDtype::BF16,
                    Dtype::U32 if mlx.is_some() => {
                        let config = mlx.as_ref().expect("checked");
                        let stem = tensor_name.strip_suffix(".weight").unwrap_or(&tensor_name);
                        let bits = config
                            .get(stem)
                            .and_then(|o| o.get("bits"))
                            .or_else(|| config.get("bits"))
                            .and_then(Value::as_u64)
                            .filter(|b| (1..=8).contains(b))
                            .ok_or_else(|| input_err(format!("{}: no MLX bits for {stem}", dir.display())))?;
                        let (&[out, words], true) = (view.shape(), names.iter().any(|n| *n == format!("{stem}.scales")))
                        else {
                            return Err(input_err(format!(
                                "{}: tensor {tensor_name} is U32 but not an MLX quantized matrix (2-D, with {stem}.scales)",
                                path.display()
                            )));
                        };
                        shape = vec![out, words * 32 / bits as usize];
                        SourceDtype::Mlx
                    }
                    Dtype::F8_E4M3 | Dtype::F8_E5M2 | Dtype::U8 if quantized.is_some() => {
                        let weights = quantized.as_ref().expect("checked");
                        let stem = tensor_name.strip_suffix(".weight").unwrap_or(&tensor_name);
                        let found = weights
                            .quantized_weight_shape(stem)
                            .map_err(|e| input_err(format!("{}: {e}", path.display())))?;
                        let Some([out, inp]) = found else {
                            return Err(input_err(format!(
                                "{}: tensor {tensor_name} is {:?} and not a quantized weight",
                                path.display(),
                                view.dtype()
                            )));
                        };
                        shape = vec![out, inp];
                        SourceDtype::Quantized
                    }
                    other => {
                        return Err(input_err(format!(
                            "{}: tensor {tensor_name} is {other:?}; F32, F16 and BF16 weights are converted, and FP8 / bitsandbytes 4-bit ones when config.json declares their quantization_config",
                            path.display()
                        )))
                    }
                };
                let start = view.data().as_ptr() as usize - map.as_ptr() as usize;
                debug_assert!(start >= data_start);
                tensors.push(SourceTensor {
                    name: tensor_name,
                    dtype,
                    shape,
                    file: index,
                    start,
                    end: start + view.data().len(),
                });
            }
            maps.push(map);
        }
        check_index(dir, &all_names)?;
        Ok(HfFolder {
            config,
            tensors,
            maps,
            quantized,
        })
    }

    /// Whether any weight is FP8, 4-bit or MLX-quantized.
    pub fn is_quantized(&self) -> bool {
        self.tensors
            .iter()
            .any(|t| matches!(t.dtype, SourceDtype::Quantized | SourceDtype::Mlx))
    }

    /// The tensor's values as f32 (F16 and BF16 widen exactly; FP8 and 4-bit
    /// weights decoded as the model runs them).
    pub fn values(&self, tensor: &SourceTensor) -> Result<Vec<f32>, ConvertError> {
        let bytes = &self.maps[tensor.file][tensor.start..tensor.end];
        let quantized_stem = || {
            let weights = self
                .quantized
                .as_ref()
                .expect("quantized tensors come with their reader");
            (
                weights,
                tensor.name.strip_suffix(".weight").unwrap_or(&tensor.name),
            )
        };
        let tensor_err =
            |e: mlxr_models::ModelError| input_err(format!("tensor {}: {e}", tensor.name));
        Ok(match tensor.dtype {
            SourceDtype::Mlx => {
                let (weights, stem) = quantized_stem();
                weights
                    .dequantized_mlx(stem, tensor.shape[0], tensor.shape[1])
                    .map_err(tensor_err)?
            }
            SourceDtype::Quantized => {
                let (weights, stem) = quantized_stem();
                weights
                    .dequantized_weight(stem)
                    .map_err(tensor_err)?
                    .ok_or_else(|| {
                        input_err(format!("tensor {} is not a quantized weight", tensor.name))
                    })?
                    .0
            }
            SourceDtype::F32 => bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            SourceDtype::F16 => bytes
                .chunks_exact(2)
                .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            SourceDtype::BF16 => bytes
                .chunks_exact(2)
                .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
        })
    }
}

/// Every tensor `model.safetensors.index.json` names must be in the shards,
/// and no other.
fn check_index(
    dir: &Path,
    stored: &std::collections::BTreeSet<String>,
) -> Result<(), ConvertError> {
    let path = dir.join("model.safetensors.index.json");
    let Some(index) = read_json_object(&path)? else {
        return Ok(());
    };
    let Some(map) = index.get("weight_map").and_then(Value::as_object) else {
        return Err(input_err(format!("{} has no weight_map", path.display())));
    };
    let stored: std::collections::BTreeSet<&str> = stored.iter().map(String::as_str).collect();
    let listed: std::collections::BTreeSet<&str> = map.keys().map(String::as_str).collect();
    let missing: Vec<&str> = listed.difference(&stored).copied().collect();
    let extra: Vec<&str> = stored.difference(&listed).copied().collect();
    if !missing.is_empty() {
        return Err(input_err(format!(
            "{}: tensors listed in model.safetensors.index.json are missing from the shards: {}",
            dir.display(),
            missing.join(", ")
        )));
    }
    if !extra.is_empty() {
        return Err(input_err(format!(
            "{}: the shards hold tensors model.safetensors.index.json does not list: {}",
            dir.display(),
            extra.join(", ")
        )));
    }
    Ok(())
}
