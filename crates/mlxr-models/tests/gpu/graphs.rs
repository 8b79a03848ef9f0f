//! Decode steps replayed from CUDA graphs, our kernels launched to start as
//! the one before ends ([`Launch::Dependent`]), against the same steps run
//! plainly, each kernel launched after the one before is done, on two CUDA
//! backends over one model: the logits must be equal bit for bit (the same
//! kernels with the same launch shapes). The steps:
//! two sequences prefilled, decoded together (recorded at the second step,
//! replayed after), a third sequence's long prefill (the step buffers grow,
//! so the records are dropped), then three decoded together and one alone.

use candle_core::{DType, Device};
use mlxr_models::{CudaBackend, DecoderModel, Launch, Session, StepGraphs};

use super::common::argmax;
use super::{geometry, prompt, tables, BLOCK, BLOCKS_PER_SEQ, SEQS};

/// The failures, after printing one line.
pub fn check(label: &str, model: &DecoderModel, device: &Device) -> Vec<String> {
    let vocab = model.config().vocab_size;
    let kv = geometry(model, SEQS * BLOCKS_PER_SEQ);
    let session = |graphs, launch| {
        let mut b = CudaBackend::new(kv, DType::F16, device).unwrap();
        b.set_graphs(graphs);
        b.set_launch(launch);
        Session::with_tables(b, tables(), BLOCK)
    };
    let mut plain = session(StepGraphs::Off, Launch::Serial);
    let mut replayed = session(StepGraphs::Replay, Launch::Dependent);
    let mut failures = Vec::new();
    let (mut steps, mut worst) = (0usize, 0f32);
    let mut step = |chunks: &[(usize, &[u32])]| -> Vec<u32> {
        let want = plain.feed(model, chunks).unwrap().to_vec();
        let got = replayed.feed(model, chunks).unwrap().to_vec();
        let diff = want
            .iter()
            .zip(&got)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        if got.len() != want.len() || diff != 0.0 || got.iter().any(|x| !x.is_finite()) {
            failures.push(format!(
                "step {steps} ({} chunks): replayed logits differ by {diff:e}",
                chunks.len()
            ));
        }
        worst = worst.max(diff);
        steps += 1;
        want.chunks_exact(vocab).map(argmax).collect()
    };
    let mut next = step(&[(0, &prompt(20, 1, vocab)), (1, &prompt(9, 2, vocab))]);
    for _ in 0..12 {
        next = step(&[(0, &[next[0]]), (1, &[next[1]])]);
    }
    let third = step(&[(2, &prompt(70, 3, vocab))]);
    next.push(third[0]);
    for _ in 0..8 {
        next = step(&[(0, &[next[0]]), (1, &[next[1]]), (2, &[next[2]])]);
    }
    let mut last = next[2];
    for _ in 0..6 {
        last = step(&[(2, &[last])])[0];
    }
    println!(
        "{label}: CUDA graph replays (dependent launches) vs plain steps (serial launches): \
         {steps} steps, max abs diff {worst:e}"
    );
    failures
}
