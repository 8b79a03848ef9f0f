//! Many sequences decoding together (the multi-stream serving step: up to
//! 64 rows through our 8-bit matmuls in tiles of 8 tokens, the split decode
//! attention, CUDA graphs) against each sequence decoded alone, one step
//! each: the logits must be equal bit for bit. The sequences' contexts
//! differ (3 to 39 prompt tokens); the batched side records its step at the
//! second decode step and replays it after, the alone side runs plainly.

use candle_core::{DType, Device};
use mlxr_models::{CudaBackend, DecoderModel, Session, StepGraphs};

use super::common::argmax;
use super::{geometry, prompt, BLOCK};

/// Decode steps after the prompts: plain, recorded, then replayed.
const STEPS: usize = 4;
const BLOCKS_PER_SEQ: usize = 3;

/// The failures, after printing one line.
pub fn check(label: &str, model: &DecoderModel, device: &Device) -> Vec<String> {
    let vocab = model.config().vocab_size;
    let mut failures = Vec::new();
    let mut worst = 0f32;
    let sizes = [9usize, 16, 64];
    for n in sizes {
        let kv = geometry(model, n * BLOCKS_PER_SEQ);
        let session = |graphs| {
            let mut b = CudaBackend::new(kv, DType::F16, device).unwrap();
            b.set_graphs(graphs);
            // Our many-sequence paths for every size (off by default).
            b.set_many_sequence_rows(64);
            Session::new(b, n, BLOCKS_PER_SEQ, BLOCK)
        };
        let mut together = session(StepGraphs::Replay);
        let mut alone = session(StepGraphs::Off);
        let mut next = Vec::with_capacity(n);
        for s in 0..n {
            let tokens = prompt(3 + (s * 7) % 37, s, vocab);
            alone.feed(model, &[(s, &tokens)]).unwrap();
            next.push(argmax(together.feed(model, &[(s, &tokens)]).unwrap()));
        }
        for step in 0..STEPS {
            let ids: Vec<[u32; 1]> = next.iter().map(|&t| [t]).collect();
            let chunks: Vec<(usize, &[u32])> =
                ids.iter().enumerate().map(|(s, t)| (s, &t[..])).collect();
            let got = together.feed(model, &chunks).unwrap().to_vec();
            if got.len() != n * vocab {
                failures.push(format!("{n} sequences: {} logits", got.len()));
                break;
            }
            for (s, row) in got.chunks_exact(vocab).enumerate() {
                let want = alone.feed(model, &[chunks[s]]).unwrap();
                let diff = row
                    .iter()
                    .zip(want)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0f32, f32::max);
                if diff != 0.0 || row.iter().any(|x| !x.is_finite()) {
                    failures.push(format!(
                        "{n} sequences, step {step}: sequence {s}'s logits differ from alone by {diff:e}"
                    ));
                }
                worst = worst.max(diff);
            }
            next = got.chunks_exact(vocab).map(argmax).collect();
        }
    }
    println!(
        "{label}: {sizes:?} sequences decoding together vs each alone, {STEPS} steps (graphs): max abs diff {worst:e} (must be 0)"
    );
    failures
}
