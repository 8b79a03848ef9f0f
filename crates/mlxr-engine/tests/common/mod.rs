//! Shared by the engine's integration tests: locating the real models.

use std::path::PathBuf;

pub const SMOLLM2: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
pub const GEMMA3: &str = "gemma-3-270m-q4_k_m.gguf";

/// The model file, or `None` (test skipped) when the models were not
/// fetched — unless `MLXR_REQUIRE_MODELS=1`, as in CI.
pub fn model_path(file: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("MLXR_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/mlxr/models")
        });
    let path = dir.join(file);
    if path.exists() {
        return Some(path);
    }
    assert!(
        std::env::var("MLXR_REQUIRE_MODELS").as_deref() != Ok("1"),
        "{} missing: run scripts/fetch-models.sh",
        path.display()
    );
    eprintln!("skipping: {} not found", path.display());
    None
}
