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

/// The longest template source accepted, in bytes. Real templates are a
/// few KiB (the longest fixture, gpt-oss, is 16 KiB).
pub const MAX_SOURCE_BYTES: usize = 64 << 10;

/// The work one render may do, in minijinja fuel: about one unit per
/// instruction and one per 64 bytes of data created. Every fixture template
/// renders its test conversations with a hundredth of it; a runaway loop
/// stops after well under a second.
pub const FUEL: u64 = 10_000_000;

/// The longest rendered prompt, in bytes.
pub const MAX_RENDERED_BYTES: usize = 64 << 20;

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
        if source.len() > MAX_SOURCE_BYTES {
            return Err(TemplateError::TooLarge {
                bytes: source.len(),
                max: MAX_SOURCE_BYTES,
            });
        }
        let mut env = hf_environment().map_err(|e| syntax_error(&e))?;
        env.set_fuel(Some(FUEL));
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

    /// The same template with another fuel budget per render.
    pub fn with_fuel(mut self, fuel: u64) -> ChatTemplate {
        self.env.set_fuel(Some(fuel));
        self
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
        let mut out = CappedWriter::default();
        match template.render_captured_to(Value::from_object(context), &mut out) {
            Ok(_) => {}
            Err(_) if out.overflowed => {
                return Err(TemplateError::OutputTooLarge {
                    max: MAX_RENDERED_BYTES,
                })
            }
            Err(e) => return Err(render_error(&e)),
        }
        // Output is written whole, `str` by `str`.
        String::from_utf8(out.bytes).map_err(|e| TemplateError::Render {
            message: e.to_string(),
            line: None,
        })
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

/// Collects the output, failing past [`MAX_RENDERED_BYTES`].
#[derive(Default)]
struct CappedWriter {
    bytes: Vec<u8>,
    overflowed: bool,
}

impl std::io::Write for CappedWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len() + buf.len() > MAX_RENDERED_BYTES {
            self.overflowed = true;
            return Err(std::io::Error::other("rendered prompt too long"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn syntax_error(e: &minijinja::Error) -> TemplateError {
    TemplateError::Syntax {
        message: describe(e),
        line: e.line(),
    }
}

fn render_error(e: &minijinja::Error) -> TemplateError {
    if e.kind() == minijinja::ErrorKind::OutOfFuel {
        return TemplateError::OutOfFuel { fuel: FUEL };
    }
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
