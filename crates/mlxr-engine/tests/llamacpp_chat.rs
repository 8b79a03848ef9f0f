//! Chat prompts end to end against llama.cpp: the template renders the same
//! text, the tokenizer gives the same ids, and greedy generation through the
//! engine (scheduler, paged KV cache, sampler, EOG handling) gives the same
//! tokens at every step.
//!
//! llama.cpp has two chat renderers: Jinja (the default of llama-server and
//! llama-cli) and the legacy `llama_chat_apply_template`, which recognises
//! SmolLM2's template as ChatML and drops the template's built-in default
//! system prompt. With a system message both agree and we compare with the
//! legacy output; without one we compare with the Jinja rendering recorded
//! next to it (`jinja_rendered`, Python Jinja2 with HF's settings).

use std::sync::Arc;

use mlxr_engine::{
    ChatMessage, EngineConfig, EngineHandle, GenerateRequest, KvBudget, KvDtype, LoadedModel,
    Prompt, SamplingParams,
};
use serde_json::Value;

/// Steps compared: those before the first where llama.cpp's top-2 gap is
/// below this. SmolLM2 runs bit-exact through the engine (f32 paged KV
/// cache), so every step is compared, ambiguous ones included.
const AMBIGUOUS_GAP: f64 = 0.0;

fn fixture(name: &str) -> Value {
    let path = mlxr_testkit::fixture_path(&format!("llamacpp/{name}.json"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn load(fx: &Value) -> Option<LoadedModel> {
    let path = mlxr_testkit::model_path(fx["model_file"].as_str().unwrap())?;
    Some(LoadedModel::load(&path, Some(4096)).unwrap())
}

fn messages(v: &Value) -> Vec<ChatMessage> {
    serde_json::from_value(v.clone()).unwrap()
}

#[test]
fn smollm2_chat_template_renders_like_llamacpp() {
    let fx = fixture("smollm2");
    let Some(lm) = load(&fx) else {
        return;
    };
    let cases = fx["chat_template"]["cases"].as_array().unwrap();
    assert!(cases.len() >= 3);
    for case in cases {
        let has_system = case["messages"][0]["role"] == "system";
        let expected = if has_system {
            &case["rendered"]
        } else {
            &case["jinja_rendered"]
        };
        let rendered = lm
            .template
            .render(
                &messages(&case["messages"]),
                case["add_generation_prompt"].as_bool().unwrap(),
            )
            .unwrap();
        assert_eq!(
            rendered,
            expected.as_str().unwrap(),
            "case {}",
            case["name"]
        );
    }
}

fn greedy_cases(name: &str) {
    let fx = fixture(name);
    let Some(lm) = load(&fx) else {
        return;
    };
    // llama.cpp's fixtures were recorded with an f32 KV cache.
    let config = EngineConfig {
        kv_dtype: KvDtype::F32,
        kv_budget: KvBudget::Bytes(256 << 20),
        ..EngineConfig::default()
    };
    let engine = EngineHandle::start(Arc::new(lm), config).unwrap();
    let lm = engine.model().clone();
    let mut checked = 0;
    for case in fx["generate"].as_array().unwrap() {
        let text = case["prompt"].as_str().unwrap();
        let prompt = if case["kind"] == "chat" {
            let msgs = messages(&case["messages"]);
            // See the module comment: only system-led chats render identically.
            if msgs[0].role == "system" {
                assert_eq!(lm.render_chat(&msgs).unwrap(), text);
                Prompt::Chat(msgs)
            } else {
                Prompt::Raw(text.to_string())
            }
        } else {
            Prompt::Raw(text.to_string())
        };
        let ids: Vec<u32> = serde_json::from_value(case["ids"].clone()).unwrap();
        let gaps: Vec<f64> = serde_json::from_value(case["top2_gap"].clone()).unwrap();
        let clear = gaps.iter().take_while(|&&g| g >= AMBIGUOUS_GAP).count();
        let mut req = GenerateRequest::new(prompt);
        req.sampling = SamplingParams::greedy();
        req.max_tokens = Some(clear.max(1));
        let out = engine.generate(&req, |_| true).unwrap();
        let prompt_ids: Vec<u32> = serde_json::from_value(case["prompt_ids"].clone()).unwrap();
        assert_eq!(
            out.prompt_tokens, prompt_ids,
            "{name}/{}: prompt ids",
            case["name"]
        );
        let n = clear.min(out.tokens.len());
        assert_eq!(
            out.tokens[..n],
            ids[..n],
            "{name}/{}: greedy tokens",
            case["name"]
        );
        if n < clear {
            // We stopped early: only an end-of-generation token may do that, and llama.cpp agrees.
            assert!(lm.tokenizer.is_eog(*out.tokens.last().unwrap()));
        }
        checked += 1;
    }
    eprintln!("{name}: {checked} prompts checked against llama.cpp");
}

/// Every fixture prompt, raw and chat (incl. unicode, code, whitespace runs).
#[test]
fn smollm2_greedy_through_the_engine_matches_llamacpp() {
    greedy_cases("smollm2");
}
