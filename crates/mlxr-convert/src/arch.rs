//! The architectures the converter writes: which Hugging Face classes map to
//! which GGUF architecture, their tensor names, the per-tensor changes
//! (llama's Q/K row order, Gemma's `1 + w` norms) and their hyperparameter
//! keys, in the order convert_hf_to_gguf.py writes them.

use serde_json::{json, Map, Value};

use crate::kvs::Kvs;
use crate::ConvertError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// `LlamaForCausalLM`, `MistralForCausalLM`.
    Llama,
    Qwen2,
    Qwen3,
    Phi3,
    Gemma2,
    /// `Gemma3ForCausalLM` (text only).
    Gemma3,
}

/// The Hugging Face classes accepted, for error messages.
pub const SUPPORTED_CLASSES: &[&str] = &[
    "LlamaForCausalLM",
    "MistralForCausalLM",
    "Qwen2ForCausalLM",
    "Qwen3ForCausalLM",
    "Phi3ForCausalLM",
    "Gemma2ForCausalLM",
    "Gemma3ForCausalLM",
];

impl Arch {
    pub fn from_config(config: &Map<String, Value>) -> Result<Arch, ConvertError> {
        let class = config
            .get("architectures")
            .and_then(Value::as_array)
            .and_then(|a| a.first())
            .and_then(Value::as_str)
            .ok_or_else(|| {
                ConvertError::Input("config.json has no \"architectures\" list".into())
            })?;
        Ok(match class {
            "LlamaForCausalLM" | "MistralForCausalLM" => Arch::Llama,
            "Qwen2ForCausalLM" => Arch::Qwen2,
            "Qwen3ForCausalLM" => Arch::Qwen3,
            "Phi3ForCausalLM" => Arch::Phi3,
            "Gemma2ForCausalLM" => Arch::Gemma2,
            "Gemma3ForCausalLM" => Arch::Gemma3,
            other => {
                return Err(ConvertError::Input(format!(
                    "architecture {other} is not supported; supported: {}",
                    SUPPORTED_CLASSES.join(", ")
                )))
            }
        })
    }

