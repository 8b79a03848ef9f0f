//! Quantized Hugging Face checkpoints: `config.json`'s `quantization_config`
//! read into [`HfQuantization`], and the FP8 and bitsandbytes 4-bit weights
//! it describes (../shared/reference/fp8-nf4.md).
//!
//! - FP8 (`quant_method: fp8`, DeepSeek / Qwen3-FP8): an `F8_E4M3` (or
//!   `F8_E5M2`) `weight [out, in]` and a float `weight_scale_inv`
//!   `[⌈out/bn⌉, ⌈in/bk⌉]` for `weight_block_size [bn, bk]`, which despite
//!   its name multiplies: `w[i, j] = q[i, j] · s[i / bn, j / bk]`; edge
//!   blocks are partial. Without a block size, one scale per tensor.
//! - compressed-tensors `float-quantized` (llm-compressor FP8): the same
//!   with `weight_scale`, per tensor `[1]`, per channel `[out, 1]` or per
//!   block. All three are block scales here (blocks of `[out, in]`,
//!   `[1, in]`, `[bn, bk]`).
//! - bitsandbytes 4-bit (NF4, FP4): `weight` `U8` with two codes a byte (the
//!   even element in the high nibble), `absmax` per `blocksize` elements of
//!   the flattened matrix, the 16-entry code book `quant_map`, and, with
//!   double quantization, `absmax` as `U8` codes of `nested_quant_map`
//!   scaled per 256 blocks by `nested_absmax`, plus `nested_offset`; the JSON
//!   `quant_state.bitsandbytes__nf4` (or `__fp4`) gives blocksize and shape.
//!
//! - MLX (`quantization: {group_size, bits, mode}`, no `quant_method`):
//!   `mode` affine, mxfp4, mxfp8 or nvfp4 ([`MlxMode`], the layouts in
//!   [`super::mlx_quant`]), and per-layer entries `"<module>": {group_size,
//!   bits, mode}` as mlx-lm records a quant predicate's choices (an entry
//!   without `mode` is affine, as `to_quantized` defaults).
//!
//! On the CPU the weights stay in their codes and are decoded row by row
//! inside the matmul (`backend::cpu::kernels::{fp8, bnb4}`); other devices
//! get them dequantized to f32 at load.

use serde_json::Value;

use mlxr_formats::float8::Float8;

use crate::ModelError;

fn invalid(msg: impl Into<String>) -> ModelError {
    ModelError::InvalidConfig(format!("quantization_config: {}", msg.into()))
}

/// How a checkpoint's linear weights are quantized.
#[derive(Clone, Debug, PartialEq)]
pub enum HfQuantization {
    /// MLX (`weight`/`scales`, and `biases` for affine): `mode` for every
    /// quantized layer but those `layers` names with their own.
    Mlx {
        mode: MlxMode,
        layers: Vec<(String, MlxMode)>,
    },
    /// `quant_method: fp8`: `weight_scale_inv` per block, or per tensor
    /// without `weight_block_size`.
    Fp8 {
        format: Float8,
        block: Option<[usize; 2]>,
        not_converted: Vec<String>,
    },
    /// compressed-tensors `float-quantized`: `weight_scale`.
    CompressedFp8 {
        strategy: ScaleStrategy,
        not_converted: Vec<String>,
    },
    /// bitsandbytes `load_in_4bit`.
    Bnb4 {
        kind: Bnb4Kind,
        not_converted: Vec<String>,
    },
}

/// Which part of a weight one compressed-tensors scale covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleStrategy {
    Tensor,
    Channel,
    Block([usize; 2]),
}

/// MLX's quantization modes (`mx.quantize(w, mode=...)`, mlx 0.32).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MlxMode {
    /// `bits`-bit integers with a float scale and bias per group (bits and
    /// group size read from the tensors' shapes).
    Affine,
    /// E2M1 codes, an E8M0 scale per 32.
    Mxfp4,
    /// E4M3 codes, an E8M0 scale per 32.
    Mxfp8,
    /// E2M1 codes, an E4M3 scale per 16.
    Nvfp4,
}

