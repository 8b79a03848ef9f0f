//! `POST /v1/embeddings`.

use axum::extract::State;
use axum::Json;
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::embedding::embed as run;
use crate::error::{ApiError, OpenAiError};
use crate::extract::JsonBody;
use crate::state::AppState;

#[derive(Deserialize)]
pub struct EmbeddingsRequest {
    model: String,
    input: Value,
    #[serde(default)]
    encoding_format: Option<String>,
    #[serde(default)]
    dimensions: Option<usize>,
}

pub async fn handle(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<EmbeddingsRequest>,
) -> Result<Json<Value>, OpenAiError> {
    let texts = match &req.input {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) if !items.is_empty() => items
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                ApiError::bad_request(
                    "input must be a string or a list of strings (token ids are not supported)",
                )
            })?,
        _ => {
            return Err(ApiError::bad_request(
                "input must be a non-empty string or list of strings",
            )
            .into())
        }
    };
    let base64 = match req.encoding_format.as_deref() {
        None | Some("float") => false,
        Some("base64") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "encoding_format must be float or base64, got '{other}'"
            ))
            .into())
        }
    };
    // OpenAI's API refuses over-long input instead of truncating it.
    let out = run(&state, &req.model, texts, false, req.dimensions, None).await?;
    let data: Vec<Value> = out
        .vectors
        .iter()
        .enumerate()
        .map(|(index, v)| {
            let embedding = if base64 {
                let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                json!(base64::engine::general_purpose::STANDARD.encode(bytes))
            } else {
                json!(v)
            };
            json!({"object": "embedding", "index": index, "embedding": embedding})
        })
        .collect();
    Ok(Json(json!({
        "object": "list",
        "data": data,
        "model": req.model,
        "usage": {"prompt_tokens": out.prompt_tokens, "total_tokens": out.prompt_tokens},
    })))
}
