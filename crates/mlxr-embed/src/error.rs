use std::path::PathBuf;

use thiserror::Error;

/// Everything that can go wrong loading an embedding model or embedding text.
#[derive(Debug, Error)]
pub enum EmbedError {
    #[error("model folder is missing {path}")]
    MissingFile { path: PathBuf },

    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("bad config {path}: {message}")]
    BadConfig { path: PathBuf, message: String },

    #[error("unsupported pooling in {path}: {mode} (supported: mean, cls)")]
    UnsupportedPooling { path: PathBuf, mode: String },

    #[error("loading weights from {path}: {source}")]
    Weights {
        path: PathBuf,
        #[source]
        source: candle_core::Error,
    },

    #[error("loading tokenizer {path}: {message}")]
    LoadTokenizer { path: PathBuf, message: String },

    #[error("tokenizing input {index}: {message}")]
    Tokenize { index: usize, message: String },

    #[error(
        "input {index} is {tokens} tokens long, more than the model's limit of {limit}; \
         shorten it or enable truncation"
    )]
    InputTooLong {
        index: usize,
        tokens: usize,
        limit: usize,
    },

    #[error("embedding forward pass: {0}")]
    Compute(#[from] candle_core::Error),
}
