//! OpenAI request bodies and how they become engine requests.

use mlxr_engine::{ChatMessage, GenerateRequest, Prompt, SamplingParams, SpecOverrides};
use serde::Deserialize;
use serde_json::Value;

use crate::error::ApiError;
use crate::limits::{self, at_most};
use crate::structured;
use crate::tools::{history_calls, ToolRequest};

#[derive(Deserialize, Debug)]
pub struct ChatCompletionRequest {
    pub model: String,
    pub messages: Vec<Message>,
    #[serde(flatten)]
    pub common: CommonParams,
    #[serde(default)]
    pub logprobs: Option<bool>,
    #[serde(default)]
    pub top_logprobs: Option<usize>,
    #[serde(default)]
    pub max_completion_tokens: Option<usize>,
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
    #[serde(default)]
    pub tool_choice: Option<Value>,
    #[serde(default)]
    pub parallel_tool_calls: Option<bool>,
    /// The deprecated forms of `tools` and `tool_choice`.
    #[serde(default)]
    pub functions: Option<Vec<Value>>,
    #[serde(default)]
    pub function_call: Option<Value>,
}

#[derive(Deserialize, Debug)]
pub struct CompletionRequest {
    pub model: String,
    pub prompt: Value,
    #[serde(flatten)]
    pub common: CommonParams,
    #[serde(default)]
    pub logprobs: Option<usize>,
    #[serde(default)]
    pub echo: Option<bool>,
    #[serde(default)]
    pub suffix: Option<String>,
    #[serde(default)]
    pub best_of: Option<usize>,
}

/// Fields both endpoints share (OpenAI's, plus llama-server's extensions
/// `top_k`, `min_p`, `repeat_penalty`, `ignore_eos` and the flat
/// `speculative.*` keys).
#[derive(Deserialize, Debug, Default)]
pub struct CommonParams {
    #[serde(default)]
    pub stream: bool,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    #[serde(default)]
    pub max_tokens: Option<usize>,
    #[serde(default)]
    pub temperature: Option<f32>,
    #[serde(default)]
    pub top_p: Option<f32>,
    #[serde(default)]
    pub top_k: Option<usize>,
    #[serde(default)]
    pub min_p: Option<f32>,
    #[serde(default)]
    pub repeat_penalty: Option<f32>,
    #[serde(default)]
    pub presence_penalty: Option<f32>,
    #[serde(default)]
    pub frequency_penalty: Option<f32>,
    #[serde(default)]
    pub seed: Option<i64>,
    #[serde(default)]
    pub stop: Option<StopField>,
    #[serde(default)]
    pub logit_bias: Option<std::collections::HashMap<String, f32>>,
    #[serde(default)]
    pub n: Option<usize>,
    #[serde(default)]
    pub ignore_eos: bool,
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default, rename = "speculative.type")]
    pub spec_type: Option<String>,
    #[serde(default, rename = "speculative.n_max")]
    pub spec_n_max: Option<usize>,
    #[serde(default, rename = "speculative.n_min")]
    pub spec_n_min: Option<usize>,
    #[serde(default, rename = "speculative.p_min")]
    pub spec_p_min: Option<f32>,
    #[serde(default, rename = "speculative.ngram_min")]
    pub spec_ngram_min: Option<usize>,
    #[serde(default, rename = "speculative.ngram_max")]
    pub spec_ngram_max: Option<usize>,
    #[serde(default, rename = "speculative.draft_length")]
    pub spec_draft_length: Option<String>,
    /// On completions too, as vLLM takes it.
    #[serde(default)]
    pub response_format: Option<Value>,
    /// MLXR's extension (see [`crate::structured::grammar`]).
    #[serde(default)]
    pub grammar: Option<Value>,
}

#[derive(Deserialize, Debug, Default)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: bool,
}

#[derive(Deserialize, Debug)]
#[serde(untagged)]
pub enum StopField {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize, Debug)]
pub struct Message {
    pub role: String,
    #[serde(default)]
    pub content: Option<Content>,
    /// An assistant turn's calls (arguments as JSON strings).
    #[serde(default)]
    pub tool_calls: Option<Vec<Value>>,
    /// A tool result: the call it answers.
    #[serde(default)]
    pub tool_call_id: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
}

