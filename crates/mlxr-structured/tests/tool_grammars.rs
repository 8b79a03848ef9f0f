//! The tool-call grammars on Qwen2.5-Coder's real vocabulary: under `auto`
//! the model writes freely until its `<tool_call>` token, then only a call
//! of a known tool with arguments of that tool's schema, then freely again.

use std::sync::Arc;

use mlxr_formats::gguf::GgufFile;
use mlxr_structured::tools::{call_grammar, ToolChoice, ToolFormat, ToolSpec};
use mlxr_structured::{Grammars, TokenConstraint};
use mlxr_tokenizer::Tokenizer;
use serde_json::json;

/// `get_weather(city: string)`, the one tool the tests offer.
fn weather_tool() -> ToolSpec {
    ToolSpec::from_json(&json!({"type": "function", "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}))
    .unwrap()
}

/// Feeds `text` to `m` a token at a time (forced tokens first, else the
/// text's first token); false at the first token the grammar refuses or
/// where it forces other text than `text`.
fn feed(tokenizer: &Tokenizer, m: &mut TokenConstraint, text: &str) -> bool {
    let mut rest = text.to_owned();
    while !rest.is_empty() {
        let next = m
            .forced()
            .first()
            .copied()
            .unwrap_or_else(|| tokenizer.encode(&rest, false, false)[0]);
        let s = tokenizer.decode(&[next], false);
        if !m.allows(next) || !rest.starts_with(&s) {
            return false;
        }
        m.commit(next).unwrap();
        rest.drain(..s.len());
    }
    true
}

#[test]
fn auto_holds_a_call_to_its_syntax_from_the_call_token_on() {
    let Some(path) = mlxr_testkit::model_path(mlxr_testkit::QWEN_CODER_05B) else {
        return;
    };
    let file = GgufFile::open(&path).unwrap();
    let tokenizer = Arc::new(Tokenizer::from_gguf(file.metadata()).unwrap());
    let grammars = Grammars::new(&tokenizer, tokenizer.vocab_size()).unwrap();
    let tools = [weather_tool()];
    let grammar = call_grammar(ToolFormat::Hermes, &tools, &ToolChoice::Auto, true).unwrap();
    let mut m = grammars.compile(&grammar).unwrap();
    let ids = |s: &str| tokenizer.encode(s, false, false);
    let open = tokenizer.token_id("<tool_call>").unwrap();
    let close = tokenizer.token_id("</tool_call>").unwrap();
    let eos = tokenizer.eog_ids()[0];

    // Free text before a call: anything goes, nothing is masked or forced.
    for t in ids("Let me check the weather. {not json") {
        assert!(m.allows(t));
        m.commit(t).unwrap();
    }
    let mut scores = vec![0.0f32; tokenizer.vocab_size()];
    m.mask(&mut scores).unwrap();
    assert!(scores.iter().all(|&s| s == 0.0));
    assert!(m.forced().is_empty());

    // The call token arms the grammar: a call of a known tool only.
    m.commit(open).unwrap();
    assert!(!m.allows(ids("Hello")[0]));
    assert!(!m.allows(eos), "a call cannot end the reply half written");
    let mut text = String::new();
    for piece in ["\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"] {
        let mut rest = piece.to_owned();
        while !rest.is_empty() {
            let forced = m.forced();
            let next = if forced.is_empty() {
                ids(&rest)[0]
            } else {
                forced[0]
            };
            assert!(
                m.allows(next),
                "{:?} refused after {text:?}",
                tokenizer.decode(&[next], false)
            );
            m.commit(next).unwrap();
            let s = tokenizer.decode(&[next], false);
            assert!(rest.starts_with(&s), "{s:?} is not the start of {rest:?}");
            rest.drain(..s.len());
            text += &s;
        }
    }
    m.mask(&mut scores).unwrap();
    assert_eq!(
        scores[close as usize], 0.0,
        "the call is complete: </tool_call> may follow"
    );
    m.commit(close).unwrap();
    // Free again: more text, another call, or the end.
    assert!(!m.is_finished());
    assert!(m.allows(ids("Done")[0]) && m.allows(eos) && m.allows(open));

    // A call of a tool not offered is refused where its name starts.
    let mut m = grammars.compile(&grammar).unwrap();
    m.commit(open).unwrap();
    let mut refused = false;
    for t in ids("\n{\"name\": \"launch_rockets\"") {
        if !m.allows(t) {
            refused = true;
            break;
        }
        m.commit(t).unwrap();
    }
    assert!(refused, "an unknown tool name was allowed");
}

/// Bare JSON formats (Llama 3.x's, and the system-message fallback of
/// models without tools, here SmolLM2): under `auto` a reply that opens a
/// JSON object is held to a call of a known tool; any other reply is free.
#[test]
fn auto_holds_a_bare_json_reply_to_a_call() {
    let Some(path) = mlxr_testkit::model_path(mlxr_testkit::SMOLLM2) else {
        return;
    };
    let file = GgufFile::open(&path).unwrap();
    let tokenizer = Arc::new(Tokenizer::from_gguf(file.metadata()).unwrap());
    let grammars = Grammars::new(&tokenizer, tokenizer.vocab_size()).unwrap();
    let tools = [weather_tool()];
    let format = ToolFormat::Json { native: false };
    let grammar = call_grammar(format, &tools, &ToolChoice::Auto, true).unwrap();
    let eos = tokenizer.eog_ids()[0];

    let mut m = grammars.compile(&grammar).unwrap();
    assert!(m.allows(eos), "an empty reply is a reply");
    assert!(feed(
        &tokenizer,
        &mut m,
        "It is sunny in Paris today, {probably} 25 degrees."
    ));
    assert!(m.allows(eos));

    let mut m = grammars.compile(&grammar).unwrap();
    assert!(feed(
        &tokenizer,
        &mut m,
        "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"
    ));
    assert!(m.is_finished(), "the call is the whole reply");

    for wrong in [
        "{\"name\": \"get_time\"",
        "{\"city\": \"Paris\"}",
        "{\"name\": \"get_weather\", \"arguments\": {\"town\"",
    ] {
        let mut m = grammars.compile(&grammar).unwrap();
        assert!(!feed(&tokenizer, &mut m, wrong), "{wrong} was allowed");
    }
    let mut m = grammars.compile(&grammar).unwrap();
    assert!(feed(
        &tokenizer,
        &mut m,
        "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\""
    ));
    assert!(
        !m.allows(eos) && !m.is_finished(),
        "a call cannot end half written"
    );
}

/// Qwen2.5-Coder's vocabulary with three of its padding tokens renamed to
/// Phi-4-mini's call tokens, user-defined as Qwen's own `<tool_call>` is,
/// and Mistral's `[TOOL_CALLS]`, a control token as in Mistral's GGUFs (no
/// model with these vocabularies is here).
fn with_call_tokens(file: &GgufFile) -> Tokenizer {
    use mlxr_formats::gguf::{Metadata, MetadataArray, MetadataValue};
    const RENAMED: [&str; 3] = ["<|tool_call|>", "<|/tool_call|>", "[TOOL_CALLS]"];
    let entries = file.metadata().iter().map(|(key, value)| {
        let mut value = value.clone();
        match (key, &mut value) {
            ("tokenizer.ggml.tokens", MetadataValue::Array(MetadataArray::String(tokens))) => {
                let n = tokens.len();
                for (slot, name) in tokens[n - RENAMED.len()..].iter_mut().zip(RENAMED) {
                    assert!(slot.starts_with("[PAD"), "{slot} is not a padding token");
                    *slot = name.to_owned();
                }
            }
            ("tokenizer.ggml.token_type", MetadataValue::Array(MetadataArray::I32(types))) => {
                let n = types.len();
                types[n - RENAMED.len()..].copy_from_slice(&[4, 4, 3]);
            }
            _ => {}
        }
        (key.to_owned(), value)
    });
    Tokenizer::from_gguf(&Metadata::from_entries(entries).unwrap()).unwrap()
}

/// Phi-4-mini's `<|tool_call|>[...]<|/tool_call|>` and Mistral's
/// `[TOOL_CALLS] [...]` under `auto` (free text until the call token, then
/// an array of calls of known tools) and, for Phi-4-mini, `required`.
#[test]
fn call_token_formats_hold_an_array_of_calls() {
    let Some(path) = mlxr_testkit::model_path(mlxr_testkit::QWEN_CODER_05B) else {
        return;
    };
    let file = GgufFile::open(&path).unwrap();
    let tokenizer = Arc::new(with_call_tokens(&file));
    let grammars = Grammars::new(&tokenizer, tokenizer.vocab_size()).unwrap();
    let tools = [weather_tool()];
    let ids = |s: &str| tokenizer.encode(s, false, false);
    let token = |s: &str| tokenizer.token_id(s).unwrap();
    let eos = tokenizer.eog_ids()[0];
    let two_calls = "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, \
                     {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}]";

    // Phi-4-mini, auto: free, then the array, then the closing token, then free.
    let grammar = call_grammar(ToolFormat::Phi4Mini, &tools, &ToolChoice::Auto, true).unwrap();
    let mut m = grammars.compile(&grammar).unwrap();
    assert!(feed(
        &tokenizer,
        &mut m,
        "Let me look that up. [not a call]"
    ));
    m.commit(token("<|tool_call|>")).unwrap();
    assert!(!m.allows(ids("Hello")[0]) && !m.allows(eos));
    assert!(feed(&tokenizer, &mut m, two_calls));
    assert!(!m.allows(eos), "the call must be closed");
    let close = token("<|/tool_call|>");
    assert!(m.allows(close));
    m.commit(close).unwrap();
    assert!(m.allows(eos) && m.allows(ids("Done")[0]));

    let mut m = grammars.compile(&grammar).unwrap();
    m.commit(token("<|tool_call|>")).unwrap();
    assert!(
        !feed(&tokenizer, &mut m, "[{\"name\": \"launch_rockets\""),
        "an unknown tool was allowed"
    );

    // Phi-4-mini, required: the call token first, one call without `parallel`.
    let grammar = call_grammar(ToolFormat::Phi4Mini, &tools, &ToolChoice::Required, false).unwrap();
    let mut m = grammars.compile(&grammar).unwrap();
    assert!(!m.allows(ids("Sure")[0]), "a required call starts at once");
    let open = m
        .forced()
        .first()
        .copied()
        .unwrap_or_else(|| token("<|tool_call|>"));
    assert_eq!(open, token("<|tool_call|>"));
    m.commit(open).unwrap();
    assert!(
        !feed(&tokenizer, &mut m, two_calls),
        "two calls without parallel_tool_calls"
    );
    let mut m = grammars.compile(&grammar).unwrap();
    m.commit(token("<|tool_call|>")).unwrap();
    assert!(feed(
        &tokenizer,
        &mut m,
        "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]"
    ));
    m.commit(close).unwrap();
    assert!(m.is_finished() || m.allows(eos));

    // Mistral, auto: free, then `[TOOL_CALLS]` and the array.
    let grammar = call_grammar(ToolFormat::Mistral, &tools, &ToolChoice::Auto, true).unwrap();
    let mut m = grammars.compile(&grammar).unwrap();
    assert!(feed(&tokenizer, &mut m, "I will check. {\"name\": 1}"));
    m.commit(token("[TOOL_CALLS]")).unwrap();
    assert!(!m.allows(eos) && !m.allows(ids("Hello")[0]));
    assert!(feed(&tokenizer, &mut m, two_calls));
    assert!(m.allows(eos), "the array ends the call");
    let mut m = grammars.compile(&grammar).unwrap();
    m.commit(token("[TOOL_CALLS]")).unwrap();
    assert!(!feed(
        &tokenizer,
        &mut m,
        "[{\"name\": \"get_weather\", \"arguments\": {\"town\""
    ));

    // Mistral, a named function: `[TOOL_CALLS]` at once (by id), then one call.
    let named = ToolChoice::Function("get_weather".into());
    let grammar = call_grammar(ToolFormat::Mistral, &tools, &named, false).unwrap();
    let mut m = grammars.compile(&grammar).unwrap();
    assert!(
        !m.allows(ids("Sure")[0]) && !m.allows(eos),
        "the call starts at once"
    );
    assert!(m.allows(token("[TOOL_CALLS]")));
    m.commit(token("[TOOL_CALLS]")).unwrap();
    assert!(
        !feed(&tokenizer, &mut m, two_calls),
        "two calls without parallel_tool_calls"
    );
    let mut m = grammars.compile(&grammar).unwrap();
    m.commit(token("[TOOL_CALLS]")).unwrap();
    assert!(feed(
        &tokenizer,
        &mut m,
        "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]"
    ));
    assert!(m.is_finished() || m.allows(eos));
    // A vocabulary without the token cannot open the call: a clear error.
    let plain = Arc::new(Tokenizer::from_gguf(file.metadata()).unwrap());
    let plain = Grammars::new(&plain, plain.vocab_size()).unwrap();
    let Err(e) = plain.compile(&grammar) else {
        panic!("compiled without [TOOL_CALLS]");
    };
    assert!(
        e.to_string().contains("no special token [TOOL_CALLS]"),
        "{e}"
    );
}
