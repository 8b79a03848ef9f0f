//! Python's `str()` and `repr()` of template values. Jinja2 prints values with
//! `str()`, so `{{ true }}` is `True` and `{{ [1, 'a'] }}` is `[1, 'a']`;
//! minijinja's own display (`true`, `[1, "a"]`) would change the prompt.

use minijinja::value::ValueKind;
use minijinja::Value;

/// `repr(float)`: the shortest digits that round-trip, positional for
/// exponents in -4..16 and scientific (`1e+16`, `1.5e-05`) outside.
pub(crate) fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.into();
    }
    // Rust's `{:e}` already yields the shortest round-trip digits.
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let mut out = String::with_capacity(digits.len() + 8);
    if negative {
        out.push('-');
    }
    if (-4..16).contains(&exp) {
        if exp >= 0 {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                out.push_str(&digits);
                out.extend(std::iter::repeat_n('0', int_len - digits.len()));
                out.push_str(".0");
            } else {
                out.push_str(&digits[..int_len]);
                out.push('.');
                out.push_str(&digits[int_len..]);
            }
        } else {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-exp - 1) as usize));
            out.push_str(&digits);
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        out.push_str(&format!("{:02}", exp.unsigned_abs()));
    }
    out
}

/// `str(value)`, which is what Jinja2 prints for `{{ value }}`.
pub(crate) fn py_str(value: &Value) -> String {
    match value.kind() {
        ValueKind::Undefined => String::new(),
        ValueKind::String => value.as_str().unwrap_or_default().to_owned(),
        _ => py_repr(value),
    }
}

/// `repr(value)`, used inside containers (`['a', 1]`).
pub(crate) fn py_repr(value: &Value) -> String {
    let mut out = String::new();
    write_repr(&mut out, value);
    out
}

fn write_repr(out: &mut String, value: &Value) {
    match value.kind() {
        ValueKind::Undefined => {}
        ValueKind::None => out.push_str("None"),
        ValueKind::Bool => out.push_str(if value.is_true() { "True" } else { "False" }),
        ValueKind::Number => out.push_str(&number_repr(value)),
        ValueKind::String => write_str_repr(out, value.as_str().unwrap_or_default()),
        ValueKind::Seq => {
            let (open, close) = if value.is_tuple() {
                ("(", ")")
            } else {
                ("[", "]")
            };
            out.push_str(open);
            let items: Vec<Value> = value.try_iter().map(Iterator::collect).unwrap_or_default();
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(out, item);
            }
            if value.is_tuple() && items.len() == 1 {
                out.push(',');
            }
            out.push_str(close);
        }
        ValueKind::Map => {
            out.push('{');
            let keys: Vec<Value> = value.try_iter().map(Iterator::collect).unwrap_or_default();
            for (i, key) in keys.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(out, key);
                out.push_str(": ");
                write_repr(out, &value.get_item(key).unwrap_or_default());
            }
            out.push('}');
        }
        _ => out.push_str(&value.to_string()),
    }
}

pub(crate) fn number_repr(value: &Value) -> String {
    if value.is_integer() {
        return value.to_string();
    }
    match f64::try_from(value.clone()) {
        Ok(x) => float_repr(x),
        Err(_) => value.to_string(),
    }
}

/// Python picks single quotes unless the text has one and no double quote.
/// Non-printable characters are approximated by Unicode control characters.
fn write_str_repr(out: &mut String, s: &str) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => {
                let code = c as u32;
                if code <= 0xff {
                    out.push_str(&format!("\\x{code:02x}"));
                } else {
                    out.push_str(&format!("\\u{code:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_repr_matches_python() {
        // Right-hand sides printed by CPython 3.11's repr().
        let cases = [
            (1e16, "1e+16"),
            (1.5e-5, "1.5e-05"),
            (0.0001, "0.0001"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (-0.0, "-0.0"),
            (7.5, "7.5"),
            (1e100, "1e+100"),
            (2.5e-300, "2.5e-300"),
            (1.0 / 3.0, "0.3333333333333333"),
            (1e15, "1000000000000000.0"),
            (9999999999999998.0, "9999999999999998.0"),
            (21.0, "21.0"),
            (f64::INFINITY, "inf"),
        ];
        for (x, want) in cases {
            assert_eq!(float_repr(x), want, "{x:e}");
        }
    }

    #[test]
    fn repr_of_containers() {
        let v = Value::from(minijinja::value::Serde(
            serde_json::json!({"a": [1, 2.5, "it's", true, null], "b": "x"}),
        ));
        assert_eq!(
            py_repr(&v),
            "{'a': [1, 2.5, \"it's\", True, None], 'b': 'x'}"
        );
        assert_eq!(py_str(&Value::from("plain")), "plain");
        assert_eq!(py_str(&Value::UNDEFINED), "");
        assert_eq!(
            py_repr(&Value::from("a\nb\\'\"\u{1}")),
            "'a\\nb\\\\\\'\"\\x01'"
        );
    }
}
