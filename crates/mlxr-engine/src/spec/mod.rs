//! Speculative decoding's proposers. The verifier is
//! [`mlxr_sampling::Sampler::verify`]; neither is wired into the scheduler
//! yet (a speculating sequence's k + 1 query tokens in the step's budget,
//! rollback of rejected tokens' KV, per-request control).
//!
//! - [`prompt_lookup`]: draft tokens copied from the sequence itself, after
//!   an earlier occurrence of its last few tokens.

pub mod prompt_lookup;
