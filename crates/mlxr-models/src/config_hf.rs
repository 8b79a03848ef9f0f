//! [`ModelConfig`] from a Hugging Face `config.json` (also what MLX
//! conversions carry). Field names follow transformers; both its 4.x keys
//! (`rope_theta`, `rope_local_base_freq`) and 5.x `rope_parameters` are read.

use serde_json::Value;

use crate::config::{Activation, LayerAttention, ModelConfig, RopeStyle};
use crate::ModelError;

fn invalid(msg: impl Into<String>) -> ModelError {
    ModelError::InvalidConfig(msg.into())
}

struct Json<'a>(&'a Value);

impl Json<'_> {
    fn usize(&self, key: &str) -> Result<usize, ModelError> {
        self.opt_usize(key)?
            .ok_or_else(|| invalid(format!("config.json has no '{key}'")))
    }

    fn opt_usize(&self, key: &str) -> Result<Option<usize>, ModelError> {
        match &self.0[key] {
            Value::Null => Ok(None),
            v => v
                .as_u64()
                .map(|n| Some(n as usize))
                .ok_or_else(|| invalid(format!("config.json '{key}' is not a whole number: {v}"))),
        }
    }

    fn opt_f64(&self, key: &str) -> Result<Option<f64>, ModelError> {
        match &self.0[key] {
            Value::Null => Ok(None),
            v => v
                .as_f64()
                .map(Some)
                .ok_or_else(|| invalid(format!("config.json '{key}' is not a number: {v}"))),
        }
    }

    fn str(&self, key: &str) -> Option<&str> {
        self.0[key].as_str()
    }
}

