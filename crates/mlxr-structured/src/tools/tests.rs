//! The parser on recorded output shapes, fed whole, in every two-piece
//! split and character by character; the forced-call grammars on a real
//! vocabulary are tested through the engine and the API.

use serde_json::json;

use super::*;

fn tools() -> Vec<ToolSpec> {
    ["get_weather", "get_time"]
        .iter()
        .map(|n| {
            ToolSpec::from_json(&json!({"type": "function", "function": {
                "name": n, "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}))
            .unwrap()
        })
        .collect()
}

/// Contents joined, and the calls, whatever the pieces.
fn parse_in(format: ToolFormat, pieces: &[&str]) -> (String, Vec<ToolCall>) {
    let mut p = ToolCallParser::new(format, &tools());
    let mut out: Vec<Parsed> = pieces.iter().flat_map(|s| p.push(s)).collect();
    out.extend(p.finish());
    let mut text = String::new();
    let mut calls = Vec::new();
    for piece in out {
        match piece {
            Parsed::Content(c) => text.push_str(&c),
            Parsed::Call(c) => calls.push(c),
        }
    }
    (text, calls)
}

/// The same result for every way of cutting `output` into pieces.
fn parse(format: ToolFormat, output: &str) -> (String, Vec<ToolCall>) {
    let whole = parse_in(format, &[output]);
    let chars: Vec<String> = output.chars().map(String::from).collect();
    let by_char: Vec<&str> = chars.iter().map(String::as_str).collect();
    assert_eq!(
        parse_in(format, &by_char),
        whole,
        "char by char: {output:?}"
    );
    for (i, _) in output.char_indices() {
        let (a, b) = output.split_at(i);
        assert_eq!(parse_in(format, &[a, b]), whole, "split at {i}: {output:?}");
    }
    whole
}

fn weather(city: &str) -> ToolCall {
    ToolCall {
        name: "get_weather".into(),
        arguments: json!({"city": city}),
    }
}

#[test]
fn hermes_calls_after_text_and_in_parallel() {
    let out = "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    assert_eq!(
        parse(ToolFormat::Hermes, out),
        ("Let me check.".into(), vec![weather("Paris")])
    );
    let two = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n\
               <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>";
    assert_eq!(
        parse(ToolFormat::Hermes, two),
        (String::new(), vec![weather("Paris"), weather("Rome")])
    );
}

#[test]
fn text_streams_at_once_and_only_a_possible_tag_is_held_back() {
    let mut p = ToolCallParser::new(ToolFormat::Hermes, &tools());
    assert_eq!(p.push("Hello"), vec![Parsed::Content("Hello".into())]);
    assert_eq!(
        p.push(" world <tool"),
        vec![Parsed::Content(" world".into())]
    );
    assert_eq!(
        p.push("s are fun"),
        vec![Parsed::Content(" <tools are fun".into())]
    );
    assert_eq!(p.finish(), vec![]);
    // Nothing is lost when the text merely looks like a start.
    let out = "a < b, and <tool_call";
    assert_eq!(parse(ToolFormat::Hermes, out), (out.into(), vec![]));
}

#[test]
fn what_does_not_parse_stays_text() {
    let bad = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \n</tool_call> and more";
    assert_eq!(parse(ToolFormat::Hermes, bad), (bad.into(), vec![]));
    // An unclosed tag with a whole call at the end is a call.
    let unclosed = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}";
    assert_eq!(
        parse(ToolFormat::Hermes, unclosed),
        (String::new(), vec![weather("Oslo")])
    );
}

#[test]
fn bare_json_and_fenced_calls_of_known_tools() {
    let bare = "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}";
    for format in [ToolFormat::Hermes, ToolFormat::Json { native: false }] {
        assert_eq!(parse(format, bare), (String::new(), vec![weather("Paris")]));
        let fenced = format!("```json\n{bare}\n```");
        assert_eq!(
            parse(format, &fenced),
            (String::new(), vec![weather("Paris")])
        );
        // JSON that is not a call of a known tool is the reply.
        let other = "{\"name\": \"launch_rockets\", \"arguments\": {}}";
        assert_eq!(parse(format, other), (other.into(), vec![]));
        let data = "  {\"city\": \"Paris\", \"temp\": 21}";
        assert_eq!(parse(format, data), (data.into(), vec![]));
    }
}

#[test]
fn llama_parameters_phi_and_mistral_arrays_and_string_arguments() {
    let llama = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}; {\"name\": \"get_time\", \"parameters\": {}}";
    let (text, calls) = parse(ToolFormat::Json { native: true }, llama);
    assert_eq!(text, "");
    assert_eq!(
        calls,
        vec![
            weather("Paris"),
            ToolCall {
                name: "get_time".into(),
                arguments: json!({})
            }
        ]
    );
    let phi = "Sure.<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}]<|/tool_call|>";
    assert_eq!(
        parse(ToolFormat::Phi4Mini, phi),
        ("Sure.".into(), vec![weather("Paris"), weather("Rome")])
    );
    let mistral = "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"}]";
    assert_eq!(
        parse(ToolFormat::Mistral, mistral),
        (String::new(), vec![weather("Paris")])
    );
}

