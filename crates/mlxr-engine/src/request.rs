use mlxr_sampling::SamplingParams;
use mlxr_template::ChatMessage;
use mlxr_tokenizer::TokenId;

#[derive(Clone, Debug)]
pub enum Prompt {
    /// Text tokenized as is (BOS added where the model wants one, special tokens parsed).
    Raw(String),
    /// Messages rendered with the model's chat template, ending with the assistant's turn.
    Chat(Vec<ChatMessage>),
    /// Token ids used unchanged.
    Tokens(Vec<TokenId>),
}

#[derive(Clone, Debug)]
pub struct GenerateRequest {
    pub prompt: Prompt,
    pub sampling: SamplingParams,
    /// `None`: until an end-of-generation token or the context is full.
    pub max_tokens: Option<usize>,
    pub stop: Vec<String>,
    /// Keep going past end-of-generation tokens.
    pub ignore_eos: bool,
}

impl GenerateRequest {
    pub fn new(prompt: Prompt) -> Self {
        Self {
            prompt,
            sampling: SamplingParams::default(),
            max_tokens: None,
            stop: Vec::new(),
            ignore_eos: false,
        }
    }
}
