//! Model name parsing and validation.

use mlxr_registry::{ModelName, RegistryError};

#[test]
fn parses_ollama_style_names() {
    let n = ModelName::parse("smollm2").unwrap();
    assert_eq!((n.model(), n.tag()), ("smollm2", "latest"));
    assert_eq!(n.to_string(), "smollm2:latest");
    assert_eq!(
        ModelName::parse("smollm2:135m").unwrap().to_string(),
        "smollm2:135m"
    );

    let hf = ModelName::parse("hf.co/org/repo:Q4_K_M").unwrap();
    assert_eq!(hf.host(), Some("hf.co"));
    assert_eq!(hf.namespace(), Some("org"));
    assert_eq!(hf.model(), "repo");
    assert_eq!(hf.tag(), "Q4_K_M");
    assert_eq!(hf.to_string(), "hf.co/org/repo:Q4_K_M");

    let ns = ModelName::parse("library/llama3.2:3b-instruct-q4_K_M").unwrap();
    assert_eq!(ns.namespace(), Some("library"));
    assert_eq!(ns.host(), None);
    assert_eq!(ns.with_tag("x").unwrap().to_string(), "library/llama3.2:x");
}

#[test]
fn rejects_traversal_and_bad_characters() {
    let bad = [
        "",
        ":",
        "model:",
        ":tag",
        "..",
        "../etc/passwd",
        "a/../b",
        "..:latest",
        "model:..",
        "model:../x",
        ".hidden",
        "-flag",
        "a..b",
        "/abs",
        "a//b",
        "a/",
        "a/b/c/d",
        "a b",
        "a\\b",
        "a\0b",
        "mödel",
        "a:b:c",
        "host:80/ns/model",
        "model:tag/x",
        "ns/model:t?g",
    ];
    for s in bad {
        match ModelName::parse(s) {
            Err(RegistryError::InvalidName { .. }) => {}
            other => panic!("{s:?} was accepted: {other:?}"),
        }
    }
}

#[test]
fn rejects_over_long_names() {
    let long = "a".repeat(129);
    assert!(ModelName::parse(&long).is_err());
    assert!(ModelName::parse(&format!("m:{long}")).is_err());
    assert!(ModelName::parse(&"a".repeat(128)).is_ok());
    let whole = format!(
        "{}/{}/{}:{}",
        "h".repeat(253),
        "n".repeat(128),
        "m".repeat(128),
        "t".repeat(10)
    );
    assert!(ModelName::parse(&whole).is_err(), "over 512 bytes in all");
}

#[test]
fn error_messages_name_the_problem() {
    let e = ModelName::parse("../x").unwrap_err().to_string();
    assert!(e.contains("invalid model name"), "{e}");
    assert!(ModelName::parse("a b")
        .unwrap_err()
        .to_string()
        .contains("' '"));
}

#[test]
fn sanitizes_file_names_into_parts() {
    assert_eq!(
        ModelName::sanitize_part("SmolLM2 135M (v1)..gguf").as_deref(),
        Some("SmolLM2-135M--v1-.gguf")
    );
    assert_eq!(ModelName::sanitize_part("...").as_deref(), None);
    assert_eq!(ModelName::sanitize_part("../x").as_deref(), Some("x"));
}
