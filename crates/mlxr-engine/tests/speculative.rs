//! Speculative decoding is lossless: on the real models, greedy output with
//! drafts verified (prompt lookup, k = 1 to 8, and a model drafting for
//! itself) is token for token the output without, alone and in batches
//! where speculating and plain requests mix, with tiny steps, forced
//! preemption and prefix-cache hits, and drafts are really verified and
//! accepted (the counts say so); sampled output keeps its distribution
//! (a chi-square test on a tiny model).

mod common;

use std::sync::Arc;

use common::{batch_variants, load};
use mlxr_engine::spec::frequent_tokens::{frequent_tokens, DEFAULT_DRAFT_VOCAB};
use mlxr_engine::{
    DraftLength, EngineConfig, EngineHandle, Event, FinishReason, GenerateRequest, KvBudget,
    LoadedModel, Prompt, SamplingParams, SpecOverrides, SpecType,
};
use mlxr_testkit::{model_path, QWEN_CODER_05B, QWEN_CODER_15B, SMOLLM2};

const MAX_TOKENS: usize = 32;

fn config() -> EngineConfig {
    EngineConfig {
        kv_budget: KvBudget::Bytes(64 << 20),
        max_num_seqs: 8,
        // Draft in every step, however many sequences decode, as many
        // tokens as asked (a draft model drafting for itself never pays).
        spec_disable_batch: usize::MAX,
        speculation: SpecOverrides {
            draft_length: Some(DraftLength::Max),
            ..SpecOverrides::default()
        },
        ..EngineConfig::default()
    }
}

/// 24 prompts: rewrites and lists that repeat their input (lookup drafts
/// well), and free text (it rarely does).
fn prompts() -> Vec<String> {
    let code = [
        "fn add(a: i32, b: i32) -> i32 {\n    a + b\n}",
        "def area(r):\n    return 3.14159 * r * r",
        "for i in range(10):\n    print(i * i)",
        "let total: u64 = items.iter().map(|x| x.price).sum();",
        "SELECT name, age FROM users WHERE age > 30 ORDER BY name;",
        "const greet = (name) => `Hello, ${name}!`;",
    ];
    let mut p = Vec::new();
    for c in code {
        p.push(format!(
            "Rewrite this code with the variable names in uppercase:\n{c}\nRewritten:\n"
        ));
        p.push(format!("Repeat this exactly:\n{c}\nRepeated:\n"));
    }
    for list in [
        "apple, banana, cherry, date, elderberry, fig, grape",
        "Monday, Tuesday, Wednesday, Thursday, Friday",
        "one two three four five six seven eight nine ten",
        "red green blue red green blue red green",
        "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12",
        "the cat sat on the mat and the cat sat on the",
    ] {
        p.push(format!("Copy the list twice: {list}\n"));
    }
    for free in [
        "The capital of France is",
        "Once upon a time, in a land far away,",
        "Rust's ownership model means that",
        "Translate to German: good morning",
        "Write a haiku about the sea.",
        "Explain what a hash map is.",
    ] {
        p.push(free.to_string());
    }
    p
}

fn request(prompt: &str, speculation: SpecOverrides) -> GenerateRequest {
    let mut req = GenerateRequest::new(Prompt::Raw(prompt.to_string()));
    req.sampling = SamplingParams::greedy();
    req.max_tokens = Some(MAX_TOKENS);
    req.ignore_eos = true;
    req.speculation = speculation;
    req
}

/// Submits every request at once, then reads the streams: tokens and
/// `(draft_n, draft_n_accepted)` of each.
fn together(engine: &EngineHandle, reqs: &[GenerateRequest]) -> Vec<(Vec<u32>, (usize, usize))> {
    let mut streams: Vec<_> = reqs.iter().map(|r| engine.submit(r).unwrap()).collect();
    streams
        .iter_mut()
        .map(|s| {
            let mut tokens = Vec::new();
            loop {
                match s.blocking_next().expect("a final event") {
                    Event::Token(t) => tokens.push(t.id),
                    Event::Done {
                        finish_reason,
                        timings,
                        ..
                    } => {
                        assert_eq!(finish_reason, FinishReason::Length);
                        break (tokens, (timings.draft_n, timings.draft_n_accepted));
                    }
                    Event::Error(e) => panic!("{e}"),
                }
            }
        })
        .collect()
}

