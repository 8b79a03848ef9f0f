//! The request fields that ask for structured output, in each API's shape,
//! as one engine [`Constraint`]: OpenAI's `response_format`, Ollama's
//! `format`, and MLXR's `grammar` extension (both APIs).

use mlxr_engine::Constraint;
use serde_json::Value;

use crate::error::ApiError;
use crate::limits::{self, at_most};

/// OpenAI's `response_format`: `{"type": "text"}`, `{"type":
/// "json_object"}` or `{"type": "json_schema", "json_schema": {"name",
/// "schema", "strict", "description"}}`.
pub fn response_format(format: Option<&Value>) -> Result<Option<Constraint>, ApiError> {
    let Some(format) = format.filter(|f| !f.is_null()) else {
        return Ok(None);
    };
    let bad = |m: &str| ApiError::bad_request(format!("response_format: {m}"));
    match format.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(Constraint::JsonObject)),
        Some("json_schema") => {
            let spec = format
                .get("json_schema")
                .filter(|s| s.is_object())
                .ok_or_else(|| bad("json_schema (an object with name and schema) is required"))?;
            let name = spec.get("name").and_then(Value::as_str).unwrap_or("");
            let valid = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
            if name.is_empty() || name.len() > 64 || !name.chars().all(valid) {
                return Err(bad(
                    "json_schema.name is required: a-z, A-Z, 0-9, _ and -, at most 64 characters",
                ));
            }
            match spec.get("schema") {
                None | Some(Value::Null) => Ok(Some(Constraint::JsonSchema(Value::Bool(true)))),
                Some(schema @ (Value::Object(_) | Value::Bool(_))) => {
                    Ok(Some(Constraint::JsonSchema(schema.clone())))
                }
                Some(_) => Err(bad("json_schema.schema must be a JSON schema object")),
            }
        }
        _ => Err(bad(
            "type must be \"text\", \"json_object\" or \"json_schema\"",
        )),
    }
}

/// Ollama's `format`: `"json"` or a JSON schema object (`""` or null: none).
pub fn ollama_format(format: Option<&Value>) -> Result<Option<Constraint>, ApiError> {
    match format {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) if s == "json" => Ok(Some(Constraint::JsonObject)),
        Some(schema @ Value::Object(_)) => Ok(Some(Constraint::JsonSchema(schema.clone()))),
        Some(other) => Err(ApiError::bad_request(format!(
            "invalid format: {other}; expected \"json\" or a valid JSON Schema object"
        ))),
    }
}

/// MLXR's `grammar` extension: a Lark grammar in llguidance's dialect as a
/// string, or `{"type": "lark" | "regex", "value": "..."}`.
pub fn grammar(field: Option<&Value>) -> Result<Option<Constraint>, ApiError> {
    let bad = |m: &str| ApiError::bad_request(format!("grammar: {m}"));
    let (kind, text) = match field {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) => ("lark", s.as_str()),
        Some(Value::Object(o)) => (
            o.get("type").and_then(Value::as_str).unwrap_or(""),
            o.get("value")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("value (a string) is required"))?,
        ),
        Some(_) => return Err(bad("a Lark grammar string or {\"type\", \"value\"}")),
    };
    at_most("grammar (bytes)", text.len(), limits::MAX_GRAMMAR_BYTES)?;
    match kind {
        "lark" => Ok(Some(Constraint::Lark(text.to_owned()))),
        "regex" => Ok(Some(Constraint::Regex(text.to_owned()))),
        _ => Err(bad("type must be \"lark\" or \"regex\"")),
    }
}

/// At most one of a request's constraints.
pub fn only_one(
    constraints: [(&str, Option<Constraint>); 2],
) -> Result<Option<Constraint>, ApiError> {
    match constraints {
        [(a, Some(_)), (b, Some(_))] => Err(ApiError::bad_request(format!(
            "{a} and {b} cannot be combined: give one"
        ))),
        [(_, x), (_, y)] => Ok(x.or(y)),
    }
}
