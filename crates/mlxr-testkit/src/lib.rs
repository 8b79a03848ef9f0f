//! Test support shared by MLXR's crates: where the real models
//! (`scripts/fetch-models.sh`) and the committed fixtures are.

use std::path::PathBuf;

pub const SMOLLM2: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
pub const GEMMA3: &str = "gemma-3-270m-q4_k_m.gguf";
pub const MINILM: &str = "all-MiniLM-L6-v2";
/// The speculative-decoding pair: the draft and the target
/// (`scripts/fetch-models.sh qwen-coder`).
pub const QWEN_CODER_05B: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
pub const QWEN_CODER_15B: &str = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";
/// llama.cpp's tokenizer test vocabularies (`ggml-vocab-*.gguf` + `.inp`/`.out`).
pub const LLAMACPP_VOCABS: &str = "llama.cpp-vocabs";

/// `$MLXR_MODELS_DIR`, or `~/.cache/mlxr/models`.
pub fn models_dir() -> PathBuf {
    match std::env::var_os("MLXR_MODELS_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/mlxr/models"),
    }
}

/// The model file or folder `name`, or `None` (the test is skipped, with a
/// note) when the models were not fetched — unless `MLXR_REQUIRE_MODELS=1`,
/// as in CI, where a missing model fails the test.
pub fn model_path(name: &str) -> Option<PathBuf> {
    let path = models_dir().join(name);
    if path.exists() {
        return Some(path);
    }
    assert!(
        std::env::var("MLXR_REQUIRE_MODELS").as_deref() != Ok("1"),
        "{} missing: run scripts/fetch-models.sh",
        path.display()
    );
    skip_note(&format!(
        "{} not found (scripts/fetch-models.sh)",
        path.display()
    ));
    None
}

/// Says on the test run's own stderr that a test skipped part of its work
/// and why. Written past libtest's output capture (which takes only the
/// `print!`/`eprint!` macros), so it shows for passing tests too.
pub fn skip_note(why: &str) {
    use std::io::Write;
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("test");
    let _ = writeln!(std::io::stderr(), "note: {test}: skipped: {why}");
}

/// `tests/fixtures/<relative>` at the workspace root.
pub fn fixture_path(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(relative)
}
