//! The constraints on a model's tool calls: the family's own call syntax
//! around the JSON of a call whose name is one of the tools and whose
//! arguments follow that tool's schema, from the first token (`tool_choice`
//! required or a named function) or, under `auto`, from the moment the
//! model opens a call (Hermes' `<tool_call>`, Phi-4-mini's `<|tool_call|>`,
//! Mistral's `[TOOL_CALLS]` token), or at once.

use serde_json::{json, Value};

use super::{ToolChoice, ToolFormat, ToolSpec};
use crate::constraint::with_layout;
use crate::Constraint;

/// `None` where the model stays free (`none`). `parallel`: more than one
/// call may follow (where the format allows).
pub fn call_grammar(
    format: ToolFormat,
    tools: &[ToolSpec],
    choice: &ToolChoice,
    parallel: bool,
) -> Option<Constraint> {
    let chosen: Vec<&ToolSpec> = match choice {
        ToolChoice::None => return None,
        ToolChoice::Auto | ToolChoice::Required => tools.iter().collect(),
        ToolChoice::Function(name) => tools.iter().filter(|t| &t.name == name).collect(),
    };
    let calls: Vec<Value> = chosen
        .iter()
        .map(|t| {
            json!({
                "type": "object",
                "properties": {"name": {"const": t.name}, "arguments": closed(t.parameters.clone())},
                "required": ["name", "arguments"],
                "additionalProperties": false
            })
        })
        .collect();
    let call = match <[Value; 1]>::try_from(calls) {
        Ok([one]) => one,
        Err(calls) => json!({ "anyOf": calls }),
    };
    Some(match format {
        ToolFormat::Hermes if *choice == ToolChoice::Auto => Constraint::Triggered {
            trigger: "<tool_call>".into(),
            then: Box::new(Constraint::Lark(format!(
                "start: \"\\n\" body \"\\n\" </tool_call>\nbody: %json {}\n",
                with_layout(call)
            ))),
        },
        ToolFormat::Hermes => {
            let body = with_layout(call);
            let more = if parallel { " (\"\\n\" call)*" } else { "" };
            Constraint::Lark(format!(
                "start: call{more}\ncall: <tool_call> \"\\n\" body \"\\n\" </tool_call>\nbody: %json {body}\n"
            ))
        }
        // A JSON array of calls after the call token, closed by
        // `<|/tool_call|>`.
        ToolFormat::Phi4Mini => {
            let rules = format!(
                "{} <|/tool_call|>\n{}",
                call_array(parallel),
                body_rules(call)
            );
            if *choice == ToolChoice::Auto {
                Constraint::Triggered {
                    trigger: "<|tool_call|>".into(),
                    then: Box::new(Constraint::Lark(format!("start: {rules}"))),
                }
            } else {
                Constraint::Lark(format!("start: <|tool_call|> {rules}"))
            }
        }
        // `[TOOL_CALLS]` and a JSON array of calls, the reply's end.
        ToolFormat::Mistral if *choice == ToolChoice::Auto => Constraint::Triggered {
            trigger: "[TOOL_CALLS]".into(),
            then: Box::new(Constraint::Lark(format!(
                "start: \" \"? {}\n{}",
                call_array(parallel),
                body_rules(call)
            ))),
        },
        // A bare JSON call is the whole reply: under `auto`, a reply that
        // opens a JSON object is a call, any other is free text.
        ToolFormat::Json { .. } if *choice == ToolChoice::Auto => Constraint::Lark(format!(
            "start: call | TEXT\ncall: %json {}\nTEXT: /{BARE_TEXT}/\n",
            with_layout(call)
        )),
        // Required or named: `[TOOL_CALLS]` (by id: Lark names only `<...>`
        // tokens) and the array at once.
        ToolFormat::Mistral => Constraint::Opened {
            token: "[TOOL_CALLS]".into(),
            lark: format!(
                "start: \" \"? {}\n{}",
                call_array(parallel),
                body_rules(call)
            ),
        },
        ToolFormat::Json { .. } => Constraint::JsonSchema(call),
    })
}

/// The rules under [`call_array`]: a call's JSON and the separator
/// between calls.
fn body_rules(call: Value) -> String {
    format!("body: %json {}\nSEP: /,[ \\n]?/\n", with_layout(call))
}

/// `[call, call, ...]` (one call unless `parallel`), as Lark.
fn call_array(parallel: bool) -> &'static str {
    if parallel {
        "\"[\" body (SEP body)* \"]\""
    } else {
        "\"[\" body \"]\""
    }
}

/// A reply that is not a bare JSON call: it does not open with `{` (after
/// whitespace), or is empty.
const BARE_TEXT: &str = r"(\s*[^{\s][\s\S]*)?";

/// The arguments' schema with `additionalProperties: false` wherever an
/// object lists its properties and says nothing of others (llama.cpp's
/// default): a model fills in the tool's fields, not fields of its own.
fn closed(mut schema: Value) -> Value {
    if let Value::Object(map) = &mut schema {
        if map.contains_key("properties") && !map.contains_key("additionalProperties") {
            map.insert("additionalProperties".into(), Value::Bool(false));
        }
        for key in ["properties", "$defs", "definitions"] {
            if let Some(Value::Object(children)) = map.get_mut(key) {
                for child in children.values_mut() {
                    *child = closed(child.take());
                }
            }
        }
        for key in ["items", "additionalItems"] {
            if let Some(child) = map.get_mut(key) {
                *child = closed(child.take());
            }
        }
        for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
            if let Some(Value::Array(children)) = map.get_mut(key) {
                for child in children.iter_mut() {
                    *child = closed(child.take());
                }
            }
        }
    }
    schema
}