impl MlxMode {
    /// The mode named `name` as mlx spells it.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "affine" => Self::Affine,
            "mxfp4" => Self::Mxfp4,
            "mxfp8" => Self::Mxfp8,
            "nvfp4" => Self::Nvfp4,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Affine => "affine",
            Self::Mxfp4 => "mxfp4",
            Self::Mxfp8 => "mxfp8",
            Self::Nvfp4 => "nvfp4",
        }
    }

    /// The `(group_size, bits)` mlx requires of a floating-point mode;
    /// `None` for affine, which takes several.
    pub fn fixed_layout(self) -> Option<(usize, usize)> {
        match self {
            Self::Affine => None,
            Self::Mxfp4 => Some((32, 4)),
            Self::Mxfp8 => Some((32, 8)),
            Self::Nvfp4 => Some((16, 4)),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bnb4Kind {
    Nf4,
    Fp4,
}

impl Bnb4Kind {
    fn name(self) -> &'static str {
        match self {
            Self::Nf4 => "nf4",
            Self::Fp4 => "fp4",
        }
    }
}

fn string_list(v: &Value, key: &str) -> Result<Vec<String>, ModelError> {
    match &v[key] {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => items
            .iter()
            .map(|s| {
                s.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| invalid(format!("'{key}' holds {s}, not a module name")))
            })
            .collect(),
        other => Err(invalid(format!("'{key}' is {other}, not a list"))),
    }
}

/// The `mode` of an MLX quantization object (the folder's, or `module`'s
/// own entry); affine when absent.
fn mlx_mode(v: &Value, module: Option<&str>) -> Result<MlxMode, ModelError> {
    let whose = module.map_or(String::new(), |m| format!(" of '{m}'"));
    match &v["mode"] {
        Value::Null => Ok(MlxMode::Affine),
        Value::String(name) => MlxMode::parse(name).ok_or_else(|| {
            invalid(format!(
                "MLX mode '{name}'{whose} is not supported (supported: affine, mxfp4, mxfp8, \
                 nvfp4)"
            ))
        }),
        other => Err(invalid(format!("MLX 'mode'{whose} is {other}, not a name"))),
    }
}

fn block_size(v: &Value, key: &str) -> Result<[usize; 2], ModelError> {
    match v
        .as_array()
        .map(|a| a.iter().map(Value::as_u64).collect::<Vec<_>>())
    {
        Some(dims) if dims.len() == 2 && dims.iter().all(|d| d.is_some_and(|d| d > 0)) => {
            Ok([dims[0].unwrap() as usize, dims[1].unwrap() as usize])
        }
        _ => Err(invalid(format!(
            "'{key}' is {v}, expected two positive whole numbers"
        ))),
    }
}

impl HfQuantization {
    /// The quantization `config.json` declares (`quantization_config`, or
    /// MLX's `quantization`), `None` for a float checkpoint.
    pub fn from_config(config: &Value) -> Result<Option<Self>, ModelError> {
        let qc = match (&config["quantization_config"], &config["quantization"]) {
            (Value::Null, Value::Null) => return Ok(None),
            (Value::Null, mlx) => mlx,
            (qc, _) => qc,
        };
        if !qc.is_object() {
            return Err(invalid(format!("{qc} is not an object")));
        }
        let method = match &qc["quant_method"] {
            Value::Null => return Self::mlx(qc).map(Some),
            Value::String(m) => m.as_str(),
            other => return Err(invalid(format!("'quant_method' is {other}"))),
        };
        match method {
            "fp8" => Self::fp8(qc),
            "compressed-tensors" => Self::compressed(qc),
            "bitsandbytes" => Self::bitsandbytes(qc),
            other => Err(invalid(format!(
                "quant_method '{other}' is not supported (supported: fp8, compressed-tensors \
                 float-quantized FP8, bitsandbytes 4-bit, MLX affine)"
            ))),
        }
        .map(Some)
    }

