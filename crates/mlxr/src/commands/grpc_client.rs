//! The CLI's gRPC transport (`MLXR_HOST=grpc://HOST:PORT` or
//! `grpc+unix:PATH`): the Ollama-API calls the commands make, as calls of
//! `mlxr.v1.Inference`. Bodies are the JSON the commands build for REST and
//! answers come back in the REST API's shape, so each command has one
//! implementation whatever the transport.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use mlxr_server::grpc::pb;
use mlxr_server::grpc::pb::inference_client::InferenceClient;
use serde_json::{json, Map, Value};
use tokio::runtime::Runtime;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status, Streaming};

use super::client::{ApiError, Lines};

pub struct GrpcClient {
    runtime: Arc<Runtime>,
    inner: InferenceClient<Channel>,
    api_key: Option<String>,
    /// The address as the user wrote it, for messages.
    display: String,
}

/// Where a `grpc` host points.
pub enum GrpcTarget {
    /// `host:port`
    Tcp(String),
    Unix(PathBuf),
}

impl GrpcTarget {
    /// `grpc://HOST:PORT` or `grpc+unix:PATH` (also `grpc+unix://PATH`).
    pub fn parse(host: &str) -> Option<GrpcTarget> {
        if let Some(path) = host.strip_prefix("grpc+unix:") {
            let path = path.strip_prefix("//").unwrap_or(path);
            return Some(GrpcTarget::Unix(PathBuf::from(path)));
        }
        let address = host.strip_prefix("grpc://")?.trim_end_matches('/');
        Some(GrpcTarget::Tcp(address.to_string()))
    }
}

fn connect(target: &GrpcTarget) -> Result<Channel> {
    let timeout = Duration::from_secs(5);
    Ok(match target {
        GrpcTarget::Tcp(address) => Endpoint::from_shared(format!("http://{address}"))
            .map_err(|e| anyhow!("grpc://{address}: {e}"))?
            .connect_timeout(timeout)
            .connect_lazy(),
        #[cfg(unix)]
        GrpcTarget::Unix(path) => {
            let path = path.clone();
            // The URI is not used: every connection goes to the socket.
            Endpoint::from_static("http://localhost")
                .connect_timeout(timeout)
                .connect_with_connector_lazy(tower::service_fn(move |_| {
                    let path = path.clone();
                    async move {
                        let stream = tokio::net::UnixStream::connect(path).await?;
                        Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
                    }
                }))
        }
        #[cfg(not(unix))]
        GrpcTarget::Unix(_) => bail!("Unix sockets need a Unix system"),
    })
}

