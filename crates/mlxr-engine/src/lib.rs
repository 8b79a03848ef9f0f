//! The generation engine: one thread owns a loaded model and a paged KV
//! cache and serves many requests at once.
//!
//! - [`handle`]: [`EngineHandle`] — start, `submit` (a stream of [`Event`]s),
//!   `abort`, metrics.
//! - [`engine`]: the engine thread's loop, one forward pass per step.
//! - [`scheduler`]: one token budget per step; decode first, then prompt
//!   chunks; admission with prefix reuse; preemption by recompute.
//! - [`sequence`]: one request's tokens, sampler and text state.
//! - [`kv`]: KV block bookkeeping (block pool, prefix hashes, block tables).
//! - [`metrics`]: counters and histograms in Prometheus' format.
//! - [`device`]: `--device`, and which devices this build supports.
//! - [`spec`]: speculative decoding (prompt lookup drafts, verified in
//!   the sequence's next step).
//! - [`grammar_masks`]: when constrained sequences' grammar masks are
//!   computed (lazily, or ahead while the forward pass runs).
//! - `sampling`: a step's sequences sample, on several threads for a model
//!   on a GPU.

pub mod byte_size;
pub mod config;
pub mod device;
mod engine;
pub mod error;
pub mod events;
pub mod grammar_masks;
pub mod handle;
pub mod kv;
pub mod loaded_model;
pub mod metrics;
pub mod request;
mod sampling;
pub mod scheduler;
pub mod sequence;
pub mod spec;

pub use byte_size::ByteSize;
pub use config::{EngineConfig, KvBudget, KvDtype};
pub use device::DeviceChoice;
pub use error::EngineError;
pub use events::{Event, FinishReason, Timings, TokenEvent, TokenLogprob, Usage};
pub use grammar_masks::GrammarMasks;
pub use handle::{EngineHandle, Generation, RequestId, RequestStream};
pub use loaded_model::{file_key, LoadedModel};
pub use metrics::EngineMetrics;
pub use mlxr_models::DecoderModel;
pub use request::{tokenize_prompt, GenerateRequest, Prompt};
pub use spec::cost::DraftLength;
pub use spec::{SpecOverrides, SpecType, Speculation};

pub use mlxr_sampling::SamplingParams;
pub use mlxr_structured::Constraint;
pub use mlxr_template::ChatMessage;
pub use mlxr_tokenizer::TokenId;
