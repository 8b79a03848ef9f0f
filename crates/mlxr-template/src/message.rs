use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One turn of a conversation, as chat templates see it (`message.role`,
/// `message.content`, and for tool use `message.tool_calls`,
/// `message.tool_call_id`, `message.name`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
    /// An assistant turn's calls, as Hugging Face templates read them:
    /// `[{"type": "function", "function": {"name", "arguments": {...}}}]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<Value>>,
    /// A tool result: the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// A tool result: the tool's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl ChatMessage {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: role.into(),
            content: content.into(),
            ..Self::default()
        }
    }
}
