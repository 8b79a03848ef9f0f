//! Renders every case of tests/fixtures/templates/expected.json (written by
//! scripts/render-templates.py with Python's Jinja2 set up like transformers)
//! and requires byte-identical output, or an error where Python failed.

use std::path::PathBuf;
use std::time::{Duration, UNIX_EPOCH};

use mlxr_template::{ChatTemplate, RenderOptions, TemplateError};
use serde::Deserialize;

#[derive(Deserialize)]
struct Case {
    name: String,
    /// A fixture file name (without .jinja), or None when `source` is inline.
    template: Option<String>,
    #[serde(default)]
    source: Option<String>,
    bos_token: String,
    eos_token: String,
    messages: Vec<serde_json::Value>,
    add_generation_prompt: bool,
    tools: Option<Vec<serde_json::Value>>,
    extra: serde_json::Map<String, serde_json::Value>,
    now_unix_secs: u64,
    expected: Option<String>,
    error: Option<String>,
}

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/templates")
}

fn load_cases() -> Vec<Case> {
    let text =
        std::fs::read_to_string(fixtures().join("expected.json")).expect("read expected.json");
    serde_json::from_str(&text).expect("parse expected.json")
}

fn render(case: &Case) -> Result<String, TemplateError> {
    render_with_fuel(case, mlxr_template::FUEL)
}

fn render_with_fuel(case: &Case, fuel: u64) -> Result<String, TemplateError> {
    let source = match (&case.source, &case.template) {
        (Some(source), _) => source.clone(),
        (None, Some(file)) => std::fs::read_to_string(fixtures().join(format!("{file}.jinja")))
            .unwrap_or_else(|e| panic!("{}: read template: {e}", case.name)),
        (None, None) => panic!("{}: case names no template", case.name),
    };
    let template = ChatTemplate::new(&source, &case.bos_token, &case.eos_token)?.with_fuel(fuel);
    let options = RenderOptions {
        add_generation_prompt: case.add_generation_prompt,
        tools: case.tools.clone(),
        extra: case.extra.clone(),
        now: Some(UNIX_EPOCH + Duration::from_secs(case.now_unix_secs)),
    };
    template.render_with(&case.messages, &options)
}

#[test]
fn renders_like_transformers() {
    let cases = load_cases();
    assert!(
        cases.len() > 100,
        "expected.json has only {} cases",
        cases.len()
    );
    let mut failures = Vec::new();
    for case in &cases {
        match (render(case), &case.expected, &case.error) {
            (Ok(got), Some(want), _) if &got == want => {}
            (Ok(got), Some(want), _) => failures.push(format!(
                "{}: rendering differs\n--- want\n{want}\n--- got\n{got}",
                case.name
            )),
            (Err(e), Some(_), _) => failures.push(format!("{}: unexpected error: {e}", case.name)),
            (Ok(got), None, Some(err)) => failures.push(format!(
                "{}: rendered, but Python failed with {err}\n{got}",
                case.name
            )),
            (Err(_), None, _) => {}
            (Ok(_), None, None) => {
                failures.push(format!("{}: case has neither output nor error", case.name))
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
}

/// The fuel budget leaves a wide margin: every case renders the same with
/// a hundredth of it.
#[test]
fn every_case_renders_with_a_hundredth_of_the_fuel() {
    let cases = load_cases();
    for case in cases.iter().filter(|c| c.expected.is_some()) {
        let got = render_with_fuel(case, mlxr_template::FUEL / 100);
        assert_eq!(
            got.as_ref().ok(),
            case.expected.as_ref(),
            "{}: {got:?}",
            case.name
        );
    }
}

/// Python's `raise_exception` message must come back as `TemplateError::Raised`.
#[test]
fn raised_exceptions_keep_their_message() {
    let raised: Vec<Case> = load_cases()
        .into_iter()
        .filter(|c| {
            c.error
                .as_deref()
                .is_some_and(|e| e.starts_with("TemplateError: "))
        })
        .collect();
    assert!(!raised.is_empty());
    for case in &raised {
        let want = case
            .error
            .as_deref()
            .unwrap()
            .trim_start_matches("TemplateError: ");
        match render(case) {
            Err(TemplateError::Raised(msg)) => assert_eq!(msg, want, "{}", case.name),
            other => panic!("{}: expected Raised({want:?}), got {other:?}", case.name),
        }
    }
}

/// The SmolLM2 fixture is the template embedded in the GGUF the project tests
/// with (re-extract with `scripts/render-templates.py --extract`).
#[test]
fn smollm2_fixture_is_well_formed() {
    let source = std::fs::read_to_string(fixtures().join("smollm2.jinja")).unwrap();
    assert!(source.contains("<|im_start|>"));
    ChatTemplate::new(&source, "<|im_start|>", "<|im_end|>").unwrap();
}
