//! `GET /v1/models`, `GET /v1/models/{id}`, `POST /v1/embeddings`.

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Value};

use crate::catalog::ModelSpec;
use crate::error::{ApiError, OpenAiError};
use crate::state::AppState;

fn model_json(m: &ModelSpec) -> Value {
    let owner = m
        .name
        .rsplit_once('/')
        .map(|(ns, _)| ns)
        .unwrap_or("library");
    json!({"id": m.name, "object": "model", "created": m.modified_at.timestamp(), "owned_by": owner})
}

pub async fn list(State(state): State<AppState>) -> Result<Json<Value>, OpenAiError> {
    let models = state.models.catalog().list().map_err(ApiError::internal)?;
    Ok(Json(
        json!({"object": "list", "data": models.iter().map(model_json).collect::<Vec<_>>()}),
    ))
}

pub async fn get(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, OpenAiError> {
    let spec = state.models.resolve(&id)?;
    Ok(Json(model_json(&spec)))
}
