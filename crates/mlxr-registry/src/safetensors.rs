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

fn read_header(path: &Path) -> Option<Header> {
    let mut file = File::open(path).ok()?;
    let mut prefix = [0u8; 8];
    file.read_exact(&mut prefix).ok()?;
    let mut header = vec![0u8; header_len(prefix)?];
    file.read_exact(&mut header).ok()?;
    parse_header_json(&header)
}

/// A header's JSON object: tensor names to `{dtype, shape, data_offsets}`,
/// and `__metadata__`.
pub type Header = serde_json::Map<String, Value>;

/// The header length an 8-byte little-endian prefix announces, when within
/// bounds.
fn header_len(prefix: [u8; 8]) -> Option<usize> {
    let len = u64::from_le_bytes(prefix);
    (2..=MAX_HEADER).contains(&len).then_some(len as usize)
}

fn parse_header_json(header: &[u8]) -> Option<Header> {
    if header.first() != Some(&b'{') {
        return None;
    }
    serde_json::from_slice(header).ok()
}

/// The header at the start of `bytes` (a whole file or its beginning), or
/// `None` when it is not a readable safetensors header.
pub fn header_from_bytes(bytes: &[u8]) -> Option<Header> {
    let prefix: [u8; 8] = bytes.get(..8)?.try_into().ok()?;
    let len = header_len(prefix)?;
    parse_header_json(bytes.get(8..)?.get(..len)?)
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
    let mut prefix = [0u8; 8];
    prefix.copy_from_slice(&magic[..8]);
    header_len(prefix).is_some()
}

/// Details from the headers of the weights files (parameter count, dominant
/// dtype) and the model's `config.json` (`model_type` as the family, MLX
/// quantization width).
pub fn details(weights: &[&Path], config: Option<&Path>) -> Result<ModelDetails> {
    let config = config
        .and_then(|p| std::fs::read(p).ok())
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .unwrap_or(Value::Null);
    let headers = weights
        .iter()
        .map(|&path| {
            read_header(path).ok_or_else(|| RegistryError::InvalidModel {
                path: path.to_path_buf(),
                reason: "not a readable safetensors file".to_string(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(details_from_headers(&headers, &config))
}

/// [`details`] from parsed headers and `config.json` (`Value::Null` when
/// absent). Any header and config are accepted: counts saturate.
pub fn details_from_headers(headers: &[Header], config: &Value) -> ModelDetails {
    // MLX packs `32 / bits` integers in each U32 element; its per-group
    // scales and biases are not parameters of the model.
    let mlx_bits = config["quantization"]["bits"]
        .as_u64()
        .filter(|&b| b > 0 && 32 % b == 0);
    let mut params = 0u64;
    let mut by_dtype: HashMap<String, u64> = HashMap::new();
    for header in headers {
        for (name, info) in header {
            if name == "__metadata__" {
                continue;
            }
            let dtype = info["dtype"].as_str().unwrap_or("unknown").to_string();
            let mut n: u64 = info["shape"]
                .as_array()
                .map(|dims| {
                    dims.iter()
                        .filter_map(Value::as_u64)
                        .fold(1u64, u64::saturating_mul)
                })
                .unwrap_or(0);
            if let Some(bits) = mlx_bits {
                if name.ends_with(".scales") || name.ends_with(".biases") {
                    continue;
                }
                if dtype == "U32" {
                    n = n.saturating_mul(32 / bits);
                }
            }
            params = params.saturating_add(n);
            let count = by_dtype.entry(dtype).or_default();
            *count = count.saturating_add(n);
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
    ModelDetails {
        format: "safetensors".to_string(),
        families: vec![family.clone()],
        family,
        parameter_size: human_number(params),
        quantization_level,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn header(v: Value) -> Header {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn header_from_bytes_reads_the_length_prefix() {
        let json = br#"{"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}}"#;
        let mut bytes = (json.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(json);
        let h = header_from_bytes(&bytes).unwrap();
        assert_eq!(h["w"]["shape"], json!([2, 3]));
        assert!(header_from_bytes(&bytes[..bytes.len() - 1]).is_none());
        assert!(header_from_bytes(&bytes[..7]).is_none());
    }

    #[test]
    fn counts_saturate_instead_of_wrapping() {
        let h = header(json!({"w": {"dtype": "U32", "shape": [4294967296u64, 4294967296u64]}}));
        let config = json!({"quantization": {"bits": 4}});
        let d = details_from_headers(&[h], &config);
        assert_eq!(d.parameter_size, human_number(u64::MAX));
    }

    #[test]
    fn zero_or_odd_mlx_bits_count_u32_words() {
        for bits in [0, 3] {
            let h = header(json!({"w": {"dtype": "U32", "shape": [10]}}));
            let config = json!({"quantization": {"bits": bits}});
            let d = details_from_headers(&[h], &config);
            assert_eq!(d.parameter_size, human_number(10));
            assert_eq!(d.quantization_level, format!("MLX_Q{bits}"));
        }
    }
}
