//! Running one request on an engine from async code, shared by both APIs.

use mlxr_engine::{
    EngineHandle, Event, FinishReason, GenerateRequest, RequestStream, Timings, TokenLogprob, Usage,
};

use crate::error::ApiError;

/// Tokenizes and submits on a blocking thread (templating and tokenizing a
/// long prompt takes milliseconds).
pub async fn submit(
    engine: &EngineHandle,
    req: GenerateRequest,
) -> Result<RequestStream, ApiError> {
    let engine = engine.clone();
    tokio::task::spawn_blocking(move || engine.submit(&req))
        .await
        .map_err(|e| ApiError::internal(format!("submitting the request panicked: {e}")))?
        .map_err(ApiError::from)
}

/// A whole generation, for non-streaming responses.
#[derive(Default)]
pub struct Collected {
    pub text: String,
    pub tokens: Vec<u32>,
    pub logprobs: Vec<(TokenLogprob, Vec<TokenLogprob>)>,
    pub finish_reason: Option<FinishReason>,
    pub usage: Usage,
    pub timings: Timings,
}

pub async fn collect(mut stream: RequestStream) -> Result<Collected, ApiError> {
    let mut out = Collected::default();
    while let Some(event) = stream.next().await {
        match event {
            Event::Token(t) => {
                out.text.push_str(&t.text);
                out.tokens.push(t.id);
                if let Some(lp) = t.logprob {
                    out.logprobs.push((lp, t.top_logprobs));
                }
            }
            Event::Done {
                finish_reason,
                text,
                usage,
                timings,
            } => {
                out.text.push_str(&text);
                out.finish_reason = Some(finish_reason);
                out.usage = usage;
                out.timings = timings;
                return Ok(out);
            }
            Event::Error(message) => return Err(ApiError::internal(message)),
        }
    }
    Err(ApiError::internal(
        "the engine stopped before the request finished",
    ))
}

pub fn finish_reason_str(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Stop | FinishReason::Cancelled => "stop",
        FinishReason::Length => "length",
    }
}