impl GrpcClient {
    pub fn new(target: GrpcTarget, display: String, api_key: Option<String>) -> Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        // Endpoint's lazy channel spawns nothing until the first call, but
        // wants to be made inside a runtime.
        let channel = runtime.block_on(async { connect(&target) })?;
        Ok(GrpcClient {
            runtime: Arc::new(runtime),
            inner: InferenceClient::new(channel),
            api_key,
            display,
        })
    }

    fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        if let Some(key) = &self.api_key {
            if let Ok(value) = format!("Bearer {key}").parse() {
                request.metadata_mut().insert("authorization", value);
            }
        }
        request
    }

    /// A failed connection as the REST transport words it; the server's
    /// status as an [`ApiError`] with REST's status number.
    fn error(&self, status: Status) -> anyhow::Error {
        // A transport failure carries its cause; a status the server sent
        // carries none.
        if status.code() == Code::Unavailable && std::error::Error::source(&status).is_some() {
            return anyhow!(
                "could not connect to mlxr serve at {} (start it with `mlxr serve`)",
                self.display
            );
        }
        let http = match status.code() {
            Code::InvalidArgument => 400,
            Code::Unauthenticated => 401,
            Code::PermissionDenied => 403,
            Code::NotFound => 404,
            Code::FailedPrecondition => 409,
            Code::ResourceExhausted => 413,
            Code::Unavailable => 503,
            Code::DeadlineExceeded => 504,
            _ => 500,
        };
        ApiError {
            status: http,
            message: status.message().to_string(),
        }
        .into()
    }

    fn not_here(&self, what: &str) -> anyhow::Error {
        anyhow!(
            "{what} is not part of the gRPC API: use the REST address of the daemon \
             (MLXR_HOST=HOST:PORT or unix:PATH) instead of {}",
            self.display
        )
    }

    pub fn get(&self, path: &str) -> Result<Value> {
        let mut inner = self.inner.clone();
        match path {
            "/api/tags" => {
                let reply = self
                    .runtime
                    .block_on(inner.list_models(self.request(pb::ListModelsRequest {})));
                let models = reply.map_err(|s| self.error(s))?.into_inner().models;
                Ok(json!({"models": models.into_iter().map(|m| json!({
                    "name": m.name, "model": m.name, "size": m.size, "digest": m.digest,
                    "modified_at": m.modified_at, "details": details(m.details),
                })).collect::<Vec<_>>()}))
            }
            "/api/ps" => {
                let reply = self
                    .runtime
                    .block_on(inner.list_running(self.request(pb::ListRunningRequest {})));
                let models = reply.map_err(|s| self.error(s))?.into_inner().models;
                Ok(json!({"models": models.into_iter().map(|m| json!({
                    "name": m.name, "model": m.name, "size": m.size, "digest": m.digest,
                    "details": details(m.details), "expires_at": m.expires_at,
                    "context_length": m.context_length, "device": m.device,
                })).collect::<Vec<_>>()}))
            }
            _ => Err(self.not_here(&format!("GET {path}"))),
        }
    }

    pub fn post(&self, path: &str, body: &Value) -> Result<Value> {
        let mut inner = self.inner.clone();
        let model = || body["model"].as_str().unwrap_or_default().to_string();
        match path {
            "/api/show" => {
                let request = pb::ShowModelRequest {
                    model: model(),
                    verbose: body["verbose"].as_bool().unwrap_or(false),
                };
                let reply = self
                    .runtime
                    .block_on(inner.show_model(self.request(request)))
                    .map_err(|s| self.error(s))?
                    .into_inner();
                let model_info: Value =
                    serde_json::from_str(&reply.model_info_json).unwrap_or(Value::Null);
                Ok(json!({
                    "modelfile": reply.modelfile, "parameters": reply.parameters,
                    "template": reply.template, "system": reply.system, "license": reply.license,
                    "details": details(reply.details), "capabilities": reply.capabilities,
                    "model_info": model_info, "modified_at": reply.modified_at,
                }))
            }
            "/api/embed" => {
                let input = match &body["input"] {
                    Value::String(s) => vec![s.clone()],
                    Value::Array(items) => items
                        .iter()
                        .map(|i| i.as_str().map(str::to_string))
                        .collect::<Option<_>>()
                        .ok_or_else(|| anyhow!("input: expected strings"))?,
                    _ => bail!("input: expected a string or an array of strings"),
                };
                let request = pb::EmbedRequest {
                    model: model(),
                    input,
                    ..Default::default()
                };
                let reply = self
                    .runtime
                    .block_on(inner.embed(self.request(request)))
                    .map_err(|s| self.error(s))?
                    .into_inner();
                let embeddings: Vec<_> = reply.embeddings.into_iter().map(|e| e.values).collect();
                Ok(json!({"model": reply.model, "embeddings": embeddings,
                          "prompt_eval_count": reply.prompt_tokens}))
            }
            // `mlxr stop`: a load-only generate with keep_alive 0.
            "/api/generate" if is_unload(body) => {
                let request = pb::UnloadModelRequest { model: model() };
                self.runtime
                    .block_on(inner.unload_model(self.request(request)))
                    .map_err(|s| self.error(s))?;
                Ok(json!({"model": model(), "done": true, "done_reason": "unload"}))
            }
            _ => Err(self.not_here(&format!("POST {path}"))),
        }
    }

    pub fn delete(&self, path: &str, body: &Value) -> Result<()> {
        if path != "/api/delete" {
            return Err(self.not_here(&format!("DELETE {path}")));
        }
        let request = pb::DeleteModelRequest {
            model: body["model"].as_str().unwrap_or_default().to_string(),
        };
        let mut inner = self.inner.clone();
        self.runtime
            .block_on(inner.delete_model(self.request(request)))
            .map_err(|s| self.error(s))?;
        Ok(())
    }

    /// The streaming calls, answered as REST's NDJSON lines would be.
    pub fn post_stream(&self, path: &str, body: &Value) -> Result<Lines> {
        let mut inner = self.inner.clone();
        match path {
            "/api/pull" => {
                let request = pb::PullModelRequest {
                    model: body["model"].as_str().unwrap_or_default().to_string(),
                };
                let stream = self
                    .runtime
                    .block_on(inner.pull_model(self.request(request)))
                    .map_err(|s| self.error(s))?
                    .into_inner();
                Ok(self.lines(stream, |p: pb::PullProgress| {
                    let mut line = json!({"status": p.status});
                    if !p.digest.is_empty() {
                        line["digest"] = json!(p.digest);
                        line["total"] = json!(p.total);
                        line["completed"] = json!(p.completed);
                    }
                    line
                }))
            }
            "/api/chat" => {
                let started = Instant::now();
                let request = chat_request(body)?;
                let stream = self
                    .runtime
                    .block_on(inner.chat(self.request(request)))
                    .map_err(|s| self.error(s))?
                    .into_inner();
                Ok(self.lines(stream, move |r: pb::GenerateResponse| chat_line(r, started)))
            }
            _ => Err(self.not_here(&format!("POST {path}"))),
        }
    }

    /// The `HEAD` of a blob (uploads are REST only).
    pub fn not_for_uploads(&self) -> anyhow::Error {
        self.not_here("uploading a model (blobs and /api/create)")
    }

    fn lines<T: Send + 'static>(
        &self,
        stream: Streaming<T>,
        line: impl FnMut(T) -> Value + 'static,
    ) -> Lines {
        Box::new(GrpcLines {
            runtime: self.runtime.clone(),
            stream,
            line,
            display: self.display.clone(),
            done: false,
        })
    }
}

