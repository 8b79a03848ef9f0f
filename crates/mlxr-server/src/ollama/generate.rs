//! `POST /api/generate` and `POST /api/chat`: NDJSON streams by default.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::StreamExt;
use mlxr_engine::{
    ChatMessage, Constraint, GenerateRequest, LoadedModel, Prompt, Timings, TokenLogprob, Usage,
};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::options::{settings, Settings};
use crate::error::{ApiError, OllamaError};
use crate::extract::JsonBody;
use crate::generation::{finish_reason_str, pieces, submit, Piece};
use crate::limits::{self, at_most};
use crate::models::{Acquired, KeepAlive};
use crate::state::AppState;
use crate::structured;
use crate::tools::{history_calls, ReplyCall, ToolReader, ToolRequest};
use crate::wire::ndjson;

#[derive(Deserialize)]
pub struct GenerateBody {
    model: String,
    #[serde(default)]
    prompt: Option<String>,
    #[serde(default)]
    suffix: Option<String>,
    #[serde(default)]
    system: Option<String>,
    #[serde(default)]
    template: Option<String>,
    #[serde(default)]
    context: Option<Vec<u32>>,
    #[serde(default)]
    raw: bool,
    #[serde(flatten)]
    common: Common,
}

#[derive(Deserialize)]
pub struct ChatBody {
    model: String,
    #[serde(default)]
    messages: Vec<ChatBodyMessage>,
    #[serde(default)]
    tools: Option<Vec<Value>>,
    /// MLXR's extensions, as OpenAI takes them (Ollama lets the model decide).
    #[serde(default)]
    tool_choice: Option<Value>,
    #[serde(default)]
    parallel_tool_calls: Option<bool>,
    #[serde(default)]
    template: Option<String>,
    #[serde(flatten)]
    common: Common,
}

#[derive(Deserialize)]
struct ChatBodyMessage {
    role: String,
    #[serde(default)]
    content: String,
    #[serde(default)]
    images: Option<Vec<Value>>,
    /// An assistant turn's calls (arguments as objects).
    #[serde(default)]
    tool_calls: Option<Vec<Value>>,
    /// A tool result: the tool's name (Ollama's), or the call it answers.
    #[serde(default)]
    tool_name: Option<String>,
    #[serde(default)]
    tool_call_id: Option<String>,
}

/// Fields both endpoints take.
#[derive(Deserialize)]
struct Common {
    #[serde(default)]
    options: Option<Value>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    keep_alive: Option<Value>,
    #[serde(default)]
    format: Option<Value>,
    #[serde(default)]
    images: Option<Vec<Value>>,
    #[serde(default)]
    think: Option<Value>,
    #[serde(default)]
    logprobs: Option<bool>,
    #[serde(default)]
    top_logprobs: Option<usize>,
    /// MLXR's extension (see [`crate::structured::grammar`]).
    #[serde(default)]
    grammar: Option<Value>,
}

impl Common {
    fn check_unsupported(&self) -> Result<(), ApiError> {
        self.constraint()?;
        if self.images.as_ref().is_some_and(|i| !i.is_empty()) {
            return Err(ApiError::bad_request(
                "images are not supported: no vision models yet",
            ));
        }
        if matches!(self.think, Some(Value::Bool(true)) | Some(Value::String(_))) {
            return Err(ApiError::bad_request(
                "thinking is not supported by this model",
            ));
        }
        if let Some(k) = self.top_logprobs {
            at_most("top_logprobs", k, limits::MAX_TOP_LOGPROBS)?;
        }
        Ok(())
    }

    /// `format` or `grammar`, as the engine's constraint.
    fn constraint(&self) -> Result<Option<Constraint>, ApiError> {
        structured::only_one([
            ("format", structured::ollama_format(self.format.as_ref())?),
            ("grammar", structured::grammar(self.grammar.as_ref())?),
        ])
    }

    fn keep_alive(&self) -> Result<Option<KeepAlive>, ApiError> {
        super::keep_alive(&self.keep_alive)
    }

