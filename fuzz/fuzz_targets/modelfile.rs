//! Parses arbitrary text as an Ollama Modelfile. Refusals are errors naming
//! a line of the text, never panics; accepted files keep the parser's
//! guarantees (a FROM, lower-case parameter names with values, known roles).

#![no_main]

use libfuzzer_sys::fuzz_target;
use mlxr_registry::modelfile::parse;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse(text) {
        Ok(m) => {
            assert!(!m.from.is_empty());
            for (key, value) in &m.parameters {
                assert!(!key.is_empty() && !value.is_empty());
                assert_eq!(*key, key.to_ascii_lowercase());
            }
            for (role, _) in &m.messages {
                assert!(["system", "user", "assistant"].contains(&role.as_str()));
            }
            assert_eq!(parse(text), Ok(m), "parsing is deterministic");
        }
        Err(e) => {
            assert!(e.line >= 1 && e.line <= text.lines().count().max(1));
            assert!(e.to_string().starts_with("line "));
        }
    }
});
