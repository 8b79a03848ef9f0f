//! Between the gRPC messages and the REST API's types: requests become the
//! Ollama API's JSON bodies (so they are checked, defaulted and limited
//! exactly as REST requests are), errors become statuses, and the reply's
//! pieces become stream messages.

use axum::http::StatusCode;
use mlxr_engine::TokenLogprob;
use serde_json::{json, Map, Value};
use tonic::Status;

use super::pb;
use crate::error::ApiError;
use crate::generation::Piece;
use crate::ollama::{ChatBody, GenerateBody};

/// The REST status's meaning as a gRPC code; the message is the same.
pub fn status(e: ApiError) -> Status {
    let message = e.message;
    match e.status {
        StatusCode::BAD_REQUEST | StatusCode::UNPROCESSABLE_ENTITY => {
            if e.code == Some("context_length_exceeded") {
                Status::resource_exhausted(message)
            } else {
                Status::invalid_argument(message)
            }
        }
        StatusCode::PAYLOAD_TOO_LARGE | StatusCode::TOO_MANY_REQUESTS => {
            Status::resource_exhausted(message)
        }
        StatusCode::UNAUTHORIZED => Status::unauthenticated(message),
        StatusCode::FORBIDDEN => Status::permission_denied(message),
        StatusCode::NOT_FOUND => Status::not_found(message),
        StatusCode::CONFLICT => Status::failed_precondition(message),
        StatusCode::SERVICE_UNAVAILABLE => Status::unavailable(message),
        StatusCode::REQUEST_TIMEOUT | StatusCode::GATEWAY_TIMEOUT => {
            Status::deadline_exceeded(message)
        }
        _ => Status::internal(message),
    }
}

fn invalid(message: String) -> Status {
    Status::invalid_argument(message)
}

/// A JSON text field (`json_schema`, `parameters_json`, `arguments_json`).
fn json_text(field: &str, text: &str) -> Result<Value, Status> {
    serde_json::from_str(text).map_err(|e| invalid(format!("{field} is not valid JSON: {e}")))
}

fn options(o: Option<pb::Options>) -> Value {
    let Some(o) = o else { return Value::Null };
    let mut m = Map::new();
    let mut put = |key: &str, v: Option<Value>| {
        if let Some(v) = v {
            m.insert(key.to_owned(), v);
        }
    };
    put("temperature", o.temperature.map(|v| json!(v)));
    put("top_k", o.top_k.map(|v| json!(v)));
    put("top_p", o.top_p.map(|v| json!(v)));
    put("min_p", o.min_p.map(|v| json!(v)));
    put("repeat_penalty", o.repeat_penalty.map(|v| json!(v)));
    put("repeat_last_n", o.repeat_last_n.map(|v| json!(v)));
    put("presence_penalty", o.presence_penalty.map(|v| json!(v)));
    put("frequency_penalty", o.frequency_penalty.map(|v| json!(v)));
    put("seed", o.seed.map(|v| json!(v)));
    put("num_predict", o.num_predict.map(|v| json!(v)));
    put("num_ctx", o.num_ctx.map(|v| json!(v)));
    if !o.stop.is_empty() {
        put("stop", Some(json!(o.stop)));
    }
    if let Some(s) = o.speculation {
        put("speculative.type", s.r#type.map(|v| json!(v)));
        put("speculative.n_max", s.n_max.map(|v| json!(v)));
        put("speculative.n_min", s.n_min.map(|v| json!(v)));
        put("speculative.p_min", s.p_min.map(|v| json!(v)));
        put("speculative.ngram_min", s.ngram_min.map(|v| json!(v)));
        put("speculative.ngram_max", s.ngram_max.map(|v| json!(v)));
        put("speculative.draft_length", s.draft_length.map(|v| json!(v)));
    }
    Value::Object(m)
}

/// The fields both requests share, into `body`: `format` as Ollama's
/// `format` (JSON) or MLXR's `grammar` extension.
fn common(
    body: &mut Map<String, Value>,
    o: Option<pb::Options>,
    format: Option<pb::Format>,
    keep_alive: Option<String>,
    logprobs: bool,
    top_logprobs: u32,
) -> Result<(), Status> {
    use pb::format::Kind;
    body.insert("stream".into(), json!(true));
    body.insert("options".into(), options(o));
    match format.and_then(|f| f.kind) {
        None | Some(Kind::JsonObject(false)) => {}
        Some(Kind::JsonObject(true)) => {
            body.insert("format".into(), json!("json"));
        }
        Some(Kind::JsonSchema(text)) => {
            body.insert("format".into(), json_text("format.json_schema", &text)?);
        }
        Some(Kind::Regex(text)) => {
            body.insert("grammar".into(), json!({"type": "regex", "value": text}));
        }
        Some(Kind::Lark(text)) => {
            body.insert("grammar".into(), json!({"type": "lark", "value": text}));
        }
    }
    if let Some(k) = keep_alive {
        body.insert("keep_alive".into(), json!(k));
    }
    body.insert("logprobs".into(), json!(logprobs));
    if top_logprobs > 0 {
        body.insert("top_logprobs".into(), json!(top_logprobs));
    }
    Ok(())
}

fn body<T: serde::de::DeserializeOwned>(m: Map<String, Value>) -> Result<T, Status> {
    serde_json::from_value(Value::Object(m)).map_err(|e| invalid(e.to_string()))
}

pub fn generate_body(r: pb::GenerateRequest) -> Result<GenerateBody, Status> {
    let mut m = Map::new();
    m.insert("model".into(), json!(r.model));
    m.insert("prompt".into(), json!(r.prompt));
    if let Some(system) = r.system {
        m.insert("system".into(), json!(system));
    }
    m.insert("raw".into(), json!(r.raw));
    common(
        &mut m,
        r.options,
        r.format,
        r.keep_alive,
        r.logprobs,
        r.top_logprobs,
    )?;
    body(m)
}

pub fn chat_body(r: pb::ChatRequest) -> Result<ChatBody, Status> {
    let messages = r
        .messages
        .into_iter()
        .enumerate()
        .map(|(i, msg)| {
            let calls = msg
                .tool_calls
                .into_iter()
                .map(|c| {
                    let field = format!("messages[{i}].tool_calls.arguments_json");
                    Ok(json!({
                        "id": c.id,
                        "function": {"name": c.name, "arguments": json_text(&field, &c.arguments_json)?},
                    }))
                })
                .collect::<Result<Vec<_>, Status>>()?;
            let mut v = json!({"role": msg.role, "content": msg.content});
            if !calls.is_empty() {
                v["tool_calls"] = json!(calls);
            }
            if let Some(id) = msg.tool_call_id {
                v["tool_call_id"] = json!(id);
            }
            if let Some(name) = msg.tool_name {
                v["tool_name"] = json!(name);
            }
            Ok(v)
        })
        .collect::<Result<Vec<_>, Status>>()?;
    let tools = r
        .tools
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            let parameters = if t.parameters_json.is_empty() {
                json!({"type": "object", "properties": {}})
            } else {
                json_text(&format!("tools[{i}].parameters_json"), &t.parameters_json)?
            };
            Ok(json!({"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": parameters,
            }}))
        })
        .collect::<Result<Vec<_>, Status>>()?;
    let mut m = Map::new();
    m.insert("model".into(), json!(r.model));
    m.insert("messages".into(), json!(messages));
    if !tools.is_empty() {
        m.insert("tools".into(), json!(tools));
    }
    if let Some(choice) = r.tool_choice {
        let choice = match choice.as_str() {
            "none" | "auto" | "required" => json!(choice),
            name => json!({"type": "function", "function": {"name": name}}),
        };
        m.insert("tool_choice".into(), choice);
    }
    if let Some(parallel) = r.parallel_tool_calls {
        m.insert("parallel_tool_calls".into(), json!(parallel));
    }
    common(
        &mut m,
        r.options,
        r.format,
        r.keep_alive,
        r.logprobs,
        r.top_logprobs,
    )?;
    body(m)
}