#[derive(Deserialize, Debug)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Deserialize, Debug)]
pub struct Part {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub text: Option<String>,
}

impl CommonParams {
    /// The engine request for `prompt`. OpenAI's defaults: temperature and
    /// top_p 1, no other truncation.
    pub fn to_request(
        &self,
        prompt: Prompt,
        max_tokens: Option<usize>,
        logprobs: Option<usize>,
    ) -> Result<GenerateRequest, ApiError> {
        if let Some(n) = self.n {
            if n != 1 {
                return Err(ApiError::bad_request(format!(
                    "n = {n} is not supported; only one choice per request (n = 1)"
                )));
            }
        }
        if let Some(n) = max_tokens.or(self.max_tokens) {
            let field = if max_tokens.is_some() {
                "max_completion_tokens"
            } else {
                "max_tokens"
            };
            at_most(field, n, limits::MAX_TOKENS)?;
        }
        let logit_bias = self
            .logit_bias
            .iter()
            .flatten()
            .map(|(token, bias)| {
                token.parse::<u32>().map(|id| (id, *bias)).map_err(|_| {
                    ApiError::bad_request(format!("logit_bias key '{token}' is not a token id"))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        limits::check_logit_bias(&logit_bias)?;
        let sampling = SamplingParams {
            temperature: self.temperature.unwrap_or(1.0),
            top_k: self.top_k.unwrap_or(0),
            top_p: self.top_p.unwrap_or(1.0),
            min_p: self.min_p.unwrap_or(0.0),
            repeat_penalty: self.repeat_penalty.unwrap_or(1.0),
            repeat_last_n: 64,
            presence_penalty: self.presence_penalty.unwrap_or(0.0),
            frequency_penalty: self.frequency_penalty.unwrap_or(0.0),
            logit_bias,
            seed: self.seed.map(|s| s as u64),
            logprobs,
        };
        sampling
            .validate()
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        let stop = match &self.stop {
            None => Vec::new(),
            Some(StopField::One(s)) => vec![s.clone()],
            Some(StopField::Many(v)) => v.clone(),
        };
        limits::check_stop(&stop)?;
        let constraint = structured::only_one([
            (
                "response_format",
                structured::response_format(self.response_format.as_ref())?,
            ),
            ("grammar", structured::grammar(self.grammar.as_ref())?),
        ])?;
        let mut req = GenerateRequest::new(prompt);
        req.constraint = constraint;
        req.sampling = sampling;
        req.max_tokens = max_tokens.or(self.max_tokens);
        req.stop = stop.into_iter().filter(|s| !s.is_empty()).collect();
        req.ignore_eos = self.ignore_eos;
        req.speculation = SpecOverrides {
            spec_type: self
                .spec_type
                .as_deref()
                .map(str::parse)
                .transpose()
                .map_err(ApiError::bad_request)?,
            n_max: self.spec_n_max,
            n_min: self.spec_n_min,
            p_min: self.spec_p_min,
            ngram_min: self.spec_ngram_min,
            ngram_max: self.spec_ngram_max,
            draft_length: self
                .spec_draft_length
                .as_deref()
                .map(str::parse)
                .transpose()
                .map_err(|e| ApiError::bad_request(format!("speculative.draft_length: {e}")))?,
        };
        Ok(req)
    }

    pub fn include_usage(&self) -> bool {
        self.stream_options
            .as_ref()
            .is_some_and(|o| o.include_usage)
    }
}

impl ChatCompletionRequest {
    pub fn to_request(&self) -> Result<GenerateRequest, ApiError> {
        if self.top_logprobs.is_some() && self.logprobs != Some(true) {
            return Err(ApiError::bad_request(
                "top_logprobs requires logprobs: true",
            ));
        }
        if let Some(k) = self.top_logprobs {
            at_most("top_logprobs", k, limits::MAX_TOP_LOGPROBS)?;
        }
        if self.messages.is_empty() {
            return Err(ApiError::bad_request("messages must not be empty"));
        }
        at_most(
            "messages (number of messages)",
            self.messages.len(),
            limits::MAX_MESSAGES,
        )?;
        let messages = self
            .messages
            .iter()
            .map(|m| {
                Ok(ChatMessage {
                    role: m.role.clone(),
                    content: message_text(m)?,
                    tool_calls: m.tool_calls.as_deref().map(history_calls).transpose()?,
                    tool_call_id: m.tool_call_id.clone(),
                    name: m.name.clone(),
                })
            })
            .collect::<Result<Vec<_>, ApiError>>()?;
        let logprobs = (self.logprobs == Some(true)).then(|| self.top_logprobs.unwrap_or(0));
        self.common
            .to_request(Prompt::Chat(messages), self.max_completion_tokens, logprobs)
    }
}

impl ChatCompletionRequest {
    /// `tools`, `tool_choice` and `parallel_tool_calls`; the deprecated
    /// `functions` and `function_call` are refused with a pointer to them.
    pub fn tools(&self) -> Result<Option<ToolRequest>, ApiError> {
        let default_call = |f: &Value| f.is_null() || f == "none" || f == "auto";
        if self.functions.as_ref().is_some_and(|f| !f.is_empty())
            || self
                .function_call
                .as_ref()
                .is_some_and(|f| !default_call(f))
        {
            return Err(ApiError::bad_request(
                "functions and function_call are deprecated and not supported: send tools and tool_choice",
            ));
        }
        ToolRequest::parse(
            self.tools.as_deref(),
            self.tool_choice.as_ref(),
            self.parallel_tool_calls,
        )
    }
}

fn message_text(m: &Message) -> Result<String, ApiError> {
    match &m.content {
        None => Ok(String::new()),
        Some(Content::Text(t)) => Ok(t.clone()),
        Some(Content::Parts(parts)) => parts
            .iter()
            .map(|p| match (p.kind.as_str(), &p.text) {
                ("text", Some(t)) => Ok(t.as_str()),
                (kind, _) => Err(ApiError::bad_request(format!(
                    "message content of type '{kind}' is not supported (text only)"
                ))),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|texts| texts.join("")),
    }
}

impl CompletionRequest {
    pub fn to_request(&self) -> Result<GenerateRequest, ApiError> {
        if self.echo == Some(true) {
            return Err(ApiError::bad_request("echo is not supported"));
        }
        if self.suffix.is_some() {
            return Err(ApiError::bad_request(
                "suffix (fill-in-the-middle) is not supported yet",
            ));
        }
        if let Some(best_of) = self.best_of.filter(|&b| b != 1) {
            return Err(ApiError::bad_request(format!(
                "best_of = {best_of} is not supported; only one candidate per request (best_of = 1)"
            )));
        }
        if let Some(k) = self.logprobs {
            at_most("logprobs", k, limits::MAX_COMPLETION_LOGPROBS)?;
        }
        let prompt = completion_prompt(&self.prompt)?;
        if let Prompt::Tokens(ids) = &prompt {
            at_most(
                "prompt (number of token ids)",
                ids.len(),
                limits::MAX_PROMPT_TOKEN_IDS,
            )?;
        }
        self.common.to_request(prompt, None, self.logprobs)
    }
}

/// A string, one-element array of strings, token ids, or one-element array of token id arrays.
fn completion_prompt(v: &Value) -> Result<Prompt, ApiError> {
    let ids = |a: &Vec<Value>| -> Option<Vec<u32>> {
        a.iter()
            .map(|x| x.as_u64().and_then(|n| u32::try_from(n).ok()))
            .collect()
    };
    let multi = || ApiError::bad_request("only one prompt per request is supported");
    match v {
        Value::String(s) => Ok(Prompt::Raw(s.clone())),
        Value::Array(a) if a.is_empty() => Err(ApiError::bad_request("prompt must not be empty")),
        Value::Array(a) if a.iter().all(Value::is_number) => ids(a)
            .map(Prompt::Tokens)
            .ok_or_else(|| ApiError::bad_request("prompt token ids must be non-negative integers")),
        Value::Array(a) if a.len() == 1 => completion_prompt(&a[0]),
        Value::Array(_) => Err(multi()),
        _ => Err(ApiError::bad_request(
            "prompt must be a string, an array of token ids, or a one-element array of either",
        )),
    }
}
