//! The bounds on user-supplied templates: source size, fuel, output size.

use std::path::PathBuf;

use mlxr_template::{ChatMessage, ChatTemplate, TemplateError, FUEL, MAX_SOURCE_BYTES};

fn user(text: &str) -> Vec<ChatMessage> {
    vec![ChatMessage::new("user", text)]
}

#[test]
fn runaway_loops_run_out_of_fuel() {
    for source in [
        "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",
        "{% for i in range(100000) %}{% for j in range(100000) %}{% set k = i * j %}{% endfor %}{% endfor %}",
        // Data built up without bound, a little at a time.
        "{% set ns = namespace(s='') %}{% for i in range(100000) %}{% for j in range(100000) %}\
         {% set ns.s = ns.s ~ 'abcdefgh' %}{% endfor %}{% endfor %}{{ ns.s }}",
    ] {
        let t = ChatTemplate::new(source, "", "").unwrap();
        match t.render(&user("hi"), true) {
            Err(TemplateError::OutOfFuel { fuel }) => assert_eq!(fuel, FUEL),
            other => panic!("{source}: expected OutOfFuel, got {other:?}"),
        }
    }
    let err = TemplateError::OutOfFuel { fuel: FUEL }.to_string();
    assert!(err.contains("ran out of fuel"), "{err}");
}

#[test]
fn long_sources_are_refused() {
    let just_fits = "x".repeat(MAX_SOURCE_BYTES);
    assert_eq!(
        ChatTemplate::new(&just_fits, "", "")
            .unwrap()
            .render(&[], false)
            .unwrap(),
        just_fits
    );
    let too_long = "x".repeat(MAX_SOURCE_BYTES + 1);
    match ChatTemplate::new(&too_long, "", "") {
        Err(TemplateError::TooLarge { bytes, max }) => {
            assert_eq!((bytes, max), (MAX_SOURCE_BYTES + 1, MAX_SOURCE_BYTES))
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
}

#[test]
fn output_past_the_cap_is_refused() {
    // 8 MiB strings printed 9 times: 72 MiB, over the 64 MiB cap.
    let source = "{% set s = 'x' * 8388608 %}{% for i in range(9) %}{{ s }}{% endfor %}";
    let t = ChatTemplate::new(source, "", "").unwrap();
    match t.render(&user("hi"), true) {
        Err(TemplateError::OutputTooLarge { .. }) => {}
        other => panic!("expected OutputTooLarge, got {:?}", other.map(|s| s.len())),
    }
}

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/templates")
}

/// Long conversations with every fixture template stay well within the
/// budget (a quarter of it): 4096 messages (the servers' cap on a chat) of
/// 256 bytes each, with a system prompt where the template takes one.
#[test]
fn long_conversations_fit_the_fuel() {
    let mut turns = Vec::new();
    for i in 0..4095 {
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        turns.push(ChatMessage::new(role, "word ".repeat(51)));
    }
    let with_system: Vec<ChatMessage> = std::iter::once(ChatMessage::new("system", "Be terse."))
        .chain(turns.iter().cloned())
        .collect();
    let mut checked = 0;
    for entry in std::fs::read_dir(fixtures()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "jinja") {
            continue;
        }
        let source = std::fs::read_to_string(&path).unwrap();
        let t = ChatTemplate::new(&source, "<s>", "</s>")
            .unwrap()
            .with_fuel(FUEL / 4);
        let rendered = match t.render(&with_system, true) {
            Err(TemplateError::Raised(_)) => t.render(&turns, true),
            other => other,
        };
        if let Err(e) = rendered {
            panic!("{}: {e}", path.display());
        }
        checked += 1;
    }
    assert!(checked >= 15, "only {checked} fixture templates");
}