    /// `general.architecture`.
    pub fn gguf_name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
            Arch::Phi3 => "phi3",
            Arch::Gemma2 => "gemma2",
            Arch::Gemma3 => "gemma3",
        }
    }

    /// The architecture of a GGUF `general.architecture`.
    pub fn from_gguf_name(name: &str) -> Option<Arch> {
        [
            Arch::Llama,
            Arch::Qwen2,
            Arch::Qwen3,
            Arch::Phi3,
            Arch::Gemma2,
            Arch::Gemma3,
        ]
        .into_iter()
        .find(|a| a.gguf_name() == name)
    }

    /// The Hugging Face class and `model_type` written for it.
    pub fn hf_class(self) -> (&'static str, &'static str) {
        match self {
            Arch::Llama => ("LlamaForCausalLM", "llama"),
            Arch::Qwen2 => ("Qwen2ForCausalLM", "qwen2"),
            Arch::Qwen3 => ("Qwen3ForCausalLM", "qwen3"),
            Arch::Phi3 => ("Phi3ForCausalLM", "phi3"),
            Arch::Gemma2 => ("Gemma2ForCausalLM", "gemma2"),
            Arch::Gemma3 => ("Gemma3ForCausalLM", "gemma3_text"),
        }
    }

    /// Gemma's RMSNorm scales by `1 + w`: the converter stores `1 + w`.
    pub fn shifts_norms(self) -> bool {
        matches!(self, Arch::Gemma2 | Arch::Gemma3)
    }

    /// Tensors the converter leaves out.
    pub fn skips(self, hf_name: &str) -> bool {
        hf_name.ends_with(".rotary_emb.inv_freq")
            || hf_name.ends_with(".attention.masked_bias")
            || hf_name.ends_with(".attention.bias")
            || (self == Arch::Gemma2 && hf_name == "lm_head.weight")
    }

    /// Per-layer tensors: (Hugging Face part, GGUF part).
    pub fn layer_parts(self) -> Vec<(&'static str, &'static str)> {
        let mut parts = vec![
            ("input_layernorm", "attn_norm"),
            ("self_attn.o_proj", "attn_output"),
            ("mlp.down_proj", "ffn_down"),
        ];
        if self == Arch::Phi3 {
            parts.extend([
                ("self_attn.qkv_proj", "attn_qkv"),
                ("mlp.gate_up_proj", "ffn_up"),
            ]);
        } else {
            parts.extend([
                ("self_attn.q_proj", "attn_q"),
                ("self_attn.k_proj", "attn_k"),
                ("self_attn.v_proj", "attn_v"),
                ("mlp.gate_proj", "ffn_gate"),
                ("mlp.up_proj", "ffn_up"),
            ]);
        }
        if matches!(self, Arch::Qwen3 | Arch::Gemma3) {
            parts.extend([
                ("self_attn.q_norm", "attn_q_norm"),
                ("self_attn.k_norm", "attn_k_norm"),
            ]);
        }
        if matches!(self, Arch::Gemma2 | Arch::Gemma3) {
            parts.extend([
                ("post_attention_layernorm", "post_attention_norm"),
                ("pre_feedforward_layernorm", "ffn_norm"),
                ("post_feedforward_layernorm", "post_ffw_norm"),
            ]);
        } else {
            parts.push(("post_attention_layernorm", "ffn_norm"));
        }
        parts
    }

    /// The GGUF name of a Hugging Face tensor.
    pub fn tensor_name(self, hf_name: &str) -> Result<String, ConvertError> {
        self.map_name(hf_name, false).ok_or_else(|| {
            ConvertError::Input(format!(
                "cannot map tensor {hf_name:?} of a {} model",
                self.gguf_name()
            ))
        })
    }

    /// The Hugging Face name of a GGUF tensor.
    pub fn hf_tensor_name(self, gguf_name: &str) -> Result<String, ConvertError> {
        self.map_name(gguf_name, true).ok_or_else(|| {
            ConvertError::Input(format!(
                "GGUF tensor {gguf_name:?} has no Hugging Face name in a {} model",
                self.gguf_name()
            ))
        })
    }

    /// One table, both directions: `to_hf` maps GGUF names to Hugging Face ones.
    fn map_name(self, name: &str, to_hf: bool) -> Option<String> {
        const FIXED: [(&str, &str); 3] = [
            ("model.embed_tokens", "token_embd"),
            ("lm_head", "output"),
            ("model.norm", "output_norm"),
        ];
        let (stem, suffix) = name
            .strip_suffix(".weight")
            .map(|s| (s, "weight"))
            .or_else(|| name.strip_suffix(".bias").map(|s| (s, "bias")))?;
        let pick = |pair: (&'static str, &'static str)| if to_hf { (pair.1, pair.0) } else { pair };
        if let Some((_, to)) = FIXED.into_iter().map(pick).find(|(from, _)| *from == stem) {
            return Some(format!("{to}.{suffix}"));
        }
        let (layer_prefix, out_prefix) = if to_hf {
            ("blk.", "model.layers.")
        } else {
            ("model.layers.", "blk.")
        };
        let (layer, part) = stem.strip_prefix(layer_prefix)?.split_once('.')?;
        let layer: usize = layer.parse().ok()?;
        let (_, to) = self
            .layer_parts()
            .into_iter()
            .map(pick)
            .find(|(from, _)| *from == part)?;
        Some(format!("{out_prefix}{layer}.{to}.{suffix}"))
    }
}

/// `config.json` with the lookups the converter needs.
pub struct HParams<'a> {
    pub map: &'a Map<String, Value>,
}