impl ModelConfig {
    /// Reads `dir/config.json`.
    pub fn from_hf_dir(dir: &std::path::Path) -> Result<Self, ModelError> {
        let path = dir.join("config.json");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| ModelError::Files(format!("reading {}: {e}", path.display())))?;
        let json: Value = serde_json::from_str(&text)
            .map_err(|e| ModelError::Files(format!("{} is not valid JSON: {e}", path.display())))?;
        Self::from_hf_json(&json)
    }

    /// Reads `config.json`. `architectures[0]` (or `model_type`) picks the
    /// architecture: Llama, Mistral, Qwen2, Qwen3, Phi-3, Gemma 2 and Gemma 3
    /// (text).
    pub fn from_hf_json(config: &Value) -> Result<Self, ModelError> {
        let j = Json(config);
        let model_type = j.str("model_type").unwrap_or_default();
        let arch = match config["architectures"][0].as_str().unwrap_or(model_type) {
            "LlamaForCausalLM" | "llama" => "llama",
            "MistralForCausalLM" | "mistral" => "mistral",
            "Qwen2ForCausalLM" | "qwen2" => "qwen2",
            "Qwen3ForCausalLM" | "qwen3" => "qwen3",
            "Phi3ForCausalLM" | "phi3" => "phi3",
            "Gemma2ForCausalLM" | "gemma2" => "gemma2",
            "Gemma3ForCausalLM" | "gemma3_text" => "gemma3",
            other => {
                return Err(ModelError::UnsupportedArchitecture(if other.is_empty() {
                    "(config.json names none)".to_string()
                } else {
                    other.to_string()
                }))
            }
        };
        let hidden_size = j.usize("hidden_size")?;
        let n_heads = j.usize("num_attention_heads")?;
        let n_kv_heads = j.opt_usize("num_key_value_heads")?.unwrap_or(n_heads);
        if n_heads == 0 || n_kv_heads == 0 || n_heads % n_kv_heads != 0 {
            return Err(invalid(format!(
                "{n_heads} attention heads cannot be shared by {n_kv_heads} KV heads"
            )));
        }
        let head_dim = match j.opt_usize("head_dim")? {
            Some(d) => d,
            None if hidden_size % n_heads == 0 => hidden_size / n_heads,
            None => return Err(invalid("hidden_size is not a multiple of the head count")),
        };
        let n_layers = crate::config::check_layer_count(j.usize("num_hidden_layers")?)?;
        let rope = RopeParameters::read(config)?;
        let rope_dim = ((head_dim as f64 * rope.partial_rotary_factor).round() as usize) & !1;
        if rope_dim == 0 || rope_dim > head_dim {
            return Err(invalid(format!(
                "rotary dimension {rope_dim} does not fit head dimension {head_dim}"
            )));
        }
        let activation = match j
            .str("hidden_activation")
            .or(j.str("hidden_act"))
            .unwrap_or("silu")
        {
            "silu" | "swish" => Activation::Silu,
            "gelu_pytorch_tanh" | "gelu_tanh" => Activation::GeluTanh,
            other => return Err(invalid(format!("activation '{other}' is not supported"))),
        };
        let is_gemma = matches!(arch, "gemma2" | "gemma3");
        // Soft caps: transformers' Gemma 2 defaults (50, 30) when the keys
        // are absent, none when null; Gemma 3 has the same keys, null by
        // default. Other architectures have no soft caps.
        let softcap = |key: &str, gemma2_default: f64| -> Result<Option<f32>, ModelError> {
            let value = match config.get(key) {
                None if arch == "gemma2" => gemma2_default,
                None | Some(Value::Null) => return Ok(None),
                Some(_) if !is_gemma => return Err(invalid(format!("{key} is not supported"))),
                Some(_) => j.opt_f64(key)?.unwrap_or_default(),
            };
            crate::config::check_softcap(&format!("config.json '{key}'"), value)
        };
        let attn_logit_softcap = softcap("attn_logit_softcapping", 50.0)?;
        let final_logit_softcap = softcap("final_logit_softcapping", 30.0)?;
        let layers = layer_spans(config, arch, n_layers, &rope)?;
        let query_pre_attn_scalar = match j.opt_f64("query_pre_attn_scalar")? {
            // transformers' Gemma2Config default.
            None if arch == "gemma2" => Some(256.0),
            s => s,
        };
        let attention_scale = match query_pre_attn_scalar {
            Some(s) if is_gemma => {
                if !(s > 0.0 && s.is_finite()) {
                    return Err(invalid(format!("query_pre_attn_scalar is {s}")));
                }
                (1.0 / s.sqrt()) as f32
            }
            _ => 1.0 / (head_dim as f32).sqrt(),
        };
        Ok(ModelConfig {
            architecture: arch.to_string(),
            n_layers,
            hidden_size,
            intermediate_size: j.usize("intermediate_size")?,
            n_heads,
            n_kv_heads,
            head_dim,
            rope_dim,
            // Hugging Face rotates halves; only llama.cpp's llama GGUFs permute
            // Q/K rows for adjacent pairs.
            rope_style: RopeStyle::Halves,
            rms_norm_eps: j.opt_f64("rms_norm_eps")?.unwrap_or(1e-6) as f32,
            vocab_size: j.usize("vocab_size")?,
            context_length: j.opt_usize("max_position_embeddings")?.unwrap_or(4096),
            activation,
            embedding_scale: is_gemma.then(|| (hidden_size as f32).sqrt()),
            qk_norm: matches!(arch, "qwen3" | "gemma3"),
            post_norms: is_gemma,
            norm_offset: if is_gemma { 1.0 } else { 0.0 },
            attention_scale,
            attn_logit_softcap,
            final_logit_softcap,
            layers,
        })
    }
}

/// RoPE bases (one, or per layer type) and the rotated fraction of a head.
struct RopeParameters {
    base: f32,
    /// Gemma 3's local (sliding) layers.
    local_base: Option<f32>,
    partial_rotary_factor: f64,
}