    /// The engine settings: the model's parameters, then the request's options.
    fn settings(&self, model_params: &Map<String, Value>) -> Result<Settings, ApiError> {
        settings(model_params, self.options.as_ref())
    }
}

impl GenerateBody {
    /// The engine settings for a model with `model_params`.
    pub fn settings(&self, model_params: &Map<String, Value>) -> Result<Settings, ApiError> {
        self.common.settings(model_params)
    }
}

impl ChatBody {
    /// The engine settings for a model with `model_params`.
    pub fn settings(&self, model_params: &Map<String, Value>) -> Result<Settings, ApiError> {
        self.common.settings(model_params)
    }

    /// `tools`, and `tool_choice` and `parallel_tool_calls` if given.
    fn tools(&self) -> Result<Option<ToolRequest>, ApiError> {
        ToolRequest::parse(
            self.tools.as_deref(),
            self.tool_choice.as_ref(),
            self.parallel_tool_calls,
        )
    }

    /// The conversation as chat templates read it.
    fn messages(&self) -> Result<Vec<ChatMessage>, ApiError> {
        self.messages
            .iter()
            .map(|m| {
                Ok(ChatMessage {
                    role: m.role.to_lowercase(),
                    content: m.content.clone(),
                    tool_calls: m.tool_calls.as_deref().map(history_calls).transpose()?,
                    tool_call_id: m.tool_call_id.clone(),
                    name: m.tool_name.clone(),
                })
            })
            .collect()
    }
}

/// The two endpoints differ only in how a chunk carries text.
#[derive(Clone, Copy)]
enum Shape {
    Generate,
    Chat,
}

impl Shape {
    fn chunk(self, model: &str, text: &str, done: bool) -> Value {
        let mut v = json!({"model": model, "created_at": now_rfc3339()});
        match self {
            Shape::Generate => v["response"] = json!(text),
            Shape::Chat => v["message"] = json!({"role": "assistant", "content": text}),
        }
        v["done"] = json!(done);
        v
    }
}

fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
}

/// A request ready for the engine, its model acquired: whoever runs it
/// releases the model when the reply ends (the gRPC API runs these too).
pub struct Prepared {
    pub acquired: Acquired,
    pub request: GenerateRequest,
    /// Reads tool calls out of the reply when the request has tools.
    pub reader: Option<ToolReader>,
    pub keep_alive: Option<KeepAlive>,
}

/// What `/api/generate` and `/api/chat` (and gRPC's Generate and Chat) do
/// with a request's body.
pub trait ReplyBody {
    /// What is empty in a request that only loads or unloads the model.
    const EMPTY: &'static str;

    /// Everything checked before a model is loaded; the request's keep-alive.
    fn check(&self) -> Result<Option<KeepAlive>, ApiError>;

    fn is_load_only(&self) -> bool;

    /// The engine request: the model acquired, the prompt templated.
    fn prepare(
        &self,
        state: &AppState,
        keep_alive: Option<KeepAlive>,
    ) -> impl Future<Output = Result<Prepared, ApiError>> + Send;
}

impl ReplyBody for GenerateBody {
    const EMPTY: &'static str = "prompt is empty";

    fn check(&self) -> Result<Option<KeepAlive>, ApiError> {
        self.common.check_unsupported()?;
        if self.suffix.as_deref().is_some_and(|s| !s.is_empty()) {
            return Err(ApiError::bad_request(
                "suffix (fill-in-the-middle) is not supported yet",
            ));
        }
        let template = self.template.as_deref().filter(|t| !t.is_empty());
        if self.raw && (self.system.is_some() || self.context.is_some() || template.is_some()) {
            return Err(ApiError::bad_request(
                "raw mode cannot be combined with system, template or context",
            ));
        }
        if let Some(context) = &self.context {
            at_most(
                "context (number of token ids)",
                context.len(),
                limits::MAX_PROMPT_TOKEN_IDS,
            )?;
        }
        self.common.keep_alive()
    }