#[test]
fn formats_from_the_real_templates() {
    assert_eq!(
        ToolFormat::detect("{%- if tools %}<tools>{{ tool | tojson }}</tools> <tool_call>"),
        ToolFormat::Hermes
    );
    assert_eq!(
        ToolFormat::detect("[AVAILABLE_TOOLS] [TOOL_CALLS]"),
        ToolFormat::Mistral
    );
    assert_eq!(
        ToolFormat::detect("{{ messages }}"),
        ToolFormat::Json { native: false }
    );
}

#[test]
fn tool_specs_are_checked() {
    let err = |v| ToolSpec::from_json(&v).unwrap_err();
    assert!(err(json!({"type": "function"})).contains("function"));
    assert!(err(json!({"type": "function", "function": {"name": "a b"}})).contains("name"));
    assert!(err(json!({"type": "retrieval", "function": {"name": "a"}})).contains("retrieval"));
    assert!(err(json!({"function": {"name": "a", "parameters": 3}})).contains("parameters"));
    let t = ToolSpec::from_json(&json!({"function": {"name": "a"}})).unwrap();
    assert_eq!(t.parameters, json!({"type": "object"}));
}

#[test]
fn forced_calls_by_format() {
    let t = tools();
    let Some(Constraint::Triggered { trigger, .. }) =
        call_grammar(ToolFormat::Hermes, &t, &ToolChoice::Auto, true)
    else {
        panic!("auto: a grammar from <tool_call> on");
    };
    assert_eq!(trigger, "<tool_call>");
    let Some(Constraint::Lark(bare)) = call_grammar(
        ToolFormat::Json { native: false },
        &t,
        &ToolChoice::Auto,
        true,
    ) else {
        panic!("auto, bare JSON: a call or free text");
    };
    assert!(bare.starts_with("start: call | TEXT"), "{bare}");
    for (format, token) in [
        (ToolFormat::Mistral, "[TOOL_CALLS]"),
        (ToolFormat::Phi4Mini, "<|tool_call|>"),
    ] {
        let Some(Constraint::Triggered { trigger, .. }) =
            call_grammar(format, &t, &ToolChoice::Auto, true)
        else {
            panic!("{format:?} auto: a grammar from its call token on");
        };
        assert_eq!(trigger, token);
    }
    assert_eq!(
        call_grammar(ToolFormat::Hermes, &t, &ToolChoice::None, true),
        None
    );
    let Some(Constraint::Lark(lark)) =
        call_grammar(ToolFormat::Hermes, &t, &ToolChoice::Required, true)
    else {
        panic!("Hermes forces a Lark grammar");
    };
    assert!(
        lark.contains("<tool_call>")
            && lark.contains("(\"\\n\" call)*")
            && lark.contains("get_time")
    );
    let Some(Constraint::JsonSchema(s)) = call_grammar(
        ToolFormat::Json { native: false },
        &t,
        &ToolChoice::Function("get_time".into()),
        false,
    ) else {
        panic!("a JSON schema");
    };
    assert_eq!(s["properties"]["name"]["const"], "get_time");
    // Only the tool's own fields.
    assert_eq!(s["properties"]["arguments"]["additionalProperties"], false);
}