    fn mlx(qc: &Value) -> Result<Self, ModelError> {
        if qc["bits"].as_u64().is_none() || qc["group_size"].as_u64().is_none() {
            return Err(invalid(format!(
                "{qc} has no quant_method and is not MLX's {{bits, group_size}}"
            )));
        }
        let mode = mlx_mode(qc, None)?;
        let mut layers = Vec::new();
        for (module, entry) in qc.as_object().expect("checked").iter() {
            if entry.is_object() {
                layers.push((module.clone(), mlx_mode(entry, Some(module))?));
            }
        }
        Ok(Self::Mlx { mode, layers })
    }

    /// The MLX mode of the layer `module` (an HF stem like
    /// `model.layers.0.mlp.down_proj`): its own entry's, else the
    /// folder's; `None` when this is not an MLX quantization.
    pub fn mlx_mode(&self, module: &str) -> Option<MlxMode> {
        match self {
            Self::Mlx { mode, layers } => Some(
                layers
                    .iter()
                    .find(|(m, _)| m == module)
                    .map_or(*mode, |(_, mode)| *mode),
            ),
            _ => None,
        }
    }

    fn fp8(qc: &Value) -> Result<Self, ModelError> {
        let format = match qc["fmt"].as_str().unwrap_or("e4m3") {
            "e4m3" | "float8_e4m3fn" => Float8::E4M3,
            "e5m2" | "float8_e5m2" => Float8::E5M2,
            other => {
                return Err(invalid(format!(
                    "fp8 'fmt' '{other}' is not supported (e4m3, e5m2)"
                )))
            }
        };
        if let Some(scheme) = qc["activation_scheme"].as_str() {
            if scheme != "dynamic" {
                return Err(invalid(format!(
                    "activation_scheme '{scheme}' is not supported (weights are dequantized; \
                     only 'dynamic' keeps activations unquantized)"
                )));
            }
        }
        let block = match &qc["weight_block_size"] {
            Value::Null => None,
            v => Some(block_size(v, "weight_block_size")?),
        };
        let mut not_converted = string_list(qc, "modules_to_not_convert")?;
        not_converted.extend(string_list(qc, "ignored_layers")?);
        Ok(Self::Fp8 {
            format,
            block,
            not_converted,
        })
    }

    fn compressed(qc: &Value) -> Result<Self, ModelError> {
        match qc["format"].as_str() {
            Some("float-quantized") => {}
            other => {
                return Err(invalid(format!(
                    "compressed-tensors format {} is not supported (supported: float-quantized)",
                    other.unwrap_or("(none)")
                )))
            }
        }
        let groups = qc["config_groups"]
            .as_object()
            .ok_or_else(|| invalid("compressed-tensors config has no 'config_groups'"))?;
        let mut strategies = Vec::new();
        for (name, group) in groups {
            let w = &group["weights"];
            let bad = |why: String| invalid(format!("config_groups.{name}.weights: {why}"));
            if w["num_bits"].as_u64() != Some(8) || w["type"].as_str() != Some("float") {
                return Err(bad(format!(
                    "{} bits of type {} (supported: 8-bit float)",
                    w["num_bits"], w["type"]
                )));
            }
            if w["symmetric"].as_bool() == Some(false) {
                return Err(bad("asymmetric FP8 is not supported".into()));
            }
            let strategy = match w["strategy"].as_str() {
                Some("tensor") => ScaleStrategy::Tensor,
                Some("channel") => ScaleStrategy::Channel,
                Some("block") => ScaleStrategy::Block(block_size(
                    &w["block_structure"],
                    &format!("config_groups.{name}.weights.block_structure"),
                )?),
                other => {
                    return Err(bad(format!(
                        "strategy {} is not supported (tensor, channel, block)",
                        other.unwrap_or("(none)")
                    )))
                }
            };
            let act = &group["input_activations"];
            if !act.is_null() && act["dynamic"].as_bool() != Some(true) {
                return Err(invalid(format!(
                    "config_groups.{name}.input_activations: static activation scales are not \
                     supported (weights are dequantized; only dynamic activations)"
                )));
            }
            strategies.push(strategy);
        }
        let strategy = match strategies.as_slice() {
            [s, rest @ ..] if rest.iter().all(|r| r == s) => *s,
            [] => return Err(invalid("config_groups is empty")),
            _ => {
                return Err(invalid(
                    "config_groups with different weight strategies are not supported",
                ))
            }
        };
        Ok(Self::CompressedFp8 {
            strategy,
            not_converted: string_list(qc, "ignore")?,
        })
    }

