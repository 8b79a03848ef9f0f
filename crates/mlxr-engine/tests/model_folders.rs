//! Hugging Face and MLX model folders through the engine, the way
//! `mlxr run -m FOLDER` and the daemon meet them: `tokenizer.json` gives
//! transformers' ids, the chat template from the folder renders the same
//! prompt as transformers' `apply_chat_template`, and greedy generation
//! (scheduler, paged KV cache, sampler, EOS from generation_config.json)
//! gives the reference's tokens (tests/fixtures/tiny-models).

use std::path::PathBuf;
use std::sync::Arc;

use mlxr_engine::{
    ChatMessage, EngineConfig, EngineHandle, GenerateRequest, KvBudget, KvDtype, LoadedModel,
    Prompt, SamplingParams,
};
use serde_json::Value;

/// Steps compared: those before the first where the reference's top-2 gap
/// is below this (see crates/mlxr-models/tests/tiny_models.rs).
const CLEAR_GAP: f64 = 0.01;

fn folder(name: &str) -> PathBuf {
    mlxr_testkit::fixture_path("tiny-models").join(name)
}

fn reference(name: &str) -> Value {
    let path = folder("reference").join(format!("{name}.json"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn check(name: &str) {
    let lm = LoadedModel::load(&folder(name), None).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(lm.context_size, 256, "{name}: max_position_embeddings");
    let config = EngineConfig {
        kv_dtype: KvDtype::F32,
        kv_budget: KvBudget::Bytes(64 << 20),
        ..EngineConfig::default()
    };
    let engine = EngineHandle::start(Arc::new(lm), config).unwrap();
    let lm = engine.model().clone();
    let fx = reference(name);
    for case in fx["cases"].as_array().unwrap() {
        let label = format!("{name}/{}", case["name"].as_str().unwrap());
        let ids: Vec<u32> = serde_json::from_value(case["ids"].clone()).unwrap();
        let text = case["text"].as_str().unwrap();
        let prompt = match case.get("messages") {
            Some(messages) => {
                let messages: Vec<ChatMessage> = serde_json::from_value(messages.clone()).unwrap();
                let rendered = lm.render_chat(&messages).unwrap();
                assert_eq!(rendered, text, "{label}: chat template");
                Prompt::Chat(messages)
            }
            None => Prompt::Raw(text.to_string()),
        };
        if case.get("messages").is_none() {
            assert_eq!(lm.tokenizer.encode(text, true, true), ids, "{label}: ids");
            assert_eq!(lm.tokenizer.decode(&ids, true), text, "{label}: decode");
        }

        let want: Vec<u32> = serde_json::from_value(case["greedy"]["ids"].clone()).unwrap();
        let gaps: Vec<f64> = serde_json::from_value(case["greedy"]["top2_gaps"].clone()).unwrap();
        let clear = gaps.iter().take_while(|&&g| g >= CLEAR_GAP).count();
        let mut req = GenerateRequest::new(prompt);
        req.sampling = SamplingParams::greedy();
        req.max_tokens = Some(want.len());
        req.ignore_eos = true;
        let out = engine.generate(&req, |_| true).unwrap();
        assert_eq!(out.prompt_tokens, ids, "{label}: prompt ids");
        assert_eq!(out.tokens[..clear], want[..clear], "{label}: greedy tokens");
        assert_eq!(
            out.text,
            lm.tokenizer.decode(&out.tokens, false),
            "{label}: streamed text"
        );
    }
}

#[test]
fn hugging_face_folders_through_the_engine() {
    for name in ["llama", "qwen2", "gemma3", "phi3"] {
        check(name);
    }
}

#[test]
fn mlx_folders_through_the_engine() {
    for name in ["llama-mlx-q4-g64", "qwen3-mlx-q4-g128"] {
        check(name);
    }
}

#[test]
fn generation_stops_at_the_folders_eos() {
    let lm = LoadedModel::load(&folder("qwen3"), None).unwrap();
    let im_end = lm.tokenizer.token_id("<|im_end|>").unwrap();
    assert!(lm.tokenizer.is_eog(im_end));
    assert_eq!(lm.tokenizer.eos(), Some(im_end));
    // A folder without tokenizer.json is a clear error.
    let dir = tempfile::tempdir().unwrap();
    for file in ["config.json", "model.safetensors"] {
        std::fs::copy(folder("qwen3").join(file), dir.path().join(file)).unwrap();
    }
    let err = match LoadedModel::load(dir.path(), None) {
        Ok(_) => panic!("loaded without a tokenizer"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("has no tokenizer.json"), "{err}");
}