impl HParams<'_> {
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    /// The first of `keys` present.
    pub fn find(&self, keys: &[&str]) -> Option<&Value> {
        keys.iter().find_map(|k| self.map.get(*k))
    }

    pub fn u32(&self, keys: &[&str]) -> Result<Option<u32>, ConvertError> {
        match self.find(keys) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| {
                    ConvertError::Input(format!(
                        "config.json: {} is not a whole number: {v}",
                        keys[0]
                    ))
                }),
        }
    }

    pub fn need_u32(&self, keys: &[&str]) -> Result<u32, ConvertError> {
        self.u32(keys)?
            .ok_or_else(|| ConvertError::Input(format!("config.json has no {}", keys.join(" / "))))
    }

    pub fn f32(&self, keys: &[&str]) -> Result<Option<f32>, ConvertError> {
        match self.find(keys) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v.as_f64().map(|x| Some(x as f32)).ok_or_else(|| {
                ConvertError::Input(format!("config.json: {} is not a number: {v}", keys[0]))
            }),
        }
    }

    pub fn need_f32(&self, keys: &[&str]) -> Result<f32, ConvertError> {
        self.f32(keys)?
            .ok_or_else(|| ConvertError::Input(format!("config.json has no {}", keys.join(" / "))))
    }

    pub fn block_count(&self) -> Result<u32, ConvertError> {
        self.need_u32(&["n_layers", "num_hidden_layers", "n_layer", "num_layers"])
    }

    /// `rope_parameters` (transformers 5) or `rope_scaling`, with the legacy
    /// top-level `rope_theta` / `original_max_position_embeddings` /
    /// `partial_rotary_factor` mirrored into it.
    pub fn rope_parameters(&self) -> Map<String, Value> {
        let mut rope = self
            .get("rope_parameters")
            .or_else(|| self.get("rope_scaling"))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        if !rope.contains_key("full_attention") && !rope.contains_key("sliding_attention") {
            let local = [
                "local_rope_theta",
                "rope_local_theta",
                "rope_theta_local",
                "swa_rope_theta",
                "rope_local_base_freq",
            ];
            if let Some(theta) = self.find(&local).filter(|v| !v.is_null()) {
                rope.insert("sliding_attention".into(), json!({ "rope_theta": theta }));
            }
            let mirror = [
                (
                    "rope_theta",
                    &[
                        "global_rope_theta",
                        "rope_global_theta",
                        "rope_theta_global",
                        "rope_theta",
                        "rotary_emb_base",
                    ][..],
                ),
                (
                    "partial_rotary_factor",
                    &["partial_rotary_factor", "rope_pct", "rope_percent"][..],
                ),
                (
                    "original_max_position_embeddings",
                    &["original_max_position_embeddings"][..],
                ),
            ];
            for (key, sources) in mirror {
                if !rope.contains_key(key) {
                    if let Some(v) = self.find(sources).filter(|v| !v.is_null()) {
                        rope.insert(key.into(), v.clone());
                    }
                }
            }
            if !rope.contains_key("rope_type") {
                if let Some(t) = rope.get("type").cloned() {
                    rope.insert("rope_type".into(), t);
                }
            }
        }
        rope
    }
}

fn f32_of(v: &Value, what: &str) -> Result<f32, ConvertError> {
    v.as_f64()
        .map(|x| x as f32)
        .ok_or_else(|| ConvertError::Input(format!("config.json: {what} is not a number: {v}")))
}