/// 24 prompts; alone, prompt i drafts up to k = 1 + i % 8 tokens.
#[test]
fn smollm2_prompt_lookup_is_token_identical() {
    speculation_is_token_identical(SMOLLM2, prompts(), 1..=8, None, SpecOverrides::ngram, 4);
}

/// The Qwen2.5-Coder pair's small model (head_dim 64, GQA, QKV biases), as
/// SmolLM2.
#[test]
fn qwen_coder_prompt_lookup_is_token_identical() {
    speculation_is_token_identical(
        QWEN_CODER_05B,
        prompts(),
        1..=8,
        None,
        SpecOverrides::ngram,
        4,
    );
}

/// With speculation `spec(k)` (and the draft model `draft`, if any), greedy
/// output equals the output without, token for token: each request alone
/// (prompt i with the i-th of `ks`, cycling), then batched under the first
/// `variants` of [`batch_variants`]; asserts drafts were accepted.
fn speculation_is_token_identical(
    file: &str,
    prompts: Vec<String>,
    ks: impl IntoIterator<Item = usize>,
    draft: Option<&str>,
    spec: fn(usize) -> SpecOverrides,
    variants: usize,
) {
    let Some(lm) = load(file) else { return };
    let draft_model = match draft {
        Some(d) => match model_path(d) {
            Some(path) => Some(path),
            None => return,
        },
        None => None,
    };
    let config = || EngineConfig {
        draft_model: draft_model.clone(),
        ..config()
    };
    // Without speculation, batched (batches equal requests alone: engine.rs).
    let engine = EngineHandle::start(lm.clone(), config()).unwrap();
    if draft == Some(file) {
        // Drafting for itself, the model reads one copy of its weights.
        let drafting = engine.draft_model().expect("a draft model");
        assert!(
            Arc::ptr_eq(&drafting.model, &lm.model),
            "{file}: weights loaded twice"
        );
    }
    let plain: Vec<GenerateRequest> = prompts
        .iter()
        .map(|p| request(p, SpecOverrides::off()))
        .collect();
    let expected: Vec<Vec<u32>> = together(&engine, &plain)
        .into_iter()
        .map(|(tokens, _)| tokens)
        .collect();

    // Alone: one request at a time.
    let engine = EngineHandle::start(lm.clone(), config()).unwrap();
    let (mut drafted, mut accepted) = (0, 0);
    let ks: Vec<usize> = ks.into_iter().collect();
    for ((i, p), k) in prompts.iter().enumerate().zip(ks.iter().copied().cycle()) {
        let g = engine.generate(&request(p, spec(k)), |_| true).unwrap();
        assert_eq!(g.tokens, expected[i], "{file}, k = {k}: prompt {i} alone");
        drafted += g.timings.draft_n;
        accepted += g.timings.draft_n_accepted;
        assert!(g.timings.draft_n_accepted <= g.timings.draft_n);
    }
    // Rewrites repeat their input: most of their drafts stand.
    assert!(
        accepted > 0,
        "{file}: {accepted} of {drafted} draft tokens stood"
    );
    let (drafts, tokens, stood) = engine.metrics().spec_counts();
    assert_eq!((tokens, stood), (drafted as u64, accepted as u64));
    assert!(drafts > 0);
    eprintln!("{file}, alone: {accepted} of {drafted} draft tokens stood");
    batched_is_token_identical(file, &lm, config(), &prompts, &expected, spec, variants);
}

