//! A model made by a run that writes one new blob (a quantize or a convert):
//! the run works on a blocking thread in the registry's scratch folder,
//! sends progress lines and then the blob's digest; [`create`] streams them
//! and registers the model only at the end. Dropping the receiver (a client
//! that goes away, a cancelled job) stops the run and nothing is stored.

use std::path::Path;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use axum::Json;
use mlxr_registry::{Digest, ModelName, NewModel, Registry};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::manage::{ndjson_response, register, registry_error};
use crate::error::ApiError;
use crate::state::AppState;
use crate::wire::ndjson;

/// What a run reports: progress lines, then the new blob.
pub enum Made {
    Progress(Value),
    Done(Digest),
}

pub type Run = mpsc::Receiver<Result<Made, ApiError>>;

/// Starts `work` on a blocking thread: it gets a progress callback (false
/// once nobody listens: stop) and returns the new blob.
pub fn start(
    work: impl FnOnce(&mut dyn FnMut(Value) -> bool) -> Result<Digest, ApiError> + Send + 'static,
) -> Run {
    let (tx, rx) = mpsc::channel(16);
    tokio::task::spawn_blocking(move || {
        let mut progress = |line: Value| tx.blocking_send(Ok(Made::Progress(line))).is_ok();
        let result = work(&mut progress);
        let _ = tx.blocking_send(result.map(Made::Done));
    });
    rx
}

/// A scratch folder under the registry's `tmp/`, removed when dropped (its
/// output is a blob by then, or the run failed).
pub fn scratch(registry: &Registry, prefix: &str) -> Result<tempfile::TempDir, ApiError> {
    let dir = registry.home().join("tmp");
    std::fs::create_dir_all(&dir)
        .and_then(|()| tempfile::Builder::new().prefix(prefix).tempdir_in(&dir))
        .map_err(|e| ApiError::internal(format!("{}: {e}", dir.display())))
}

/// The file a run wrote, stored as a blob.
pub fn store(registry: &Registry, path: &Path) -> Result<Digest, ApiError> {
    let mut file = std::fs::File::open(path)
        .map_err(|e| ApiError::internal(format!("reading the new model: {e}")))?;
    registry.put_blob(&mut file, None).map_err(registry_error)
}

/// `/api/create`'s answer for a model whose blob `run` makes: its progress
/// streamed (or awaited with `stream: false`), then `creating new layer`,
/// the model registered as `new` on the blob, `success`. An error before
/// the first progress line (a source the run cannot read) is the answer's
/// status.
pub async fn create(
    state: AppState,
    name: ModelName,
    mut new: NewModel,
    companions: Vec<(String, Digest)>,
    mut run: Run,
    stream: Option<bool>,
) -> Result<Response, ApiError> {
    const STOPPED: &str = "the run stopped without a result";
    let first = run
        .recv()
        .await
        .ok_or_else(|| ApiError::internal(STOPPED))??;
    if stream == Some(false) {
        let mut event = first;
        let digest = loop {
            if let Made::Done(digest) = event {
                break digest;
            }
            event = run
                .recv()
                .await
                .ok_or_else(|| ApiError::internal(STOPPED))??;
        };
        new.model_blob = digest;
        register(&state, &name, new, companions).await?;
        return Ok(Json(json!({"status": "success"})).into_response());
    }
    let lines = async_stream::stream! {
        let mut event: Option<Result<Made, ApiError>> = Some(Ok(first));
        let digest = loop {
            match event {
                Some(Ok(Made::Progress(line))) => yield line,
                Some(Ok(Made::Done(digest))) => break digest,
                Some(Err(e)) => {
                    yield json!({"error": e.message});
                    return;
                }
                None => {
                    yield json!({"error": STOPPED});
                    return;
                }
            }
            event = run.recv().await;
        };
        yield json!({"status": format!("creating new layer {digest}")});
        new.model_blob = digest;
        if let Err(e) = register(&state, &name, new, companions).await {
            yield json!({"error": e.message});
            return;
        }
        yield json!({"status": "writing manifest"});
        yield json!({"status": "success"});
    };
    Ok(ndjson_response(Body::from_stream(
        futures_util::StreamExt::map(lines, |line| {
            Ok::<_, std::convert::Infallible>(ndjson(&line))
        }),
    )))
}