/// The shared hyperparameters (convert_hf_to_gguf.py's `TextModel`).
fn text_model_params(
    arch: &str,
    hp: &HParams,
    kvs: &mut Kvs,
    file_type: u32,
) -> Result<(), ConvertError> {
    let key = |k: &str| format!("{arch}.{k}");
    kvs.set(key("block_count"), hp.block_count()?);
    let ctx = [
        "max_position_embeddings",
        "n_ctx",
        "n_positions",
        "max_length",
        "max_sequence_length",
        "model_max_length",
    ];
    if let Some(v) = hp.u32(&ctx)? {
        kvs.set(key("context_length"), v);
    }
    if let Some(v) = hp.u32(&["hidden_size", "n_embd", "dim"])? {
        kvs.set(key("embedding_length"), v);
    }
    let ff = [
        "prefix_dense_intermediate_size",
        "dense_intermediate_size",
        "intermediate_size",
        "n_inner",
        "hidden_dim",
    ];
    if let Some(v) = hp.u32(&ff)? {
        kvs.set(key("feed_forward_length"), v);
    }
    if let Some(v) = hp.u32(&["num_attention_heads", "n_head", "n_heads"])? {
        kvs.set(key("attention.head_count"), v);
    }
    if let Some(v) = hp.u32(&["num_key_value_heads", "n_kv_heads"])? {
        kvs.set(key("attention.head_count_kv"), v);
    }
    if hp.get("is_causal") == Some(&Value::Bool(false)) {
        kvs.set(key("attention.causal"), false);
    }
    let rope = hp.rope_parameters();
    let params = rope
        .get("full_attention")
        .and_then(Value::as_object)
        .unwrap_or(&rope);
    if let Some(rope_type) = params.get("rope_type").and_then(Value::as_str) {
        let factor = params.get("factor").filter(|v| !v.is_null());
        match (rope_type, factor) {
            ("linear", Some(f)) => {
                kvs.set(key("rope.scaling.type"), "linear");
                kvs.set(key("rope.scaling.factor"), f32_of(f, "rope factor")?);
            }
            ("default", _) => {}
            // Llama 3's frequency factors go into a rope_freqs tensor instead.
            (t, _) if arch == "llama" && t.eq_ignore_ascii_case("llama3") => {}
            (other, _) => {
                return Err(ConvertError::Input(format!(
                "RoPE scaling type {other:?} is not supported yet (default, linear and llama3 are)"
            )))
            }
        }
    }
    if let Some(theta) = params.get("rope_theta").filter(|v| !v.is_null()) {
        kvs.set(key("rope.freq_base"), f32_of(theta, "rope_theta")?);
    }
    if let Some(theta) = rope
        .get("sliding_attention")
        .and_then(|s| s.get("rope_theta"))
        .filter(|v| !v.is_null())
    {
        kvs.set(
            key("rope.freq_base_swa"),
            f32_of(theta, "sliding rope_theta")?,
        );
    }
    if let Some(v) = hp.f32(&["rms_norm_eps", "norm_eps"])? {
        kvs.set(key("attention.layer_norm_rms_epsilon"), v);
    }
    if let Some(v) = hp.f32(&["layer_norm_eps", "layer_norm_epsilon", "norm_epsilon"])? {
        kvs.set(key("attention.layer_norm_epsilon"), v);
    }
    if hp
        .find(&["num_local_experts", "num_experts", "n_routed_experts"])
        .is_some_and(|v| !v.is_null())
    {
        return Err(ConvertError::Input(
            "mixture-of-experts models are not supported yet".into(),
        ));
    }
    if let Some(head_dim) = hp.u32(&["head_dim"])? {
        kvs.set(key("attention.key_length"), head_dim);
        kvs.set(key("attention.value_length"), head_dim);
    }
    kvs.set("general.file_type", file_type);
    Ok(())
}

