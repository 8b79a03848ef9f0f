//! OpenAI-compatible routes under `/v1`.

mod chat;
mod completions;
mod embeddings;
mod models;
pub mod request;
mod response;

use axum::routing::{get, post};
use axum::Router;

use crate::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/models", get(models::list))
        .route("/v1/models/{*id}", get(models::get))
        .route("/v1/chat/completions", post(chat::handle))
        .route("/v1/completions", post(completions::handle))
        .route("/v1/embeddings", post(embeddings::handle))
}
