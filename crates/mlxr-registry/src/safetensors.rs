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
    // MLX packs `bits`-bit integers into U32 elements (across element
    // boundaries at 3, 5, 6 bits); its per-group scales and biases are not
    // parameters of the model.
    let mlx_bits = config["quantization"]["bits"]
        .as_u64()
        .filter(|&b| (1..=32).contains(&b));
    let hf_quant = hf_quantization(config);
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
                    n = n.checked_mul(32).map_or(u64::MAX, |b| b / bits);
                }
            }
            if let Some(level) = &hf_quant {
                // FP8 scales and bitsandbytes quant states are not parameters;
                // a 4-bit U8 weight holds two.
                if mlxr_formats::safetensors_folder::is_quantization_stat(name) {
                    continue;
                }
                if dtype == "U8" && matches!(level.as_str(), "NF4" | "FP4") {
                    n = n.saturating_mul(2);
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
    let quantization_level = match (config["quantization"]["bits"].as_u64(), hf_quant) {
        (Some(bits), _) => format!("MLX_Q{bits}"),
        (None, Some(level)) => level,
        (None, None) => quantization_level,
    };
    ModelDetails {
        format: "safetensors".to_string(),
        families: vec![family.clone()],
        family,
        parameter_size: human_number(params),
        quantization_level,
    }
}

/// The level a Hugging Face `quantization_config` names: `FP8` (fp8 and
/// compressed-tensors float-quantized), `NF4`/`FP4` (bitsandbytes 4-bit).
fn hf_quantization(config: &Value) -> Option<String> {
    let qc = &config["quantization_config"];
    match qc["quant_method"].as_str()? {
        "fp8" => Some("FP8".to_string()),
        "compressed-tensors" if qc["format"] == "float-quantized" => Some("FP8".to_string()),
        "bitsandbytes" if qc["load_in_4bit"] == true => Some(
            qc["bnb_4bit_quant_type"]
                .as_str()
                .unwrap_or("fp4")
                .to_uppercase(),
        ),
        _ => None,
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
    fn mlx_bits_unpack_u32_words() {
        for (bits, params) in [(0, 30), (3, 320), (5, 192), (6, 160), (64, 30)] {
            let h = header(json!({"w": {"dtype": "U32", "shape": [30]}}));
            let config = json!({"quantization": {"bits": bits}});
            let d = details_from_headers(&[h], &config);
            assert_eq!(d.parameter_size, human_number(params), "{bits} bits");
            assert_eq!(d.quantization_level, format!("MLX_Q{bits}"));
        }
    }

    #[test]
    fn fp8_and_nf4_checkpoints_name_their_level() {
        let fp8 = header(json!({
            "l.weight": {"dtype": "F8_E4M3", "shape": [64, 64]},
            "l.weight_scale_inv": {"dtype": "F32", "shape": [1, 1]},
            "norm.weight": {"dtype": "BF16", "shape": [64]}}));
        let config = json!({"quantization_config": {"quant_method": "fp8"}});
        let d = details_from_headers(&[fp8], &config);
        assert_eq!(
            (d.quantization_level.as_str(), d.parameter_size),
            ("FP8", human_number(4160))
        );
        let nf4 = header(json!({
            "l.weight": {"dtype": "U8", "shape": [2048, 1]},
            "l.weight.absmax": {"dtype": "U8", "shape": [64]},
            "l.weight.quant_map": {"dtype": "F32", "shape": [16]},
            "l.weight.nested_absmax": {"dtype": "F32", "shape": [1]},
            "l.weight.nested_quant_map": {"dtype": "F32", "shape": [256]},
            "l.weight.quant_state.bitsandbytes__nf4": {"dtype": "U8", "shape": [166]}}));
        let config = json!({"quantization_config": {"quant_method": "bitsandbytes",
            "load_in_4bit": true, "bnb_4bit_quant_type": "nf4"}});
        let d = details_from_headers(&[nf4], &config);
        assert_eq!(
            (d.quantization_level.as_str(), d.parameter_size),
            ("NF4", human_number(4096))
        );
    }
}
