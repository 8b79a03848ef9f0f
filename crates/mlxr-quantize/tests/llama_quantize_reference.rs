//! `quantize_model` against llama-quantize: for every type the fixture
//! records (scripts/fixtures/quantize-reference.py), the same tensors in
//! the same order, with the same types and the same bytes.

use std::path::PathBuf;

use mlxr_formats::gguf::GgufFile;
use mlxr_quantize::{quantize_model, FileType, QuantizeOptions};
use sha2::{Digest, Sha256};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

#[test]
fn every_type_is_bit_identical_to_llama_quantize() {
    let reference: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture("llama-quantize-reference.json")).unwrap())
            .unwrap();
    let input = GgufFile::open(fixture(reference["input"].as_str().unwrap())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    let types = reference["types"].as_object().unwrap();
    assert!(types.len() >= 17);
    for (name, expected) in types {
        let ftype: FileType = name.parse().unwrap();
        let out = dir.path().join(format!("{name}.gguf"));
        let options = QuantizeOptions {
            file_type: ftype,
            allow_requantize: false,
        };
        quantize_model(&input, &out, options, |_| {}).unwrap();
        let file = GgufFile::open(&out).unwrap();
        assert_eq!(
            file.metadata().get_u32("general.file_type").unwrap() as u64,
            expected["file_type"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(
            file.metadata()
                .get_u32("general.quantization_version")
                .unwrap(),
            2
        );
        let tensors = expected["tensors"].as_array().unwrap();
        assert_eq!(file.tensors().len(), tensors.len(), "{name}");
        for (t, e) in file.tensors().iter().zip(tensors) {
            let sha = format!("{:x}", Sha256::digest(file.raw_tensor_data(t).unwrap()));
            let got = (t.name.as_str(), t.ggml_type.name(), sha.as_str());
            let want = (
                e["name"].as_str().unwrap(),
                e["type"].as_str().unwrap(),
                e["sha256"].as_str().unwrap(),
            );
            if got != want {
                failures.push(format!(
                    "{name}: got {} {} want {} {}{}",
                    got.0,
                    got.1,
                    want.0,
                    want.1,
                    if got.2 != want.2 {
                        " (data differs)"
                    } else {
                        ""
                    }
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
