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
        if n_heads == 0 || n_kv_heads == 0 || n_heads % n_kv_heads != 0 {
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
