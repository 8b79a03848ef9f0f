use std::time::{Duration, UNIX_EPOCH};

use mlxr_template::{ChatMessage, ChatTemplate, RenderOptions, TemplateError};

fn conversation() -> Vec<ChatMessage> {
    vec![
        ChatMessage::new("system", "You are terse."),
        ChatMessage::new("user", "Hi"),
        ChatMessage::new("assistant", "Hello."),
        ChatMessage::new("user", "Bye"),
    ]
}

#[test]
fn fallback_format() {
    let t = ChatTemplate::fallback();
    assert_eq!(
        t.render(&conversation(), true).unwrap(),
        "System: You are terse.\nUser: Hi\nAssistant: Hello.\nUser: Bye\nAssistant:"
    );
    assert_eq!(
        t.render(&conversation()[1..2], false).unwrap(),
        "User: Hi\n"
    );
    let odd = [ChatMessage::new("tool", "42")];
    assert_eq!(t.render(&odd, true).unwrap(), "Tool: 42\nAssistant:");
    assert_eq!(t.render(&[], true).unwrap(), "Assistant:");
}

#[test]
fn syntax_errors_are_reported_with_their_line() {
    let err = ChatTemplate::new("ok\n{% if x %}\nnever closed", "", "").unwrap_err();
    match &err {
        TemplateError::Syntax { line, message } => {
            assert!(line.is_some(), "{err}");
            assert!(message.contains("syntax error"), "{message}");
        }
        other => panic!("expected a syntax error, got {other:?}"),
    }
    assert!(ChatTemplate::new("{{ unclosed", "", "").is_err());
    assert!(ChatTemplate::new("{% endfor %}", "", "").is_err());
}

#[test]
fn raise_exception_becomes_raised_with_the_message() {
    let t = ChatTemplate::new(
        "{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}ok",
        "",
        "",
    )
    .unwrap();
    assert_eq!(
        t.render(&conversation(), false),
        Err(TemplateError::Raised("System role not supported".into()))
    );
    assert_eq!(t.render(&conversation()[1..], false).unwrap(), "ok");
    // Raised from inside a macro and a loop too.
    let nested = ChatTemplate::new(
        "{% macro check(m) %}{% if m.role == 'assistant' %}{{ raise_exception('no ' ~ m.role) }}{% endif %}{% endmacro %}\
         {% for m in messages %}{{ check(m) }}{% endfor %}",
        "",
        "",
    )
    .unwrap();
    assert_eq!(
        nested.render(&conversation(), false),
        Err(TemplateError::Raised("no assistant".into()))
    );
}

#[test]
fn render_failures_are_errors_not_panics() {
    let cases = [
        "{{ nothing.attr }}",
        "{{ 'a' + 1 }}",
        "{{ messages | tojson(indent=[]) }}",
        "{{ messages[0].content.no_such_method() }}",
        "{{ 1 / 0 }}",
    ];
    for source in cases {
        let t = ChatTemplate::new(source, "", "").unwrap();
        match t.render(&conversation(), false) {
            Err(TemplateError::Render { .. }) => {}
            other => panic!("{source}: expected a render error, got {other:?}"),
        }
    }
}

#[test]
fn lenient_undefined_like_jinja2() {
    let t = ChatTemplate::new(
        "[{{ missing }}]{% for x in missing %}x{% endfor %}{{ missing is defined }}{{ missing | default('d') }}",
        "",
        "",
    )
    .unwrap();
    assert_eq!(t.render(&[], false).unwrap(), "[]Falsed");
}

#[test]
fn exposes_tokens_and_generation_flag() {
    let t = ChatTemplate::new(
        "{{ bos_token }}|{{ add_generation_prompt }}|{{ eos_token }}|{{ tools }}",
        "<s>",
        "</s>",
    )
    .unwrap();
    assert_eq!(t.render(&[], true).unwrap(), "<s>|True|</s>|None");
    assert_eq!(t.bos_token(), "<s>");
    assert_eq!(t.eos_token(), "</s>");
}

#[test]
fn source_is_kept_verbatim() {
    let source = "{% for m in messages %}{{ m.content }}\r\n{% endfor %}";
    let t = ChatTemplate::new(source, "", "").unwrap();
    assert_eq!(t.source(), source);
    // Jinja2 reads template text with \r\n turned into \n.
    assert_eq!(t.render(&conversation()[1..2], false).unwrap(), "Hi\n");
}

#[test]
fn trailing_newline_of_the_template_is_dropped() {
    let t = ChatTemplate::new("{{ messages | length }}\n", "", "").unwrap();
    assert_eq!(t.render(&conversation(), false).unwrap(), "4");
}

#[test]
fn strftime_now_reads_the_given_clock() {
    let t = ChatTemplate::new("{{ strftime_now('%d %b %Y %H:%M') }}", "", "").unwrap();
    let options = RenderOptions {
        now: Some(UNIX_EPOCH + Duration::from_secs(1_721_984_703)),
        ..RenderOptions::default()
    };
    assert_eq!(
        t.render_with(&conversation(), &options).unwrap(),
        "26 Jul 2024 09:05"
    );
    let today = t.render(&[], false).unwrap();
    let year: u32 = today[7..11].parse().unwrap();
    assert!(year >= 2024, "{today}");
}

#[test]
fn extra_variables_do_not_override_the_renderers_own() {
    let t = ChatTemplate::new("{{ messages | length }} {{ enable_thinking }}", "", "").unwrap();
    let mut options = RenderOptions::default();
    options
        .extra
        .insert("messages".into(), serde_json::json!([]));
    options
        .extra
        .insert("enable_thinking".into(), serde_json::json!(false));
    assert_eq!(t.render_with(&conversation(), &options).unwrap(), "4 False");
}

#[test]
fn generation_tags_render_their_body() {
    let t = ChatTemplate::new(
        "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}[{{ m.content }}]{% endgeneration %}{% else %}{{ m.content }}{% endif %}{% endfor %}",
        "",
        "",
    )
    .unwrap();
    assert_eq!(
        t.render(&conversation(), false).unwrap(),
        "You are terse.Hi[Hello.]Bye"
    );
}

#[test]
fn render_with_accepts_richer_messages() {
    let t = ChatTemplate::new(
        "{% for m in messages %}{{ m.role }}:{% if m.tool_calls %}{{ m.tool_calls[0].function.arguments | tojson }}{% else %}{{ m.content }}{% endif %};{% endfor %}",
        "",
        "",
    )
    .unwrap();
    let messages = serde_json::json!([
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "w", "arguments": {"city": "Zürich", "days": 2.0}}}]},
    ]);
    let messages = messages.as_array().unwrap();
    assert_eq!(
        t.render_with(messages, &RenderOptions::default()).unwrap(),
        "user:weather?;assistant:{\"city\": \"Zürich\", \"days\": 2.0};"
    );
}

/// Python's `%` string operator has no minijinja equivalent; such a template
/// fails with an error instead of rendering differently.
#[test]
fn percent_formatting_is_an_error() {
    let t = ChatTemplate::new("{{ '%s!' % 'hi' }}", "", "").unwrap();
    assert!(matches!(
        t.render(&[], false),
        Err(TemplateError::Render { .. })
    ));
}
