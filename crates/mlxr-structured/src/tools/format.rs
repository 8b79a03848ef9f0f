//! How a model family writes tool calls, told from its chat template.

use super::ToolSpec;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolFormat {
    /// `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`, one
    /// block per call (Qwen 2/2.5/3, Hermes).
    Hermes,
    /// `<|tool_call|>[{"name": ..., "arguments": {...}}]<|/tool_call|>`
    /// (Phi-4-mini).
    Phi4Mini,
    /// `[TOOL_CALLS]` and a JSON array of calls (Mistral).
    Mistral,
    /// A bare JSON object `{"name", "arguments"}` (or `"parameters"`, Llama
    /// 3.x). `native`: the template shows the tools itself; otherwise MLXR
    /// describes them in a system message ([`ToolFormat::system_prompt`]).
    Json { native: bool },
}

impl ToolFormat {
    /// The format a chat template's text asks for.
    pub fn detect(template: &str) -> ToolFormat {
        if template.contains("<tool_call>") {
            ToolFormat::Hermes
        } else if template.contains("<|tool_call|>") {
            ToolFormat::Phi4Mini
        } else if template.contains("[TOOL_CALLS]") {
            ToolFormat::Mistral
        } else {
            ToolFormat::Json {
                native: template.contains("tools"),
            }
        }
    }

    /// The tags around calls (the closing one, where the format has it).
    pub(crate) fn tags(self) -> Option<(&'static str, Option<&'static str>)> {
        match self {
            ToolFormat::Hermes => Some(("<tool_call>", Some("</tool_call>"))),
            ToolFormat::Phi4Mini => Some(("<|tool_call|>", Some("<|/tool_call|>"))),
            ToolFormat::Mistral => Some(("[TOOL_CALLS]", None)),
            ToolFormat::Json { .. } => None,
        }
    }

    /// Whether the chat template renders the request's tools.
    pub fn template_shows_tools(self) -> bool {
        !matches!(self, ToolFormat::Json { native: false })
    }

    /// For templates without tools: a system message that lists them and
    /// the one shape of a call (what Ollama and vLLM do for such models).
    pub fn system_prompt(tools: &[ToolSpec]) -> String {
        let list: Vec<String> = tools.iter().map(|t| t.to_json().to_string()).collect();
        format!(
            "You can call the following tools (JSON schemas of their arguments):\n{}\n\n\
             To call a tool, reply with only a JSON object of the form \
             {{\"name\": <tool name>, \"arguments\": <arguments object>}} and nothing else. \
             Otherwise, answer normally.",
            list.join("\n")
        )
    }
}
