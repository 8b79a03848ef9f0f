//! `quantize_model` against llama-quantize: for every type the fixture
//! records (scripts/fixtures/quantize-reference.py), the same file byte
//! for byte (metadata, tensor order, types, data); where it is not, the
//! failure names the tensors that differ.

mod common;

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
    let mut failures = Vec::new();
    for reference in [
        "llama-quantize-reference.json",
        "llama-quantize-reference-phi3.json",
    ] {
        failures.extend(compare_with(reference));
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Quantizes the reference's input to each of its types; what differs.
fn compare_with(reference: &str) -> Vec<String> {
    let reference: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture(reference)).unwrap()).unwrap();
    let input_name = reference["input"].as_str().unwrap();
    let input = GgufFile::open(fixture(input_name)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    let types = reference["types"].as_object().unwrap();
    assert!(types.len() >= 17);
    for (ty, expected) in types {
        let name = format!("{input_name} {ty}");
        let ftype: FileType = ty.parse().unwrap();
        let out = dir.path().join(format!("{ty}.gguf"));
        let options = QuantizeOptions {
            file_type: ftype,
            allow_requantize: false,
        };
        quantize_model(&input, &out, options, |_| true).unwrap();
        let file = GgufFile::open(&out).unwrap();
        let file_sha = format!("{:x}", Sha256::digest(std::fs::read(&out).unwrap()));
        if file_sha != expected["file_sha256"].as_str().unwrap() {
            failures.push(format!("{name}: the file differs from llama-quantize's"));
        }
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
        failures.extend(common::tensor_mismatches(
            &file,
            &expected["tensors"],
            &name,
        ));
    }
    failures
}

#[test]
fn a_cancelled_or_refused_run_leaves_nothing() {
    let input = GgufFile::open(fixture("tiny-llama-f16.gguf")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("q.gguf");
    let options = QuantizeOptions {
        file_type: FileType::Q4_K_M,
        allow_requantize: false,
    };
    let e = quantize_model(&input, &out, options, |p| p.index < 10).unwrap_err();
    assert!(matches!(e, mlxr_quantize::QuantizeError::Cancelled), "{e}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);

    // A quantized input needs allow_requantize; with it, Q8_0 -> Q4_0 runs.
    quantize_model(
        &input,
        &out,
        QuantizeOptions {
            file_type: FileType::Q8_0,
            ..options
        },
        |_| true,
    )
    .unwrap();
    let q8 = GgufFile::open(&out).unwrap();
    let out2 = dir.path().join("q4.gguf");
    let e = quantize_model(
        &q8,
        &out2,
        QuantizeOptions {
            file_type: FileType::Q4_0,
            ..options
        },
        |_| true,
    )
    .unwrap_err();
    assert!(e.to_string().contains("already quantized (Q8_0)"), "{e}");
    assert!(!out2.exists());
    let requant = QuantizeOptions {
        file_type: FileType::Q4_0,
        allow_requantize: true,
    };
    let summary = quantize_model(&q8, &out2, requant, |_| true).unwrap();
    let q4 = GgufFile::open(&out2).unwrap();
    assert_eq!(
        q4.tensor("blk.0.attn_q.weight").unwrap().ggml_type.name(),
        "Q4_0"
    );
    assert_eq!(q4.tensor("output.weight").unwrap().ggml_type.name(), "Q6_K");
    assert_eq!(summary.tensors.len(), q4.tensors().len());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
}