/// Speculating and plain requests mixed, in batches of 8, under each of
/// [`batch_variants`]: the plain batch twice (k = 3 for the even prompts,
/// then k = 8 for the odd ones: the second round hits the prefix cache),
/// the others once (k = 8 for the odd prompts, k = 3 for the even ones).
fn batched_is_token_identical(
    file: &str,
    lm: &Arc<LoadedModel>,
    config: EngineConfig,
    prompts: &[String],
    expected: &[Vec<u32>],
    spec: fn(usize) -> SpecOverrides,
    variants: usize,
) {
    // 12 blocks of 16 tokens: two of these sequences at a time.
    let variants = batch_variants(config, lm, 12).into_iter().take(variants);
    for (v, (name, cfg)) in variants.enumerate() {
        let engine = EngineHandle::start(lm.clone(), cfg).unwrap();
        let rounds: &[(usize, usize)] = match v {
            0 => &[(0, 3), (1, 8)],
            v if v % 2 == 1 => &[(1, 8)],
            _ => &[(0, 3)],
        };
        for &(parity, k) in rounds {
            let reqs: Vec<GenerateRequest> = prompts
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let spec = if i % 2 == parity {
                        spec(k)
                    } else {
                        SpecOverrides::off()
                    };
                    request(p, spec)
                })
                .collect();
            let got = together(&engine, &reqs);
            for (i, (tokens, (drafted, _))) in got.iter().enumerate() {
                assert_eq!(tokens, &expected[i], "{file}, {name}, k = {k}: prompt {i}");
                if i % 2 != parity {
                    assert_eq!(*drafted, 0, "{name}: a plain request drafted");
                }
            }
        }
        let g = engine.metrics().gauges();
        if name == "tight KV budget" {
            assert!(g.preemptions > 0, "{file}: no preemption");
        }
        if name == "batched" {
            assert!(g.prefix_cache_hits > 0, "{file}: no prefix-cache hit");
        }
        let (_, drafted, accepted) = engine.metrics().spec_counts();
        assert!(
            accepted > 0,
            "{file}, {name}: {accepted} of {drafted} stood"
        );
    }
}

fn draft(k: usize) -> SpecOverrides {
    SpecOverrides {
        spec_type: Some(SpecType::Draft),
        n_max: Some(k),
        // Every draft token, however unsure: the test wants long drafts.
        p_min: Some(0.0),
        ..SpecOverrides::default()
    }
}

/// SmolLM2 as its own draft model: every draft stands, and the text is the
/// text without speculation (the draft's KV mirrors the target's blocks,
/// rolled back with them, recomputed after preemption).
#[test]
fn smollm2_drafting_for_itself_is_token_identical() {
    let quarter: Vec<String> = prompts().into_iter().step_by(4).collect();
    speculation_is_token_identical(SMOLLM2, quarter, [1, 8], Some(SMOLLM2), draft, 2);
}

/// Qwen2.5-Coder-0.5B drafting for itself at k = 5 (head_dim 64, GQA, QKV
/// biases), and SmolLM2 refusing it as a draft (another vocabulary). The
/// real pair (0.5B for 1.5B) is measured by bench/speculative.sh.
#[test]
fn qwen_coder_drafting_for_itself_and_a_foreign_vocabulary_refused() {
    let sixth: Vec<String> = prompts().into_iter().step_by(6).collect();
    speculation_is_token_identical(QWEN_CODER_05B, sixth, [5], Some(QWEN_CODER_05B), draft, 2);
    let (Some(smol), Some(qwen)) = (load(SMOLLM2), model_path(QWEN_CODER_05B)) else {
        return;
    };
    let err = EngineHandle::start(
        smol.clone(),
        EngineConfig {
            draft_model: Some(qwen.clone()),
            ..config()
        },
    )
    .err()
    .expect("another vocabulary");
    assert!(err.to_string().contains("cannot draft for"), "{err}");

    // A draft whose weights another engine already loaded (as `serve`
    // passes those of a model it serves) takes them instead of a copy.
    let served = load(QWEN_CODER_05B).unwrap();
    let target = load(QWEN_CODER_05B).unwrap();
    let config = EngineConfig {
        draft_model: Some(qwen),
        ..config()
    };
    let engine = EngineHandle::start_sharing(target, config, Some(served.model.clone())).unwrap();
    let drafting = engine.draft_model().expect("a draft model");
    assert!(Arc::ptr_eq(&drafting.model, &served.model));
    assert_eq!(drafting.path, served.path);
}

