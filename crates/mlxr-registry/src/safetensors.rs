//! Details of a safetensors weights file (the embedding default model).

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::Path;

use serde_json::Value;

use crate::details::{human_number, ModelDetails};
use crate::error::{RegistryError, Result};

/// Largest header accepted (the format's own limit is 100 MB).
const MAX_HEADER: u64 = 100 << 20;

fn read_header(path: &Path) -> Option<serde_json::Map<String, Value>> {
    let mut file = File::open(path).ok()?;
    let mut len = [0u8; 8];
    file.read_exact(&mut len).ok()?;
    let len = u64::from_le_bytes(len);
    if !(2..=MAX_HEADER).contains(&len) {
        return None;
    }
    let mut header = vec![0u8; len as usize];
    file.read_exact(&mut header).ok()?;
    if header.first() != Some(&b'{') {
        return None;
    }
    serde_json::from_slice(&header).ok()
}

/// Whether `path` starts with a safetensors header.
pub(crate) fn is_safetensors(path: &Path) -> bool {
    let mut magic = [0u8; 9];
    let Ok(mut f) = File::open(path) else {
        return false;
    };
    if f.read_exact(&mut magic).is_err() || magic[8] != b'{' {
        return false;
    }
    let len = u64::from_le_bytes(magic[..8].try_into().unwrap());
    (2..=MAX_HEADER).contains(&len)
}

/// Details from the headers of the weights files (parameter count, dominant
/// dtype) and the model's `config.json` (`model_type` as the family, MLX
/// quantization width).
pub fn details(weights: &[&Path], config: Option<&Path>) -> Result<ModelDetails> {
    let config = config
        .and_then(|p| std::fs::read(p).ok())
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .unwrap_or(Value::Null);
    // MLX packs `32 / bits` integers in each U32 element; its per-group
    // scales and biases are not parameters of the model.
    let mlx_bits = config["quantization"]["bits"]
        .as_u64()
        .filter(|b| 32 % b == 0);
    let mut params = 0u64;
    let mut by_dtype: HashMap<String, u64> = HashMap::new();
    for &path in weights {
        let header = read_header(path).ok_or_else(|| RegistryError::InvalidModel {
            path: path.to_path_buf(),
            reason: "not a readable safetensors file".to_string(),
        })?;
        for (name, info) in &header {
            if name == "__metadata__" {
                continue;
            }
            let dtype = info["dtype"].as_str().unwrap_or("unknown").to_string();
            let mut n: u64 = info["shape"]
                .as_array()
                .map(|dims| dims.iter().filter_map(Value::as_u64).product())
                .unwrap_or(0);
            if let Some(bits) = mlx_bits {
                if name.ends_with(".scales") || name.ends_with(".biases") {
                    continue;
                }
                if dtype == "U32" {
                    n *= 32 / bits;
                }
            }
            params += n;
            *by_dtype.entry(dtype).or_default() += n;
        }
    }
    let quantization_level = by_dtype
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
        .map(|(d, _)| d)
        .unwrap_or_else(|| "unknown".to_string());
    let family = config["model_type"]
        .as_str()
        .unwrap_or("unknown")
        .to_string();
    // MLX conversions: the integer width, not the U32 words they are packed in.
    let quantization_level = match config["quantization"]["bits"].as_u64() {
        Some(bits) => format!("MLX_Q{bits}"),
        None => quantization_level,
    };
    Ok(ModelDetails {
        format: "safetensors".to_string(),
        families: vec![family.clone()],
        family,
        parameter_size: human_number(params),
        quantization_level,
    })
}
