//! Constrained generation through the engine on real models: the output
//! follows the regex or JSON schema (checked here without llguidance),
//! ends when the constraint is complete, is the same batched as alone and
//! with prompt-lookup speculation, with masks computed ahead and sampled on
//! several threads, and a constraint that does not compile is the
//! request's error.

mod common;

use std::sync::Arc;

use common::{batch_variants, load};
use mlxr_engine::{
    ChatMessage, Constraint, DraftLength, EngineConfig, EngineError, EngineHandle, FinishReason,
    GenerateRequest, GrammarMasks, KvBudget, LoadedModel, Prompt, SamplingParams, SpecOverrides,
};
use mlxr_testkit::{QWEN_CODER_05B, SMOLLM2};
use serde_json::{json, Value};

fn config() -> EngineConfig {
    EngineConfig {
        kv_budget: KvBudget::Bytes(64 << 20),
        ..EngineConfig::default()
    }
}

fn chat(text: &str, constraint: Option<Constraint>, max_tokens: usize) -> GenerateRequest {
    let mut req = GenerateRequest::new(Prompt::Chat(vec![ChatMessage::new("user", text)]));
    req.sampling = SamplingParams::greedy();
    req.max_tokens = Some(max_tokens);
    req.constraint = constraint;
    req
}

fn person_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 20},
            "age": {"type": "integer", "minimum": 0, "maximum": 130},
            "languages": {
                "type": "array",
                "items": {"type": "string", "enum": ["rust", "python", "go"]},
                "maxItems": 3
            }
        },
        "required": ["name", "age", "languages"],
        "additionalProperties": false
    })
}

/// The schema's rules, checked by hand.
fn assert_person(text: &str) {
    let v: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text:?}"));
    let obj = v.as_object().expect("an object");
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["age", "languages", "name"], "{text}");
    assert!(
        obj["name"].as_str().unwrap().chars().count() <= 20,
        "{text}"
    );
    let age = obj["age"].as_i64().expect("an integer age");
    assert!((0..=130).contains(&age), "{text}");
    let langs = obj["languages"].as_array().unwrap();
    assert!(langs.len() <= 3);
    for l in langs {
        assert!(
            ["rust", "python", "go"].contains(&l.as_str().unwrap()),
            "{text}"
        );
    }
}

#[test]
fn json_schema_output_follows_the_schema_and_stops_when_complete() {
    for model in [SMOLLM2, QWEN_CODER_05B] {
        let Some(lm) = load(model) else { continue };
        let engine = EngineHandle::start(lm, config()).unwrap();
        let req = chat(
            "Describe a programmer as JSON with name, age and languages.",
            Some(Constraint::JsonSchema(person_schema())),
            200,
        );
        let out = engine.generate(&req, |_| true).unwrap();
        assert_eq!(
            out.finish_reason,
            FinishReason::Stop,
            "{model}: {}",
            out.text
        );
        assert_person(&out.text);
    }
}

#[test]
fn regex_and_json_object_under_sampling() {
    let Some(lm) = load(SMOLLM2) else { return };
    let engine = EngineHandle::start(lm, config()).unwrap();
    for seed in 0..6 {
        let mut req = chat(
            "Is the sky blue? Answer yes or no.",
            Some(Constraint::Regex("(yes|no|maybe)[.!]?".into())),
            20,
        );
        req.sampling = SamplingParams {
            temperature: 1.5,
            seed: Some(seed),
            ..SamplingParams::default()
        };
        let out = engine.generate(&req, |_| true).unwrap();
        let word = out.text.trim_end_matches(['.', '!']);
        assert!(["yes", "no", "maybe"].contains(&word), "{:?}", out.text);
        assert_eq!(out.finish_reason, FinishReason::Stop);

        req.constraint = Some(Constraint::JsonObject);
        req.max_tokens = Some(400);
        req.sampling.temperature = 0.8;
        let out = engine.generate(&req, |_| true).unwrap();
        if out.finish_reason == FinishReason::Stop {
            let v: Value =
                serde_json::from_str(&out.text).unwrap_or_else(|e| panic!("{e}: {}", out.text));
            assert!(v.is_object());
        } else {
            assert!(out.text.trim_start().starts_with('{'), "{}", out.text);
        }
    }
}

/// Constrained requests among unconstrained ones: each gives the tokens it
/// gives alone, under every batching variant (preemption recomputes a
/// constrained sequence without moving its grammar).
#[test]
fn constrained_sequences_batch_like_they_run_alone() {
    let Some(lm) = load(SMOLLM2) else { return };
    let requests: Vec<GenerateRequest> = (0..6)
        .map(|i| {
            let constraint = match i % 3 {
                0 => Some(Constraint::JsonSchema(person_schema())),
                1 => Some(Constraint::Regex("[A-Z][a-z]+( [a-z]+){2,5}\\.".into())),
                _ => None,
            };
            chat(&format!("Tell me about person number {i}."), constraint, 48)
        })
        .collect();
    let alone = run_alone(&lm, &requests);
    for (name, config) in batch_variants(config(), &lm, 24) {
        for (i, tokens) in run_batch(&lm, &requests, config).iter().enumerate() {
            assert_eq!(tokens, &alone[i], "{name}: request {i}");
        }
    }
}

