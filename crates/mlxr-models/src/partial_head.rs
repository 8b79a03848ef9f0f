//! An LM head over part of the vocabulary: a draft model that scores only
//! its most frequent tokens (FR-Spec, Zhao et al. 2025) reads a fraction of
//! its output matrix each pass. In a small model with a large vocabulary
//! that matrix is a large share of the bytes a pass reads (Qwen2.5 0.5B:
//! 151,936 × 896 of its ~0.5 B weights).
//!
//! The rows are the file's own blocks, copied: a token's logit is the one
//! the whole head gives it.

use std::sync::Arc;

use candle_core::quantized::ggml_file::qtensor_from_ggml;
use candle_core::Device;
use mlxr_formats::gguf::GgufFile;

use crate::backend::cpu::kernels::RowOrder;
use crate::config::ModelConfig;
use crate::layers::Linear;
use crate::weights::GgufWeights;
use crate::{ModelError, Result};

pub struct PartialHead {
    /// Logit column `i` is token `tokens[i]`.
    tokens: Vec<u32>,
    pub(crate) linear: Linear,
}

impl PartialHead {
    /// The rows `tokens` of the LM head in `file` (its `output.weight`, or
    /// the tied embedding table), loaded as the model's own head would be.
    pub fn from_gguf(
        file: &GgufFile,
        config: &ModelConfig,
        device: &Device,
        kernels: Option<RowOrder>,
        tokens: Vec<u32>,
    ) -> Result<Self> {
        let (vocab, hidden) = (config.vocab_size, config.hidden_size);
        if tokens.is_empty() {
            return Err(ModelError::InvalidConfig("an LM head of no tokens".into()));
        }
        if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= vocab) {
            return Err(ModelError::InvalidConfig(format!(
                "token {bad} is outside the vocabulary of {vocab}"
            )));
        }
        let weights = GgufWeights::new(file, device);
        let name = if weights.contains("output.weight") {
            "output.weight"
        } else {
            "token_embd.weight"
        };
        let (dtype, bytes) = weights.stored(name, &[vocab, hidden])?;
        let row_bytes = bytes.len() / vocab;
        let mut rows = Vec::with_capacity(tokens.len() * row_bytes);
        for &t in &tokens {
            let at = t as usize * row_bytes;
            rows.extend_from_slice(&bytes[at..at + row_bytes]);
        }
        let q = qtensor_from_ggml(dtype, &rows, vec![tokens.len(), hidden], device)
            .map_err(|e| ModelError::candle(format!("the rows of '{name}'"), e))?;
        Ok(Self {
            linear: Linear::ggml(Arc::new(q), kernels)?,
            tokens,
        })
    }

    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }
}
