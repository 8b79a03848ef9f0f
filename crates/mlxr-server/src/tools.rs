//! Tool calling over both APIs: a request's tools become the chat
//! template's `tools` (or a system message for templates without them) and,
//! for `tool_choice` required or named, a constraint; the model's output is
//! read back into calls ([`ToolCallParser`]), which each API writes in its
//! own shape.

use mlxr_engine::{ChatMessage, GenerateRequest, LoadedModel, Prompt};
use mlxr_structured::tools::{
    call_grammar, Parsed, ToolCall, ToolCallParser, ToolChoice, ToolFormat, ToolSpec,
};
use rand::Rng;
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::limits::{self, at_most};

/// The tools of one request and what it asks of them.
pub struct ToolRequest {
    specs: Vec<ToolSpec>,
    choice: ToolChoice,
    /// More than one call per reply (OpenAI's `parallel_tool_calls`).
    parallel: bool,
}

impl ToolRequest {
    /// `tools`, `tool_choice` and `parallel_tool_calls` as OpenAI (and,
    /// for `tools`, Ollama) send them; `None` without tools.
    pub fn parse(
        tools: Option<&[Value]>,
        choice: Option<&Value>,
        parallel: Option<bool>,
    ) -> Result<Option<ToolRequest>, ApiError> {
        let tools = tools.unwrap_or_default();
        at_most("tools (number of tools)", tools.len(), limits::MAX_TOOLS)?;
        let specs = tools
            .iter()
            .enumerate()
            .map(|(i, t)| {
                ToolSpec::from_json(t)
                    .map_err(|e| ApiError::bad_request(format!("tools[{i}]: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let choice = match choice {
            None | Some(Value::Null) => ToolChoice::Auto,
            Some(Value::String(s)) => match s.as_str() {
                "none" => ToolChoice::None,
                "auto" => ToolChoice::Auto,
                "required" => ToolChoice::Required,
                other => {
                    return Err(ApiError::bad_request(format!(
                        "tool_choice \"{other}\": expected \"none\", \"auto\", \"required\" or \
                         {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}"
                    )))
                }
            },
            Some(v) => match v.pointer("/function/name").and_then(Value::as_str) {
                Some(name) => ToolChoice::Function(name.to_owned()),
                None => {
                    return Err(ApiError::bad_request(
                        "tool_choice: function.name is required",
                    ))
                }
            },
        };
        if specs.is_empty() {
            return match choice {
                ToolChoice::None | ToolChoice::Auto => Ok(None),
                _ => Err(ApiError::bad_request("tool_choice needs tools")),
            };
        }
        if let ToolChoice::Function(name) = &choice {
            if !specs.iter().any(|t| &t.name == name) {
                return Err(ApiError::bad_request(format!(
                    "tool_choice names function \"{name}\", which is not in tools"
                )));
            }
        }
        Ok(Some(ToolRequest {
            specs,
            choice,
            parallel: parallel.unwrap_or(true),
        }))
    }

    /// Shows the tools to `lm` in `req` and, for a required or named
    /// choice, constrains the reply to a call; returns what reads the
    /// calls out of the reply (`None` with `tool_choice: "none"`).
    pub fn apply(
        &self,
        lm: &LoadedModel,
        req: &mut GenerateRequest,
    ) -> Result<Option<ToolReader>, ApiError> {
        if self.choice == ToolChoice::None {
            return Ok(None);
        }
        let Prompt::Chat(messages) = &mut req.prompt else {
            return Err(ApiError::bad_request(
                "tools need the model's chat template (not a raw prompt or a request template)",
            ));
        };
        let format = ToolFormat::detect(lm.template.source());
        if format.template_shows_tools() {
            req.tools = self.specs.iter().map(ToolSpec::to_json).collect();
        } else {
            let note = ToolFormat::system_prompt(&self.specs);
            match messages.first_mut() {
                Some(m) if m.role == "system" => m.content = format!("{}\n\n{note}", m.content),
                _ => messages.insert(0, ChatMessage::new("system", note)),
            }
        }
        match call_grammar(format, &self.specs, &self.choice, self.parallel) {
            // Under `auto` the reply's own constraint wins over the calls'.
            Some(_) if self.choice == ToolChoice::Auto && req.constraint.is_some() => {}
            Some(_) if req.constraint.is_some() => {
                return Err(ApiError::bad_request(
                    "tool_choice \"required\" or a named function cannot be combined with \
                     response_format, format or grammar",
                ))
            }
            grammar => req.constraint = req.constraint.take().or(grammar),
        }
        Ok(Some(ToolReader {
            parser: ToolCallParser::new(format, &self.specs),
            parallel: self.parallel,
            calls: 0,
        }))
    }
}

/// Reads one reply's calls as its text streams.
pub struct ToolReader {
    parser: ToolCallParser,
    parallel: bool,
    calls: usize,
}

/// Text for the reply and calls, in order.
#[derive(Default)]
pub struct ReplyPieces {
    pub text: String,
    pub calls: Vec<ReplyCall>,
}

/// A call of the reply: numbered from 0, with its id (`call_...`).
pub struct ReplyCall {
    pub index: usize,
    pub id: String,
    pub call: ToolCall,
}

impl ToolReader {
    pub fn push(&mut self, text: &str) -> ReplyPieces {
        let parsed = self.parser.push(text);
        self.collect(parsed)
    }

    pub fn finish(&mut self) -> ReplyPieces {
        let parsed = self.parser.finish();
        self.collect(parsed)
    }

    /// Whether the reply made a call (its finish reason is `tool_calls`).
    pub fn called(&self) -> bool {
        self.calls > 0
    }

    fn collect(&mut self, parsed: Vec<Parsed>) -> ReplyPieces {
        let mut out = ReplyPieces::default();
        for p in parsed {
            match p {
                Parsed::Content(c) => out.text.push_str(&c),
                // Without parallel calls, the first call is the reply's.
                Parsed::Call(_) if !self.parallel && self.calls > 0 => {}
                Parsed::Call(call) => {
                    out.calls.push(ReplyCall {
                        index: self.calls,
                        id: call_id(),
                        call,
                    });
                    self.calls += 1;
                }
            }
        }
        out
    }
}

/// A piece of the reply's text, read for tool calls when the request has
/// tools; `last`: the end of the reply.
pub fn read(reader: &mut Option<ToolReader>, text: &str, last: bool) -> ReplyPieces {
    let Some(r) = reader else {
        return ReplyPieces {
            text: text.to_owned(),
            calls: Vec::new(),
        };
    };
    let mut pieces = r.push(text);
    if last {
        let rest = r.finish();
        pieces.text.push_str(&rest.text);
        pieces.calls.extend(rest.calls);
    }
    pieces
}

/// `call_` and 24 letters and digits (OpenAI's shape).
fn call_id() -> String {
    let mut rng = rand::rng();
    let suffix: String = (0..24)
        .map(|_| {
            b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                [rng.random_range(0..62)] as char
        })
        .collect();
    format!("call_{suffix}")
}

/// An earlier assistant turn's calls, as OpenAI (arguments a JSON string)
/// or Ollama (arguments an object) send them, in the form chat templates
/// read (arguments an object).
pub fn history_calls(calls: &[Value]) -> Result<Vec<Value>, ApiError> {
    calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let f = c.get("function").unwrap_or(c);
            let name = f.get("name").and_then(Value::as_str).ok_or_else(|| {
                ApiError::bad_request(format!("tool_calls[{i}]: function.name is required"))
            })?;
            let arguments = match f.get("arguments") {
                None | Some(Value::Null) => json!({}),
                Some(Value::String(s)) => serde_json::from_str(s).map_err(|e| {
                    ApiError::bad_request(format!(
                        "tool_calls[{i}]: function.arguments is not JSON: {e}"
                    ))
                })?,
                Some(a) => a.clone(),
            };
            let mut call =
                json!({"type": "function", "function": {"name": name, "arguments": arguments}});
            if let Some(id) = c.get("id") {
                call["id"] = id.clone();
            }
            Ok(call)
        })
        .collect()
}