    /// An empty prompt without `context` only loads or unloads the model.
    fn is_load_only(&self) -> bool {
        self.prompt.as_deref().unwrap_or_default().is_empty() && self.context.is_none()
    }

    /// The engine request: the model acquired, the prompt templated.
    async fn prepare(
        &self,
        state: &AppState,
        keep_alive: Option<KeepAlive>,
    ) -> Result<Prepared, ApiError> {
        let acquired = state.models.acquire(&self.model, keep_alive).await?;
        let settings = self.common.settings(&acquired.spec.parameters)?;
        let prompt = self.prompt.clone().unwrap_or_default();
        let system = self.system.clone().or_else(|| acquired.spec.system.clone());
        let engine_prompt = if self.raw {
            Prompt::Raw(prompt)
        } else {
            let mut messages = Vec::new();
            if let Some(system) = system {
                messages.push(message("system", &system));
            }
            messages.extend(acquired.spec.messages.iter().map(|(r, c)| message(r, c)));
            messages.push(message("user", &prompt));
            let template = self.template.clone().filter(|t| !t.is_empty());
            chat_prompt(
                acquired.engine.model(),
                template,
                messages,
                self.context.clone(),
            )
            .await?
        };
        let request = engine_request(engine_prompt, &settings, &self.common)?;
        Ok(Prepared {
            acquired,
            request,
            reader: None,
            keep_alive,
        })
    }
}

impl ReplyBody for ChatBody {
    const EMPTY: &'static str = "messages are empty";

    fn check(&self) -> Result<Option<KeepAlive>, ApiError> {
        self.common.check_unsupported()?;
        self.tools()?;
        if self
            .messages
            .iter()
            .any(|m| m.images.as_ref().is_some_and(|i| !i.is_empty()))
        {
            return Err(ApiError::bad_request(
                "images are not supported: no vision models yet",
            ));
        }
        at_most(
            "messages (number of messages)",
            self.messages.len(),
            limits::MAX_MESSAGES,
        )?;
        self.common.keep_alive()
    }

    /// No messages: the request only loads or unloads the model.
    fn is_load_only(&self) -> bool {
        self.messages.is_empty()
    }

    /// The engine request: the model acquired, the conversation templated,
    /// the tools applied.
    async fn prepare(
        &self,
        state: &AppState,
        keep_alive: Option<KeepAlive>,
    ) -> Result<Prepared, ApiError> {
        let acquired = state.models.acquire(&self.model, keep_alive).await?;
        let settings = self.common.settings(&acquired.spec.parameters)?;
        let mut messages = self.messages()?;
        // A system prompt (the chat's, else the model's), the model's MESSAGE
        // turns, then the chat.
        let has_system = messages[0].role == "system";
        let preset = acquired.spec.messages.iter().map(|(r, c)| message(r, c));
        messages.splice(usize::from(has_system)..usize::from(has_system), preset);
        if let (false, Some(system)) = (has_system, &acquired.spec.system) {
            messages.insert(0, message("system", system));
        }
        let template = self.template.clone().filter(|t| !t.is_empty());
        let prompt = chat_prompt(acquired.engine.model(), template, messages, None).await?;
        let mut request = engine_request(prompt, &settings, &self.common)?;
        let reader = match self.tools()? {
            Some(tools) => tools.apply(acquired.engine.model(), &mut request)?,
            None => None,
        };
        Ok(Prepared {
            acquired,
            request,
            reader,
            keep_alive,
        })
    }
}

pub async fn generate(
    State(state): State<AppState>,
    JsonBody(body): JsonBody<GenerateBody>,
) -> Result<Response, OllamaError> {
    let started = Instant::now();
    let keep_alive = body.check()?;
    if body.is_load_only() {
        return load_or_unload(&state, &body.model, keep_alive, Shape::Generate).await;
    }
    let prepared = body.prepare(&state, keep_alive).await?;
    respond(
        state,
        prepared,
        &body.common,
        Shape::Generate,
        started,
        !body.raw,
    )
    .await
}