/// Writes the architecture's hyperparameters into `kvs`.
pub fn write_hparams(
    arch: Arch,
    hp: &HParams,
    kvs: &mut Kvs,
    file_type: u32,
) -> Result<(), ConvertError> {
    let name = arch.gguf_name();
    let key = |k: &str| format!("{name}.{k}");
    match arch {
        Arch::Llama => {
            text_model_params(name, hp, kvs, file_type)?;
            kvs.set(key("vocab_size"), hp.need_u32(&["vocab_size"])?);
            let rope_dim = match hp.u32(&["head_dim"])? {
                Some(d) => d,
                None => hp.need_u32(&["hidden_size"])? / hp.need_u32(&["num_attention_heads"])?,
            };
            kvs.set(key("rope.dimension_count"), rope_dim);
        }
        Arch::Qwen2 | Arch::Qwen3 => text_model_params(name, hp, kvs, file_type)?,
        Arch::Phi3 => {
            let n_embd = hp.need_u32(&["hidden_size", "n_embd"])?;
            let n_head = hp.need_u32(&["num_attention_heads", "n_head"])?;
            let n_head_kv = hp.need_u32(&["num_key_value_heads", "n_head_kv"])?;
            let eps = hp.need_f32(&["rms_norm_eps"])?;
            let ctx = hp.need_u32(&["n_positions", "max_position_embeddings"])?;
            let rope = hp.rope_parameters();
            let orig_ctx = rope
                .get("original_max_position_embeddings")
                .and_then(Value::as_u64)
                .ok_or_else(|| {
                    ConvertError::Input(
                        "config.json has no original_max_position_embeddings".into(),
                    )
                })?;
            if rope.get("long_factor").is_some_and(|v| !v.is_null()) {
                return Err(ConvertError::Input(
                    "Phi-3 long-context RoPE factors are not supported yet".into(),
                ));
            }
            let pct = rope
                .get("partial_rotary_factor")
                .and_then(Value::as_f64)
                .unwrap_or(1.0);
            let rope_dims = ((pct * f64::from(n_embd)) as u32) / n_head;
            let full = rope
                .get("full_attention")
                .and_then(Value::as_object)
                .unwrap_or(&rope);
            let theta = full
                .get("rope_theta")
                .ok_or_else(|| ConvertError::Input("config.json has no rope_theta".into()))?;
            kvs.set(key("context_length"), ctx);
            kvs.set(key("rope.scaling.original_context_length"), orig_ctx as u32);
            kvs.set(key("embedding_length"), n_embd);
            kvs.set(
                key("feed_forward_length"),
                hp.need_u32(&["intermediate_size"])?,
            );
            kvs.set(key("block_count"), hp.block_count()?);
            kvs.set(key("attention.head_count"), n_head);
            kvs.set(key("attention.head_count_kv"), n_head_kv);
            kvs.set(key("attention.layer_norm_rms_epsilon"), eps);
            kvs.set(key("rope.dimension_count"), rope_dims);
            kvs.set(key("rope.freq_base"), f32_of(theta, "rope_theta")?);
            kvs.set("general.file_type", file_type);
            kvs.set(
                key("attention.sliding_window"),
                hp.u32(&["sliding_window"])?.unwrap_or(0),
            );
        }
        Arch::Gemma2 => {
            let heads = hp.need_u32(&["num_attention_heads"])?;
            kvs.set(
                key("context_length"),
                hp.need_u32(&["max_position_embeddings"])?,
            );
            kvs.set(key("embedding_length"), hp.need_u32(&["hidden_size"])?);
            kvs.set(key("block_count"), hp.block_count()?);
            kvs.set(
                key("feed_forward_length"),
                hp.need_u32(&["intermediate_size"])?,
            );
            kvs.set(key("attention.head_count"), heads);
            kvs.set(
                key("attention.head_count_kv"),
                hp.u32(&["num_key_value_heads"])?.unwrap_or(heads),
            );
            kvs.set(
                key("attention.layer_norm_rms_epsilon"),
                hp.need_f32(&["rms_norm_eps"])?,
            );
            let head_dim = hp.need_u32(&["head_dim"])?;
            kvs.set(key("attention.key_length"), head_dim);
            kvs.set(key("attention.value_length"), head_dim);
            kvs.set("general.file_type", file_type);
            kvs.set(
                key("attn_logit_softcapping"),
                hp.need_f32(&["attn_logit_softcapping"])?,
            );
            kvs.set(
                key("final_logit_softcapping"),
                hp.need_f32(&["final_logit_softcapping"])?,
            );
            kvs.set(
                key("attention.sliding_window"),
                hp.need_u32(&["sliding_window"])?,
            );
        }
        Arch::Gemma3 => gemma3_params(hp, kvs, file_type)?,
    }
    Ok(())
}

