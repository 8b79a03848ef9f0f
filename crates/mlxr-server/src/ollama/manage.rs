//! Registry routes: `/api/pull`, `/api/create`, `/api/copy`,
//! `DELETE /api/delete` (blob uploads are in [`super::blobs`]).

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use mlxr_registry::{Digest, ModelName, NewModel, PullProgress, Registry, RegistryError};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;

use crate::catalog::{model_draft, resolve_draft, MODEL_DRAFT_PARAMETER};
use crate::error::{ApiError, OllamaError};
use crate::extract::JsonBody;
use crate::state::AppState;
use crate::wire::ndjson;

pub fn registry_error(e: RegistryError) -> ApiError {
    let status = match &e {
        RegistryError::PullRefused { .. } => Some(StatusCode::FORBIDDEN),
        RegistryError::BlobTooLarge { .. } => Some(StatusCode::PAYLOAD_TOO_LARGE),
        RegistryError::NoSpace { .. } => Some(StatusCode::INSUFFICIENT_STORAGE),
        _ => None,
    };
    if let Some(status) = status {
        ApiError::new(status, e.to_string())
    } else if e.is_not_found() {
        ApiError::not_found(e.to_string())
    } else if e.is_client_error() {
        ApiError::bad_request(e.to_string())
    } else {
        ApiError::internal(e.to_string())
    }
}

pub(super) fn model_name(s: &str) -> Result<ModelName, ApiError> {
    ModelName::parse(s).map_err(registry_error)
}

#[derive(Deserialize)]
pub struct PullBody {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    stream: Option<bool>,
}

/// Pulls a model (a default name, `hf.co/…`, an https URL; a local path on
/// the server or an http URL only where the daemon allows them), streaming
/// Ollama's progress lines. A source the daemon does not allow is a 403.
pub async fn pull(
    State(state): State<AppState>,
    JsonBody(body): JsonBody<PullBody>,
) -> Result<Response, OllamaError> {
    let spec = super::requested_model(body.model, body.name)?;
    let (rx, task) = start_pull(&state, &spec)?;
    if body.stream == Some(false) {
        // A dropped receiver reads as a cancelled pull: drain it until the
        // pull ends, so only a client that goes away cancels it.
        let mut rx = rx;
        while rx.recv().await.is_some() {}
        return match task.await {
            Ok(Ok(_)) => Ok(Json(json!({"status": "success"})).into_response()),
            Ok(Err(RegistryError::Cancelled)) => Err(ApiError::internal("pull cancelled").into()),
            Ok(Err(e)) => Err(registry_error(e).into()),
            Err(e) => Err(ApiError::internal(format!("pull panicked: {e}")).into()),
        };
    }
    let lines = async_stream::stream! {
        let mut rx = rx;
        while let Some(progress) = rx.recv().await {
            yield Ok::<_, std::convert::Infallible>(ndjson(&json!(progress)));
        }
        match task.await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => yield Ok(ndjson(&json!({"error": e.to_string()}))),
            Err(e) => yield Ok(ndjson(&json!({"error": format!("pull panicked: {e}")}))),
        }
    };
    Ok(ndjson_response(Body::from_stream(lines)))
}

/// A running pull: its progress, and its end. Dropping the receiver cancels
/// the pull (the registry can resume it).
pub type Pull = (
    mpsc::UnboundedReceiver<PullProgress>,
    tokio::task::JoinHandle<Result<ModelName, RegistryError>>,
);

/// Starts pulling `spec` on a blocking thread.
pub fn start_pull(state: &AppState, spec: &str) -> Result<Pull, ApiError> {
    let (source, name) = state.registry.resolve_pull(spec).map_err(registry_error)?;
    let registry = state.registry.clone();
    let (tx, rx) = mpsc::unbounded_channel::<PullProgress>();
    let task = tokio::task::spawn_blocking(move || {
        let progress_tx = tx.clone();
        let mut progress = |p: PullProgress| {
            let _ = progress_tx.send(p);
        };
        let cancelled = || tx.is_closed();
        registry
            .pull_with_cancel(&source, &name, &mut progress, &cancelled)
            .map(|_| name)
    });
    Ok((rx, task))
}

pub(super) fn ndjson_response(body: Body) -> Response {
    ([(header::CONTENT_TYPE, "application/x-ndjson")], body).into_response()
}

