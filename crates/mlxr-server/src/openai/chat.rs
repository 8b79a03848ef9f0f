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

pub async fn handle(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<ChatCompletionRequest>,
) -> Result<Response, OpenAiError> {
    let engine_req = req.to_request()?;
    let acquired = state.models.acquire(&req.model, None).await?;
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
        let finish = out.finish_reason.map(finish_reason_str);
        return Ok(Json(json!({
            "id": id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "system_fingerprint": crate::SYSTEM_FINGERPRINT,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": out.text},
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
                    if !t.text.is_empty() || logprobs.is_some() {
                        yield Ok(sse_json(&chunk(json!({"content": t.text}), None, logprobs)));
                    }
                }
                Event::Done { finish_reason, text, usage, timings } => {
                    if !text.is_empty() {
                        yield Ok(sse_json(&chunk(json!({"content": text}), None, None)));
                    }
                    let mut last = chunk(json!({}), Some(finish_reason_str(finish_reason)), None);
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