/// A server stream as an iterator of REST-shaped lines; an error status
/// ends it with the server's message.
struct GrpcLines<T, F> {
    runtime: Arc<Runtime>,
    stream: Streaming<T>,
    line: F,
    display: String,
    done: bool,
}

impl<T, F: FnMut(T) -> Value> Iterator for GrpcLines<T, F> {
    type Item = Result<Value>;

    fn next(&mut self) -> Option<Result<Value>> {
        if self.done {
            return None;
        }
        match self.runtime.block_on(self.stream.message()) {
            Ok(Some(message)) => Some(Ok((self.line)(message))),
            Ok(None) => None,
            Err(status) => {
                self.done = true;
                let message = status.message();
                Some(Err(if message.is_empty() {
                    anyhow!("{}: {status}", self.display)
                } else {
                    anyhow!("{message}")
                }))
            }
        }
    }
}

fn details(d: Option<pb::ModelDetails>) -> Value {
    let d = d.unwrap_or_default();
    json!({"format": d.format, "family": d.family, "parameter_size": d.parameter_size,
           "quantization_level": d.quantization_level})
}

fn is_unload(body: &Value) -> bool {
    let zero = match &body["keep_alive"] {
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.trim_end_matches(char::is_alphabetic) == "0",
        _ => false,
    };
    zero && body.get("prompt").is_none()
}

/// Ollama's `keep_alive` (seconds as a number, or a duration string).
fn keep_alive(v: &Value) -> Option<String> {
    match v {
        Value::Number(n) => Some(format!("{n}s")),
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// The chat body the CLI builds (`remote_chat.rs`) as a `ChatRequest`.
/// Anything it cannot carry is an error rather than silently dropped.
fn chat_request(body: &Value) -> Result<pb::ChatRequest> {
    let mut messages = Vec::new();
    for m in body["messages"].as_array().into_iter().flatten() {
        let text = |k: &str| m[k].as_str().map(str::to_string);
        let tool_calls = m["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| pb::ToolCall {
                id: c["id"].as_str().unwrap_or_default().to_string(),
                name: c["function"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                arguments_json: match &c["function"]["arguments"] {
                    Value::String(s) => s.clone(),
                    v => v.to_string(),
                },
            })
            .collect();
        messages.push(pb::Message {
            role: text("role").unwrap_or_default(),
            content: text("content").unwrap_or_default(),
            tool_calls,
            tool_call_id: text("tool_call_id"),
            tool_name: text("tool_name"),
        });
    }
    let tools = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            let f = &t["function"];
            pb::Tool {
                name: f["name"].as_str().unwrap_or_default().to_string(),
                description: f["description"].as_str().unwrap_or_default().to_string(),
                parameters_json: if f["parameters"].is_null() {
                    String::new()
                } else {
                    f["parameters"].to_string()
                },
            }
        })
        .collect();
    Ok(pb::ChatRequest {
        model: body["model"].as_str().unwrap_or_default().to_string(),
        messages,
        tools,
        options: options(body["options"].as_object())?,
        keep_alive: keep_alive(&body["keep_alive"]),
        ..Default::default()
    })
}

