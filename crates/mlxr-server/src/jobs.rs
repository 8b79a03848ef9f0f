//! Quantize and convert jobs that outlive the request that starts them (the
//! web UI's models page), behind the API key like the rest:
//!
//! - `POST /api/mlxr/jobs` with `kind: "quantize"` (the default) and
//!   `/api/create`'s body (`model`, `from` or `files`, `quantize`, ...;
//!   `quantize` required), or `kind: "convert"` with `model`, `from` (a
//!   folder model) and `outtype` (as `mlxr convert`'s; `auto` by default):
//!   202 with the job. The run is `/api/create`'s own (same checks, same
//!   progress lines, the model registered only at its end; a convert runs
//!   the same way, [`crate::ollama::convert`]); an error before it starts
//!   is the answer.
//! - `GET /api/mlxr/jobs`: every job of this daemon's life, newest first
//!   (the last [`KEPT`]); `GET /api/mlxr/jobs/{id}`: one.
//! - `DELETE /api/mlxr/jobs/{id}`: cancels a running job (nothing is
//!   registered); 409 once it has finished or is registering its model.
//!
//! A job: `{id, kind, model, quantize (or outtype), status:
//! running|registering|success|error|cancelled, progress: the last progress
//! line (status, completed, total), error?, started_at}`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio::task::AbortHandle;

use crate::error::{ApiError, OllamaError};
use crate::extract::JsonBody;
use crate::ollama::{convert, manage};
use crate::state::AppState;

/// Finished jobs beyond this many are forgotten, oldest first.
pub const KEPT: usize = 64;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/mlxr/jobs", get(list).post(start))
        .route("/api/mlxr/jobs/{id}", get(show).delete(cancel))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Running,
    /// The model's blob is written and being registered: too late to cancel.
    Registering,
    Success,
    Error,
    Cancelled,
}

impl Status {
    fn is_final(self) -> bool {
        !matches!(self, Status::Running | Status::Registering)
    }

    fn name(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Registering => "registering",
            Status::Success => "success",
            Status::Error => "error",
            Status::Cancelled => "cancelled",
        }
    }
}

/// What a job makes, and the type it makes it in.
#[derive(Clone, Debug)]
enum Kind {
    /// A GGUF model quantized to this type (`quantize`).
    Quantize(String),
    /// A folder model converted to GGUF of this out type (`outtype`).
    Convert(String),
}

impl Kind {
    /// The request's `kind` (`quantize` when absent) and its type field.
    fn of(body: &Value) -> Result<Kind, ApiError> {
        let field = |name: &str| body.get(name).and_then(Value::as_str).map(str::to_string);
        match body.get("kind").filter(|k| !k.is_null()).map(Value::as_str) {
            None | Some(Some("quantize")) => {
                field("quantize").map(Kind::Quantize).ok_or_else(|| {
                    ApiError::bad_request(
                        "a job needs 'quantize' (e.g. \"q4_K_M\"), or 'kind': \"convert\"",
                    )
                })
            }
            Some(Some("convert")) => Ok(Kind::Convert(
                field("outtype").unwrap_or_else(|| "auto".into()),
            )),
            Some(other) => Err(ApiError::bad_request(format!(
                "unknown job kind {}; valid: quantize, convert",
                other.map_or_else(|| body["kind"].to_string(), |k| format!("'{k}'"))
            ))),
        }
    }

    /// `kind`, and the field naming the type made with its value.
    fn fields(&self) -> (&'static str, &'static str, &str) {
        match self {
            Kind::Quantize(t) => ("quantize", "quantize", t),
            Kind::Convert(t) => ("convert", "outtype", t),
        }
    }
}

struct Job {
    id: u64,
    model: String,
    kind: Kind,
    status: Status,
    progress: Value,
    error: Option<String>,
    started_at: String,
    task: Option<AbortHandle>,
}

impl Job {
    fn json(&self) -> Value {
        let (kind, type_field, made_type) = self.kind.fields();
        let mut j = json!({
            "id": self.id.to_string(),
            "kind": kind,
            "model": self.model,
            "status": self.status.name(),
            "progress": self.progress,
            "started_at": self.started_at,
        });
        j[type_field] = json!(made_type);
        if let Some(e) = &self.error {
            j["error"] = json!(e);
        }
        j
    }
}

/// The daemon's jobs (a field of [`AppState`]).
#[derive(Default)]
pub struct Jobs {
    next: AtomicU64,
    jobs: Mutex<VecDeque<Job>>,
}

impl Jobs {
    fn with<R>(&self, id: u64, f: impl FnOnce(&mut Job) -> R) -> Option<R> {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        jobs.iter_mut().find(|j| j.id == id).map(f)
    }

