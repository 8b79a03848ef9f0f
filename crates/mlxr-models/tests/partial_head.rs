//! A partial LM head (a draft model's frequent tokens) gives each of its
//! tokens the logit the whole head gives it, for every row of a mixed step.

use candle_core::{DType, Device};
use mlxr_formats::gguf::GgufFile;
use mlxr_models::{CpuBackend, DecoderModel, KvGeometry, ModelRunner, PartialHead, RowOrder, Step};
use mlxr_testkit::{model_path, QWEN_CODER_05B, SMOLLM2};

const BLOCK: usize = 16;

/// Two prompts in one step, then a step with one decode token each and a
/// verifying chunk of 3 scored tokens: the logits of the head's tokens with
/// `head` against the whole head's.
fn partial_equals_whole(file: &str, tokens: Vec<u32>) {
    let Some(path) = model_path(file) else { return };
    let gguf = GgufFile::open(&path).unwrap();
    let order = Some(RowOrder::Independent);
    let model = DecoderModel::load_with_kernels(&gguf, &Device::Cpu, order).unwrap();
    let head = PartialHead::from_gguf(&gguf, model.config(), &Device::Cpu, order, tokens).unwrap();
    let vocab = model.config().vocab_size;
    let runner = || {
        let geometry = KvGeometry::new(model.config(), 8, BLOCK);
        ModelRunner::new(CpuBackend::new(geometry, DType::F32).unwrap())
    };
    let (mut whole, mut partial) = (runner(), runner());
    let prompts: [Vec<u32>; 2] = [
        (0..37).map(|i| 200 + i * 113).collect(),
        (0..5).map(|i| 900 + i * 7).collect(),
    ];
    let mut steps = Vec::new();
    let mut step = Step::default();
    step.push(&prompts[0], 0, [0, 1, 2, 3]);
    step.push(&prompts[1], 0, [4, 5]);
    step.finish(BLOCK).unwrap();
    steps.push(step);
    let mut step = Step::default();
    step.push(&[11], 37, [0, 1, 2, 3]);
    step.push_scored(&[12, 13, 14], 5, [4, 5], 3);
    step.finish(BLOCK).unwrap();
    steps.push(step);
    for (s, step) in steps.iter().enumerate() {
        let all = whole.execute(&model, step).unwrap().to_vec();
        let some = partial.execute_head(&model, Some(&head), step).unwrap();
        let width = head.tokens().len();
        assert_eq!(
            all.len() / vocab,
            some.len() / width,
            "{file}: step {s} rows"
        );
        for (r, (all, some)) in all
            .chunks_exact(vocab)
            .zip(some.chunks_exact(width))
            .enumerate()
        {
            for (&token, &logit) in head.tokens().iter().zip(some) {
                assert_eq!(
                    logit.to_bits(),
                    all[token as usize].to_bits(),
                    "{file}: step {s}, row {r}, token {token}"
                );
            }
        }
    }
}

/// Qwen2.5's tied Q8_0 head, 151,936 rows: a spread of 4,096 of them.
#[test]
fn qwen_partial_head_equals_the_whole_one() {
    let tokens = (0..4096u32).map(|i| i * 37).collect();
    partial_equals_whole(QWEN_CODER_05B, tokens);
}

/// SmolLM2's tied Q4_1 head, and a head of rows out of order (logit `i`
/// is token `tokens[i]` whatever the order).
#[test]
fn smollm2_partial_head_equals_the_whole_one() {
    let tokens = (0..48u32).rev().map(|i| 1 + i * 1000).collect();
    partial_equals_whole(SMOLLM2, tokens);
}

#[test]
fn a_head_of_tokens_outside_the_vocabulary_is_refused() {
    let Some(path) = model_path(SMOLLM2) else {
        return;
    };
    let gguf = GgufFile::open(&path).unwrap();
    let model = DecoderModel::load(&gguf, &Device::Cpu).unwrap();
    let vocab = model.config().vocab_size as u32;
    for tokens in [vec![], vec![1, vocab]] {
        let err = PartialHead::from_gguf(&gguf, model.config(), &Device::Cpu, None, tokens)
            .err()
            .expect("refused");
        assert!(err.to_string().contains("token"), "{err}");
    }
}
