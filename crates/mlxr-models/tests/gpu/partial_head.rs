//! A partial LM head on the GPU (a draft model scoring its frequent
//! tokens): each of its tokens gets the logit the whole head gives it, bit
//! for bit, in prefill and decode steps and a verifying chunk, plain and
//! replayed from CUDA graphs.

use candle_core::{DType, Device};
use mlxr_formats::gguf::GgufFile;
use mlxr_models::{CudaBackend, DecoderModel, ModelRunner, PartialHead, Step};

use super::{geometry, prompt, BLOCK};

/// The failures, after printing one line.
pub fn check(label: &str, file: &GgufFile, model: &DecoderModel, device: &Device) -> Vec<String> {
    let vocab = model.config().vocab_size;
    // 4,096 rows spread over the vocabulary, the last one included (more
    // than 2,048 rows, as the whole head: the same kernel layout).
    let step = vocab / 4096;
    let tokens: Vec<u32> = (0..4096)
        .map(|i| (vocab - 1 - i * step) as u32)
        .rev()
        .collect();
    let head = PartialHead::from_gguf(file, model.config(), device, None, tokens).unwrap();
    let runner =
        || ModelRunner::new(CudaBackend::new(geometry(model, 5), DType::F16, device).unwrap());
    let (mut whole, mut partial) = (runner(), runner());
    let prompts = [prompt(37, 5, vocab), prompt(5, 9, vocab)];
    let mut steps = Vec::new();
    let mut first = Step::default();
    first.push(&prompts[0], 0, [0, 1, 2]);
    first.push(&prompts[1], 0, [3, 4]);
    steps.push(first);
    for i in 0..4 {
        let mut s = Step::default();
        s.push(&prompts[1][..1], 37 + i, [0, 1, 2]);
        s.push_scored(&prompts[0][..3], 5 + 3 * i, [3, 4], 3);
        steps.push(s);
    }
    let mut failures = Vec::new();
    let (mut compared, mut worst) = (0usize, 0f32);
    for (n, step) in steps.iter_mut().enumerate() {
        step.finish(BLOCK).unwrap();
        let all = whole.execute(model, step).unwrap().to_vec();
        let some = partial.execute_head(model, Some(&head), step).unwrap();
        let width = head.tokens().len();
        if all.len() / vocab != some.len() / width {
            failures.push(format!(
                "step {n}: {} rows against {}",
                some.len() / width,
                all.len() / vocab
            ));
            continue;
        }
        for (all, some) in all.chunks_exact(vocab).zip(some.chunks_exact(width)) {
            for (&t, &logit) in head.tokens().iter().zip(some) {
                let diff = (logit - all[t as usize]).abs();
                worst = worst.max(diff);
                compared += 1;
                if logit.to_bits() != all[t as usize].to_bits() && failures.len() < 4 {
                    failures.push(format!(
                        "step {n}, token {t}: {logit} against {}",
                        all[t as usize]
                    ));
                }
            }
        }
    }
    println!(
        "{label}: a head of 4,096 tokens vs the whole head, {compared} logits in 5 steps: max abs diff {worst:e} (must be 0)"
    );
    failures
}