impl RopeParameters {
    fn read(config: &Value) -> Result<Self, ModelError> {
        let j = Json(config);
        let params = &config["rope_parameters"];
        let (global, local) = if params.get("full_attention").is_some() {
            (
                &params["full_attention"],
                Some(&params["sliding_attention"]),
            )
        } else {
            (params, None)
        };
        let theta = |v: &Value| -> Result<Option<f32>, ModelError> {
            if let Some(kind) = v["rope_type"].as_str() {
                if kind != "default" {
                    return Err(invalid(format!(
                        "RoPE scaling '{kind}' is not supported (only unscaled RoPE)"
                    )));
                }
            }
            Ok(v["rope_theta"].as_f64().map(|t| t as f32))
        };
        if let Some(kind) = config["rope_scaling"]["rope_type"]
            .as_str()
            .or(config["rope_scaling"]["type"].as_str())
        {
            if kind != "default" {
                return Err(invalid(format!(
                    "RoPE scaling '{kind}' is not supported (only unscaled RoPE)"
                )));
            }
        }
        let base = match theta(global)? {
            Some(t) => t,
            None => j.opt_f64("rope_theta")?.unwrap_or(10_000.0) as f32,
        };
        let local_base = match local.map(theta).transpose()?.flatten() {
            Some(t) => Some(t),
            None => j.opt_f64("rope_local_base_freq")?.map(|t| t as f32),
        };
        let partial_rotary_factor = global["partial_rotary_factor"]
            .as_f64()
            .or(j.opt_f64("partial_rotary_factor")?)
            .unwrap_or(1.0);
        Ok(Self {
            base,
            local_base,
            partial_rotary_factor,
        })
    }
}

