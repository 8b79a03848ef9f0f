//! A model made by a run that writes new blobs (a quantize or a convert: a
//! GGUF file, or a folder's files): the run works on a blocking thread in
//! the registry's scratch folder, sends progress lines and then what it
//! stored; [`create`] streams them and registers the model only at the
//! end. Dropping the receiver (a client that goes away, a cancelled job)
//! stops the run and nothing is stored.

use std::path::{Path, PathBuf};

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use axum::Json;
use mlxr_registry::{Digest, ModelName, ModelRecord, NewModel, Registry};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::manage::{ndjson_response, register, registry_error};
use crate::catalog::link_model_files;
use crate::error::ApiError;
use crate::state::AppState;
use crate::wire::ndjson;

/// What a run reports: progress lines, then the model's new blobs.
pub enum Made {
    Progress(Value),
    Done(Stored),
}

/// A new model's blobs: its weights, and a folder's other files by name.
pub struct Stored {
    pub model_blob: Digest,
    pub files: Vec<(String, Digest)>,
}

pub type Run = mpsc::Receiver<Result<Made, ApiError>>;

/// Starts `work` on a blocking thread: it gets a progress callback (false
/// once nobody listens: stop) and returns the new blobs.
pub fn start(
    work: impl FnOnce(&mut dyn FnMut(Value) -> bool) -> Result<Stored, ApiError> + Send + 'static,
) -> Run {
    let (tx, rx) = mpsc::channel(16);
    tokio::task::spawn_blocking(move || {
        let mut progress = |line: Value| tx.blocking_send(Ok(Made::Progress(line))).is_ok();
        let result = work(&mut progress);
        let _ = tx.blocking_send(result.map(Made::Done));
    });
    rx
}

/// The model a run reads: its weights blob, a folder's other files by name,
/// and the name a folder of them gets (the GGUF's `general.name` comes from
/// it when config.json names no Hub id, as for `mlxr convert NAME/ OUT.gguf`).
pub struct Source {
    pub name: String,
    pub model_blob: Digest,
    pub files: Vec<(String, Digest)>,
}

impl Source {
    pub fn of(record: &ModelRecord) -> Source {
        Source {
            name: record.name.model().to_string(),
            model_blob: record.model_blob.clone(),
            files: record
                .files
                .iter()
                .map(|f| (f.path.clone(), f.digest.clone()))
                .collect(),
        }
    }

    /// A GGUF file is one blob; a folder has its other files beside it.
    pub fn is_folder(&self) -> bool {
        !self.files.is_empty()
    }

    /// The source as a folder of links to its blobs in `scratch` (under
    /// `source/`: its name never meets the run's output files).
    pub fn folder_in(&self, registry: &Registry, scratch: &Path) -> Result<PathBuf, ApiError> {
        let folder = scratch.join("source").join(&self.name);
        link_model_files(registry, &self.model_blob, &self.files, &folder)
            .map_err(ApiError::internal)?;
        Ok(folder)
    }
}

/// A scratch folder under the registry's `tmp/`, removed when dropped (its
/// output is a blob by then, or the run failed).
pub fn scratch(registry: &Registry, prefix: &str) -> Result<tempfile::TempDir, ApiError> {
    let dir = registry.home().join("tmp");
    std::fs::create_dir_all(&dir)
        .and_then(|()| tempfile::Builder::new().prefix(prefix).tempdir_in(&dir))
        .map_err(|e| ApiError::internal(format!("{}: {e}", dir.display())))
}

/// The GGUF file a run wrote, stored as the model's blob.
pub fn store_file(registry: &Registry, path: &Path) -> Result<Stored, ApiError> {
    Ok(Stored {
        model_blob: put(registry, path)?,
        files: Vec::new(),
    })
}

/// The folder a run wrote, stored as blobs: `model.safetensors` the
/// weights, the other files (config, tokenizer, template) beside them.
pub fn store_folder(registry: &Registry, dir: &Path) -> Result<Stored, ApiError> {
    let unreadable = |e: std::io::Error| ApiError::internal(format!("{}: {e}", dir.display()));
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(unreadable)? {
        let entry = entry.map_err(unreadable)?;
        if entry.file_type().map_err(unreadable)?.is_file() {
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    names.sort();
    let mut model_blob = None;
    let mut files = Vec::new();
    for name in names {
        let digest = put(registry, &dir.join(&name))?;
        if name == "model.safetensors" {
            model_blob = Some(digest);
        } else {
            files.push((name, digest));
        }
    }
    let model_blob = model_blob
        .ok_or_else(|| ApiError::internal(format!("{} has no model.safetensors", dir.display())))?;
    Ok(Stored { model_blob, files })
}

fn put(registry: &Registry, path: &Path) -> Result<Digest, ApiError> {
    let mut file = std::fs::File::open(path)
        .map_err(|e| ApiError::internal(format!("reading the new model: {e}")))?;
    registry.put_blob(&mut file, None).map_err(registry_error)
}

/// `/api/create`'s answer for a model whose blobs `run` makes: its progress
/// streamed (or awaited with `stream: false`), then `creating new layer`,
/// the model registered as `new` on the blobs, `success`. An error before
/// the first progress line (a source the run cannot read) is the answer's
/// status.
pub async fn create(
    state: AppState,
    name: ModelName,
    mut new: NewModel,
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
        let stored = loop {
            if let Made::Done(stored) = event {
                break stored;
            }
            event = run
                .recv()
                .await
                .ok_or_else(|| ApiError::internal(STOPPED))??;
        };
        new.model_blob = stored.model_blob;
        register(&state, &name, new, stored.files).await?;
        return Ok(Json(json!({"status": "success"})).into_response());
    }
    let lines = async_stream::stream! {
        let mut event: Option<Result<Made, ApiError>> = Some(Ok(first));
        let stored = loop {
            match event {
                Some(Ok(Made::Progress(line))) => yield line,
                Some(Ok(Made::Done(stored))) => break stored,
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
        yield json!({"status": format!("creating new layer {}", stored.model_blob)});
        new.model_blob = stored.model_blob;
        if let Err(e) = register(&state, &name, new, stored.files).await {
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
