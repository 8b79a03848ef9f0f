//! Hyper-parameters of a decoder-only transformer, read from GGUF metadata.
//!
//! Every architecture is described by the same [`ModelConfig`]; what differs
//! between Llama and Gemma 3 is data here (norm placement, activation, RoPE
//! style, sliding windows), not a separate forward pass.

use mlxr_formats::gguf::Metadata;

use crate::ModelError;

/// How RoPE pairs the dimensions of a head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeStyle {
    /// Adjacent pairs `(2i, 2i+1)`: llama.cpp's "norm" mode, used by `llama` GGUFs
    /// (the converter permutes Q/K so this matches the HF model).
    Interleaved,
    /// Halves `(i, i + d/2)`: llama.cpp's "neox" mode (Gemma, Qwen, ...).
    Halves,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// SwiGLU: `silu(gate) * up`.
    Silu,
    /// GeGLU with the tanh approximation of GELU: `gelu(gate) * up`.
    GeluTanh,
}

/// Attention span of one layer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LayerAttention {
    /// `Some(w)`: a query at position `p` sees keys at `p - w < k <= p`.
    pub sliding_window: Option<usize>,
    pub rope_base: f32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    pub architecture: String,
    pub n_layers: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    /// Dimensions of a head that RoPE rotates (the rest pass through).
    pub rope_dim: usize,
    pub rope_style: RopeStyle,
    pub rms_norm_eps: f32,
    pub vocab_size: usize,
    pub context_length: usize,
    pub activation: Activation,
    /// Multiply the token embeddings by this (Gemma: `sqrt(hidden_size)`).
    pub embedding_scale: Option<f32>,
    /// RMS-normalise each query and key head (Gemma 3, Qwen 3).
    pub qk_norm: bool,
    /// Extra norms after attention and after the MLP (Gemma 2/3 "sandwich" norms).
    pub post_norms: bool,
    /// Added to every RMSNorm weight at load (Gemma's `(1 + w)` norms as
    /// Hugging Face stores them; GGUF files have the 1 added already).
    pub norm_offset: f32,
    /// Scale applied to `q·k`.
    pub attention_scale: f32,
    /// Gemma 2: attention scores become `cap * tanh(scores / cap)` (after
    /// the scale, before the mask and softmax).
    pub attn_logit_softcap: Option<f32>,
    /// Gemma 2: the logits become `cap * tanh(logits / cap)`.
    pub final_logit_softcap: Option<f32>,
    pub layers: Vec<LayerAttention>,
}

impl ModelConfig {
    pub fn from_gguf(meta: &Metadata) -> Result<Self, ModelError> {
        let arch = meta.get_str("general.architecture")?.to_string();
        match arch.as_str() {
            "llama" | "mistral" => Self::llama(meta, &arch),
            "gemma2" => Self::gemma2(meta),
            "gemma3" => Self::gemma3(meta),
            // llama.cpp's NEOX RoPE (rotate-half), as in the HF models.
            "qwen2" | "qwen3" | "phi3" => {
                let mut cfg = Self::llama(meta, &arch)?;
                cfg.rope_style = RopeStyle::Halves;
                cfg.qk_norm = arch == "qwen3";
                Ok(cfg)
            }
            _ => Err(ModelError::UnsupportedArchitecture(arch)),
        }
    }

