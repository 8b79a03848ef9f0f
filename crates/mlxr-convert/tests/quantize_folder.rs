//! `quantize_hf_folder` against llama.cpp's pipeline for a Hugging Face
//! folder: convert_hf_to_gguf.py (--outtype f32) then llama-quantize (ours
//! converts losslessly: qwen2's F16 weights go through an F16 file). The
//! fixture (scripts/fixtures/quantize-hf-reference.py) records llama-quantize's
//! output hashes for the script's conversions of two tiny folders.

mod common;
use common::sha256;

use std::path::PathBuf;

use mlxr_convert::{quantize_hf_folder, HfToGgufOptions, OutType};
use mlxr_quantize::{FileType, QuantizeOptions};

#[test]
fn a_folder_quantizes_as_convert_then_llama_quantize() {
    let fixture =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/llama-quantize-hf.json");
    let reference: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let convert = HfToGgufOptions {
        out_type: OutType::Lossless,
        tokenizer_pre: Some("qwen2".into()),
    };
    let mut failures = Vec::new();
    let mut checked = 0;
    for (model, entry) in reference["models"].as_object().unwrap() {
        let folder = mlxr_testkit::fixture_path(entry["folder"].as_str().unwrap());
        let script_f32 =
            mlxr_testkit::fixture_path(entry["convert_hf_to_gguf_f32"].as_str().unwrap());
        assert_eq!(
            sha256(&script_f32),
            entry["convert_hf_to_gguf_f32_sha256"].as_str().unwrap(),
            "{model}: the fixture's input changed; rerun the script"
        );
        for (ty, expected) in entry["types"].as_object().unwrap() {
            let out = dir.path().join(format!("{model}-{ty}.gguf"));
            let options = QuantizeOptions {
                file_type: ty.parse::<FileType>().unwrap(),
                allow_requantize: false,
            };
            quantize_hf_folder(&folder, &out, &convert, options, |_| true, |_| true).unwrap();
            if sha256(&out) != expected.as_str().unwrap() {
                failures.push(format!("{model} {ty}: differs from llama-quantize's"));
            }
            checked += 1;
        }
    }
    assert!(checked >= 7);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Only the outputs are left: the intermediate file is gone.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.starts_with('.')), "{names:?}");
}

#[test]
fn a_failed_conversion_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.gguf");
    let options = QuantizeOptions {
        file_type: "Q8_0".parse().unwrap(),
        allow_requantize: false,
    };
    let e = quantize_hf_folder(
        dir.path(),
        &out,
        &HfToGgufOptions::default(),
        options,
        |_| true,
        |_| true,
    )
    .unwrap_err();
    assert!(e.to_string().contains("no config.json"), "{e}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
