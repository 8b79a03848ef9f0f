//! SmolLM2-135M through `mlxr convert` both ways (GGUF → Hugging Face folder →
//! GGUF), checked against llama.cpp: scripts/fixtures/convert-smollm2-reference.py
//! ran llama.cpp on the converted file and recorded its greedy ids
//! (tests/fixtures/convert/smollm2-roundtrip.json). The first test reads only
//! that fixture; the second rebuilds the converted file from the fetched GGUF
//! and checks it is the one llama.cpp ran (same sha256), with the original's
//! weights and vocabulary.

mod common;
use common::sha256;

use std::path::PathBuf;

use mlxr_convert::{gguf_to_hf, hf_to_gguf, HfDtype, HfToGgufOptions, OutType};
use mlxr_formats::GgufFile;
use serde_json::Value;

fn fixture() -> Value {
    let path = mlxr_testkit::fixture_path("convert/smollm2-roundtrip.json");
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn ids(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

fn gaps(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// A top-2 gap below this is within the difference between llama.cpp's Q4_1
/// kernels (activations rounded to Q8_1) and its F32 ones.
const MIN_GAP: f64 = 0.1;

#[test]
fn llama_cpp_runs_the_converted_smollm2_as_the_original() {
    let fx = fixture();
    let cases = fx["cases"].as_array().unwrap();
    assert!(cases.len() >= 10);
    let mut compared = 0;
    for c in cases {
        let name = c["name"].as_str().unwrap();
        // The converted vocabulary tokenizes every prompt as the original does.
        assert_eq!(
            ids(&c["prompt_ids"]),
            ids(&c["original_prompt_ids"]),
            "{name}"
        );
        // llama.cpp gives the same ids and logits as on its own F32 dequantization of the original.
        assert_eq!(c["llama_quantize_f32_same_ids_and_top5"], true, "{name}");
        // And the original Q4_1 file's ids, up to the first close call.
        let (ours, theirs) = (ids(&c["ids"]), ids(&c["original_ids"]));
        let (g1, g2) = (gaps(&c["top2_gap"]), gaps(&c["original_top2_gap"]));
        for step in 0..ours.len().min(theirs.len()) {
            if g1[step] < MIN_GAP || g2[step] < MIN_GAP {
                break;
            }
            assert_eq!(ours[step], theirs[step], "{name} step {step}");
            compared += 1;
        }
    }
    assert!(compared >= 150, "only {compared} steps compared");
}

#[test]
fn the_converted_smollm2_is_the_file_llama_cpp_ran() {
    let Some(source) = mlxr_testkit::model_path(mlxr_testkit::SMOLLM2) else {
        return;
    };
    let fx = fixture();
    assert_eq!(
        sha256(&source),
        fx["source_gguf_sha256"].as_str().unwrap(),
        "{} is not the file the fixture was made from",
        source.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let folder: PathBuf = dir.path().join("SmolLM2-135M-Instruct");
    gguf_to_hf(&source, &folder, HfDtype::F32, |_| true).unwrap();
    let out = dir.path().join("smollm2.f32.gguf");
    // No --tokenizer-pre: the written tokenizer.json is recognised as SmolLM's.
    let options = HfToGgufOptions {
        out_type: OutType::F32,
        tokenizer_pre: None,
    };
    hf_to_gguf(&folder, &out, &options, |_| true).unwrap();
    std::fs::remove_dir_all(&folder).unwrap();

    let (a, b) = (
        GgufFile::open(&source).unwrap(),
        GgufFile::open(&out).unwrap(),
    );
    for key in [
        "tokenizer.ggml.pre",
        "tokenizer.ggml.tokens",
        "tokenizer.ggml.token_type",
        "tokenizer.ggml.merges",
        "tokenizer.ggml.bos_token_id",
        "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.unknown_token_id",
        "tokenizer.ggml.padding_token_id",
        "tokenizer.ggml.add_bos_token",
        "tokenizer.ggml.add_space_prefix",
        "tokenizer.chat_template",
        "llama.block_count",
        "llama.context_length",
        "llama.embedding_length",
        "llama.feed_forward_length",
        "llama.attention.head_count",
        "llama.attention.head_count_kv",
        "llama.rope.freq_base",
        "llama.attention.layer_norm_rms_epsilon",
        "llama.vocab_size",
        "llama.rope.dimension_count",
    ] {
        assert_eq!(a.metadata().get(key), b.metadata().get(key), "{key}");
    }
    assert_eq!(b.tensors().len(), a.tensors().len());
    for t in a.tensors() {
        let other = b
            .tensor(&t.name)
            .unwrap_or_else(|| panic!("{} missing", t.name));
        assert_eq!(other.dims, t.dims, "{}", t.name);
        let n = t.n_elements() as usize;
        let want =
            mlxr_quantize::dequantize(t.ggml_type, a.raw_tensor_data(t).unwrap(), n).unwrap();
        let got = mlxr_quantize::dequantize(other.ggml_type, b.raw_tensor_data(other).unwrap(), n)
            .unwrap();
        assert!(want == got, "{}: values differ", t.name);
    }
    assert_eq!(
        sha256(&out),
        fx["converted_gguf_sha256"].as_str().unwrap(),
        "not the file llama.cpp ran"
    );
}
