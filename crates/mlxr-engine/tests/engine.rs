//! The engine with real models: sequences batched together give exactly the
//! tokens each gives alone (also with tiny prefill chunks and with a KV
//! budget that forces preemption), the prefix cache reports its hits without
//! changing outputs, aborted or abandoned requests free their blocks, and
//! shutting down waits for the engine thread.

mod common;

use std::sync::Arc;

use common::{batch_variants, load};
use mlxr_engine::{
    EngineConfig, EngineHandle, Event, FinishReason, GenerateRequest, KvBudget, KvDtype,
    LoadedModel, Prompt, SamplingParams,
};
use mlxr_testkit::{GEMMA3, SMOLLM2};

const MAX_TOKENS: usize = 10;

fn config() -> EngineConfig {
    EngineConfig {
        kv_budget: KvBudget::Bytes(64 << 20),
        kv_dtype: KvDtype::F16,
        ..EngineConfig::default()
    }
}

/// Eight different prompts; the last is longer than Gemma 3's 512-token window.
fn prompts() -> Vec<String> {
    let mut p: Vec<String> = [
        "The capital of France is",
        "def fibonacci(n):",
        "Once upon a time, in a land far away,",
        "1, 2, 3, 4, 5,",
        "Rust's ownership model means that",
        "Translate to German: good morning",
        "   whitespace   and\ttabs\n\nnewlines",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let long: Vec<String> = (0..140).map(|i| format!("item {i},")).collect();
    p.push(format!(
        "A long list: {} and the last item is",
        long.join(" ")
    ));
    p
}

fn request(prompt: &str) -> GenerateRequest {
    let mut req = GenerateRequest::new(Prompt::Raw(prompt.to_string()));
    req.sampling = SamplingParams::greedy();
    req.max_tokens = Some(MAX_TOKENS);
    req.ignore_eos = true;
    req
}

fn alone(lm: &Arc<LoadedModel>, prompts: &[String]) -> Vec<Vec<u32>> {
    let engine = EngineHandle::start(lm.clone(), config()).unwrap();
    prompts
        .iter()
        .map(|p| engine.generate(&request(p), |_| true).unwrap().tokens)
        .collect()
}

/// Submits every prompt at once, then reads the streams.
fn together(engine: &EngineHandle, prompts: &[String]) -> Vec<Vec<u32>> {
    let mut streams: Vec<_> = prompts
        .iter()
        .map(|p| engine.submit(&request(p)).unwrap())
        .collect();
    streams
        .iter_mut()
        .map(|s| {
            let mut tokens = Vec::new();
            while let Some(event) = s.blocking_next() {
                match event {
                    Event::Token(t) => tokens.push(t.id),
                    Event::Done { finish_reason, .. } => {
                        assert_eq!(finish_reason, FinishReason::Length);
                        break;
                    }
                    Event::Error(e) => panic!("{e}"),
                }
            }
            tokens
        })
        .collect()
}

fn batched_equals_alone(file: &str) {
    let Some(lm) = load(file) else { return };
    let prompts = prompts();
    assert!(lm.tokenizer.encode(&prompts[7], true, true).len() > 512);
    let expected = alone(&lm, &prompts);

    // 56 blocks of 16: the long prompt alone takes 40.
    let variants = batch_variants(config(), &lm, 56);
    for (name, cfg) in variants.into_iter().take(3) {
        let engine = EngineHandle::start(lm.clone(), cfg).unwrap();
        let got = together(&engine, &prompts);
        for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
            assert_eq!(
                g, e,
                "{file}, {name}: prompt {i} differs from its run alone"
            );
        }
        if name == "tight KV budget" {
            assert!(
                engine.metrics().gauges().preemptions > 0,
                "{file}: no preemption"
            );
        }
        wait_idle(&engine);
    }
}

