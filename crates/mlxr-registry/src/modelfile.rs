//! Ollama's Modelfile: `FROM`, `PARAMETER key value`, `TEMPLATE`, `SYSTEM`,
//! `MESSAGE role text`, `LICENSE`. Keywords are case-insensitive, `#` starts
//! a comment line, and a value may span lines inside `"""triple quotes"""`.

#[derive(Debug, Default, PartialEq)]
pub struct Modelfile {
    pub from: String,
    /// In file order; a key (like `stop`) may repeat.
    pub parameters: Vec<(String, String)>,
    pub template: Option<String>,
    pub system: Option<String>,
    pub messages: Vec<(String, String)>,
    pub licenses: Vec<String>,
}

/// Why a Modelfile was refused: the 1-based line and a readable sentence.
#[derive(Debug, PartialEq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

const ROLES: [&str; 3] = ["system", "user", "assistant"];

/// Parses a Modelfile's text. Every refusal is a [`ParseError`].
pub fn parse(text: &str) -> Result<Modelfile, ParseError> {
    let mut out = Modelfile::default();
    let mut from = None;
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let number = i + 1;
        let err = |message: String| ParseError {
            line: number,
            message,
        };
        let line = lines[i].trim();
        i += 1;
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (keyword, rest) = split_word(line);
        let keyword = keyword.to_ascii_uppercase();
        let (value, used) = read_value(rest, &lines[i..]).map_err(&err)?;
        i += used;
        match keyword.as_str() {
            "FROM" => {
                if value.is_empty() {
                    return Err(err("FROM needs a model name or a file path".into()));
                }
                from = Some(value);
            }
            "PARAMETER" => {
                let (key, param) = split_word(&value);
                let param = unquote(param.trim());
                if key.is_empty() || param.is_empty() {
                    return Err(err("PARAMETER needs a name and a value".into()));
                }
                out.parameters.push((key.to_ascii_lowercase(), param));
            }
            "TEMPLATE" => out.template = Some(value),
            "SYSTEM" => out.system = Some(value),
            "LICENSE" => out.licenses.push(value),
            "MESSAGE" => {
                let (role, content) = split_word(&value);
                let role = role.to_ascii_lowercase();
                if !ROLES.contains(&role.as_str()) {
                    return Err(err(format!(
                        "MESSAGE role must be system, user or assistant, not '{role}'"
                    )));
                }
                out.messages.push((role, unquote(content.trim())));
            }
            "ADAPTER" => return Err(err("ADAPTER is not supported yet".into())),
            other => return Err(err(format!("unknown instruction '{other}'"))),
        }
    }
    out.from = from.ok_or(ParseError {
        line: lines.len().max(1),
        message: "no FROM line: say which model or file to start from".into(),
    })?;
    Ok(out)
}

fn split_word(s: &str) -> (&str, &str) {
    let s = s.trim_start();
    match s.find(char::is_whitespace) {
        Some(at) => (&s[..at], s[at..].trim_start()),
        None => (s, ""),
    }
}

/// The instruction's argument: the rest of the line, or, when it contains
/// `"""`, everything up to the closing `"""` (possibly lines later).
/// Returns the value and how many further lines it used.
fn read_value(rest: &str, next: &[&str]) -> Result<(String, usize), String> {
    let Some(open) = rest.find(r#"""""#) else {
        return Ok((unquote(rest.trim()), 0));
    };
    let prefix = &rest[..open];
    let after = &rest[open + 3..];
    if let Some(close) = after.find(r#"""""#) {
        check_trailing(&after[close + 3..])?;
        return Ok((format!("{prefix}{}", &after[..close]), 0));
    }
    let mut body = after.to_string();
    for (used, line) in next.iter().enumerate() {
        body.push('\n');
        if let Some(close) = line.find(r#"""""#) {
            check_trailing(&line[close + 3..])?;
            body.push_str(&line[..close]);
            let body = body.strip_prefix('\n').unwrap_or(&body).to_string();
            return Ok((format!("{prefix}{body}"), used + 1));
        }
        body.push_str(line);
    }
    Err(r#"unterminated """ (no closing """ before the end of the file)"#.into())
}

fn check_trailing(s: &str) -> Result<(), String> {
    if s.trim().is_empty() {
        Ok(())
    } else {
        Err(format!(
            r#"unexpected text after the closing """: '{}'"#,
            s.trim()
        ))
    }
}

/// `"a b"` -> `a b`; anything else as is.
fn unquote(s: &str) -> String {
    if s.len() >= 2 && s.starts_with('"') && s.ends_with('"') {
        s[1..s.len() - 1].replace("\\\"", "\"")
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_instruction() {
        let text = r#"# a comment
from ./model.gguf
PARAMETER temperature 0
parameter stop "<|im_end|>"
PARAMETER stop User:
Template """{{ .System }}
{{ .Prompt }}"""
SYSTEM You are terse.
MESSAGE user Hi there
MESSAGE assistant """Hello!
How can I help?"""
LICENSE """MIT"""
"#;
        let m = parse(text).unwrap();
        assert_eq!(m.from, "./model.gguf");
        assert_eq!(
            m.parameters,
            vec![
                ("temperature".into(), "0".into()),
                ("stop".into(), "<|im_end|>".into()),
                ("stop".into(), "User:".into()),
            ]
        );
        assert_eq!(m.template.as_deref(), Some("{{ .System }}\n{{ .Prompt }}"));
        assert_eq!(m.system.as_deref(), Some("You are terse."));
        assert_eq!(
            m.messages,
            vec![
                ("user".into(), "Hi there".into()),
                ("assistant".into(), "Hello!\nHow can I help?".into()),
            ]
        );
        assert_eq!(m.licenses, vec!["MIT".to_string()]);
    }

    #[test]
    fn multi_line_value_starting_on_next_line() {
        let m = parse("FROM x\nSYSTEM \"\"\"\nline one\nline two\n\"\"\"\n").unwrap();
        assert_eq!(m.system.as_deref(), Some("line one\nline two\n"));
    }

    #[test]
    fn missing_from() {
        let e = parse("SYSTEM hi\n").unwrap_err();
        assert!(e.message.contains("no FROM"), "{e}");
    }

    #[test]
    fn unknown_instruction_names_its_line() {
        let e = parse("FROM x\n\nFROBNICATE y\n").unwrap_err();
        assert_eq!(e.line, 3);
        assert_eq!(e.to_string(), "line 3: unknown instruction 'FROBNICATE'");
    }

    #[test]
    fn unterminated_triple_quote() {
        let e = parse("FROM x\nTEMPLATE \"\"\"{{ .Prompt }}\nmore\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("unterminated"), "{e}");
    }

    #[test]
    fn bad_parameter_and_role() {
        assert_eq!(
            parse("FROM x\nPARAMETER temperature\n").unwrap_err().line,
            2
        );
        let e = parse("FROM x\nMESSAGE robot hi\n").unwrap_err();
        assert!(e.message.contains("robot"), "{e}");
        assert!(parse("FROM\n").unwrap_err().message.contains("FROM needs"));
    }

    #[test]
    fn text_after_closing_quotes_is_an_error() {
        let e = parse("FROM x\nSYSTEM \"\"\"hi\"\"\" extra\n").unwrap_err();
        assert!(e.message.contains("extra"), "{e}");
    }
}
