//! Model architectures: weights to logits.
//!
//! One decoder implementation ([`DecoderModel`]) serves every supported
//! architecture; [`ModelConfig`] holds what differs between them. Its one
//! forward pass runs a [`Step`] (a batch of sequence chunks, prefill and
//! decode mixed, with paged-cache metadata) on a [`Backend`]: the CPU
//! backend ([`CpuBackend`]) or the candle reference ([`ReferenceBackend`]).
//! A [`ModelRunner`] keeps a backend's buffers between steps.

pub mod backend;
pub mod batch;
pub mod config;
mod config_hf;
pub mod decoder;
pub mod layers;
pub mod partial_head;
pub mod pass;
pub mod runner;
pub mod step;
pub mod tensor_parallel;
pub mod weights;

pub use backend::cpu::kernels::RowOrder;
pub use backend::cpu::paged::PagedKvStore;
pub use backend::cpu::CpuBackend;
#[cfg(feature = "cuda")]
pub use backend::cuda::{device as cuda_device, CudaBackend, Launch, StepGraphs};
pub use backend::reference::ReferenceBackend;
pub use backend::{AttentionSpec, Backend, Glu, KvGeometry};
pub use batch::SeqChunk;
pub use config::{Activation, LayerAttention, ModelConfig, RopeStyle};
pub use decoder::DecoderModel;
pub use partial_head::PartialHead;
pub use pass::Activations;
pub use runner::{ModelRunner, Session, StepRunner};
pub use step::Step;

use mlxr_formats::gguf::GgufError;

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error(transparent)]
    Gguf(#[from] GgufError),
    #[error(
        "architecture '{0}' is not supported (supported: llama, mistral, qwen2, qwen3, phi3, gemma2, gemma3)"
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
    #[error("tensor parallel: {0}")]
    Shard(#[from] tensor_parallel::ShardError),
    #[error("tensor parallel: {0}")]
    Collective(#[from] tensor_parallel::CollectiveError),
    #[error("{context}: {source}")]
    Candle {
        context: String,
        #[source]
        source: Box<candle_core::Error>,
    },
}

impl ModelError {
    /// `ShapeMismatch` for `tensor` unless `found` is `expected`.
    pub(crate) fn check_shape(tensor: &str, expected: &[usize], found: &[usize]) -> Result<()> {
        if found == expected {
            return Ok(());
        }
        Err(ModelError::ShapeMismatch {
            tensor: tensor.to_string(),
            expected: expected.to_vec(),
            found: found.to_vec(),
        })
    }

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
