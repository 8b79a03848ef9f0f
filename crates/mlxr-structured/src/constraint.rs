//! What a request may ask its output to be.

use llguidance::api::TopLevelGrammar;
use serde_json::{json, Value};

/// A constraint on a whole generated text.
#[derive(Clone, Debug, PartialEq)]
pub enum Constraint {
    /// Any JSON object (OpenAI's `json_object`, Ollama's `"json"`).
    JsonObject,
    /// JSON valid under this schema (draft 2020-12 as llguidance reads it).
    JsonSchema(Value),
    /// Text matching this regular expression in full.
    Regex(String),
    /// llguidance's Lark dialect (`start: ...`, `%json {...}` inside).
    Lark(String),
    /// Free text until the special token `trigger` (e.g. `<tool_call>`),
    /// then `then` until it is complete, then free text again, and so on:
    /// a syntax enforced only where the model starts it.
    Triggered {
        trigger: String,
        then: Box<Constraint>,
    },
    /// The special token `token` at once, then the Lark grammar `lark`
    /// (its `start` rule follows the token): a call syntax opened by a
    /// control token that Lark cannot name (Mistral's `[TOOL_CALLS]`),
    /// referred to by id once the vocabulary is known.
    Opened { token: String, lark: String },
}

/// JSON layout where a schema does not say (its `x-guidance` object):
/// whitespace between tokens as a model writes it, at most 20 characters,
/// so a model cannot pad its output with whitespace until `max_tokens`.
const JSON_LAYOUT: &str = r"[\x20\x0A\x0D\x09]{1,20}";

impl Constraint {
    /// What the constraint is called in errors.
    pub fn kind(&self) -> &'static str {
        match self {
            Constraint::JsonObject => "json_object",
            Constraint::JsonSchema(_) => "json_schema",
            Constraint::Regex(_) => "regex",
            Constraint::Lark(_) => "grammar",
            Constraint::Triggered { then, .. } => then.kind(),
            Constraint::Opened { .. } => "grammar",
        }
    }

    /// A key that identifies the compiled grammar (the cache's).
    pub(crate) fn cache_key(&self) -> String {
        match self {
            Constraint::JsonObject => "o".to_owned(),
            Constraint::JsonSchema(v) => format!("j{v}"),
            Constraint::Regex(r) => format!("r{r}"),
            Constraint::Lark(l) => format!("l{l}"),
            Constraint::Triggered { trigger, then } => format!("t{trigger}\0{}", then.cache_key()),
            Constraint::Opened { token, lark } => format!("s{token}\0{lark}"),
        }
    }

    pub(crate) fn grammar(&self) -> Result<TopLevelGrammar, String> {
        Ok(match self {
            Constraint::JsonObject => TopLevelGrammar::from_json_schema(with_layout(json!({
                "type": "object"
            }))),
            Constraint::JsonSchema(schema) => {
                if !schema.is_object() && !schema.is_boolean() {
                    return Err("a JSON schema is an object".to_owned());
                }
                TopLevelGrammar::from_json_schema(with_layout(schema.clone()))
            }
            Constraint::Regex(rx) => TopLevelGrammar::from_regex(rx),
            Constraint::Lark(lark) => TopLevelGrammar::from_lark(lark.clone()),
            Constraint::Triggered { then, .. } => then.grammar()?,
            Constraint::Opened { token, .. } => {
                return Err(format!("{token} is resolved against the vocabulary first"))
            }
        })
    }

    /// [`Constraint::Opened`] as Lark, the token referred to by `id`.
    pub(crate) fn opened_lark(id: u32, lark: &str) -> String {
        format!(
            "start: <[{id}]> opened\n{}",
            lark.replacen("start:", "opened:", 1)
        )
    }
}

pub(crate) fn with_layout(mut schema: Value) -> Value {
    if let Value::Bool(any) = schema {
        schema = if any { json!({}) } else { json!({"not": {}}) };
    }
    if let Value::Object(map) = &mut schema {
        map.entry("x-guidance")
            .or_insert_with(|| json!({ "whitespace_pattern": JSON_LAYOUT }));
    }
    schema
}