/// Per-layer sliding windows: `layer_types` when given, else one window for
/// every layer when `sliding_window` is set (and `use_sliding_window` is not
/// false, as in Qwen 2); Gemma 2 without `layer_types` alternates sliding
/// (even) and full (odd) layers, its window 4096 unless given, as
/// transformers' Gemma2Config does.
fn layer_spans(
    config: &Value,
    arch: &str,
    n_layers: usize,
    rope: &RopeParameters,
) -> Result<Vec<LayerAttention>, ModelError> {
    let j = Json(config);
    let window = match config.get("sliding_window") {
        None if arch == "gemma2" => Some(4096),
        _ => j.opt_usize("sliding_window")?,
    }
    .filter(|&w| w > 0);
    let global = LayerAttention {
        sliding_window: None,
        rope_base: rope.base,
    };
    let local = |w: usize| LayerAttention {
        sliding_window: Some(w),
        rope_base: rope.local_base.unwrap_or(rope.base),
    };
    if let Some(types) = config["layer_types"].as_array() {
        if types.len() != n_layers {
            return Err(invalid(format!(
                "layer_types lists {} layers, num_hidden_layers is {n_layers}",
                types.len()
            )));
        }
        return types
            .iter()
            .map(|t| match (t.as_str(), window) {
                (Some("full_attention"), _) => Ok(global),
                (Some("sliding_attention"), Some(w)) => Ok(local(w)),
                (Some("sliding_attention"), None) => {
                    Err(invalid("sliding layers but no sliding_window"))
                }
                _ => Err(invalid(format!("layer type {t} is not supported"))),
            })
            .collect();
    }
    if arch == "gemma2" {
        return Ok((0..n_layers)
            .map(|i| match window {
                Some(w) if i % 2 == 0 => local(w),
                _ => global,
            })
            .collect());
    }
    let use_window = config["use_sliding_window"].as_bool() != Some(false);
    Ok(match window.filter(|_| use_window) {
        Some(w) => vec![local(w); n_layers],
        None => vec![global; n_layers],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn base() -> Value {
        json!({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
               "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
               "vocab_size": 100, "rope_theta": 500.0})
    }

    #[test]
    fn llama_defaults() {
        let c = ModelConfig::from_hf_json(&base()).unwrap();
        assert_eq!((c.head_dim, c.rope_dim, c.n_kv_heads), (16, 16, 2));
        assert_eq!(c.rope_style, RopeStyle::Halves);
        assert_eq!(c.layers[1].rope_base, 500.0);
        assert!(c.layers.iter().all(|l| l.sliding_window.is_none()));
    }

    #[test]
    fn unsupported_things_are_named() {
        let mut c = base();
        c["architectures"] = json!(["FalconForCausalLM"]);
        let e = ModelConfig::from_hf_json(&c).unwrap_err().to_string();
        assert!(e.contains("FalconForCausalLM"), "{e}");
        let mut c = base();
        c["rope_scaling"] = json!({"rope_type": "llama3", "factor": 8.0});
        let e = ModelConfig::from_hf_json(&c).unwrap_err().to_string();
        assert!(e.contains("llama3"), "{e}");
        let mut c = base();
        c["num_key_value_heads"] = json!(3);
        assert!(ModelConfig::from_hf_json(&c).is_err());
        let mut c = base();
        c["hidden_size"] = json!("64");
        let e = ModelConfig::from_hf_json(&c).unwrap_err().to_string();
        assert!(e.contains("hidden_size"), "{e}");
    }

    fn gemma2() -> Value {
        let mut c = base();
        c["architectures"] = json!(["Gemma2ForCausalLM"]);
        c["num_hidden_layers"] = json!(3);
        c["head_dim"] = json!(32);
        c["hidden_activation"] = json!("gelu_pytorch_tanh");
        c
    }

    #[test]
    fn gemma2_reads_caps_scalar_and_window_pattern() {
        let mut c = gemma2();
        c["attn_logit_softcapping"] = json!(2.5);
        c["final_logit_softcapping"] = json!(3);
        c["query_pre_attn_scalar"] = json!(48);
        c["sliding_window"] = json!(8);
        c["layer_types"] = json!(["sliding_attention", "full_attention", "sliding_attention"]);
        let cfg = ModelConfig::from_hf_json(&c).unwrap();
        assert_eq!(cfg.architecture, "gemma2");
        assert_eq!(
            (cfg.attn_logit_softcap, cfg.final_logit_softcap),
            (Some(2.5), Some(3.0))
        );
        assert_eq!(cfg.attention_scale, (1.0 / 48f64.sqrt()) as f32);
        assert!(cfg.post_norms && !cfg.qk_norm && cfg.norm_offset == 1.0);
        assert_eq!(cfg.embedding_scale, Some(64f32.sqrt()));
        assert_eq!(cfg.activation, Activation::GeluTanh);
        let windows: Vec<_> = cfg.layers.iter().map(|l| l.sliding_window).collect();
        assert_eq!(windows, [Some(8), None, Some(8)]);
        // Without layer_types: even layers slide, as transformers' default.
        c.as_object_mut().unwrap().remove("layer_types");
        let cfg = ModelConfig::from_hf_json(&c).unwrap();
        let windows: Vec<_> = cfg.layers.iter().map(|l| l.sliding_window).collect();
        assert_eq!(windows, [Some(8), None, Some(8)]);
    }

    #[test]
    fn gemma2_defaults_are_transformers() {
        let cfg = ModelConfig::from_hf_json(&gemma2()).unwrap();
        assert_eq!(
            (cfg.attn_logit_softcap, cfg.final_logit_softcap),
            (Some(50.0), Some(30.0))
        );
        assert_eq!(cfg.attention_scale, 1.0 / 16.0);
        assert_eq!(cfg.layers[0].sliding_window, Some(4096));
        assert_eq!(cfg.layers[1].sliding_window, None);
        // null disables a cap.
        let mut c = gemma2();
        c["final_logit_softcapping"] = Value::Null;
        let cfg = ModelConfig::from_hf_json(&c).unwrap();
        assert_eq!(cfg.final_logit_softcap, None);
    }

    #[test]
    fn soft_caps_are_checked() {
        for bad in [json!(-1.0), json!("50"), json!(f64::MAX)] {
            let mut c = gemma2();
            c["attn_logit_softcapping"] = bad.clone();
            let e = ModelConfig::from_hf_json(&c).unwrap_err().to_string();
            assert!(e.contains("attn_logit_softcapping"), "{bad}: {e}");
        }
        // Architectures without soft caps refuse them rather than ignore them.
        let mut c = base();
        c["final_logit_softcapping"] = json!(30.0);
        let e = ModelConfig::from_hf_json(&c).unwrap_err().to_string();
        assert!(
            e.contains("final_logit_softcapping is not supported"),
            "{e}"
        );
    }

    #[test]
    fn qwen2_ignores_its_window_unless_used() {
        let mut c = base();
        c["architectures"] = json!(["Qwen2ForCausalLM"]);
        c["sliding_window"] = json!(32);
        c["use_sliding_window"] = json!(false);
        let cfg = ModelConfig::from_hf_json(&c).unwrap();
        assert!(cfg.layers.iter().all(|l| l.sliding_window.is_none()));
        c["architectures"] = json!(["MistralForCausalLM"]);
        c.as_object_mut().unwrap().remove("use_sliding_window");
        let cfg = ModelConfig::from_hf_json(&c).unwrap();
        assert!(cfg.layers.iter().all(|l| l.sliding_window == Some(32)));
    }
}
