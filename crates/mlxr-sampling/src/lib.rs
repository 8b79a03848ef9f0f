//! Token sampling over raw logits (`&[f32]`, one entry per vocabulary id).
//!
//! The chain follows llama.cpp's default order: logit bias, repetition /
//! presence / frequency penalties, top-k, top-p, min-p, temperature, then a
//! draw from the softmax of what is left. Greedy decoding (temperature 0)
//! takes the argmax after bias and penalties.

mod candidates;
mod error;
mod fastexp;
mod logprobs;
mod params;
mod penalties;
mod rng;
mod sampler;
#[cfg(test)]
mod sampler_tests;
mod speculative;
#[cfg(test)]
mod speculative_tests;
mod stop;
#[cfg(test)]
mod stop_tests;

pub use error::SamplingError;
pub use logprobs::top_probability;
pub use params::SamplingParams;
pub use sampler::{Sampled, Sampler, TokenFilter};
pub use speculative::{Draft, Verified};
pub use stop::{StopMatcher, StopUpdate};

/// A vocabulary index.
pub type TokenId = u32;
