//! What a generation reports while it runs.

use serde::Serialize;

use mlxr_tokenizer::TokenId;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FinishReason {
    /// An end-of-generation token or a stop string.
    Stop,
    /// `max_tokens` reached or the context is full.
    Length,
    /// The caller asked to stop (Ctrl-C, a client that went away).
    Cancelled,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TokenLogprob {
    pub id: TokenId,
    pub token: String,
    pub logprob: f32,
}

#[derive(Clone, Debug, Serialize)]
pub struct TokenEvent {
    pub id: TokenId,
    /// Text that became final with this token: complete UTF-8 only, with
    /// stop strings (and anything that may still turn into one) held back.
    pub text: String,
    pub logprob: Option<TokenLogprob>,
    pub top_logprobs: Vec<TokenLogprob>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Timings {
    /// From submission to the first step that included the request.
    pub queued_ms: f64,
    /// From submission to the first generated token.
    pub ttft_ms: f64,
    /// Prompt tokens computed (not served by the prefix cache).
    pub prompt_n: usize,
    pub prompt_ms: f64,
    pub predicted_n: usize,
    pub predicted_ms: f64,
    /// Speculative decoding: draft tokens verified, and those that stood
    /// (llama-server's names).
    pub draft_n: usize,
    pub draft_n_accepted: usize,
}

impl Timings {
    pub fn prompt_tokens_per_second(&self) -> f64 {
        per_second(self.prompt_n, self.prompt_ms)
    }
    pub fn predicted_tokens_per_second(&self) -> f64 {
        per_second(self.predicted_n, self.predicted_ms)
    }
}

fn per_second(n: usize, ms: f64) -> f64 {
    if ms > 0.0 {
        n as f64 * 1000.0 / ms
    } else {
        0.0
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Usage {
    pub prompt_tokens: usize,
    /// Prompt tokens whose keys and values were reused from an earlier turn.
    pub cached_tokens: usize,
    pub completion_tokens: usize,
}

#[derive(Clone, Debug)]
pub enum Event {
    Token(TokenEvent),
    Done {
        finish_reason: FinishReason,
        /// Held-back text released at the end (e.g. a partial stop string that never completed).
        text: String,
        usage: Usage,
        timings: Timings,
    },
    /// The request failed inside the engine; no more events follow.
    Error(String),
}
