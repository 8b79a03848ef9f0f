//! Inputs the fuzz targets found (fuzz/README.md), replayed through the
//! same code: `config.json` texts through `ModelConfig::from_hf_json`, each
//! an error or a configuration, never a panic or an abort.

use mlxr_models::ModelConfig;

#[test]
fn hf_config_inputs_are_handled() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-regressions/hf_config");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let result = ModelConfig::from_hf_json(&json);
        if path.to_string_lossy().contains("num-hidden-layers") {
            let err = result.expect_err("a huge layer count is refused");
            assert!(err.to_string().contains("layers"), "{err}");
        }
        seen += 1;
    }
    assert!(seen > 0, "no inputs in {}", dir.display());
}
