//! `POST /v1/completions`.

use std::convert::Infallible;

use axum::extract::State;
use axum::response::sse::Sse;
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::StreamExt;
use mlxr_engine::TokenLogprob;
use serde_json::{json, Map, Value};

use super::request::CompletionRequest;
use super::response::{
    completion_id, sse_done, sse_error, sse_json, timings_json, unix_now, usage_chunk, usage_json,
};
use crate::error::OpenAiError;
use crate::extract::JsonBody;
use crate::generation::{collect, finish_reason_str, pieces, submit, Piece};
use crate::state::AppState;

/// The legacy completions `logprobs` object for a run of tokens starting at
/// character offset `offset` of the completion.
fn logprobs_json(items: &[(TokenLogprob, Vec<TokenLogprob>)], mut offset: usize) -> Value {
    let mut tokens = Vec::new();
    let mut token_logprobs = Vec::new();
    let mut top = Vec::new();
    let mut offsets = Vec::new();
    for (chosen, alternatives) in items {
        tokens.push(chosen.token.clone());
        token_logprobs.push(chosen.logprob);
        let map: Map<String, Value> = alternatives
            .iter()
            .map(|t| (t.token.clone(), json!(t.logprob)))
            .collect();
        top.push(Value::Object(map));
        offsets.push(offset);
        offset += chosen.token.len();
    }
    json!({"tokens": tokens, "token_logprobs": token_logprobs, "top_logprobs": top, "text_offset": offsets})
}

pub async fn handle(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<CompletionRequest>,
) -> Result<Response, OpenAiError> {
    let engine_req = req.to_request()?;
    let acquired = state.models.acquire(&req.model, None).await?;
    let stream = submit(&acquired.engine, engine_req).await?;
    let id = completion_id("cmpl");
    let created = unix_now();
    let model = req.model.clone();
    let want_logprobs = req.logprobs.is_some();

    if !req.common.stream {
        let out = collect(stream, None).await;
        state.models.release(&acquired.spec.name, None).await;
        let out = out?;
        return Ok(Json(json!({
            "id": id,
            "object": "text_completion",
            "created": created,
            "model": model,
            "system_fingerprint": crate::SYSTEM_FINGERPRINT,
            "choices": [{
                "text": out.text,
                "index": 0,
                "logprobs": want_logprobs.then(|| logprobs_json(&out.logprobs, 0)),
                "finish_reason": out.finish_reason.map(finish_reason_str),
            }],
            "usage": usage_json(&out.usage),
            "timings": timings_json(&out.timings, &out.usage),
        }))
        .into_response());
    }

    let include_usage = req.common.include_usage();
    let chunk = move |text: &str, finish: Option<&str>, logprobs: Option<Value>| {
        json!({
            "id": id,
            "object": "text_completion",
            "created": created,
            "model": model,
            "system_fingerprint": crate::SYSTEM_FINGERPRINT,
            "choices": [{"text": text, "index": 0, "logprobs": logprobs, "finish_reason": finish}],
        })
    };
    let events = async_stream::stream! {
        let mut pieces = std::pin::pin!(pieces(stream, None));
        let mut offset = 0;
        while let Some(piece) = pieces.next().await {
            match piece {
                Piece::Token { text, logprob, .. } => {
                    let logprobs = logprob.filter(|_| want_logprobs)
                        .map(|lp| logprobs_json(&[lp], offset));
                    offset += text.len();
                    if !text.is_empty() || logprobs.is_some() {
                        yield Ok::<_, Infallible>(sse_json(&chunk(&text, None, logprobs)));
                    }
                }
                Piece::Text(text) => yield Ok(sse_json(&chunk(&text, None, None))),
                // Completions have no tools.
                Piece::Call(_) => {}
                Piece::Done { finish_reason, usage, timings, .. } => {
                    let mut last = chunk("", Some(finish_reason_str(finish_reason)), None);
                    last["timings"] = timings_json(&timings, &usage);
                    yield Ok(sse_json(&last));
                    if include_usage {
                        yield Ok(usage_chunk(chunk("", None, None), &usage));
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
