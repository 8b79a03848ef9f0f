//! Model architectures on candle: weights to logits.
//!
//! One decoder implementation ([`DecoderModel`]) serves every supported
//! architecture; [`ModelConfig`] holds what differs between them. The forward
//! pass takes a batch of sequence chunks (flattened tokens, per-sequence
//! positions and KV caches) so a scheduler can mix prefill and decode.

pub mod batch;
pub mod config;
mod config_hf;
pub mod decoder;
pub mod kernels;
pub mod kv_cache;
pub mod layers;
pub mod paged;
pub mod weights;
mod workspace;

pub use batch::SeqChunk;
pub use config::{Activation, LayerAttention, ModelConfig, RopeStyle};
pub use decoder::DecoderModel;
pub use kernels::RowOrder;
pub use kv_cache::{AttentionSpec, ContiguousKvCache, KvCache};
pub use paged::{PagedKvStore, PagedKvView};
pub use workspace::Workspace;

use mlxr_formats::gguf::GgufError;

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error(transparent)]
    Gguf(#[from] GgufError),
    #[error(
        "architecture '{0}' is not supported (supported: llama, mistral, qwen2, qwen3, phi3, gemma3)"
    )]
    UnsupportedArchitecture(String),
    #[error("invalid model configuration: {0}")]
    InvalidConfig(String),
    #[error("the model file has no tensor '{0}'")]
    MissingTensor(String),
    #[error("tensor '{tensor}' has shape {found:?}, expected {expected:?}")]
    ShapeMismatch {
        tensor: String,
        expected: Vec<usize>,
        found: Vec<usize>,
    },
    #[error("{0}")]
    Files(String),
    #[error("invalid batch: {0}")]
    InvalidBatch(String),
    #[error("{context}: {source}")]
    Candle {
        context: String,
        #[source]
        source: Box<candle_core::Error>,
    },
}

impl ModelError {
    pub fn candle(context: impl Into<String>, source: candle_core::Error) -> Self {
        ModelError::Candle {
            context: context.into(),
            source: Box::new(source),
        }
    }
}

impl From<candle_core::Error> for ModelError {
    fn from(source: candle_core::Error) -> Self {
        ModelError::candle("tensor operation failed", source)
    }
}

pub type Result<T, E = ModelError> = std::result::Result<T, E>;
