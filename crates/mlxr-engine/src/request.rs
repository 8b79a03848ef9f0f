use mlxr_sampling::SamplingParams;
use mlxr_structured::Constraint;
use mlxr_template::ChatMessage;
use mlxr_tokenizer::TokenId;

use crate::spec::SpecOverrides;
use crate::{EngineError, LoadedModel};

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
    /// Higher runs first; equal priorities are served first come, first served.
    pub priority: i32,
    /// Caps prompt + reply below the engine's own limit (Ollama's `num_ctx`).
    pub max_context: Option<usize>,
    /// Speculative decoding values in place of the engine's.
    pub speculation: SpecOverrides,
    /// What the output must be (a JSON schema, a grammar); such a request
    /// does not speculate.
    pub constraint: Option<Constraint>,
    /// Tool definitions for the chat template (its `tools`); empty: none.
    pub tools: Vec<serde_json::Value>,
}

impl GenerateRequest {
    pub fn new(prompt: Prompt) -> Self {
        Self {
            prompt,
            sampling: SamplingParams::default(),
            max_tokens: None,
            stop: Vec::new(),
            ignore_eos: false,
            priority: 0,
            max_context: None,
            speculation: SpecOverrides::default(),
            constraint: None,
            tools: Vec::new(),
        }
    }
}

/// The token ids a prompt becomes for `lm`.
pub fn tokenize_prompt(
    lm: &LoadedModel,
    req: &GenerateRequest,
) -> Result<Vec<TokenId>, EngineError> {
    Ok(match &req.prompt {
        Prompt::Raw(text) => lm.tokenizer.encode(text, true, true),
        Prompt::Chat(messages) => {
            let text = lm.render_chat_tools(messages, &req.tools)?;
            lm.tokenizer.encode(&text, true, true)
        }
        Prompt::Tokens(ids) => ids.clone(),
    })
}
