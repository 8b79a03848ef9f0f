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

/// Whether a model folder is an embedding model: a sentence-transformers
/// folder (`modules.json`) or a BERT-family `config.json`. Decoder folders
/// (Llama, Qwen, ...) are not.
pub fn is_embedding_folder(dir: &std::path::Path) -> bool {
    if dir.join("modules.json").is_file() {
        return true;
    }
    let model_type = std::fs::read(dir.join("config.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v["model_type"].as_str().map(str::to_string));
    matches!(
        model_type.as_deref(),
        Some("bert" | "roberta" | "xlm-roberta" | "distilbert" | "mpnet" | "nomic_bert")
    )
}
pub use pooling::Pooling;
