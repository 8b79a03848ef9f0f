//! One JSON object per line: the framing of every streamed answer (NDJSON
//! lines, SSE `data:` fields).
//!
//! JSON may carry U+0085, U+2028 and U+2029 unescaped, but line readers
//! built on Python's `str.splitlines` (httpx's `aiter_lines`, which the
//! official `ollama` client reads streams with) break a line there, and a
//! model can sample them. Go's encoder, which Ollama answers with, escapes
//! the last two; escaping all three costs nothing when none is present.

use axum::body::Bytes;
use serde::Serialize;

/// `v` as JSON on one line, with no character a line reader splits at.
pub fn json_line(v: &impl Serialize) -> String {
    let json = serde_json::to_string(v).unwrap_or_else(|e| {
        serde_json::json!({"error": format!("serialising the answer failed: {e}")}).to_string()
    });
    escape_line_separators(json)
}

/// An NDJSON line: [`json_line`] and its `\n`.
pub fn ndjson(v: &impl Serialize) -> Bytes {
    let mut line = json_line(v);
    line.push('\n');
    Bytes::from(line)
}

/// Outside strings JSON has no such characters, so escaping them wherever
/// they occur keeps the document's meaning.
fn escape_line_separators(json: String) -> String {
    let separator = |c: char| matches!(c, '\u{85}' | '\u{2028}' | '\u{2029}');
    if !json.contains(separator) {
        return json;
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if separator(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    #[test]
    fn line_separators_are_escaped_and_the_value_survives() {
        let v = json!({"content": "a\u{2028}b\u{2029}c\u{85}d\ne", "n": 1});
        let line = json_line(&v);
        assert_eq!(line.lines().count(), 1);
        assert!(!line.contains(['\u{85}', '\u{2028}', '\u{2029}']), "{line}");
        assert!(line.contains(r"a\u2028b\u2029c\u0085d\ne"), "{line}");
        assert_eq!(serde_json::from_str::<Value>(&line).unwrap(), v);
    }

    #[test]
    fn other_text_is_left_as_serde_writes_it() {
        let v = json!({"content": "héllo — “quotes” \u{7f} \u{a0}"});
        assert_eq!(json_line(&v), v.to_string());
        assert_eq!(&ndjson(&v)[..], format!("{v}\n").as_bytes());
    }
}
