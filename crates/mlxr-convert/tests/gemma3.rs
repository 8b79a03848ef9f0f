//! Gemma 3 to GGUF. llama.cpp's converter needs torch, which this machine
//! lacks, so our GGUF of the tiny Gemma 3 (tests/fixtures/tiny-models/gemma3)
//! is checked by the model it makes: loaded from the GGUF, the last logits of
//! the transformers reference's prompts equal those of the folder loaded by
//! mlxr-models (itself within 2e-3 of transformers, mlxr-models'
//! tiny_models.rs), and the metadata holds the script's Gemma 3 keys.
//!
//! The folder's `query_pre_attn_scalar` (48) is set to its head dimension
//! first: GGUF has no such key and llama.cpp scales by the head dimension.

mod common;
use common::copy_folder;

use candle_core::Device;
use mlxr_convert::{hf_to_gguf, HfToGgufOptions, OutType};
use mlxr_formats::gguf::GgufFile;
use mlxr_models::{DecoderModel, KvGeometry, ReferenceBackend, Session};

const BLOCK: usize = 16;
const BLOCKS: usize = 8;
/// Both sides run the same f32 weights through the same ops.
const TOLERANCE: f32 = 1e-4;

fn last_logits(model: &DecoderModel, ids: &[u32]) -> Vec<f32> {
    let kv = KvGeometry::new(model.config(), BLOCKS, BLOCK);
    let backend = ReferenceBackend::new(kv, &Device::Cpu).unwrap();
    let mut session = Session::new(backend, 1, BLOCKS, BLOCK);
    session.feed(model, &[(0, ids)]).unwrap().to_vec()
}

#[test]
fn gemma3_gguf_makes_the_folders_model() {
    let fixtures = mlxr_testkit::fixture_path("tiny-models");
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("gemma3");
    copy_folder(&fixtures.join("gemma3"), &folder);
    let config_path = folder.join("config.json");
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&config_path).unwrap()).unwrap();
    config["query_pre_attn_scalar"] = config["head_dim"].clone();
    std::fs::write(&config_path, config.to_string()).unwrap();

    let out = dir.path().join("gemma3.gguf");
    let options = HfToGgufOptions {
        out_type: OutType::F32,
        tokenizer_pre: Some("qwen2".into()),
    };
    hf_to_gguf(&folder, &out, &options, |_| true).unwrap();

    let file = GgufFile::open(&out).unwrap();
    let meta = file.metadata();
    assert_eq!(meta.get_str("general.architecture").unwrap(), "gemma3");
    for (key, want) in [
        ("gemma3.rope.freq_base", 5000.0),
        ("gemma3.rope.freq_base_swa", 300.0),
        ("gemma3.attention.layer_norm_rms_epsilon", 1e-6),
    ] {
        assert_eq!(meta.get_f32(key).unwrap(), want, "{key}");
    }
    for (key, want) in [
        ("gemma3.attention.sliding_window", 8),
        ("gemma3.attention.sliding_window_pattern", 2),
        ("gemma3.attention.key_length", 32),
        ("gemma3.attention.head_count_kv", 2),
        ("gemma3.context_length", 256),
    ] {
        assert_eq!(meta.get_u32(key).unwrap(), want, "{key}");
    }
    assert!(meta.get_f32("gemma3.final_logit_softcapping").is_err());

    let from_gguf = DecoderModel::load_with_kernels(&file, &Device::Cpu, None).unwrap();
    let from_folder = DecoderModel::load_dir(&folder, &Device::Cpu).unwrap();
    let reference: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures.join("reference/gemma3.json")).unwrap(),
    )
    .unwrap();
    let cases = reference["cases"].as_array().unwrap();
    assert!(!cases.is_empty());
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let ids: Vec<u32> = case["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        let (a, b) = (
            last_logits(&from_gguf, &ids),
            last_logits(&from_folder, &ids),
        );
        assert_eq!(a.len(), b.len(), "{name}: vocabulary");
        let worst = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        assert!(
            worst <= TOLERANCE,
            "{name}: GGUF and folder logits differ by {worst}"
        );
    }
}