#[derive(Deserialize)]
pub struct CreateBody {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    from: Option<String>,
    #[serde(default)]
    files: Option<Map<String, Value>>,
    #[serde(default)]
    adapters: Option<Map<String, Value>>,
    #[serde(default)]
    template: Option<String>,
    #[serde(default)]
    system: Option<String>,
    #[serde(default)]
    parameters: Option<Map<String, Value>>,
    #[serde(default)]
    messages: Option<Vec<CreateMessage>>,
    #[serde(default)]
    license: Option<Value>,
    #[serde(default)]
    quantize: Option<String>,
    #[serde(default)]
    stream: Option<bool>,
}

#[derive(Deserialize)]
struct CreateMessage {
    role: String,
    content: String,
}

/// Creates a model from uploaded blobs (`files`) or an existing model
/// (`from`), with optional template, system prompt, parameters, messages
/// and license.
pub async fn create(
    State(state): State<AppState>,
    JsonBody(body): JsonBody<CreateBody>,
) -> Result<Response, OllamaError> {
    let name = model_name(&super::requested_model(
        body.model.clone(),
        body.name.clone(),
    )?)?;
    let quantize = body
        .quantize
        .as_deref()
        .map(str::parse::<mlxr_quantize::FileType>)
        .transpose()
        .map_err(|e| ApiError::bad_request(format!("quantize: {e}")))?;
    if body.adapters.as_ref().is_some_and(|a| !a.is_empty()) {
        return Err(ApiError::bad_request("adapters are not supported yet").into());
    }
    let mut status = vec![];
    let registry = state.registry.clone();
    let (model_blob, companions, base) = match (&body.files, &body.from) {
        (Some(files), _) if !files.is_empty() => {
            let mut uploaded = Vec::with_capacity(files.len());
            for (file, digest) in files {
                let digest =
                    Digest::parse(digest.as_str().unwrap_or_default()).map_err(registry_error)?;
                if !registry.has_blob(&digest) {
                    return Err(ApiError::bad_request(format!(
                        "blob {digest} for '{file}' was not uploaded"
                    ))
                    .into());
                }
                uploaded.push((file.clone(), digest));
            }
            let (model_blob, companions) = model_files(uploaded)?;
            status.push(format!("using existing layer {model_blob}"));
            (model_blob, companions, None)
        }
        (_, Some(from)) => {
            let from = model_name(from)?;
            let record = registry
                .get(&from)
                .map_err(registry_error)?
                .ok_or_else(|| ApiError::not_found(format!("model '{from}' not found")))?;
            status.push(format!("using existing layer {}", record.model_blob));
            let companions = record
                .files
                .iter()
                .map(|f| (f.path.clone(), f.digest.clone()))
                .collect();
            (record.model_blob.clone(), companions, Some(record))
        }
        _ => {
            return Err(
                ApiError::bad_request("give 'files' (uploaded blobs) or 'from' (a model)").into(),
            )
        }
    };
    let license = match &body.license {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Array(parts)) => Some(
            parts
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        Some(_) => {
            return Err(
                ApiError::bad_request("license must be a string or a list of strings").into(),
            )
        }
    };
    let new = NewModel {
        model_blob,
        template: body
            .template
            .clone()
            .or_else(|| base.as_ref().and_then(|b| b.template.clone())),
        system: body
            .system
            .clone()
            .or_else(|| base.as_ref().and_then(|b| b.system.clone())),
        parameters: body
            .parameters
            .clone()
            .or_else(|| base.as_ref().map(|b| b.parameters.clone()))
            .unwrap_or_default(),
        messages: match &body.messages {
            Some(m) => m
                .iter()
                .map(|m| (m.role.clone(), m.content.clone()))
                .collect(),
            None => base
                .as_ref()
                .map(|b| b.messages.clone())
                .unwrap_or_default(),
        },
        license: license.or_else(|| base.as_ref().and_then(|b| b.license.clone())),
    };
    check_model_draft(&state, &new.parameters)?;
    if let Some(t) = &new.template {
        mlxr_template::ChatTemplate::new(t, "", "")
            .map_err(|e| ApiError::bad_request(format!("template: {e}")))?;
    }
    if let Some(file_type) = quantize {
        let source = super::blob_run::Source {
            name: base.as_ref().map_or(&name, |b| &b.name).model().to_string(),
            model_blob: new.model_blob.clone(),
            files: companions,
        };
        let run = super::quantize::start(registry, source, file_type);
        return Ok(super::blob_run::create(state, name, new, run, body.stream).await?);
    }
    register(&state, &name, new, companions).await?;
    status.extend(["writing manifest".to_string(), "success".to_string()]);
    if body.stream == Some(false) {
        return Ok(Json(json!({"status": "success"})).into_response());
    }
    let lines: Vec<Result<Bytes, std::convert::Infallible>> = status
        .iter()
        .map(|s| Ok(ndjson(&json!({"status": s}))))
        .collect();
    Ok(ndjson_response(Body::from_stream(
        futures_util::stream::iter(lines),
    )))
}