/// The engine publishes its gauges after each step: wait until they show
/// nothing running and every KV block free.
fn wait_idle(engine: &EngineHandle) {
    let settled = (0..500).any(|_| {
        let g = engine.metrics().gauges();
        if g.running == 0 && g.waiting == 0 && g.kv_cache_usage == 0.0 {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        false
    });
    assert!(settled, "gauges: {:?}", engine.metrics().gauges());
}

#[test]
fn smollm2_batched_equals_alone() {
    batched_equals_alone(SMOLLM2);
}

#[test]
fn gemma3_batched_equals_alone() {
    batched_equals_alone(GEMMA3);
}

#[test]
fn prefix_cache_hits_every_shared_full_block_and_changes_nothing() {
    let Some(lm) = load(SMOLLM2) else { return };
    let system: String = (0..30).map(|i| format!("Rule {i}: be brief. ")).collect();
    let first = format!("{system}Question: what is 2+2?");
    let second = format!("{system}Question: name a colour.");
    let t1 = lm.tokenizer.encode(&first, true, true);
    let t2 = lm.tokenizer.encode(&second, true, true);
    let shared = t1.iter().zip(&t2).take_while(|(a, b)| a == b).count();
    assert!(shared > 100);

    let engine = EngineHandle::start(lm.clone(), config()).unwrap();
    let a = engine.generate(&request(&first), |_| true).unwrap();
    assert_eq!(a.usage.cached_tokens, 0);
    let b = engine.generate(&request(&second), |_| true).unwrap();
    assert_eq!(
        b.usage.cached_tokens,
        shared / 16 * 16,
        "every shared full block"
    );
    assert_eq!(b.timings.prompt_n, t2.len() - shared / 16 * 16);
    let g = engine.metrics().gauges();
    assert_eq!(g.prefix_cache_hits, (shared / 16 * 16) as u64);

    let uncached = EngineHandle::start(
        lm.clone(),
        EngineConfig {
            prefix_caching: false,
            ..config()
        },
    )
    .unwrap();
    uncached.generate(&request(&first), |_| true).unwrap();
    let c = uncached.generate(&request(&second), |_| true).unwrap();
    assert_eq!(c.usage.cached_tokens, 0);
    assert_eq!(b.tokens, c.tokens);
}

#[test]
fn abort_and_dropped_streams_free_their_blocks() {
    let Some(lm) = load(SMOLLM2) else { return };
    let engine = EngineHandle::start(lm, config()).unwrap();
    let mut long = request("Count slowly:");
    long.max_tokens = Some(500);

    // Abort after three tokens.
    let mut stream = engine.submit(&long).unwrap();
    let mut tokens = 0;
    let finish = loop {
        match stream.blocking_next().unwrap() {
            Event::Token(_) => {
                tokens += 1;
                if tokens == 3 {
                    engine.abort(stream.id());
                }
            }
            Event::Done { finish_reason, .. } => break finish_reason,
            Event::Error(e) => panic!("{e}"),
        }
    };
    assert_eq!(finish, FinishReason::Cancelled);
    assert!(tokens < 500);

    // A client that goes away: dropping the stream aborts the request.
    let mut stream = engine.submit(&long).unwrap();
    assert!(matches!(stream.blocking_next(), Some(Event::Token(_))));
    drop(stream);
    wait_idle(&engine);
    let text = engine.metrics().render_prometheus();
    assert!(
        text.contains("mlxr:request_success_total{finished_reason=\"abort\"} 2"),
        "{text}"
    );
}

#[test]
fn requests_that_cannot_fit_are_refused_at_submission() {
    let Some(lm) = load(SMOLLM2) else { return };
    let engine = EngineHandle::start(lm, config()).unwrap();
    let limit = engine.max_sequence_len();
    let mut req = request("Hello");
    req.max_tokens = Some(limit);
    let err = engine
        .submit(&req)
        .err()
        .expect("prompt + max_tokens > limit");
    assert!(err.to_string().contains("max_tokens"), "{err}");
    let err = engine
        .submit(&request(&"word ".repeat(limit)))
        .err()
        .expect("prompt > limit");
    assert!(err.to_string().contains("tokens"), "{err}");
    let err = engine.submit(&request("")).err().expect("empty prompt");
    assert!(err.to_string().contains("empty"), "{err}");
}

#[test]
fn shutdown_of_the_last_handle_waits_for_its_requests_and_frees_the_model() {
    let Some(lm) = load(SMOLLM2) else { return };
    let engine = EngineHandle::start(lm.clone(), config()).unwrap();
    let other = engine.clone();
    let mut req = request("Count:");
    req.max_tokens = Some(8);
    let mut stream = engine.submit(&req).unwrap();
    assert!(!engine.shutdown(), "another handle is alive");
    assert!(other.shutdown());
    // The engine thread has ended and dropped its model (only ours is left),
    // after finishing the request in flight.
    assert_eq!(Arc::strong_count(&lm), 1);
    let mut tokens = 0;
    let finish = loop {
        match stream.blocking_next().unwrap() {
            Event::Token(_) => tokens += 1,
            Event::Done { finish_reason, .. } => break finish_reason,
            Event::Error(e) => panic!("{e}"),
        }
    };
    assert_eq!((tokens, finish), (8, FinishReason::Length));
    assert!(stream.blocking_next().is_none());
}
