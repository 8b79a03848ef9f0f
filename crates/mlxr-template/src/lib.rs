//! Chat templates: the Jinja text from `tokenizer.chat_template`, rendered
//! the way Hugging Face transformers' `apply_chat_template` renders it.
//!
//! The environment mirrors transformers' (`trim_blocks` and `lstrip_blocks`
//! on, trailing newline of the template dropped, lenient undefined values,
//! `raise_exception`, `strftime_now`, a `tojson` that is Python's
//! `json.dumps`, Python string/dict/list methods), so a template renders the
//! same bytes here as in Python. `tests/fixtures/templates/expected.json`
//! holds Python's renderings of real model templates that the tests compare
//! against byte for byte.
//!
//! Known differences from Jinja2 (none used by the fixture templates):
//! Python's `%` string operator (`'%s' % x`) is an error; the string methods `center`, `ljust`, `rjust`, `swapcase`, `index` and the
//! filters `center`, `truncate`, `wordcount` are missing; `\U` escapes in
//! string literals are not understood; `strftime_now` uses UTC, not the
//! local time zone.

mod environment;
mod error;
mod fallback;
mod functions;
mod generation_tag;
mod message;
mod pyfmt;
mod pyjson;
mod strftime;
mod template;
mod tests_jinja;

pub use error::TemplateError;
pub use message::ChatMessage;
pub use template::{ChatTemplate, RenderOptions, FUEL, MAX_RENDERED_BYTES, MAX_SOURCE_BYTES};
