//! Tool calling: the tools a request offers, how a model family writes a
//! call ([`ToolFormat`]), reading calls out of its output as it streams
//! ([`ToolCallParser`]) and the constraint that makes it call one
//! ([`call_grammar`]).

mod format;
mod grammar;
mod parser;

pub use format::ToolFormat;
pub use grammar::call_grammar;
pub use parser::{Parsed, ToolCallParser};

#[cfg(test)]
use crate::Constraint;

use serde_json::{json, Value};

/// One function a request offers the model.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: Option<String>,
    /// The arguments' JSON schema (`{"type": "object"}` when not given).
    pub parameters: Value,
}

impl ToolSpec {
    /// OpenAI's and Ollama's `{"type": "function", "function": {"name",
    /// "description", "parameters"}}`.
    pub fn from_json(tool: &Value) -> Result<ToolSpec, String> {
        if let Some(kind) = tool.get("type").and_then(Value::as_str) {
            if kind != "function" {
                return Err(format!(
                    "type \"{kind}\" is not supported (only \"function\")"
                ));
            }
        }
        let f = tool
            .get("function")
            .filter(|f| f.is_object())
            .ok_or("function (an object with name and parameters) is required")?;
        let name = f.get("name").and_then(Value::as_str).unwrap_or("");
        let valid = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.';
        if name.is_empty() || name.len() > 64 || !name.chars().all(valid) {
            return Err(format!(
                "function.name {name:?}: a-z, A-Z, 0-9, _, - and ., at most 64 characters"
            ));
        }
        let parameters = match f.get("parameters") {
            None | Some(Value::Null) => json!({"type": "object"}),
            Some(p @ Value::Object(_)) => p.clone(),
            Some(_) => {
                return Err(format!(
                    "function {name}: parameters must be a JSON schema object"
                ))
            }
        };
        Ok(ToolSpec {
            name: name.to_owned(),
            description: f
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_owned),
            parameters,
        })
    }

    /// The form chat templates (and our system prompt) show.
    pub fn to_json(&self) -> Value {
        let mut function = json!({"name": self.name, "parameters": self.parameters});
        if let Some(d) = &self.description {
            function["description"] = json!(d);
        }
        json!({"type": "function", "function": function})
    }
}

/// A call the model made: a function name and its arguments (an object).
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    pub name: String,
    pub arguments: Value,
}

/// Whether and which tool the model must call (OpenAI's `tool_choice`).
#[derive(Clone, Debug, Default, PartialEq)]
pub enum ToolChoice {
    /// No tools: they are not shown to the model.
    None,
    /// The model decides; its calls are read out of its output.
    #[default]
    Auto,
    /// At least one call, of any tool.
    Required,
    /// A call of this function.
    Function(String),
}

#[cfg(test)]
mod tests;
