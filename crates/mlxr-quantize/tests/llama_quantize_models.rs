//! Requantizing the real models of scripts/fetch-models.sh (SmolLM2 Q4_1,
//! Gemma 3 270M Q4_K_M) as `llama-quantize --allow-requantize` does: the
//! same file byte for byte (recorded by
//! scripts/fixtures/quantize-reference.py --models). Skipped where a model
//! is not fetched.

mod common;

use std::path::PathBuf;

use mlxr_formats::gguf::GgufFile;
use mlxr_quantize::{quantize_model, FileType, QuantizeOptions};
use sha2::{Digest, Sha256};

#[test]
fn requantized_models_are_bit_identical_to_llama_quantize() {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/llama-quantize-models.json");
    let reference: serde_json::Value =
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for (model, entry) in reference.as_object().unwrap() {
        // Missing: a note, or a failure under MLXR_REQUIRE_MODELS=1.
        let Some(model_path) = mlxr_testkit::model_path(model) else {
            continue;
        };
        // The fetch script checks every model's sha256: another size means
        // the fixture was recorded from another file.
        assert_eq!(
            std::fs::metadata(&model_path).unwrap().len(),
            entry["bytes"].as_u64().unwrap(),
            "{model} is not the file the fixture was recorded from: rerun \
             scripts/fixtures/quantize-reference.py --models"
        );
        let input = GgufFile::open(&model_path).unwrap();
        for (ty, expected) in entry["types"].as_object().unwrap() {
            let out = dir.path().join(format!("{ty}.gguf"));
            let options = QuantizeOptions {
                file_type: ty.parse::<FileType>().unwrap(),
                allow_requantize: true,
            };
            quantize_model(&input, &out, options, |_| true).unwrap();
            let file = GgufFile::open(&out).unwrap();
            let file_sha = format!("{:x}", Sha256::digest(std::fs::read(&out).unwrap()));
            if file_sha != expected["file_sha256"].as_str().unwrap() {
                failures.push(format!(
                    "{model} {ty}: the file differs from llama-quantize's"
                ));
            }
            failures.extend(common::tensor_mismatches(
                &file,
                &expected["tensors"],
                &format!("{model} {ty}"),
            ));
            std::fs::remove_file(&out).unwrap();
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
