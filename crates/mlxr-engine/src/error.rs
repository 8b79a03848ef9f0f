use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("{path}: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: mlxr_formats::gguf::GgufError,
    },
    #[error("{path}: {source}")]
    Model {
        path: PathBuf,
        #[source]
        source: mlxr_models::ModelError,
    },
    #[error("{path}: {source}")]
    Tokenizer {
        path: PathBuf,
        #[source]
        source: mlxr_tokenizer::TokenizerError,
    },
    #[error("chat template: {0}")]
    Template(#[from] mlxr_template::TemplateError),
    #[error("sampling parameters: {0}")]
    Sampling(#[from] mlxr_sampling::SamplingError),
    #[error("the prompt has {prompt} tokens but the context holds {context}; shorten it or raise the context size")]
    PromptTooLong { prompt: usize, context: usize },
    #[error("the prompt has {prompt} tokens and max_tokens is {max_tokens}, but a sequence holds at most {context} tokens; lower max_tokens or shorten the prompt")]
    RequestTooLong {
        prompt: usize,
        max_tokens: usize,
        context: usize,
    },
    #[error("token id {id} is outside the vocabulary of {vocab} tokens")]
    InvalidToken { id: u32, vocab: usize },
    #[error("logit_bias: token id {id} is outside the vocabulary of {vocab} tokens")]
    LogitBiasToken { id: u32, vocab: usize },
    #[error("the KV cache budget ({budget}) is smaller than one block ({block_bytes} bytes)")]
    KvBudgetTooSmall { budget: String, block_bytes: u64 },
    #[error("device {0}")]
    Device(String),
    #[error("the engine has stopped")]
    Stopped,
    #[error("starting the engine thread: {0}")]
    Thread(#[source] std::io::Error),
    #[error("{0}")]
    Request(String),
    #[error("{0}")]
    Speculation(String),
    #[error(transparent)]
    Constraint(#[from] mlxr_structured::StructuredError),
    #[error("the prompt is empty")]
    EmptyPrompt,
    #[error(transparent)]
    Forward(#[from] mlxr_models::ModelError),
}
