//! Structured output: constrain what a sequence may generate to a JSON
//! schema, any JSON object, a regular expression or a Lark grammar, with
//! llguidance computing the allowed tokens over the model's vocabulary.
//!
//! Per model: [`Grammars`] (the vocabulary's token trie and llguidance's
//! parser factory, built once, and a cache of compiled grammars). Per
//! request: a [`Constraint`] compiled into a [`TokenConstraint`], which the
//! sampler asks whether a token may come next and which follows the tokens
//! the sequence commits.

mod constraint;
mod error;
mod grammars;
mod matcher;
pub mod tools;
mod vocab;

pub use constraint::Constraint;
pub use error::StructuredError;
pub use grammars::Grammars;
pub use matcher::TokenConstraint;
pub use vocab::{Tokenization, Vocab};
