//! The `tojson` filter as transformers defines it: Python's `json.dumps` with
//! `ensure_ascii=False` by default and no HTML escaping (Jinja2's built-in
//! filter, and minijinja's, escape `<`, `>`, `&` and `'`).
//!
//! Accepts transformers' arguments: `ensure_ascii`, `indent`, `separators`,
//! `sort_keys`, by keyword or in that order.

use minijinja::value::{Kwargs, Rest, ValueKind};
use minijinja::{Error, ErrorKind, Value};

use crate::pyfmt::{float_repr, number_repr};

struct Options {
    ensure_ascii: bool,
    /// `None`: everything on one line.
    indent: Option<String>,
    item_sep: String,
    key_sep: String,
    sort_keys: bool,
}

pub(crate) fn tojson(
    value: &Value,
    positional: Rest<Value>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    if positional.len() > 4 {
        return Err(Error::new(
            ErrorKind::TooManyArguments,
            "tojson takes at most 4 arguments (ensure_ascii, indent, separators, sort_keys)",
        ));
    }
    let nth = |i: usize| positional.get(i).cloned();
    let (ensure_ascii, indent, separators, sort_keys) = (nth(0), nth(1), nth(2), nth(3));
    let pick = |positional: Option<Value>, name: &str| -> Result<Option<Value>, Error> {
        match kwargs.get::<Option<Value>>(name)? {
            Some(v) => Ok(Some(v)),
            None => Ok(positional),
        }
    };
    let ensure_ascii = pick(ensure_ascii, "ensure_ascii")?.is_some_and(|v| v.is_true());
    let sort_keys = pick(sort_keys, "sort_keys")?.is_some_and(|v| v.is_true());
    let indent = match pick(indent, "indent")? {
        None => None,
        Some(v) if v.is_none() || v.is_undefined() => None,
        Some(v) => Some(indent_text(&v)?),
    };
    let (item_sep, key_sep) = match pick(separators, "separators")? {
        Some(v) if !v.is_none() && !v.is_undefined() => separator_pair(&v)?,
        // json.dumps drops the space after ',' when indenting, since a
        // newline follows.
        _ if indent.is_some() => (",".to_owned(), ": ".to_owned()),
        _ => (", ".to_owned(), ": ".to_owned()),
    };
    kwargs.assert_all_used()?;
    let options = Options {
        ensure_ascii,
        indent,
        item_sep,
        key_sep,
        sort_keys,
    };
    let mut out = String::new();
    write_json(&mut out, value, &options, 0)?;
    Ok(Value::from(out))
}

fn indent_text(v: &Value) -> Result<String, Error> {
    if let Some(s) = v.as_str() {
        return Ok(s.to_owned());
    }
    match v.as_i64() {
        // Python repeats ' ' n times; a negative n gives no indentation.
        Some(n) => Ok(" ".repeat(n.max(0) as usize)),
        None => Err(Error::new(
            ErrorKind::InvalidOperation,
            format!(
                "tojson: indent must be an integer or a string, not {}",
                v.kind()
            ),
        )),
    }
}

fn separator_pair(v: &Value) -> Result<(String, String), Error> {
    let items: Vec<Value> = v.try_iter()?.collect();
    match items.as_slice() {
        [a, b] if a.as_str().is_some() && b.as_str().is_some() => Ok((
            a.as_str().unwrap_or_default().to_owned(),
            b.as_str().unwrap_or_default().to_owned(),
        )),
        _ => Err(Error::new(
            ErrorKind::InvalidOperation,
            "tojson: separators must be a pair of strings",
        )),
    }
}

fn newline_indent(out: &mut String, options: &Options, level: usize) {
    if let Some(indent) = &options.indent {
        out.push('\n');
        for _ in 0..level {
            out.push_str(indent);
        }
    }
}

fn write_json(
    out: &mut String,
    value: &Value,
    options: &Options,
    level: usize,
) -> Result<(), Error> {
    match value.kind() {
        ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if value.is_true() { "true" } else { "false" }),
        ValueKind::Number => out.push_str(&json_number(value)),
        ValueKind::String => write_json_str(
            out,
            value.as_str().unwrap_or_default(),
            options.ensure_ascii,
        ),
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = value.try_iter()?.collect();
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(&options.item_sep);
                }
                newline_indent(out, options, level + 1);
                write_json(out, item, options, level + 1)?;
            }
            newline_indent(out, options, level);
            out.push(']');
        }
        ValueKind::Map => {
            let mut entries = Vec::new();
            for key in value.try_iter()? {
                let item = value.get_item(&key)?;
                entries.push((json_key(&key)?, item));
            }
            if options.sort_keys {
                entries.sort_by(|a, b| a.0.cmp(&b.0));
            }
            if entries.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            out.push('{');
            for (i, (key, item)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push_str(&options.item_sep);
                }
                newline_indent(out, options, level + 1);
                write_json_str(out, key, options.ensure_ascii);
                out.push_str(&options.key_sep);
                write_json(out, item, options, level + 1)?;
            }
            newline_indent(out, options, level);
            out.push('}');
        }
        kind => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("tojson: a value of type {kind} is not JSON serializable"),
            ))
        }
    }
    Ok(())
}

fn json_number(value: &Value) -> String {
    if value.is_integer() {
        return value.to_string();
    }
    match f64::try_from(value.clone()) {
        Ok(x) if x.is_nan() => "NaN".into(),
        Ok(x) if x.is_infinite() => if x > 0.0 { "Infinity" } else { "-Infinity" }.into(),
        Ok(x) => float_repr(x),
        Err(_) => number_repr(value),
    }
}

/// json.dumps turns non-string keys into strings the JSON way
/// (`True` -> `"true"`, `None` -> `"null"`, `1.5` -> `"1.5"`).
fn json_key(key: &Value) -> Result<String, Error> {
    match key.kind() {
        ValueKind::String => Ok(key.as_str().unwrap_or_default().to_owned()),
        ValueKind::None => Ok("null".into()),
        ValueKind::Bool => Ok(if key.is_true() { "true" } else { "false" }.into()),
        ValueKind::Number => Ok(json_number(key)),
        kind => Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("tojson: keys must be str, int, float, bool or None, not {kind}"),
        )),
    }
}

/// Python's JSON string escaping: quotes, backslashes and control characters;
/// with `ensure_ascii`, everything outside printable ASCII as `\uXXXX`
/// (surrogate pairs above U+FFFF).
fn write_json_str(out: &mut String, s: &str, ensure_ascii: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if ensure_ascii && !(' '..='~').contains(&c) => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