    fn bitsandbytes(qc: &Value) -> Result<Self, ModelError> {
        if qc["load_in_4bit"].as_bool() != Some(true) {
            return Err(invalid(
                "bitsandbytes without load_in_4bit (LLM.int8) is not supported",
            ));
        }
        let kind = match qc["bnb_4bit_quant_type"].as_str().unwrap_or("fp4") {
            "nf4" => Bnb4Kind::Nf4,
            "fp4" => Bnb4Kind::Fp4,
            other => {
                return Err(invalid(format!(
                    "bnb_4bit_quant_type '{other}' is not supported (nf4, fp4)"
                )))
            }
        };
        if let Some(storage) = qc["bnb_4bit_quant_storage"].as_str() {
            if storage != "uint8" {
                return Err(invalid(format!(
                    "bnb_4bit_quant_storage '{storage}' is not supported (uint8)"
                )));
            }
        }
        Ok(Self::Bnb4 {
            kind,
            not_converted: string_list(qc, "llm_int8_skip_modules")?,
        })
    }

    /// Whether `module` (an HF tensor stem like `model.layers.0.mlp.up_proj`)
    /// is listed as left in float: an entry matches whole dot-separated
    /// parts of the name (`lm_head`, `mlp.gate`, `model.layers.0`);
    /// compressed-tensors' `re:` patterns are not interpreted (never match).
    pub fn leaves_float(&self, module: &str) -> bool {
        let list = match self {
            Self::Mlx { .. } => return false,
            Self::Fp8 { not_converted, .. }
            | Self::CompressedFp8 { not_converted, .. }
            | Self::Bnb4 { not_converted, .. } => not_converted,
        };
        let dotted = format!(".{module}.");
        list.iter()
            .filter(|m| !m.starts_with("re:") && !m.is_empty())
            .any(|m| dotted.contains(&format!(".{m}.")))
    }
}

/// bitsandbytes' NF4 code book (`functional.py::get_4bit_type("nf4")`).
pub const NF4_CODE: [f32; 16] = [
    -1.0,
    -0.696_192_8,
    -0.525_073_05,
    -0.394_917_5,
    -0.284_441_38,
    -0.184_773_43,
    -0.091_050_036,
    0.0,
    0.079_580_3,
    0.160_930_2,
    0.246_112_3,
    0.337_915_24,
    0.440_709_83,
    0.562_617,
    0.722_956_84,
    1.0,
];

/// A bitsandbytes 4-bit matrix's block scales: `absmax` as stored (F32), or
/// double-quantized (`U8` codes of `nested_quant_map`, scaled per
/// `nested_blocksize` blocks by `nested_absmax`, plus `nested_offset`).
pub enum Absmax<'a> {
    Plain(Vec<f32>),
    Nested {
        codes: &'a [u8],
        quant_map: Vec<f32>,
        absmax: Vec<f32>,
        blocksize: usize,
        offset: f32,
    },
}

impl Absmax<'_> {
    /// The f32 scale of every block, as bitsandbytes computes them.
    pub fn resolve(self) -> Vec<f32> {
        match self {
            Absmax::Plain(a) => a,
            Absmax::Nested {
                codes,
                quant_map,
                absmax,
                blocksize,
                offset,
            } => codes
                .iter()
                .enumerate()
                .map(|(b, &c)| quant_map[c as usize] * absmax[b / blocksize] + offset)
                .collect(),
        }
    }
}

/// The JSON of a `quant_state.bitsandbytes__{nf4,fp4}` tensor.
#[derive(Debug)]
pub struct Bnb4State {
    pub blocksize: usize,
    pub shape: Vec<usize>,
    pub nested_blocksize: Option<usize>,
    pub nested_offset: Option<f32>,
}