    /// The keys every architecture shares, `{arch}.*`.
    fn common(meta: &Metadata, arch: &str) -> Result<Self, ModelError> {
        let key = |k: &str| format!("{arch}.{k}");
        let hidden_size = meta.get_u32(&key("embedding_length"))? as usize;
        let n_heads = meta.get_u32(&key("attention.head_count"))? as usize;
        let n_kv_heads = meta
            .opt_u32(&key("attention.head_count_kv"))?
            .map_or(n_heads, |n| n as usize);
        if n_heads == 0 || n_kv_heads == 0 || !n_heads.is_multiple_of(n_kv_heads) {
            return Err(ModelError::InvalidConfig(format!(
                "{n_heads} attention heads cannot be shared by {n_kv_heads} KV heads"
            )));
        }
        let head_dim = match meta.opt_u32(&key("attention.key_length"))? {
            Some(d) => d as usize,
            None => hidden_size / n_heads,
        };
        if let Some(v) = meta.opt_u32(&key("attention.value_length"))? {
            if v as usize != head_dim {
                return Err(ModelError::InvalidConfig(format!(
                    "key length {head_dim} differs from value length {v}"
                )));
            }
        }
        let rope_dim = meta
            .opt_u32(&key("rope.dimension_count"))?
            .map_or(head_dim, |d| d as usize);
        if rope_dim > head_dim || rope_dim % 2 != 0 {
            return Err(ModelError::InvalidConfig(format!(
                "rope dimension {rope_dim} does not fit head dimension {head_dim}"
            )));
        }
        let n_layers = check_layer_count(meta.get_u32(&key("block_count"))? as usize)?;
        let rope_base = meta.opt_f32(&key("rope.freq_base"))?.unwrap_or(10_000.0);
        let vocab_size = match meta.opt_u32(&key("vocab_size"))? {
            Some(v) => v as usize,
            None => meta.get_array("tokenizer.ggml.tokens")?.len(),
        };
        Ok(ModelConfig {
            architecture: arch.to_string(),
            n_layers,
            hidden_size,
            intermediate_size: meta.get_u32(&key("feed_forward_length"))? as usize,
            n_heads,
            n_kv_heads,
            head_dim,
            rope_dim,
            rope_style: RopeStyle::Interleaved,
            rms_norm_eps: meta.get_f32(&key("attention.layer_norm_rms_epsilon"))?,
            vocab_size,
            context_length: meta.get_u32(&key("context_length"))? as usize,
            activation: Activation::Silu,
            embedding_scale: None,
            qk_norm: false,
            post_norms: false,
            norm_offset: 0.0,
            attention_scale: 1.0 / (head_dim as f32).sqrt(),
            attn_logit_softcap: None,
            final_logit_softcap: None,
            layers: vec![
                LayerAttention {
                    sliding_window: None,
                    rope_base,
                };
                n_layers
            ],
        })
    }

    fn llama(meta: &Metadata, arch: &str) -> Result<Self, ModelError> {
        let mut cfg = Self::common(meta, arch)?;
        // Converters write 0 for "no window" (Phi-3).
        let window = meta.opt_u32(&format!("{arch}.attention.sliding_window"))?;
        if let Some(window) = window.filter(|&w| w > 0) {
            for layer in &mut cfg.layers {
                layer.sliding_window = Some(window as usize);
            }
        }
        Ok(cfg)
    }

    /// Gemma 2: Gemma's norms, embedding scale and GeGLU, pre- and post-norms
    /// without QK-norm, a sliding window on the even layers (every other layer
    /// global, one RoPE base), and soft-capped attention scores and logits.
    /// Defaults as llama.cpp's (Gemma 2's published values) where a key is
    /// missing.
    fn gemma2(meta: &Metadata) -> Result<Self, ModelError> {
        let mut cfg = Self::common(meta, "gemma2")?;
        cfg.rope_style = RopeStyle::Halves;
        cfg.activation = Activation::GeluTanh;
        cfg.embedding_scale = Some((cfg.hidden_size as f32).sqrt());
        cfg.post_norms = true;
        // GGUF has no `query_pre_attn_scalar`: Gemma 2 27B (46 layers) scales
        // by `hidden / heads`, the others by the head dimension (llama.cpp).
        if cfg.n_layers == 46 {
            cfg.attention_scale = 1.0 / ((cfg.hidden_size / cfg.n_heads) as f32).sqrt();
        }
        let window = meta
            .opt_u32("gemma2.attention.sliding_window")?
            .unwrap_or(4096) as usize;
        if window > 0 {
            for layer in cfg.layers.iter_mut().step_by(2) {
                layer.sliding_window = Some(window);
            }
        }
        let cap = |key: &str, default: f32| -> Result<Option<f32>, ModelError> {
            let cap = meta.opt_f32(key)?.unwrap_or(default);
            check_softcap(key, cap as f64)
        };
        cfg.attn_logit_softcap = cap("gemma2.attn_logit_softcapping", 50.0)?;
        cfg.final_logit_softcap = cap("gemma2.final_logit_softcapping", 30.0)?;
        Ok(cfg)
    }

