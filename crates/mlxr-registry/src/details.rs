//! Model details (`/api/tags`, `/api/show`) read from a GGUF header.

use std::collections::HashMap;
use std::path::Path;

use mlxr_formats::gguf::GgufFile;
use serde::{Deserialize, Serialize};

use crate::error::{RegistryError, Result};

/// What Ollama reports as `details` of a model.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelDetails {
    /// `"gguf"`.
    pub format: String,
    /// `general.architecture`, e.g. `"llama"`.
    pub family: String,
    pub families: Vec<String>,
    /// Human-readable parameter count, e.g. `"134.52M"`.
    pub parameter_size: String,
    /// e.g. `"Q4_1"`, `"Q4_K_M"`.
    pub quantization_level: String,
}

/// Reads the details of the GGUF file at `path`.
pub fn gguf_details(path: &Path) -> Result<ModelDetails> {
    let invalid = |reason: String| RegistryError::InvalidModel {
        path: path.to_path_buf(),
        reason,
    };
    let file =
        GgufFile::open(path).map_err(|e| invalid(format!("not a readable GGUF file: {e}")))?;
    let meta = file.metadata();
    let family = meta
        .opt_str("general.architecture")
        .map_err(|e| invalid(e.to_string()))?
        .ok_or_else(|| invalid("general.architecture is missing".to_string()))?
        .to_string();
    let parameter_count = match meta.opt_u64("general.parameter_count") {
        Ok(Some(n)) if n > 0 => n,
        _ => file.tensors().iter().map(|t| t.n_elements()).sum(),
    };
    let file_type = meta
        .get("general.file_type")
        .and_then(|v| v.as_i128())
        .and_then(|v| u32::try_from(v).ok())
        .and_then(file_type_name);
    let quantization_level = match file_type {
        Some(name) => name.to_string(),
        None => dominant_tensor_type(&file).unwrap_or_else(|| "unknown".to_string()),
    };
    Ok(ModelDetails {
        format: "gguf".to_string(),
        families: vec![family.clone()],
        family,
        parameter_size: human_number(parameter_count),
        quantization_level,
    })
}

/// The tensor type holding the most elements among 2-D+ tensors (weights),
/// falling back to all tensors.
fn dominant_tensor_type(file: &GgufFile) -> Option<String> {
    let mut by_type: HashMap<&'static str, u64> = HashMap::new();
    let weights = file.tensors().iter().filter(|t| t.dims.len() >= 2);
    for t in weights {
        *by_type.entry(t.ggml_type.name()).or_default() += t.n_elements();
    }
    if by_type.is_empty() {
        for t in file.tensors() {
            *by_type.entry(t.ggml_type.name()).or_default() += t.n_elements();
        }
    }
    by_type
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(a.0)))
        .map(|(name, _)| name.to_string())
}

/// llama.cpp's `llama_ftype` names (`general.file_type`), as Ollama prints them.
pub fn file_type_name(file_type: u32) -> Option<&'static str> {
    Some(match file_type {
        0 => "F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        7 => "Q8_0",
        8 => "Q5_0",
        9 => "Q5_1",
        10 => "Q2_K",
        11 => "Q3_K_S",
        12 => "Q3_K_M",
        13 => "Q3_K_L",
        14 => "Q4_K_S",
        15 => "Q4_K_M",
        16 => "Q5_K_S",
        17 => "Q5_K_M",
        18 => "Q6_K",
        19 => "IQ2_XXS",
        20 => "IQ2_XS",
        21 => "Q2_K_S",
        22 => "IQ3_XS",
        23 => "IQ3_XXS",
        24 => "IQ1_S",
        25 => "IQ4_NL",
        26 => "IQ3_S",
        27 => "IQ3_M",
        28 => "IQ2_S",
        29 => "IQ2_M",
        30 => "IQ4_XS",
        31 => "IQ1_M",
        32 => "BF16",
        36 => "TQ1_0",
        37 => "TQ2_0",
        38 => "MXFP4",
        _ => return None,
    })
}

/// Ollama's `format.HumanNumber`: `"134.52M"`, `"7B"`, `"1.2B"`, `"500K"`.
pub fn human_number(n: u64) -> String {
    const THOUSAND: f64 = 1e3;
    const MILLION: f64 = 1e6;
    const BILLION: f64 = 1e9;
    let x = n as f64;
    if x >= BILLION {
        let v = x / BILLION;
        if v.fract() == 0.0 {
            format!("{v:.0}B")
        } else {
            format!("{v:.1}B")
        }
    } else if x >= MILLION {
        let v = x / MILLION;
        if v.fract() == 0.0 {
            format!("{v:.0}M")
        } else {
            format!("{v:.2}M")
        }
    } else if x >= THOUSAND {
        format!("{:.0}K", x / THOUSAND)
    } else {
        n.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_numbers() {
        assert_eq!(human_number(134_515_008), "134.52M");
        assert_eq!(human_number(7_000_000_000), "7B");
        assert_eq!(human_number(1_240_000_000), "1.2B");
        assert_eq!(human_number(268_098_176), "268.10M");
        assert_eq!(human_number(22_000), "22K");
        assert_eq!(human_number(999), "999");
    }
}
