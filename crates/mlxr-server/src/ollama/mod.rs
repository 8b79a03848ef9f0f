//! Ollama-compatible routes under `/api`.

mod blob_run;
pub mod blobs;
pub mod convert;
mod embed;
mod generate;
pub mod info;
pub mod manage;
pub mod options;
mod quantize;

use axum::extract::DefaultBodyLimit;
use axum::routing::{delete, get, post};
use axum::Router;

use serde_json::Value;

use crate::error::ApiError;
use crate::models::KeepAlive;
use crate::state::AppState;

pub use generate::{ChatBody, GenerateBody, Prepared, ReplyBody};

/// Ollama accepts a model's name as `model` or, in older clients, `name`.
fn requested_model(model: Option<String>, name: Option<String>) -> Result<String, ApiError> {
    model
        .or(name)
        .ok_or_else(|| ApiError::bad_request("missing model name"))
}

/// A request's `keep_alive`, absent or null meaning the server's default.
fn keep_alive(value: &Option<Value>) -> Result<Option<KeepAlive>, ApiError> {
    value
        .as_ref()
        .filter(|v| !v.is_null())
        .map(KeepAlive::parse)
        .transpose()
        .map_err(ApiError::bad_request)
}

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/generate", post(generate::generate))
        .route("/api/chat", post(generate::chat))
        .route("/api/tags", get(info::tags).head(info::tags))
        .route("/api/ps", get(info::ps))
        .route("/api/show", post(info::show))
        .route("/api/pull", post(manage::pull))
        .route("/api/create", post(manage::create))
        .route("/api/copy", post(manage::copy))
        .route("/api/delete", delete(manage::delete))
        .route(
            "/api/blobs/{digest}",
            get(blobs::blob_exists)
                .head(blobs::blob_exists)
                .post(blobs::blob_upload)
                // Model files are large: `--max-blob-size` caps them instead.
                .layer(DefaultBodyLimit::disable()),
        )
        .route("/api/embed", post(embed::embed))
        .route("/api/embeddings", post(embed::embeddings))
}