/// Constrained requests (two of each kind) for the tests below: greedy,
/// then seeded at a high temperature, where the grammar refuses many drawn
/// tokens.
fn mixed_constrained() -> Vec<GenerateRequest> {
    (0..6u64)
        .map(|i| {
            let constraint = match i % 3 {
                0 => Constraint::JsonSchema(person_schema()),
                1 => Constraint::Regex("[A-Z][a-z]+( [a-z]+){2,5}\\.".into()),
                _ => Constraint::JsonObject,
            };
            let mut req = chat(
                &format!("Tell me about person number {i}."),
                Some(constraint),
                40,
            );
            if i >= 3 {
                req.sampling = SamplingParams {
                    temperature: 1.5,
                    seed: Some(i),
                    ..SamplingParams::default()
                };
            }
            req
        })
        .collect()
}

/// `requests` submitted at once to an engine of `config`: each one's tokens.
fn run_batch(
    lm: &Arc<LoadedModel>,
    requests: &[GenerateRequest],
    config: EngineConfig,
) -> Vec<Vec<u32>> {
    let engine = EngineHandle::start(lm.clone(), config).unwrap();
    let streams: Vec<_> = requests.iter().map(|r| engine.submit(r).unwrap()).collect();
    streams
        .into_iter()
        .map(|mut stream| {
            let mut tokens = Vec::new();
            while let Some(event) = stream.blocking_next() {
                match event {
                    mlxr_engine::Event::Token(t) => tokens.push(t.id),
                    mlxr_engine::Event::Done { .. } => break,
                    mlxr_engine::Event::Error(e) => panic!("{e}"),
                }
            }
            tokens
        })
        .collect()
}

/// Masks computed ahead (while the forward pass runs, on one thread or
/// several) sample the tokens lazy masks do, in one batch.
#[test]
fn masks_computed_ahead_sample_what_lazy_masks_do() {
    let Some(lm) = load(SMOLLM2) else { return };
    let requests = mixed_constrained();
    let with = |grammar_masks, threads| EngineConfig {
        grammar_masks,
        sample_threads: Some(threads),
        ..config()
    };
    let lazy = run_batch(&lm, &requests, with(GrammarMasks::Lazy, 1));
    assert!(lazy.iter().all(|t| !t.is_empty()));
    for threads in [1, 3] {
        let ahead = run_batch(&lm, &requests, with(GrammarMasks::Ahead, threads));
        assert_eq!(ahead, lazy, "{threads} threads");
    }
}

/// A step's sequences sampled on several threads (as for a model on a GPU)
/// give the tokens of one thread, constrained, seeded and speculating.
#[test]
fn sampling_on_several_threads_gives_the_tokens_of_one() {
    let Some(lm) = load(SMOLLM2) else { return };
    let mut requests = mixed_constrained();
    let mut free = chat("Count from one to twenty in words.", None, 40);
    free.speculation = SpecOverrides::ngram(4);
    requests.push(free);
    let with = |sample_threads| EngineConfig {
        sample_threads: Some(sample_threads),
        ..config()
    };
    let one = run_batch(&lm, &requests, with(1));
    assert_eq!(run_batch(&lm, &requests, with(3)), one);
}

fn run_alone(lm: &Arc<LoadedModel>, requests: &[GenerateRequest]) -> Vec<Vec<u32>> {
    let engine = EngineHandle::start(lm.clone(), config()).unwrap();
    requests
        .iter()
        .map(|r| engine.generate(r, |_| true).unwrap().tokens)
        .collect()
}

/// Prompt lookup under a grammar: the drafts are verified against the
/// grammar's allowed tokens, so the reply is the one without speculation.
#[test]
fn constrained_requests_speculate_within_their_grammar() {
    let Some(lm) = load(SMOLLM2) else { return };
    let engine = EngineHandle::start(lm, config()).unwrap();
    let mut req = chat(
        "Copy this JSON exactly: {\"name\": \"Ada Lovelace\", \"age\": 36, \"languages\": [\"python\", \"rust\", \"go\"]}",
        Some(Constraint::JsonSchema(person_schema())),
        200,
    );
    let plain = engine.generate(&req, |_| true).unwrap();
    assert_eq!(plain.timings.draft_n, 0);
    req.speculation = SpecOverrides {
        draft_length: Some(DraftLength::Max),
        ..SpecOverrides::ngram(6)
    };
    let out = engine.generate(&req, |_| true).unwrap();
    assert_eq!(out.tokens, plain.tokens, "{} vs {}", out.text, plain.text);
    assert!(out.timings.draft_n_accepted > 0, "{:?}", out.timings);
    assert_eq!(out.finish_reason, FinishReason::Stop);
    assert_person(&out.text);
}

#[test]
fn constraints_that_do_not_compile_are_the_requests_error() {
    let Some(lm) = load(SMOLLM2) else { return };
    let engine = EngineHandle::start(lm, config()).unwrap();
    for bad in [
        Constraint::JsonSchema(json!({"type": "no-such-type"})),
        Constraint::JsonSchema(json!(["not", "a", "schema"])),
        Constraint::Regex("(unclosed".into()),
        Constraint::Lark("start: undefined_rule".into()),
    ] {
        let req = chat("hi", Some(bad.clone()), 10);
        match engine.submit(&req) {
            Err(EngineError::Constraint(e)) => {
                let message = e.to_string();
                assert!(message.starts_with(bad.kind()), "{message}");
            }
            Err(other) => panic!("{bad:?}: {other}"),
            Ok(_) => panic!("{bad:?} compiled"),
        }
    }
    // The engine still serves.
    let out = engine
        .generate(&chat("hi", Some(Constraint::JsonObject), 100), |_| true)
        .unwrap();
    assert!(out.text.starts_with('{'));
}