    /// Gemma 3: local layers with a sliding window and their own RoPE base,
    /// every `pattern`-th layer global. The GGUF converter stores norm weights
    /// with Gemma's `1 +` already added, so plain RMSNorm applies.
    fn gemma3(meta: &Metadata) -> Result<Self, ModelError> {
        let mut cfg = Self::common(meta, "gemma3")?;
        cfg.rope_style = RopeStyle::Halves;
        cfg.activation = Activation::GeluTanh;
        cfg.embedding_scale = Some((cfg.hidden_size as f32).sqrt());
        cfg.qk_norm = true;
        cfg.post_norms = true;
        // Older converters omit these keys; the defaults are Gemma 3's published
        // values (llama.cpp uses the same).
        let pattern = meta
            .opt_u32("gemma3.attention.sliding_window_pattern")?
            .unwrap_or(6) as usize;
        let local_base = meta
            .opt_f32("gemma3.rope.freq_base_swa")?
            .unwrap_or(10_000.0);
        if let Some(window) = meta.opt_u32("gemma3.attention.sliding_window")? {
            for (i, layer) in cfg.layers.iter_mut().enumerate() {
                let is_global = pattern > 0 && (i + 1) % pattern == 0;
                if !is_global && window > 0 {
                    layer.sliding_window = Some(window as usize);
                    layer.rope_base = local_base;
                }
            }
        }
        Ok(cfg)
    }

    pub fn kv_dim(&self) -> usize {
        self.n_kv_heads * self.head_dim
    }
}

/// A soft-cap value: `None` for 0 (no cap, as converters write it), an
/// error unless positive and finite.
pub(crate) fn check_softcap(key: &str, cap: f64) -> crate::Result<Option<f32>> {
    if cap == 0.0 {
        return Ok(None);
    }
    let capped = cap as f32;
    if !(capped.is_finite() && capped > 0.0) {
        return Err(ModelError::InvalidConfig(format!(
            "{key} is {cap} (a soft cap must be a positive number)"
        )));
    }
    Ok(Some(capped))
}

/// Layers a model may declare: far beyond any real one, small enough that
/// the per-layer tables of a bad file cannot exhaust memory.
pub const MAX_LAYERS: usize = 4096;