fn options(o: Option<&Map<String, Value>>) -> Result<Option<pb::Options>> {
    let Some(o) = o else { return Ok(None) };
    let mut out = pb::Options::default();
    let mut spec = pb::Speculation::default();
    let f32_of = |v: &Value| v.as_f64().map(|v| v as f32);
    let i32_of = |v: &Value| v.as_i64().and_then(|v| i32::try_from(v).ok());
    let string_of = |v: &Value| v.as_str().map(str::to_string);
    for (key, v) in o {
        match key.as_str() {
            "temperature" => out.temperature = f32_of(v),
            "top_k" => out.top_k = i32_of(v),
            "top_p" => out.top_p = f32_of(v),
            "min_p" => out.min_p = f32_of(v),
            "repeat_penalty" => out.repeat_penalty = f32_of(v),
            "repeat_last_n" => out.repeat_last_n = i32_of(v),
            "presence_penalty" => out.presence_penalty = f32_of(v),
            "frequency_penalty" => out.frequency_penalty = f32_of(v),
            "seed" => out.seed = v.as_i64(),
            "num_predict" => out.num_predict = i32_of(v),
            "num_ctx" => out.num_ctx = i32_of(v),
            "stop" => {
                out.stop = v
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            }
            "speculative.type" => spec.r#type = string_of(v),
            "speculative.n_max" => spec.n_max = i32_of(v),
            "speculative.n_min" => spec.n_min = i32_of(v),
            "speculative.p_min" => spec.p_min = f32_of(v),
            "speculative.draft_length" => spec.draft_length = string_of(v),
            other => bail!("the option {other} cannot be sent over gRPC"),
        }
    }
    if spec != pb::Speculation::default() {
        out.speculation = Some(spec);
    }
    Ok(Some(out))
}

/// One stream message as REST's `/api/chat` line.
fn chat_line(r: pb::GenerateResponse, started: Instant) -> Value {
    use pb::generate_response::Event;
    let content =
        |text: String| json!({"message": {"role": "assistant", "content": text}, "done": false});
    match r.event {
        Some(Event::Token(t)) => content(t.text),
        Some(Event::Text(text)) => content(text),
        Some(Event::ToolCall(c)) => {
            let arguments: Value =
                serde_json::from_str(&c.arguments_json).unwrap_or(Value::String(c.arguments_json));
            json!({"message": {"role": "assistant", "content": "", "tool_calls": [
                {"id": c.id, "function": {"name": c.name, "arguments": arguments}}
            ]}, "done": false})
        }
        Some(Event::Done(d)) => {
            let reason = match d.finish_reason() {
                pb::FinishReason::Length => "length",
                _ => "stop",
            };
            let t = d.timings.unwrap_or_default();
            let ns = |ms: f64| (ms * 1e6) as u64;
            json!({
                "message": {"role": "assistant", "content": ""},
                "done": true,
                "done_reason": reason,
                "total_duration": started.elapsed().as_nanos() as u64,
                "load_duration": ns(t.load_ms),
                "prompt_eval_count": t.prompt_n,
                "prompt_eval_duration": ns(t.prompt_ms),
                "eval_count": t.predicted_n,
                "eval_duration": ns(t.predicted_ms),
                "draft_n": t.draft_n,
                "draft_n_accepted": t.draft_n_accepted,
            })
        }
        None => content(String::new()),
    }
}