    fn insert(&self, job: Job) {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        jobs.push_front(job);
        while jobs.len() > KEPT {
            match jobs.iter().rposition(|j| j.status.is_final()) {
                Some(i) => drop(jobs.remove(i)),
                None => break,
            }
        }
    }

    /// A progress line of job `id`: the last one kept, an error ends it.
    fn record(&self, id: u64, line: Value) {
        self.with(id, |job| {
            if job.status == Status::Cancelled {
                return;
            }
            if let Some(e) = line.get("error").and_then(Value::as_str) {
                job.status = Status::Error;
                job.error = Some(e.to_string());
            } else if line["status"] == "success" {
                job.status = Status::Success;
            } else if line["status"]
                .as_str()
                .is_some_and(|s| s.starts_with("creating new layer"))
            {
                job.status = Status::Registering;
            }
            job.progress = line;
        });
    }

    /// The stream ended: a job that said nothing final failed.
    fn finish(&self, id: u64) {
        self.with(id, |job| {
            job.task = None;
            if !job.status.is_final() {
                job.status = Status::Error;
                job.error = Some("the run stopped without a result".into());
            }
        });
    }
}

fn id_of(id: &str) -> Result<u64, ApiError> {
    id.parse()
        .map_err(|_| ApiError::not_found(format!("job '{id}' not found")))
}

fn not_found(id: u64) -> ApiError {
    ApiError::not_found(format!("job '{id}' not found"))
}

async fn start(
    State(state): State<AppState>,
    JsonBody(mut body): JsonBody<Value>,
) -> Result<(StatusCode, Json<Value>), OllamaError> {
    let kind = Kind::of(&body)?;
    let model = body
        .get("model")
        .or_else(|| body.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    body["stream"] = json!(true);
    let invalid = |e: serde_json::Error| ApiError::bad_request(format!("invalid request: {e}"));
    let response = match kind {
        Kind::Quantize(_) => {
            let request = serde_json::from_value(body).map_err(invalid)?;
            manage::create(State(state.clone()), JsonBody(request)).await?
        }
        Kind::Convert(_) => {
            let request = serde_json::from_value(body).map_err(invalid)?;
            convert::create(state.clone(), request).await?
        }
    };
    let id = state.jobs.next.fetch_add(1, Ordering::Relaxed) + 1;
    state.jobs.insert(Job {
        id,
        model,
        kind,
        status: Status::Running,
        progress: json!({"status": "starting"}),
        error: None,
        started_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        task: None,
    });
    let jobs = state.clone();
    let task = tokio::spawn(async move {
        let mut body = response.into_body().into_data_stream();
        let mut pending = Vec::new();
        while let Some(chunk) = body.next().await {
            let Ok(chunk) = chunk else { break };
            pending.extend_from_slice(&chunk);
            while let Some(end) = pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                if let Ok(line) = serde_json::from_slice::<Value>(&line) {
                    jobs.jobs.record(id, line);
                }
            }
        }
        jobs.jobs.finish(id);
    });
    // The task may be done already: then it has no handle to keep.
    state.jobs.with(id, |job| {
        if !task.is_finished() {
            job.task = Some(task.abort_handle());
        }
    });
    let job = state
        .jobs
        .with(id, |job| job.json())
        .ok_or_else(|| not_found(id))?;
    Ok((StatusCode::ACCEPTED, Json(job)))
}

async fn list(State(state): State<AppState>) -> Json<Value> {
    let jobs = state.jobs.jobs.lock().unwrap_or_else(|e| e.into_inner());
    Json(json!({"jobs": jobs.iter().map(Job::json).collect::<Vec<_>>()}))
}

async fn show(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, OllamaError> {
    let id = id_of(&id)?;
    Ok(Json(
        state
            .jobs
            .with(id, |job| job.json())
            .ok_or_else(|| not_found(id))?,
    ))
}

async fn cancel(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, OllamaError> {
    let id = id_of(&id)?;
    let cancelled = state
        .jobs
        .with(id, |job| {
            if job.status != Status::Running {
                return Err(ApiError::new(
                    StatusCode::CONFLICT,
                    format!("job {id} is {}: nothing to cancel", job.status.name()),
                ));
            }
            // Dropping the run's stream stops the quantizer or converter;
            // its output is never registered.
            if let Some(task) = job.task.take() {
                task.abort();
            }
            job.status = Status::Cancelled;
            Ok(job.json())
        })
        .ok_or_else(|| not_found(id))??;
    Ok(Json(cancelled))
}
