//! Ollama-compatible routes under `/api`.

mod generate;
mod info;
pub mod options;

use axum::routing::{get, post};
use axum::Router;

use crate::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/generate", post(generate::generate))
        .route("/api/chat", post(generate::chat))
        .route("/api/tags", get(info::tags).head(info::tags))
        .route("/api/ps", get(info::ps))
        .route("/api/show", post(info::show))
        .route("/api/embed", post(info::embeddings_missing))
        .route("/api/embeddings", post(info::embeddings_missing))
}