pub async fn chat(
    State(state): State<AppState>,
    JsonBody(body): JsonBody<ChatBody>,
) -> Result<Response, OllamaError> {
    let started = Instant::now();
    let keep_alive = body.check()?;
    if body.is_load_only() {
        return load_or_unload(&state, &body.model, keep_alive, Shape::Chat).await;
    }
    let prepared = body.prepare(&state, keep_alive).await?;
    respond(state, prepared, &body.common, Shape::Chat, started, false).await
}

/// The prompt `messages` become: with the model's chat template, or the
/// request's own (`template`, Jinja like a Modelfile's TEMPLATE), after the
/// tokens of an earlier reply (`context`) when given. Templates run on a
/// blocking thread, within their fuel.
async fn chat_prompt(
    lm: &Arc<LoadedModel>,
    template: Option<String>,
    messages: Vec<ChatMessage>,
    context: Option<Vec<u32>>,
) -> Result<Prompt, ApiError> {
    if template.is_none() && context.is_none() {
        // The engine renders it when the request is submitted.
        return Ok(Prompt::Chat(messages));
    }
    let lm = lm.clone();
    tokio::task::spawn_blocking(move || {
        let text = match &template {
            Some(source) => lm.render_chat_with(source, &messages),
            None => lm.render_chat(&messages),
        }?;
        Ok::<_, mlxr_engine::EngineError>(match context {
            // Continue an earlier reply: its tokens, then this turn's.
            Some(mut ids) => {
                let bos = ids.is_empty();
                ids.extend(lm.tokenizer.encode(&text, bos, true));
                Prompt::Tokens(ids)
            }
            None => Prompt::Raw(text),
        })
    })
    .await
    .map_err(|e| ApiError::internal(format!("rendering the prompt panicked: {e}")))?
    .map_err(ApiError::from)
}

fn message(role: &str, content: &str) -> ChatMessage {
    ChatMessage::new(role, content)
}

fn engine_request(
    prompt: Prompt,
    s: &Settings,
    common: &Common,
) -> Result<GenerateRequest, ApiError> {
    let mut req = GenerateRequest::new(prompt);
    req.constraint = common.constraint()?;
    req.sampling = s.sampling.clone();
    if common.logprobs == Some(true) {
        req.sampling.logprobs = Some(common.top_logprobs.unwrap_or(0));
    }
    req.max_tokens = s.max_tokens;
    req.stop = s.stop.clone();
    req.max_context = s.num_ctx;
    req.speculation = s.speculation;
    Ok(req)
}

/// An empty prompt loads the model, or unloads it with `keep_alive: 0`.
async fn load_or_unload(
    state: &AppState,
    model: &str,
    keep_alive: Option<KeepAlive>,
    shape: Shape,
) -> Result<Response, OllamaError> {
    let reason = if keep_alive == Some(KeepAlive::UnloadNow) {
        state.models.resolve(model)?;
        state.models.unload(model).await;
        "unload"
    } else {
        state.models.acquire(model, keep_alive).await?;
        "load"
    };
    let mut v = shape.chunk(model, "", true);
    v["done_reason"] = json!(reason);
    Ok(Json(v).into_response())
}

fn logprobs_json(items: &[(TokenLogprob, Vec<TokenLogprob>)]) -> Value {
    let one = |t: &TokenLogprob| json!({"token": t.token, "logprob": t.logprob, "bytes": t.token.as_bytes()});
    items
        .iter()
        .map(|(c, top)| {
            let mut v = one(c);
            v["top_logprobs"] = top.iter().map(one).collect();
            v
        })
        .collect()
}

