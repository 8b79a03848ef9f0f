//! A SentencePiece vocabulary (tokenizer.model) through `mlxr convert`:
//! scripts/fixtures/convert-spm-reference.py trained a small BPE model with
//! Llama's settings (tests/fixtures/convert/spm-llama), converted it with the
//! tiny llama's weights and had llama.cpp tokenize 68 strings with the GGUF:
//! the same ids sentencepiece gives. Here the folder is converted again and
//! must give the file llama.cpp read.

mod common;
use common::{copy_folder, sha256};

use mlxr_convert::{hf_to_gguf, HfToGgufOptions, OutType};
use mlxr_formats::GgufFile;

#[test]
fn a_sentencepiece_vocabulary_tokenizes_in_llama_cpp_as_in_sentencepiece() {
    let fx: serde_json::Value = serde_json::from_slice(
        &std::fs::read(mlxr_testkit::fixture_path("convert/spm-llama.json")).unwrap(),
    )
    .unwrap();
    let cases = fx["cases"].as_array().unwrap();
    assert!(cases.len() >= 60);
    for c in cases {
        assert_eq!(c["llama_cpp_ids"], c["sentencepiece_ids"], "{}", c["text"]);
    }

    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("spm-llama");
    copy_folder(&mlxr_testkit::fixture_path("convert/spm-llama"), &folder);
    std::fs::copy(
        mlxr_testkit::fixture_path("tiny-models/llama/model.safetensors"),
        folder.join("model.safetensors"),
    )
    .unwrap();
    let out = dir.path().join("spm-llama.gguf");
    let options = HfToGgufOptions {
        out_type: OutType::F32,
        tokenizer_pre: None,
    };
    hf_to_gguf(&folder, &out, &options, |_| true).unwrap();
    let file = GgufFile::open(&out).unwrap();
    let meta = file.metadata();
    assert_eq!(meta.get_str("tokenizer.ggml.model").unwrap(), "llama");
    assert_eq!(meta.get_str("tokenizer.ggml.pre").unwrap(), "default");
    let tokens = meta.get_str_array("tokenizer.ggml.tokens").unwrap();
    assert_eq!(tokens.len(), 384);
    assert_eq!(&tokens[..3], ["<unk>", "<s>", "</s>"]);
    assert_eq!(tokens[3], "<0x00>");
    let types = meta.get_i32_array("tokenizer.ggml.token_type").unwrap();
    // <unk> is UNKNOWN in the model but special in added_tokens_decoder: CONTROL, as the script makes it.
    assert_eq!(&types[..4], [3, 3, 3, 6]);
    assert_eq!(types.iter().filter(|t| **t == 6).count(), 256);
    assert_eq!(
        meta.get_f32_array("tokenizer.ggml.scores").unwrap().len(),
        384
    );
    assert_eq!(meta.get_u32("tokenizer.ggml.bos_token_id").unwrap(), 1);
    assert!(meta.get_bool("tokenizer.ggml.add_bos_token").unwrap());
    assert!(meta
        .get_str("tokenizer.chat_template")
        .unwrap()
        .contains("<|im_start|>"));
    assert_eq!(
        sha256(&out),
        fx["converted_gguf_sha256"].as_str().unwrap(),
        "not the file llama.cpp read"
    );
}

/// GGUF → folder → GGUF with a SentencePiece vocabulary: a tokenizer.model
/// is written, and the vocabulary comes back the same.
#[test]
fn a_sentencepiece_gguf_round_trips_through_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("spm-llama");
    copy_folder(&mlxr_testkit::fixture_path("convert/spm-llama"), &folder);
    std::fs::copy(
        mlxr_testkit::fixture_path("tiny-models/llama/model.safetensors"),
        folder.join("model.safetensors"),
    )
    .unwrap();
    let options = HfToGgufOptions {
        out_type: OutType::F32,
        tokenizer_pre: None,
    };
    let first = dir.path().join("first.gguf");
    hf_to_gguf(&folder, &first, &options, |_| true).unwrap();
    let back = dir.path().join("back").join("spm-llama");
    std::fs::create_dir_all(back.parent().unwrap()).unwrap();
    mlxr_convert::gguf_to_hf(&first, &back, mlxr_convert::HfDtype::F32, |_| true).unwrap();
    assert!(back.join("tokenizer.model").is_file() && !back.join("tokenizer.json").exists());
    let second = dir.path().join("second.gguf");
    hf_to_gguf(&back, &second, &options, |_| true).unwrap();
    let (a, b) = (
        GgufFile::open(&first).unwrap(),
        GgufFile::open(&second).unwrap(),
    );
    for key in [
        "tokenizer.ggml.model",
        "tokenizer.ggml.pre",
        "tokenizer.ggml.tokens",
        "tokenizer.ggml.scores",
        "tokenizer.ggml.token_type",
        "tokenizer.ggml.bos_token_id",
        "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.unknown_token_id",
        "tokenizer.ggml.add_bos_token",
        "tokenizer.chat_template",
    ] {
        assert_eq!(a.metadata().get(key), b.metadata().get(key), "{key}");
    }
    for t in a.tensors() {
        assert!(
            a.tensor_data(t).unwrap() == b.tensor_data(b.tensor(&t.name).unwrap()).unwrap(),
            "{}",
            t.name
        );
    }
}