/// `n_layers`, or an error naming the bound.
pub(crate) fn check_layer_count(n_layers: usize) -> crate::Result<usize> {
    if n_layers == 0 || n_layers > MAX_LAYERS {
        return Err(ModelError::InvalidConfig(format!(
            "the model declares {n_layers} layers (1 to {MAX_LAYERS} are supported)"
        )));
    }
    Ok(n_layers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mlxr_formats::gguf::MetadataValue;

    fn gemma2(extra: &[(&str, MetadataValue)]) -> Metadata {
        let u = MetadataValue::U32;
        let mut entries = vec![
            (
                "general.architecture",
                MetadataValue::String("gemma2".into()),
            ),
            ("gemma2.embedding_length", u(128)),
            ("gemma2.attention.head_count", u(4)),
            ("gemma2.attention.head_count_kv", u(2)),
            ("gemma2.attention.key_length", u(32)),
            ("gemma2.attention.value_length", u(32)),
            ("gemma2.block_count", u(3)),
            ("gemma2.feed_forward_length", u(256)),
            ("gemma2.context_length", u(256)),
            ("gemma2.vocab_size", u(384)),
            (
                "gemma2.attention.layer_norm_rms_epsilon",
                MetadataValue::F32(1e-6),
            ),
        ];
        for (key, value) in extra {
            entries.retain(|(k, _)| k != key);
            entries.push((*key, value.clone()));
        }
        Metadata::from_entries(entries.into_iter().map(|(k, v)| (k.to_string(), v))).unwrap()
    }

    #[test]
    fn gemma2_from_gguf() {
        let meta = gemma2(&[
            ("gemma2.attention.sliding_window", MetadataValue::U32(8)),
            ("gemma2.attn_logit_softcapping", MetadataValue::F32(2.5)),
            ("gemma2.final_logit_softcapping", MetadataValue::F32(3.0)),
        ]);
        let c = ModelConfig::from_gguf(&meta).unwrap();
        assert_eq!(c.architecture, "gemma2");
        assert_eq!((c.head_dim, c.rope_style), (32, RopeStyle::Halves));
        assert_eq!(c.activation, Activation::GeluTanh);
        assert_eq!(c.embedding_scale, Some(128f32.sqrt()));
        assert!(c.post_norms && !c.qk_norm && c.norm_offset == 0.0);
        assert_eq!(c.attention_scale, 1.0 / 32f32.sqrt());
        assert_eq!(
            (c.attn_logit_softcap, c.final_logit_softcap),
            (Some(2.5), Some(3.0))
        );
        let windows: Vec<_> = c.layers.iter().map(|l| l.sliding_window).collect();
        assert_eq!(windows, [Some(8), None, Some(8)]);
    }

    #[test]
    fn gemma2_gguf_defaults_and_errors() {
        // llama.cpp's defaults: window 4096, caps 50 and 30.
        let c = ModelConfig::from_gguf(&gemma2(&[])).unwrap();
        assert_eq!(c.layers[0].sliding_window, Some(4096));
        assert_eq!(c.layers[1].sliding_window, None);
        assert_eq!(
            (c.attn_logit_softcap, c.final_logit_softcap),
            (Some(50.0), Some(30.0))
        );
        // 0 disables a cap; a negative one is an error naming the key.
        let c = ModelConfig::from_gguf(&gemma2(&[(
            "gemma2.final_logit_softcapping",
            MetadataValue::F32(0.0),
        )]))
        .unwrap();
        assert_eq!(c.final_logit_softcap, None);
        let e = ModelConfig::from_gguf(&gemma2(&[(
            "gemma2.attn_logit_softcapping",
            MetadataValue::F32(-1.0),
        )]))
        .unwrap_err()
        .to_string();
        assert!(e.contains("gemma2.attn_logit_softcapping"), "{e}");
        let e = ModelConfig::from_gguf(&gemma2(&[(
            "gemma2.attn_logit_softcapping",
            MetadataValue::String("big".into()),
        )]))
        .unwrap_err()
        .to_string();
        assert!(e.contains("gemma2.attn_logit_softcapping"), "{e}");
        // Other architectures have no caps.
        let mut meta = gemma2(&[]);
        let llama = Metadata::from_entries(meta.iter().map(|(k, v)| {
            let k = k.replace("gemma2", "llama");
            let v = match (k.as_str(), v) {
                ("general.architecture", _) => MetadataValue::String("llama".into()),
                (_, v) => v.clone(),
            };
            (k, v)
        }))
        .unwrap();
        let c = ModelConfig::from_gguf(&llama).unwrap();
        assert_eq!((c.attn_logit_softcap, c.final_logit_softcap), (None, None));
        // Gemma 2 27B (46 layers) scales queries by hidden / heads.
        meta = gemma2(&[
            ("gemma2.block_count", MetadataValue::U32(46)),
            ("gemma2.attention.key_length", MetadataValue::U32(16)),
            ("gemma2.attention.value_length", MetadataValue::U32(16)),
        ]);
        let c = ModelConfig::from_gguf(&meta).unwrap();
        assert_eq!(c.attention_scale, 1.0 / 32f32.sqrt());
    }
}