/// The final chunk's counters, in nanoseconds.
fn final_fields(v: &mut Value, started: Instant, load_ns: u128, usage: &Usage, t: &Timings) {
    let ns = |ms: f64| (ms * 1e6) as u64;
    v["total_duration"] = json!(started.elapsed().as_nanos() as u64);
    v["load_duration"] = json!(load_ns as u64);
    v["prompt_eval_count"] = json!(t.prompt_n);
    v["prompt_eval_duration"] = json!(ns(t.prompt_ms));
    v["eval_count"] = json!(usage.completion_tokens);
    v["eval_duration"] = json!(ns(t.predicted_ms));
    // Speculative decoding's counts, under llama-server's names.
    v["draft_n"] = json!(t.draft_n);
    v["draft_n_accepted"] = json!(t.draft_n_accepted);
}

async fn respond(
    state: AppState,
    prepared: Prepared,
    common: &Common,
    shape: Shape,
    started: Instant,
    with_context: bool,
) -> Result<Response, OllamaError> {
    let Prepared {
        acquired,
        request,
        reader,
        keep_alive,
    } = prepared;
    let stream = submit(&acquired.engine, request).await?;
    let prompt_tokens = stream.prompt_tokens().to_vec();
    let model = acquired.spec.name.clone();
    let load_ns = acquired.load_duration.as_nanos();
    let want_logprobs = common.logprobs == Some(true);

    if common.stream == Some(false) {
        let out = crate::generation::collect(stream, reader).await;
        state.models.release(&model, keep_alive).await;
        let out = out?;
        let mut v = shape.chunk(&model, &out.text, true);
        if !out.calls.is_empty() {
            v["message"]["tool_calls"] = out.calls.iter().map(tool_call_json).collect();
        }
        v["done_reason"] = json!(out.finish_reason.map(finish_reason_str));
        final_fields(&mut v, started, load_ns, &out.usage, &out.timings);
        if with_context {
            v["context"] = json!([prompt_tokens, out.tokens].concat());
        }
        if want_logprobs {
            v["logprobs"] = logprobs_json(&out.logprobs);
        }
        return Ok(Json(v).into_response());
    }

    let lines = async_stream::stream! {
        let mut pieces = std::pin::pin!(pieces(stream, reader));
        let mut generated = Vec::new();
        while let Some(piece) = pieces.next().await {
            let line = match piece {
                Piece::Token { id, text, logprob } => {
                    generated.push(id);
                    if text.is_empty() && !want_logprobs {
                        continue;
                    }
                    let mut v = shape.chunk(&model, &text, false);
                    if let (true, Some(lp)) = (want_logprobs, logprob) {
                        v["logprobs"] = logprobs_json(&[lp]);
                    }
                    v
                }
                Piece::Text(text) => shape.chunk(&model, &text, false),
                Piece::Call(call) => call_chunk(shape, &model, &call),
                // Ollama's done_reason stays `stop` after tool calls.
                Piece::Done { finish_reason, usage, timings, .. } => {
                    let mut v = shape.chunk(&model, "", true);
                    v["done_reason"] = json!(finish_reason_str(finish_reason));
                    final_fields(&mut v, started, load_ns, &usage, &timings);
                    if with_context {
                        v["context"] = json!([prompt_tokens.clone(), generated.clone()].concat());
                    }
                    v
                }
                Piece::Error(message) => json!({"error": message}),
            };
            yield Ok::<_, std::convert::Infallible>(ndjson(&line));
        }
        state.models.release(&model, keep_alive).await;
    };
    Ok((
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        Body::from_stream(lines),
    )
        .into_response())
}

/// One call in Ollama's shape (arguments as an object).
fn tool_call_json(c: &ReplyCall) -> Value {
    json!({"id": c.id, "function": {"index": c.index, "name": c.call.name, "arguments": c.call.arguments}})
}

/// A streamed chunk that carries one call, whole, as Ollama sends them.
fn call_chunk(shape: Shape, model: &str, call: &ReplyCall) -> Value {
    let mut v = shape.chunk(model, "", false);
    v["message"]["tool_calls"] = json!([tool_call_json(call)]);
    v
}