/// convert_hf_to_gguf.py's `Gemma3Model`: the shared keys, then its own
/// (with Gemma 3's defaults where config.json is silent), each replacing the
/// shared one in place.
fn gemma3_params(hp: &HParams, kvs: &mut Kvs, file_type: u32) -> Result<(), ConvertError> {
    text_model_params("gemma3", hp, kvs, file_type)?;
    let key = |k: &str| format!("gemma3.{k}");
    let or = |keys: &[&str], default: u32| hp.u32(keys).map(|v| v.unwrap_or(default));
    kvs.set(
        key("context_length"),
        or(&["max_position_embeddings"], 131_072)?,
    );
    kvs.set(
        key("attention.head_count"),
        or(&["num_attention_heads"], 8)?,
    );
    kvs.set(
        key("attention.layer_norm_rms_epsilon"),
        hp.f32(&["rms_norm_eps"])?.unwrap_or(1e-6),
    );
    let head_dim = or(&["head_dim"], 256)?;
    kvs.set(key("attention.key_length"), head_dim);
    kvs.set(key("attention.value_length"), head_dim);
    let rope = hp.rope_parameters();
    let full = rope
        .get("full_attention")
        .and_then(Value::as_object)
        .unwrap_or(&rope);
    let theta = match full.get("rope_theta").filter(|v| !v.is_null()) {
        Some(v) => f32_of(v, "rope_theta")?,
        None => 1_000_000.0,
    };
    kvs.set(key("rope.freq_base"), theta);
    if hp.get("attn_logit_softcapping").is_some() {
        return Err(ConvertError::Input(
            "Gemma 3 with attn_logit_softcapping: the format has no such key".into(),
        ));
    }
    if let Some(cap) = hp.f32(&["final_logit_softcapping"])?.filter(|&c| c != 0.0) {
        kvs.set(key("final_logit_softcapping"), cap);
    }
    // The script asks `sliding_window_pattern` alone.
    if hp.get("sliding_window_pattern").and_then(Value::as_u64) != Some(1) {
        kvs.set(
            key("attention.sliding_window"),
            hp.need_u32(&["sliding_window"])?,
        );
    }
    kvs.set(
        key("attention.head_count_kv"),
        or(&["num_key_value_heads"], 4)?,
    );
    // llama.cpp assumes every 6th layer global and the script writes no
    // pattern; another one is kept under the key our loader reads, or the
    // model would attend through the wrong windows.
    if let Some(p) = sliding_window_pattern(hp).filter(|&p| p != 6 && p != 1) {
        kvs.set(key("attention.sliding_window_pattern"), p);
    }
    Ok(())
}

/// Every how many layers one is global: `sliding_window_pattern` (or
/// transformers 5's `_sliding_window_pattern`), else the first global layer
/// of `layer_types` when the list repeats it.
fn sliding_window_pattern(hp: &HParams) -> Option<u32> {
    if let Some(p) = hp
        .find(&["sliding_window_pattern", "_sliding_window_pattern"])
        .and_then(Value::as_u64)
    {
        return u32::try_from(p).ok();
    }
    let types: Vec<&str> = hp
        .get("layer_types")?
        .as_array()?
        .iter()
        .map(Value::as_str)
        .collect::<Option<_>>()?;
    let p = types.iter().position(|t| *t == "full_attention")? + 1;
    let repeats = types
        .iter()
        .enumerate()
        .all(|(i, t)| (*t == "full_attention") == ((i + 1) % p == 0));
    repeats.then_some(p as u32)
}

/// Llama 3's RoPE frequency factors (`rope_type: llama3`), one per rotated
/// pair, as llama.cpp's converter stores them in `rope_freqs.weight`: 1 for
/// high frequencies, `factor` for low ones, a smooth blend between; computed
/// in f32 as the script's torch code does. `None` for other RoPE types.
pub fn llama3_rope_factors(hp: &HParams) -> Result<Option<Vec<f32>>, ConvertError> {
    let rope = hp.rope_parameters();
    let params = rope
        .get("full_attention")
        .and_then(Value::as_object)
        .unwrap_or(&rope);
    let is_llama3 = params
        .get("rope_type")
        .and_then(Value::as_str)
        .is_some_and(|t| t.eq_ignore_ascii_case("llama3"));
    if !is_llama3 {
        return Ok(None);
    }
    let num = |k: &str, default: f64| params.get(k).and_then(Value::as_f64).unwrap_or(default);
    let base = num("rope_theta", 10000.0) as f32;
    let dim = match hp.u32(&["head_dim"])? {
        Some(d) => d,
        None => hp.need_u32(&["hidden_size"])? / hp.need_u32(&["num_attention_heads"])?,
    } as usize;
    let factor = num("factor", 8.0) as f32;
    let low = num("low_freq_factor", 1.0) as f32;
    let high = num("high_freq_factor", 4.0) as f32;
    let old_context = num("original_max_position_embeddings", 8192.0) as f32;
    let low_wavelen = old_context / low;
    let high_wavelen = old_context / high;
    Ok(Some(
        (0..dim)
            .step_by(2)
            .map(|i| {
                let freq = 1.0 / base.powf(i as f32 / dim as f32);
                let wavelen = std::f32::consts::TAU / freq;
                if wavelen < high_wavelen {
                    1.0
                } else if wavelen > low_wavelen {
                    factor
                } else {
                    let smooth = (old_context / wavelen - low) / (high - low);
                    1.0 / ((1.0 - smooth) / factor + smooth)
                }
            })
            .collect(),
    ))
}