/// The 1.5B target with prompt lookup, as SmolLM2 (all 24 prompts, k = 1
/// to 8, the four batch variants).
#[test]
fn qwen_coder_15b_prompt_lookup_is_token_identical() {
    speculation_is_token_identical(
        QWEN_CODER_15B,
        prompts(),
        1..=8,
        None,
        SpecOverrides::ngram,
        4,
    );
}

/// The real pair: Qwen2.5-Coder-0.5B drafting for the 1.5B, with its head
/// over its 32,768 most frequent tokens (the default): the 24 prompts alone
/// (k = 1 + i % 8), batched with plain requests, and under a KV budget
/// that forces preemption.
#[test]
fn qwen_coder_pair_is_token_identical() {
    speculation_is_token_identical(
        QWEN_CODER_15B,
        prompts(),
        1..=8,
        Some(QWEN_CODER_05B),
        draft,
        2,
    );
}

/// A Qwen2.5 draft scores its vocabulary's 32,768 most frequent tokens
/// (whole tiles of 16, its control tokens too) unless told to score every
/// one; SmolLM2's vocabulary has no ranking. (That the drafts stay
/// lossless is `qwen_coder_drafting_for_itself_...`, which runs with it.)
#[test]
fn a_qwen_draft_scores_its_most_frequent_tokens() {
    let (Some(qwen), Some(path)) = (load(QWEN_CODER_05B), model_path(QWEN_CODER_05B)) else {
        return;
    };
    let start = |draft_vocab| {
        let config = EngineConfig {
            draft_model: Some(path.clone()),
            draft_vocab,
            ..config()
        };
        EngineHandle::start(qwen.clone(), config).unwrap()
    };
    let n = start(EngineConfig::default().draft_vocab)
        .draft_vocab()
        .expect("a partial head");
    assert!(
        (DEFAULT_DRAFT_VOCAB..DEFAULT_DRAFT_VOCAB + 64).contains(&n) && n.is_multiple_of(16),
        "{n} tokens"
    );
    assert_eq!(start(None).draft_vocab(), None);

    let tokenizer = &qwen.tokenizer;
    let ids = frequent_tokens(tokenizer, 1000).expect("Qwen2's ranking");
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ascending");
    assert!(ids.len() >= 1000 && ids.len().is_multiple_of(16));
    let has = |id: u32| ids.binary_search(&id).is_ok();
    assert!(tokenizer.eog_ids().iter().all(|&id| has(id)));
    assert!((0..tokenizer.vocab_size() as u32)
        .filter(|&id| tokenizer.is_control(id))
        .all(has));
    for text in ["Ġ", "Ċ", "(", "Ġreturn", "ĠĠĠ"] {
        let id = tokenizer.token_id(text).unwrap();
        assert!(has(id), "{text:?} is among the most frequent");
    }
    // Rare enough to be left out of 1,000.
    assert!(!has(tokenizer.token_id("ĠLevi").unwrap()));
    let Some(smol) = load(SMOLLM2) else { return };
    assert_eq!(frequent_tokens(&smol.tokenizer, 1000), None);
}

#[test]
fn bad_speculation_is_refused_at_submission() {
    let Some(lm) = load(SMOLLM2) else { return };
    let engine = EngineHandle::start(lm, config()).unwrap();
    let err = engine
        .submit(&request("Hi", SpecOverrides::ngram(64)))
        .err()
        .expect("n_max 64");
    assert!(err.to_string().contains("n_max is 64"), "{err}");
    let draft = SpecOverrides {
        spec_type: Some(SpecType::Draft),
        ..SpecOverrides::ngram(4)
    };
    let err = engine
        .submit(&request("Hi", draft))
        .err()
        .expect("no draft model");
    assert!(err.to_string().contains("--model-draft"), "{err}");
}