impl Bnb4State {
    pub fn parse(bytes: &[u8], tensor: &str, kind: Bnb4Kind) -> Result<Self, ModelError> {
        let bad = |why: String| ModelError::Files(format!("tensor '{tensor}': {why}"));
        let json: Value = serde_json::from_slice(bytes)
            .map_err(|e| bad(format!("not the bitsandbytes quant-state JSON: {e}")))?;
        let quant_type = json["quant_type"].as_str().unwrap_or_default();
        if quant_type != kind.name() {
            return Err(bad(format!(
                "quant_type '{quant_type}', but config.json says '{}'",
                kind.name()
            )));
        }
        let size = |key: &str| json[key].as_u64().map(|n| n as usize).filter(|&n| n > 0);
        let blocksize = size("blocksize").ok_or_else(|| bad("no positive 'blocksize'".into()))?;
        let shape = json["shape"]
            .as_array()
            .and_then(|a| a.iter().map(|d| d.as_u64().map(|d| d as usize)).collect())
            .ok_or_else(|| bad("no 'shape'".into()))?;
        let nested_offset = json["nested_offset"].as_f64().map(|o| o as f32);
        let nested_blocksize = size("nested_blocksize");
        if nested_offset.is_some() != nested_blocksize.is_some() {
            return Err(bad(
                "'nested_offset' and a positive 'nested_blocksize' come together".into(),
            ));
        }
        Ok(Self {
            blocksize,
            shape,
            nested_blocksize,
            nested_offset,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(qc: Value) -> Result<Option<HfQuantization>, ModelError> {
        HfQuantization::from_config(&json!({ "quantization_config": qc }))
    }

    #[test]
    fn reads_every_supported_method() {
        assert_eq!(HfQuantization::from_config(&json!({})).unwrap(), None);
        assert_eq!(
            parse(
                json!({"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                         "weight_block_size": [128, 64], "modules_to_not_convert": ["lm_head"]})
            )
            .unwrap(),
            Some(HfQuantization::Fp8 {
                format: Float8::E4M3,
                block: Some([128, 64]),
                not_converted: vec!["lm_head".into()]
            })
        );
        let ct = json!({"quant_method": "compressed-tensors", "format": "float-quantized",
            "config_groups": {"group_0": {"targets": ["Linear"],
                "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": true},
                "input_activations": {"num_bits": 8, "type": "float", "dynamic": true}}},
            "ignore": ["lm_head"]});
        assert_eq!(
            parse(ct).unwrap(),
            Some(HfQuantization::CompressedFp8 {
                strategy: ScaleStrategy::Channel,
                not_converted: vec!["lm_head".into()]
            })
        );
        assert_eq!(
            parse(json!({"quant_method": "bitsandbytes", "load_in_4bit": true,
                         "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": true}))
            .unwrap(),
            Some(HfQuantization::Bnb4 {
                kind: Bnb4Kind::Nf4,
                not_converted: vec![]
            })
        );
        let mlx = json!({"quantization": {"group_size": 64, "bits": 3}});
        assert_eq!(
            HfQuantization::from_config(&mlx).unwrap(),
            Some(HfQuantization::Mlx {
                mode: MlxMode::Affine,
                layers: vec![]
            })
        );
        // mlx-lm's per-layer entries: their own mode, affine without one.
        let mlx = json!({"quantization": {"group_size": 16, "bits": 4, "mode": "nvfp4",
            "model.layers.0.mlp.down_proj": {"group_size": 32, "bits": 8, "mode": "mxfp8"},
            "lm_head": {"group_size": 64, "bits": 6}, "model.layers.1.mlp.gate": false}});
        let q = HfQuantization::from_config(&mlx).unwrap().unwrap();
        assert_eq!(
            q.mlx_mode("model.layers.0.mlp.up_proj"),
            Some(MlxMode::Nvfp4)
        );
        assert_eq!(
            q.mlx_mode("model.layers.0.mlp.down_proj"),
            Some(MlxMode::Mxfp8)
        );
        assert_eq!(q.mlx_mode("lm_head"), Some(MlxMode::Affine));
        for mode in [
            MlxMode::Affine,
            MlxMode::Mxfp4,
            MlxMode::Mxfp8,
            MlxMode::Nvfp4,
        ] {
            assert_eq!(MlxMode::parse(mode.name()), Some(mode));
        }
    }

    #[test]
    fn unsupported_or_malformed_configs_name_the_field() {
        for (qc, needle) in [
            (json!({"quant_method": "gptq", "bits": 4}), "gptq"),
            (json!({"quant_method": "fp8", "fmt": "e3m4"}), "e3m4"),
            (
                json!({"quant_method": "fp8", "weight_block_size": [128]}),
                "weight_block_size",
            ),
            (
                json!({"quant_method": "fp8", "weight_block_size": [0, 128]}),
                "weight_block_size",
            ),
            (
                json!({"quant_method": "fp8", "activation_scheme": "static"}),
                "static",
            ),
            (
                json!({"quant_method": "fp8", "modules_to_not_convert": "lm_head"}),
                "modules_to_not_convert",
            ),
            (
                json!({"quant_method": "compressed-tensors", "format": "pack-quantized"}),
                "pack-quantized",
            ),
            (
                json!({"quant_method": "compressed-tensors", "format": "float-quantized"}),
                "config_groups",
            ),
            (
                json!({"quant_method": "compressed-tensors", "format": "float-quantized",
                       "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int"}}}}),
                "config_groups.g.weights",
            ),
            (
                json!({"quant_method": "compressed-tensors", "format": "float-quantized",
                       "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float",
                       "strategy": "block"}}}}),
                "block_structure",
            ),
            (
                json!({"quant_method": "bitsandbytes", "load_in_8bit": true}),
                "LLM.int8",
            ),
            (
                json!({"quant_method": "bitsandbytes", "load_in_4bit": true,
                       "bnb_4bit_quant_type": "int4"}),
                "int4",
            ),
            (
                json!({"bits": 4, "group_size": 32, "mode": "mxfp6"}),
                "MLX mode 'mxfp6' is not supported",
            ),
            (
                json!({"bits": 4, "group_size": 32, "mode": "mxfp4",
                       "model.layers.0.mlp.up_proj": {"bits": 4, "group_size": 32, "mode": "int4"}}),
                "'int4' of 'model.layers.0.mlp.up_proj'",
            ),
            (
                json!({"bits": 4, "group_size": 32, "mode": 4}),
                "'mode' is 4",
            ),
            (json!({"group_size": 32}), "no quant_method"),
            (json!("fp8"), "not an object"),
        ] {
            let e = parse(qc.clone()).unwrap_err().to_string();
            assert!(e.contains(needle), "{qc}: {e}");
            assert!(e.contains("quantization_config"), "{qc}: {e}");
        }
    }

    #[test]
    fn nested_absmax_is_code_times_scale_plus_offset() {
        let absmax = Absmax::Nested {
            codes: &[0, 1, 1],
            quant_map: vec![0.5, 1.0],
            absmax: vec![2.0, 4.0],
            blocksize: 2,
            offset: 0.25,
        }
        .resolve();
        assert_eq!(absmax, [1.25, 2.25, 4.25]);
    }

    #[test]
    fn modules_left_in_float() {
        let q = parse(
            json!({"quant_method": "fp8", "modules_to_not_convert": ["lm_head", "mlp.gate"]}),
        )
        .unwrap()
        .unwrap();
        assert!(q.leaves_float("lm_head"));
        assert!(q.leaves_float("model.layers.3.mlp.gate"));
        assert!(!q.leaves_float("model.layers.3.mlp.gate_proj"));
        assert!(!q.leaves_float("model.layers.3.xmlp.gate"));
        let q =
            parse(json!({"quant_method": "fp8", "modules_to_not_convert": ["re:.*proj", "proj"]}))
                .unwrap()
                .unwrap();
        assert!(!q.leaves_float("model.layers.3.mlp.gate_proj"));
    }
}
