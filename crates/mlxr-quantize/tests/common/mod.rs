//! What the llama-quantize comparisons share.

use mlxr_formats::gguf::GgufFile;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Where `file`'s tensors (name, type, data hash, in order) differ from the
/// recorded `expected` list, one line each, prefixed with `label`.
pub fn tensor_mismatches(file: &GgufFile, expected: &Value, label: &str) -> Vec<String> {
    let tensors = expected.as_array().unwrap();
    assert_eq!(file.tensors().len(), tensors.len(), "{label}");
    let mut failures = Vec::new();
    for (t, e) in file.tensors().iter().zip(tensors) {
        let sha = format!("{:x}", Sha256::digest(file.raw_tensor_data(t).unwrap()));
        let got = (t.name.as_str(), t.ggml_type.name(), sha.as_str());
        let want = (
            e["name"].as_str().unwrap(),
            e["type"].as_str().unwrap(),
            e["sha256"].as_str().unwrap(),
        );
        if got != want {
            let data = if got.2 != want.2 {
                " (data differs)"
            } else {
                ""
            };
            failures.push(format!(
                "{label}: got {} {} want {} {}{data}",
                got.0, got.1, want.0, want.1
            ));
        }
    }
    failures
}
