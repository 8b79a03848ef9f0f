//! `POST /v1/chat/completions`.

use std::convert::Infallible;

use axum::extract::State;
use axum::response::sse::Sse;
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::StreamExt;
use serde_json::{json, Value};

use super::request::ChatCompletionRequest;
use super::response::{
    chat_logprob, completion_id, sse_done, sse_error, sse_json, timings_json, unix_now,
    usage_chunk, usage_json,
};
use crate::error::OpenAiError;
use crate::extract::JsonBody;
use crate::generation::{collect, pieces, submit, Piece};
use crate::state::AppState;
use crate::tools::ReplyCall;

pub async fn handle(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<ChatCompletionRequest>,
) -> Result<Response, OpenAiError> {
    let mut engine_req = req.to_request()?;
    let tools = req.tools()?;
    let acquired = state.models.acquire(&req.model, None).await?;
    let reader = match &tools {
        Some(t) => t.apply(acquired.engine.model(), &mut engine_req)?,
        None => None,
    };
    let stream = submit(&acquired.engine, engine_req).await?;
    let id = completion_id("chatcmpl");
    let created = unix_now();
    let model = req.model.clone();
    let want_logprobs = req.logprobs == Some(true);

    if !req.common.stream {
        let out = collect(stream, reader).await;
        state.models.release(&acquired.spec.name, None).await;
        let out = out?;
        let logprobs = want_logprobs.then(|| {
            json!({"content": out.logprobs.iter().map(|(c, t)| chat_logprob(c, t)).collect::<Vec<_>>()})
        });
        let mut message = json!({"role": "assistant", "content": out.text});
        if !out.calls.is_empty() {
            message["tool_calls"] = out.calls.iter().map(|c| tool_call_json(c, false)).collect();
            if out.text.is_empty() {
                message["content"] = Value::Null;
            }
        }
        let finish = out
            .finish_reason
            .map(|r| Piece::openai_finish(r, out.called));
        return Ok(Json(json!({
            "id": id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "system_fingerprint": crate::SYSTEM_FINGERPRINT,
            "choices": [{
                "index": 0,
                "message": message,
                "logprobs": logprobs,
                "finish_reason": finish,
            }],
            "usage": usage_json(&out.usage),
            "timings": timings_json(&out.timings, &out.usage),
        }))
        .into_response());
    }

    let include_usage = req.common.include_usage();
    let chunk = move |delta: Value, finish: Option<&str>, logprobs: Option<Value>| {
        json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "system_fingerprint": crate::SYSTEM_FINGERPRINT,
            "choices": [{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}],
        })
    };
    let events = async_stream::stream! {
        let mut pieces = std::pin::pin!(pieces(stream, reader));
        yield Ok::<_, Infallible>(sse_json(&chunk(json!({"role": "assistant", "content": ""}), None, None)));
        while let Some(piece) = pieces.next().await {
            match piece {
                Piece::Token { text, logprob, .. } => {
                    let logprobs = logprob
                        .filter(|_| want_logprobs)
                        .map(|(c, top)| json!({"content": [chat_logprob(&c, &top)]}));
                    if !text.is_empty() || logprobs.is_some() {
                        yield Ok(sse_json(&chunk(json!({"content": text}), None, logprobs)));
                    }
                }
                Piece::Text(text) => yield Ok(sse_json(&chunk(json!({"content": text}), None, None))),
                Piece::Call(call) => {
                    yield Ok(sse_json(&chunk(json!({"tool_calls": [tool_call_json(&call, true)]}), None, None)));
                }
                Piece::Done { finish_reason, called, usage, timings } => {
                    let mut last = chunk(json!({}), Some(Piece::openai_finish(finish_reason, called)), None);
                    last["timings"] = timings_json(&timings, &usage);
                    yield Ok(sse_json(&last));
                    if include_usage {
                        yield Ok(usage_chunk(chunk(json!({}), None, None), &usage));
                    }
                }
                Piece::Error(message) => yield Ok(sse_error(message)),
            }
        }
        state.models.release(&acquired.spec.name, None).await;
        yield Ok(sse_done());
    };
    Ok(Sse::new(events).into_response())
}

/// One call in OpenAI's shape (arguments as a JSON string); streamed with
/// its `index`, whole in one delta.
fn tool_call_json(c: &ReplyCall, streamed: bool) -> Value {
    let mut v = json!({
        "id": c.id,
        "type": "function",
        "function": {"name": c.call.name, "arguments": c.call.arguments.to_string()},
    });
    if streamed {
        v["index"] = json!(c.index);
    }
    v
}