/// Sampling with drafts keeps the distribution, on the tiny random-weight
/// llama (tests/fixtures/tiny-models) drafting for itself: 10,000 seeded
/// requests each way (temperature 1 over the 4 most likely tokens; the draft
/// is greedy, so it often disagrees with the token sampled, and drafts both
/// stand and fall), the 2nd and 3rd generated tokens (the first is sampled
/// after the prompt, before any draft) compared by a chi-square test of
/// homogeneity at the 0.001 level. The verifier's unit tests show the same
/// test catching a wrong acceptance rule.
#[test]
fn sampled_drafts_keep_the_distribution() {
    let path = mlxr_testkit::fixture_path("tiny-models/gguf/llama.f32.gguf");
    let lm = Arc::new(LoadedModel::load(&path, Some(256)).unwrap());
    const TRIALS: u64 = 10_000;
    let counts = |spec: SpecOverrides| {
        let engine = EngineHandle::start(
            lm.clone(),
            EngineConfig {
                max_num_seqs: 256,
                // Room for every running sequence's drafts.
                kv_budget: KvBudget::Bytes(512 << 20),
                draft_model: Some(path.clone()),
                ..config()
            },
        )
        .unwrap();
        let mut streams: Vec<_> = (0..TRIALS)
            .map(|seed| {
                let mut req = GenerateRequest::new(Prompt::Tokens(vec![1, 2, 3]));
                req.speculation = spec;
                req.ignore_eos = true;
                req.max_tokens = Some(3);
                req.sampling = SamplingParams {
                    temperature: 1.0,
                    top_k: 4,
                    top_p: 1.0,
                    min_p: 0.0,
                    seed: Some(seed),
                    ..SamplingParams::default()
                };
                engine.submit(&req).unwrap()
            })
            .collect();
        let mut counts = std::collections::HashMap::<(u32, u32), u64>::new();
        for s in &mut streams {
            let mut tokens = Vec::new();
            while let Some(Event::Token(t)) = s.blocking_next() {
                tokens.push(t.id);
            }
            assert_eq!(tokens.len(), 3);
            *counts.entry((tokens[1], tokens[2])).or_default() += 1;
        }
        (counts, engine.metrics().spec_counts())
    };
    let (plain, _) = counts(SpecOverrides::off());
    let (spec, (_, drafted, accepted)) = counts(draft(2));
    assert!(
        accepted > 1000 && drafted - accepted > 1000,
        "drafts must both stand and fall: {accepted} of {drafted} stood"
    );
    // Cells seen fewer than 20 times in all are pooled.
    let mut cells: Vec<(u64, u64)> = Vec::new();
    let mut rare = (0, 0);
    let keys: std::collections::BTreeSet<_> = plain.keys().chain(spec.keys()).collect();
    for key in keys {
        let a = plain.get(key).copied().unwrap_or(0);
        let b = spec.get(key).copied().unwrap_or(0);
        if a + b < 20 {
            rare = (rare.0 + a, rare.1 + b);
        } else {
            cells.push((a, b));
        }
    }
    if rare.0 + rare.1 > 0 {
        cells.push(rare);
    }
    // Equal sample sizes: sum of (a - b)^2 / (a + b), df = cells - 1.
    let stat: f64 = cells
        .iter()
        .map(|&(a, b)| (a as f64 - b as f64).powi(2) / (a + b) as f64)
        .sum();
    let df = cells.len() - 1;
    assert!(df >= 3, "too few outcomes to test: {cells:?}");
    // Wilson-Hilferty: the chi-square quantile at 0.999 (z = 3.09).
    let d = df as f64;
    let critical = d * (1.0 - 2.0 / (9.0 * d) + 3.09 * (2.0 / (9.0 * d)).sqrt()).powi(3);
    eprintln!("chi-square {stat:.1} over {df} df (critical {critical:.1}); {accepted} of {drafted} drafts stood");
    assert!(
        stat < critical,
        "sampled output with drafts differs from without: chi-square {stat:.1} over {df} df (critical {critical:.1})"
    );
}
