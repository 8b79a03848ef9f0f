use std::collections::BTreeMap;
use std::error::Error as _;
use std::time::SystemTime;

use minijinja::value::Serde;
use minijinja::{Environment, Value};
use serde::Serialize;

use crate::environment::hf_environment;
use crate::error::TemplateError;
use crate::fallback::FALLBACK_TEMPLATE;
use crate::functions::{strftime_now, RaisedException};
use crate::generation_tag::rewrite_generation_tags;
use crate::message::ChatMessage;

const NAME: &str = "chat_template";

/// Inputs to a render beyond the messages, matching the keyword arguments
/// of transformers' `apply_chat_template`.
#[derive(Clone, Debug, Default)]
pub struct RenderOptions {
    /// Append the opening of an assistant turn so the model answers next.
    pub add_generation_prompt: bool,
    /// Tool definitions (OpenAI-style JSON schemas), the template's `tools`.
    /// `None` renders as `none`, as transformers passes it.
    pub tools: Option<Vec<serde_json::Value>>,
    /// Further template variables (transformers' `**kwargs`), e.g.
    /// `enable_thinking`, `reasoning_effort`, `date_string`. The variables
    /// set by the renderer itself (`messages`, `tools`, `add_generation_prompt`,
    /// `bos_token`, `eos_token`, `documents`, `strftime_now`) take precedence.
    pub extra: serde_json::Map<String, serde_json::Value>,
    /// The instant `strftime_now` reports (as UTC); `None` reads the clock.
    pub now: Option<SystemTime>,
}

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
    source: String,
    bos_token: String,
    eos_token: String,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("source", &self.source)
            .field("bos_token", &self.bos_token)
            .field("eos_token", &self.eos_token)
            .finish_non_exhaustive()
    }
}

impl ChatTemplate {
    /// `source`: the Jinja text of `tokenizer.chat_template`; bos/eos token
    /// texts are exposed to the template as `bos_token`/`eos_token`.
    pub fn new(
        source: &str,
        bos_token: &str,
        eos_token: &str,
    ) -> Result<ChatTemplate, TemplateError> {
        let mut env = hf_environment().map_err(|e| syntax_error(&e))?;
        // Jinja2's lexer turns every \r\n and \r of the template text into \n.
        let normalized = source.replace("\r\n", "\n").replace('\r', "\n");
        let compiled = rewrite_generation_tags(&normalized).unwrap_or(normalized);
        env.add_template_owned(NAME, compiled)
            .map_err(|e| syntax_error(&e))?;
        Ok(ChatTemplate {
            env,
            source: source.to_owned(),
            bos_token: bos_token.to_owned(),
            eos_token: eos_token.to_owned(),
        })
    }

    /// A plain format for models without a template:
    ///
    /// ```text
    /// System: You are terse.
    /// User: Hi
    /// Assistant:
    /// ```
    ///
    /// One `Role: content` line per message (the role with its first letter
    /// upper-cased), and with `add_generation_prompt` a final `Assistant:`.
    /// No bos/eos text is added.
    pub fn fallback() -> ChatTemplate {
        match ChatTemplate::new(FALLBACK_TEMPLATE, "", "") {
            Ok(template) => template,
            // The fallback text is a constant covered by tests.
            Err(e) => unreachable!("the fallback chat template does not compile: {e}"),
        }
    }

    pub fn render(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String, TemplateError> {
        let options = RenderOptions {
            add_generation_prompt,
            ..RenderOptions::default()
        };
        self.render_with(messages, &options)
    }

    /// Renders any serialisable messages (e.g. with `tool_calls`,
    /// `tool_call_id` or list-of-parts content) with the full set of options.
    pub fn render_with<M: Serialize>(
        &self,
        messages: &[M],
        options: &RenderOptions,
    ) -> Result<String, TemplateError> {
        let mut context: BTreeMap<String, Value> = options
            .extra
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(Serde(v))))
            .collect();
        let now = options.now.unwrap_or_else(SystemTime::now);
        let fixed = [
            ("messages", Value::from(Serde(messages))),
            (
                "add_generation_prompt",
                Value::from(options.add_generation_prompt),
            ),
            ("bos_token", Value::from(self.bos_token.as_str())),
            ("eos_token", Value::from(self.eos_token.as_str())),
            (
                "tools",
                options
                    .tools
                    .as_ref()
                    .map_or(Value::from(()), |t| Value::from(Serde(t))),
            ),
            ("documents", Value::from(())),
            ("strftime_now", strftime_now(now)),
        ];
        context.extend(fixed.into_iter().map(|(k, v)| (k.to_owned(), v)));

        let template = self.env.get_template(NAME).map_err(|e| render_error(&e))?;
        template
            .render(Value::from_object(context))
            .map_err(|e| render_error(&e))
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn bos_token(&self) -> &str {
        &self.bos_token
    }

    pub fn eos_token(&self) -> &str {
        &self.eos_token
    }
}

fn syntax_error(e: &minijinja::Error) -> TemplateError {
    TemplateError::Syntax {
        message: describe(e),
        line: e.line(),
    }
}

fn render_error(e: &minijinja::Error) -> TemplateError {
    let mut source = e.source();
    while let Some(err) = source {
        if let Some(raised) = err.downcast_ref::<RaisedException>() {
            return TemplateError::Raised(raised.0.clone());
        }
        source = err.source();
    }
    TemplateError::Render {
        message: describe(e),
        line: e.line(),
    }
}

fn describe(e: &minijinja::Error) -> String {
    match e.detail() {
        Some(detail) => format!("{}: {detail}", e.kind()),
        None => e.kind().to_string(),
    }
}
