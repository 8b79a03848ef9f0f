//! Ollama-compatible routes under `/api`.

mod embed;
mod generate;
mod info;
mod manage;
pub mod options;

use axum::extract::DefaultBodyLimit;
use axum::routing::{delete, get, post};
use axum::Router;

use crate::state::AppState;

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
            get(manage::blob_exists)
                .head(manage::blob_exists)
                .post(manage::blob_upload)
                // Model files are large; the digest check guards what is kept.
                .layer(DefaultBodyLimit::disable()),
        )
        .route("/api/embed", post(embed::embed))
        .route("/api/embeddings", post(embed::embeddings))
}
