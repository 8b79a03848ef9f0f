//! `POST /v1/chat/completions`.

use std::convert::Infallible;

use axum::extract::State;
use axum::response::sse::Sse;
use axum::response::{IntoResponse, Response};
use axum::Json;
use mlxr_engine::Event;
use serde_json::{json, Value};

use super::request::ChatCompletionRequest;
use super::response::{
    chat_logprob, completion_id, sse_done, sse_error, sse_json, timings_json, unix_now,
    usage_chunk, usage_json,
};
use crate::error::OpenAiError;
use crate::extract::JsonBody;
use crate::generation::{collect, finish_reason_str, submit};
use crate::state::AppState;
use crate::tools::{read, ToolReader};
use mlxr_engine::FinishReason;
use mlxr_structured::tools::ToolCall;

pub async fn handle(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<ChatCompletionRequest>,
) -> Result<Response, OpenAiError> {
    let mut engine_req = req.to_request()?;
    let tools = req.tools()?;
    let acquired = state.models.acquire(&req.model, None).await?;
    let mut reader = match &tools {
        Some(t) => t.apply(acquired.engine.model(), &mut engine_req)?,
        None => None,
    };
    let stream = submit(&acquired.engine, engine_req).await?;
    let id = completion_id("chatcmpl");
    let created = unix_now();
    let model = req.model.clone();
    let want_logprobs = req.logprobs == Some(true);

    if !req.common.stream {
        let out = collect(stream).await;
        state.models.release(&acquired.spec.name, None).await;
        let out = out?;
        let logprobs = want_logprobs.then(|| {
            json!({"content": out.logprobs.iter().map(|(c, t)| chat_logprob(c, t)).collect::<Vec<_>>()})
        });
        let pieces = read(&mut reader, &out.text, true);
        let mut message = json!({"role": "assistant", "content": pieces.text});
        if !pieces.calls.is_empty() {
            message["tool_calls"] = pieces
                .calls
                .iter()
                .map(|c| tool_call_json(c, false))
                .collect();
            if pieces.text.is_empty() {
                message["content"] = Value::Null;
            }
        }
        let finish = finish_reason(&reader, out.finish_reason);
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
        let mut stream = stream;
        yield Ok::<_, Infallible>(sse_json(&chunk(json!({"role": "assistant", "content": ""}), None, None)));
        while let Some(event) = stream.next().await {
            match event {
                Event::Token(t) => {
                    let logprobs = (want_logprobs)
                        .then(|| t.logprob.as_ref().map(|c| json!({"content": [chat_logprob(c, &t.top_logprobs)]})))
                        .flatten();
                    let pieces = read(&mut reader, &t.text, false);
                    if !pieces.text.is_empty() || logprobs.is_some() {
                        yield Ok(sse_json(&chunk(json!({"content": pieces.text}), None, logprobs)));
                    }
                    for call in &pieces.calls {
                        yield Ok(sse_json(&chunk(json!({"tool_calls": [tool_call_json(call, true)]}), None, None)));
                    }
                }
                Event::Done { finish_reason: reason, text, usage, timings } => {
                    let pieces = read(&mut reader, &text, true);
                    if !pieces.text.is_empty() {
                        yield Ok(sse_json(&chunk(json!({"content": pieces.text}), None, None)));
                    }
                    for call in &pieces.calls {
                        yield Ok(sse_json(&chunk(json!({"tool_calls": [tool_call_json(call, true)]}), None, None)));
                    }
                    let mut last = chunk(json!({}), finish_reason(&reader, Some(reason)), None);
                    last["timings"] = timings_json(&timings, &usage);
                    yield Ok(sse_json(&last));
                    if include_usage {
                        yield Ok(usage_chunk(chunk(json!({}), None, None), &usage));
                    }
                    break;
                }
                Event::Error(message) => {
                    yield Ok(sse_error(message));
                    break;
                }
            }
        }
        state.models.release(&acquired.spec.name, None).await;
        yield Ok(sse_done());
    };
    Ok(Sse::new(events).into_response())
}

/// `tool_calls` when the reply made calls.
fn finish_reason(
    reader: &Option<ToolReader>,
    reason: Option<FinishReason>,
) -> Option<&'static str> {
    if reader.as_ref().is_some_and(ToolReader::called) {
        return Some("tool_calls");
    }
    reason.map(finish_reason_str)
}

/// One call in OpenAI's shape (arguments as a JSON string); streamed with
/// its `index`, whole in one delta.
fn tool_call_json((index, id, call): &(usize, String, ToolCall), streamed: bool) -> Value {
    let mut v = json!({
        "id": id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments.to_string()},
    });
    if streamed {
        v["index"] = json!(index);
    }
    v
}