/// Llama's Q/K rows reordered for llama.cpp's RoPE (pairs of halves
/// interleaved within each head): within each of `n_head` groups, the rows
/// `[h][i][j]` (i in 0..2, j in 0..rows/n_head/2) become `[h][j][i]`.
pub fn permute_rows(values: &[f32], rows: usize, n_head: usize) -> Result<Vec<f32>, String> {
    reorder_rows(values, rows, n_head, false)
}

/// The inverse of [`permute_rows`]: llama.cpp's order back to Hugging Face's.
pub fn unpermute_rows(values: &[f32], rows: usize, n_head: usize) -> Result<Vec<f32>, String> {
    reorder_rows(values, rows, n_head, true)
}

fn reorder_rows(
    values: &[f32],
    rows: usize,
    n_head: usize,
    inverse: bool,
) -> Result<Vec<f32>, String> {
    if n_head == 0 || !rows.is_multiple_of(2 * n_head) || !values.len().is_multiple_of(rows.max(1))
    {
        return Err(format!(
            "{rows} rows cannot be split into {n_head} heads of two halves"
        ));
    }
    let width = values.len() / rows;
    let half = rows / n_head / 2;
    let mut out = Vec::with_capacity(values.len());
    for h in 0..n_head {
        for a in 0..2 * half {
            // output row (h, a); in the forward direction a = j*2 + i reads row (h, i*half + j)
            let (first, second) = if inverse {
                (a / half, a % half)
            } else {
                (a % 2, a / 2)
            };
            let src = if inverse {
                h * 2 * half + second * 2 + first
            } else {
                h * 2 * half + first * half + second
            };
            out.extend_from_slice(&values[src * width..(src + 1) * width]);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permute_interleaves_halves_per_head() {
        // 2 heads of 4 rows, width 1: [a0 a1 b0 b1 | c0 c1 d0 d1] -> [a0 b0 a1 b1 | c0 d0 c1 d1]
        let v = [0., 1., 2., 3., 4., 5., 6., 7.];
        assert_eq!(
            permute_rows(&v, 8, 2).unwrap(),
            vec![0., 2., 1., 3., 4., 6., 5., 7.]
        );
        assert!(permute_rows(&v, 8, 3).is_err());
        let w: Vec<f32> = (0..48).map(|x| x as f32).collect();
        let p = permute_rows(&w, 12, 2).unwrap();
        assert_ne!(p, w);
        assert_eq!(unpermute_rows(&p, 12, 2).unwrap(), w);
    }

    #[test]
    fn names_map_per_architecture() {
        assert_eq!(
            Arch::Llama
                .tensor_name("model.layers.3.self_attn.q_proj.weight")
                .unwrap(),
            "blk.3.attn_q.weight"
        );
        assert_eq!(
            Arch::Gemma2
                .tensor_name("model.layers.0.post_attention_layernorm.weight")
                .unwrap(),
            "blk.0.post_attention_norm.weight"
        );
        assert_eq!(
            Arch::Llama
                .tensor_name("model.layers.0.post_attention_layernorm.weight")
                .unwrap(),
            "blk.0.ffn_norm.weight"
        );
        assert!(Arch::Llama
            .tensor_name("model.layers.0.self_attn.q_norm.weight")
            .is_err());
        assert!(Arch::Llama.tensor_name("vision_tower.x.weight").is_err());
        for arch in [
            Arch::Llama,
            Arch::Qwen2,
            Arch::Qwen3,
            Arch::Phi3,
            Arch::Gemma2,
            Arch::Gemma3,
        ] {
            for (hf, _) in arch.layer_parts() {
                let name = format!("model.layers.7.{hf}.weight");
                assert_eq!(
                    arch.hf_tensor_name(&arch.tensor_name(&name).unwrap())
                        .unwrap(),
                    name
                );
            }
        }
        assert_eq!(
            Arch::Qwen2.hf_tensor_name("output.weight").unwrap(),
            "lm_head.weight"
        );
    }
}
