//! Reading tool calls out of a model's output as it streams: text before a
//! call passes through at once, only a possible start of the call's tag is
//! held back, and text that looks like a call but is not one is given back
//! as text, never lost.

use serde_json::Value;

use super::{ToolCall, ToolFormat, ToolSpec};

/// A piece of the output: text for the reply, or a call.
#[derive(Clone, Debug, PartialEq)]
pub enum Parsed {
    Content(String),
    Call(ToolCall),
}

enum State {
    /// Plain text; watching for the format's opening tag.
    Text,
    /// After the opening tag, until its closing tag (or the end).
    InCall,
    /// The output opened with `{` or a code fence: a bare JSON call (as
    /// Qwen2.5-Coder often writes them), or text, decided at the end.
    Bare,
}

pub struct ToolCallParser {
    open: Option<&'static str>,
    close: Option<&'static str>,
    names: Vec<String>,
    state: State,
    /// Held back: a possible start of `open`, or the text of a call.
    pending: String,
    /// Text other than whitespace has passed through.
    started: bool,
}

const FENCE: &str = "```";

impl ToolCallParser {
    pub fn new(format: ToolFormat, tools: &[ToolSpec]) -> Self {
        let (open, close) = match format.tags() {
            Some((open, close)) => (Some(open), close),
            None => (None, None),
        };
        Self {
            open,
            close,
            names: tools.iter().map(|t| t.name.clone()).collect(),
            state: State::Text,
            pending: String::new(),
            started: false,
        }
    }

    /// The next piece of output text.
    pub fn push(&mut self, text: &str) -> Vec<Parsed> {
        self.pending.push_str(text);
        let mut out = Vec::new();
        loop {
            match self.state {
                State::Text => {
                    if !self.started {
                        let t = self.pending.trim_start();
                        if t.is_empty() || (FENCE.starts_with(t) && t.len() < FENCE.len()) {
                            break;
                        }
                        if t.starts_with('{') || t.starts_with(FENCE) {
                            self.state = State::Bare;
                            break;
                        }
                    }
                    let Some(open) = self.open else {
                        self.flush_text(self.pending.len(), &mut out);
                        break;
                    };
                    if let Some(i) = self.pending.find(open) {
                        // Whitespace between text and a call belongs to neither.
                        let before = self.pending[..i].trim_end().len();
                        self.flush_text(before, &mut out);
                        self.pending.drain(..i - before + open.len());
                        self.state = State::InCall;
                        continue;
                    }
                    // Held back: a possible start of the tag, and the
                    // whitespace before it (until text follows).
                    let keep = partial_suffix(&self.pending, open);
                    let upto = self.pending[..self.pending.len() - keep].trim_end().len();
                    self.flush_text(upto, &mut out);
                    break;
                }
                State::InCall => {
                    let Some(close) = self.close else { break };
                    let Some(i) = self.pending.find(close) else {
                        break;
                    };
                    let body: String = self.pending.drain(..i + close.len()).collect();
                    self.emit_call(&body[..i], &mut out);
                    // Calls are not text: the reply goes on as if from the start.
                    self.started = false;
                    self.state = State::Text;
                }
                State::Bare => break,
            }
        }
        out
    }

    /// The end of the output: whatever is held back.
    pub fn finish(&mut self) -> Vec<Parsed> {
        let mut out = Vec::new();
        let pending = std::mem::take(&mut self.pending);
        match self.state {
            State::Text => {
                if !pending.is_empty() && (self.started || !pending.trim().is_empty()) {
                    out.push(Parsed::Content(pending));
                }
            }
            State::InCall => self.emit_call(&pending, &mut out),
            State::Bare => match parse_calls(&pending, Some(&self.names)) {
                Some(calls) => out.extend(calls.into_iter().map(Parsed::Call)),
                None => out.push(Parsed::Content(pending)),
            },
        }
        self.state = State::Text;
        out
    }

    fn flush_text(&mut self, upto: usize, out: &mut Vec<Parsed>) {
        if upto > 0 {
            let text: String = self.pending.drain(..upto).collect();
            self.started |= !text.trim().is_empty();
            out.push(Parsed::Content(text));
        }
    }

    /// The text between a call's tags: its calls, or the text as it was.
    fn emit_call(&mut self, body: &str, out: &mut Vec<Parsed>) {
        match parse_calls(body, None) {
            Some(calls) => out.extend(calls.into_iter().map(Parsed::Call)),
            None => out.push(Parsed::Content(format!(
                "{}{body}{}",
                self.open.unwrap_or(""),
                self.close.unwrap_or("")
            ))),
        }
    }
}

/// Length of the longest end of `text` that is a proper start of `tag`.
fn partial_suffix(text: &str, tag: &str) -> usize {
    (1..tag.len().min(text.len() + 1))
        .rev()
        .find(|&n| {
            text.is_char_boundary(text.len() - n) && tag.starts_with(&text[text.len() - n..])
        })
        .unwrap_or(0)
}

/// Calls written as JSON: one object `{"name", "arguments"|"parameters"}`,
/// an array of them, or several separated by whitespace or `;`, optionally
/// in a code fence or after Llama's `<|python_tag|>`. `known`: the names a
/// bare call must have (text that merely is JSON stays text).
pub(crate) fn parse_calls(text: &str, known: Option<&[String]>) -> Option<Vec<ToolCall>> {
    let mut s = text.trim();
    s = s.strip_prefix("<|python_tag|>").unwrap_or(s).trim();
    if let Some(fenced) = s.strip_prefix(FENCE) {
        let body = fenced.split_once('\n').map_or("", |(_, b)| b);
        s = body.trim_end().strip_suffix(FENCE).unwrap_or(body).trim();
    }
    let mut calls = Vec::new();
    let mut rest = s;
    while !rest.is_empty() {
        let mut values = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
        let value = values.next()?.ok()?;
        rest = rest[values.byte_offset()..].trim_start();
        rest = rest.strip_prefix(';').unwrap_or(rest).trim_start();
        match value {
            Value::Array(items) => {
                for item in items {
                    calls.push(call_of(&item)?);
                }
            }
            item => calls.push(call_of(&item)?),
        }
    }
    if calls.is_empty() {
        return None;
    }
    if let Some(names) = known {
        if !calls.iter().all(|c| names.contains(&c.name)) {
            return None;
        }
    }
    Some(calls)
}

fn call_of(v: &Value) -> Option<ToolCall> {
    let v = v.get("function").filter(|f| f.is_object()).unwrap_or(v);
    let name = v.get("name")?.as_str()?.to_owned();
    let arguments = match v.get("arguments").or_else(|| v.get("parameters")) {
        None | Some(Value::Null) => Value::Object(Default::default()),
        Some(a @ Value::Object(_)) => a.clone(),
        // OpenAI's form, a JSON string.
        Some(Value::String(s)) => match serde_json::from_str(s).ok()? {
            a @ Value::Object(_) => a,
            _ => return None,
        },
        Some(_) => return None,
    };
    Some(ToolCall { name, arguments })
}
