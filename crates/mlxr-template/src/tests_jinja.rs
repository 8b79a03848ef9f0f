//! Jinja2's `sequence` and `iterable` tests, which minijinja answers
//! differently for strings, maps and `none`.

use minijinja::value::ValueKind;
use minijinja::Value;

/// Jinja2: anything with a length and indexing, strings and dicts included.
pub(crate) fn is_sequence(value: &Value) -> bool {
    matches!(
        value.kind(),
        ValueKind::String | ValueKind::Seq | ValueKind::Map
    )
}

/// Jinja2: anything `iter()` accepts.
pub(crate) fn is_iterable(value: &Value) -> bool {
    matches!(
        value.kind(),
        ValueKind::String | ValueKind::Seq | ValueKind::Map | ValueKind::Iterable
    )
}
