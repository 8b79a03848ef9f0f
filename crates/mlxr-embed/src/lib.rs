//! Sentence embeddings from sentence-transformers BERT folders (for example
//! all-MiniLM-L6-v2), on candle, CPU.
//!
//! ```no_run
//! # fn main() -> Result<(), mlxr_embed::EmbedError> {
//! let model = mlxr_embed::EmbeddingModel::load("all-MiniLM-L6-v2".as_ref())?;
//! let out = model.embed(&["The cat sat.", "A dog ran."], true)?;
//! assert_eq!(out.vectors[0].len(), model.dimensions());
//! # Ok(()) }
//! ```

mod config;
mod encoder;
mod error;
mod model;
mod pooling;

pub use config::{BertConfig, PipelineConfig};
pub use error::EmbedError;
pub use model::{EmbeddingModel, Embeddings};
pub use pooling::Pooling;
