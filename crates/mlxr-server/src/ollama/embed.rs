//! `POST /api/embed` (batch, normalized) and `POST /api/embeddings` (legacy).

use std::time::Instant;

use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::embedding::embed as run;
use crate::error::{ApiError, OllamaError};
use crate::extract::JsonBody;
use crate::state::AppState;

use super::keep_alive;

#[derive(Deserialize)]
pub struct EmbedBody {
    model: String,
    input: Value,
    #[serde(default)]
    truncate: Option<bool>,
    #[serde(default)]
    dimensions: Option<usize>,
    #[serde(default)]
    keep_alive: Option<Value>,
}

#[derive(Deserialize)]
pub struct EmbeddingsBody {
    model: String,
    #[serde(default)]
    prompt: String,
    #[serde(default)]
    keep_alive: Option<Value>,
}

pub async fn embed(
    State(state): State<AppState>,
    JsonBody(body): JsonBody<EmbedBody>,
) -> Result<Json<Value>, OllamaError> {
    let started = Instant::now();
    let texts = match &body.input {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| ApiError::bad_request("input must be a string or a list of strings"))?,
        _ => {
            return Err(ApiError::bad_request("input must be a string or a list of strings").into())
        }
    };
    let out = run(
        &state,
        &body.model,
        texts,
        body.truncate.unwrap_or(true),
        body.dimensions,
        keep_alive(&body.keep_alive)?,
    )
    .await?;
    Ok(Json(json!({
        "model": out.model,
        "embeddings": out.vectors,
        "total_duration": started.elapsed().as_nanos() as u64,
        "load_duration": out.load_duration.as_nanos() as u64,
        "prompt_eval_count": out.prompt_tokens,
    })))
}

pub async fn embeddings(
    State(state): State<AppState>,
    JsonBody(body): JsonBody<EmbeddingsBody>,
) -> Result<Json<Value>, OllamaError> {
    let out = run(
        &state,
        &body.model,
        vec![body.prompt],
        true,
        None,
        keep_alive(&body.keep_alive)?,
    )
    .await?;
    Ok(Json(json!({ "embedding": out.vectors[0] })))
}