fn logprob(t: TokenLogprob) -> pb::TokenLogprob {
    pb::TokenLogprob {
        token: t.token,
        logprob: t.logprob,
    }
}

/// One piece of the reply as a stream message; an error ends the call.
pub fn response(piece: Piece, load_ms: f64) -> Result<pb::GenerateResponse, Status> {
    use pb::generate_response::Event;
    let event = match piece {
        Piece::Token {
            id,
            text,
            logprob: lp,
        } => {
            let (chosen, top) = match lp {
                Some((chosen, top)) => (
                    Some(logprob(chosen)),
                    top.into_iter().map(logprob).collect(),
                ),
                None => (None, Vec::new()),
            };
            Event::Token(pb::Token {
                id,
                text,
                logprob: chosen,
                top_logprobs: top,
            })
        }
        Piece::Text(text) => Event::Text(text),
        Piece::Call(c) => Event::ToolCall(pb::ToolCall {
            id: c.id,
            name: c.call.name,
            arguments_json: c.call.arguments.to_string(),
        }),
        Piece::Done {
            finish_reason,
            called,
            usage,
            timings,
        } => {
            let finish = match (called, finish_reason) {
                (true, _) => pb::FinishReason::ToolCalls,
                (false, mlxr_engine::FinishReason::Length) => pb::FinishReason::Length,
                (false, _) => pb::FinishReason::Stop,
            };
            let n = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
            Event::Done(pb::Done {
                finish_reason: finish.into(),
                usage: Some(pb::Usage {
                    prompt_tokens: n(usage.prompt_tokens),
                    completion_tokens: n(usage.completion_tokens),
                    cached_tokens: n(usage.cached_tokens),
                }),
                timings: Some(pb::Timings {
                    load_ms,
                    ttft_ms: timings.ttft_ms,
                    prompt_n: n(timings.prompt_n),
                    prompt_ms: timings.prompt_ms,
                    predicted_n: n(timings.predicted_n),
                    predicted_ms: timings.predicted_ms,
                    draft_n: n(timings.draft_n),
                    draft_n_accepted: n(timings.draft_n_accepted),
                }),
            })
        }
        Piece::Error(message) => return Err(Status::internal(message)),
    };
    Ok(pb::GenerateResponse { event: Some(event) })
}
