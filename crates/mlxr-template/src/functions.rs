//! The globals transformers adds to the Jinja environment.

use std::time::SystemTime;

use minijinja::{Error, ErrorKind, Value};

use crate::pyfmt::py_str;
use crate::strftime::{strftime, DateTime};

/// Carried as the source of the minijinja error so the render can report the
/// template's own message as [`crate::TemplateError::Raised`].
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct RaisedException(pub String);

/// `raise_exception(message)`: aborts rendering with the message.
pub(crate) fn raise_exception(message: Value) -> Result<Value, Error> {
    let message = py_str(&message);
    Err(Error::new(ErrorKind::InvalidOperation, message.clone())
        .with_source(RaisedException(message)))
}

/// `strftime_now(format)` reading a clock fixed for one render (UTC).
pub(crate) fn strftime_now(now: SystemTime) -> Value {
    let now = DateTime::from_system_time(now);
    Value::from_function(move |format: &str| strftime(format, &now))
}

/// The `string` filter as Python's `str()`.
pub(crate) fn string_filter(value: &Value) -> Value {
    if value.as_str().is_some() {
        return value.clone();
    }
    Value::from(py_str(value))
}

/// The `trim` filter as Python's `str.strip`, whose whitespace also includes
/// the separators U+001C..U+001F that Rust's `char::is_whitespace` leaves out.
pub(crate) fn trim_filter(value: &Value, chars: Option<&str>) -> Value {
    let text = py_str(value);
    let trimmed = match chars {
        Some(chars) => text.trim_matches(|c| chars.contains(c)),
        None => {
            text.trim_matches(|c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c))
        }
    };
    Value::from(trimmed)
}