/// Stores `new` under `name` and unloads an older model of that name.
pub(super) async fn register(
    state: &AppState,
    name: &ModelName,
    new: NewModel,
    companions: Vec<(String, Digest)>,
) -> Result<(), ApiError> {
    let registry = state.registry.clone();
    let created_name = name.clone();
    tokio::task::spawn_blocking(move || registry.create_with_files(&created_name, new, companions))
        .await
        .map_err(|e| ApiError::internal(format!("create panicked: {e}")))?
        .map_err(registry_error)?;
    state.models.unload(&name.to_string()).await;
    Ok(())
}

/// A draft model named in the parameters must exist now (it may still go
/// away later: loading the model then says so).
fn check_model_draft(state: &AppState, parameters: &Map<String, Value>) -> Result<(), ApiError> {
    let Some(given) = model_draft(parameters).map_err(ApiError::bad_request)? else {
        return Ok(());
    };
    resolve_draft(state.models.catalog().as_ref(), given)
        .map(|_| ())
        .map_err(|e| ApiError::bad_request(format!("{MODEL_DRAFT_PARAMETER}: {e}")))
}

/// Which uploaded file is the model: a GGUF file alone, or the weights of
/// a safetensors folder (`model.safetensors`, else the first shard) with the
/// folder's other files (shards, config, tokenizer) beside it.
fn model_files(
    mut files: Vec<(String, Digest)>,
) -> Result<(Digest, Vec<(String, Digest)>), ApiError> {
    let is_gguf = |f: &str| f.to_ascii_lowercase().ends_with(".gguf");
    if let Some((_, digest)) = files.iter().find(|(f, _)| is_gguf(f)) {
        if files.len() > 1 {
            return Err(ApiError::bad_request(
                "a GGUF model is one file; give it alone in 'files'",
            ));
        }
        return Ok((digest.clone(), Vec::new()));
    }
    files.sort();
    let weights = files
        .iter()
        .find(|(f, _)| f == "model.safetensors")
        .or_else(|| files.iter().find(|(f, _)| f.ends_with(".safetensors")))
        .map(|(f, d)| (f.clone(), d.clone()))
        .ok_or_else(|| {
            ApiError::bad_request("'files' has neither a .gguf nor a .safetensors file")
        })?;
    let companions = files
        .into_iter()
        .filter(|(f, _)| f != "model.safetensors")
        .collect();
    Ok((weights.1, companions))
}

#[derive(Deserialize)]
pub struct CopyBody {
    source: String,
    destination: String,
}

pub async fn copy(
    State(state): State<AppState>,
    JsonBody(body): JsonBody<CopyBody>,
) -> Result<StatusCode, OllamaError> {
    let (from, to) = (model_name(&body.source)?, model_name(&body.destination)?);
    let registry: Arc<Registry> = state.registry.clone();
    tokio::task::spawn_blocking(move || registry.copy(&from, &to))
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?
        .map_err(registry_error)?;
    Ok(StatusCode::OK)
}

#[derive(Deserialize)]
pub struct DeleteBody {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    name: Option<String>,
}

pub async fn delete(
    State(state): State<AppState>,
    JsonBody(body): JsonBody<DeleteBody>,
) -> Result<StatusCode, OllamaError> {
    let name = super::requested_model(body.model.clone(), body.name.clone())?;
    delete_model(&state, &name).await?;
    Ok(StatusCode::OK)
}

/// Unloads a registry model and deletes it (its blobs when no other model
/// uses them).
pub async fn delete_model(state: &AppState, name: &str) -> Result<(), ApiError> {
    let name = model_name(name)?;
    state.models.unload(&name.to_string()).await;
    let registry = state.registry.clone();
    tokio::task::spawn_blocking(move || registry.delete(&name))
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?
        .map_err(registry_error)
}
