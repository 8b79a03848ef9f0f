//! Pieces of OpenAI responses shared by chat and completions.

use axum::response::sse::Event as SseEvent;
use mlxr_engine::{Timings, TokenLogprob, Usage};
use rand::Rng;
use serde_json::{json, Value};

pub fn completion_id(prefix: &str) -> String {
    let mut rng = rand::rng();
    let suffix: String = (0..24)
        .map(|_| {
            let i = rng.random_range(0..62);
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"[i] as char
        })
        .collect();
    format!("{prefix}-{suffix}")
}

pub fn unix_now() -> i64 {
    chrono::Utc::now().timestamp()
}

pub fn usage_json(u: &Usage) -> Value {
    json!({
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.prompt_tokens + u.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cached_tokens},
    })
}

/// llama-server's `timings` object (an extension both its and our
/// responses carry; the last streamed chunk has it too).
pub fn timings_json(t: &Timings, u: &Usage) -> Value {
    let per_token = |ms: f64, n: usize| if n > 0 { ms / n as f64 } else { 0.0 };
    json!({
        "cache_n": u.cached_tokens,
        "prompt_n": t.prompt_n,
        "prompt_ms": t.prompt_ms,
        "prompt_per_token_ms": per_token(t.prompt_ms, t.prompt_n),
        "prompt_per_second": t.prompt_tokens_per_second(),
        "predicted_n": t.predicted_n,
        "predicted_ms": t.predicted_ms,
        "predicted_per_token_ms": per_token(t.predicted_ms, t.predicted_n),
        "predicted_per_second": t.predicted_tokens_per_second(),
        "draft_n": t.draft_n,
        "draft_n_accepted": t.draft_n_accepted,
    })
}

/// One entry of a chat `logprobs.content` array.
pub fn chat_logprob(chosen: &TokenLogprob, top: &[TokenLogprob]) -> Value {
    let one = |t: &TokenLogprob| json!({"token": t.token, "logprob": t.logprob, "bytes": t.token.as_bytes()});
    let mut v = one(chosen);
    v["top_logprobs"] = top.iter().map(one).collect();
    v
}

pub fn sse_json(v: &Value) -> SseEvent {
    SseEvent::default().data(crate::wire::json_line(v))
}

/// The `stream_options.include_usage` chunk: no choices, the usage.
pub fn usage_chunk(mut chunk: Value, usage: &Usage) -> SseEvent {
    chunk["choices"] = json!([]);
    chunk["usage"] = usage_json(usage);
    sse_json(&chunk)
}

/// An error after the stream started: an `error` payload the SDKs raise.
pub fn sse_error(message: String) -> SseEvent {
    sse_json(&crate::error::ApiError::internal(message).openai_body())
}

pub fn sse_done() -> SseEvent {
    SseEvent::default().data("[DONE]")
}
