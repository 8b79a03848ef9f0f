//! The generation engine: a loaded model turns a request into a stream of
//! tokens and text.
//!
//! This is the single-sequence generator; the batching scheduler and paged
//! KV cache build on the same pieces ([`LoadedModel`], [`GenerateRequest`],
//! [`Event`]).

pub mod error;
pub mod events;
pub mod generator;
pub mod kv;
pub mod loaded_model;
pub mod request;

pub use error::EngineError;
pub use events::{Event, FinishReason, Timings, TokenEvent, TokenLogprob, Usage};
pub use generator::{Generation, Session};
pub use loaded_model::LoadedModel;
pub use request::{GenerateRequest, Prompt};

pub use mlxr_sampling::SamplingParams;
pub use mlxr_template::ChatMessage;
pub use mlxr_tokenizer::TokenId;
