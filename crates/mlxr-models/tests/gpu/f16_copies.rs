//! Weights' F16 copies kept from the load (`MLXR_CUDA_F16_WEIGHTS=on`)
//! against the same file loaded without them (`off`): a prefill of more rows
//! than `F16_GEMM_ROWS` takes the F16 route either way (copy, or dequantized
//! per call) and must give the same bits; a decode step of 16 sequences
//! (the copies' own route against candle's q8_1 kernels) is held to the
//! quantized tolerance per row.

use candle_core::{DType, Device};
use mlxr_formats::gguf::GgufFile;
use mlxr_models::{CudaBackend, DecoderModel, Session};

use super::common::{argmax, rel_diff};
use super::{geometry, prompt, BLOCK, QUANTIZED_TOLERANCE};

const SEQS: usize = 16;
const BLOCKS_PER_SEQ: usize = 8;

fn load(file: &GgufFile, device: &Device, copies: &str) -> DecoderModel {
    std::env::set_var("MLXR_CUDA_F16_WEIGHTS", copies);
    let model = DecoderModel::load_with_kernels(file, device, None).unwrap();
    std::env::remove_var("MLXR_CUDA_F16_WEIGHTS");
    model
}

/// The failures, after printing one line.
pub fn check(label: &str, file: &GgufFile, device: &Device) -> Vec<String> {
    let with = load(file, device, "on");
    let without = load(file, device, "off");
    let vocab = with.config().vocab_size;
    let kv = geometry(&with, SEQS * BLOCKS_PER_SEQ);
    let session = || {
        let b = CudaBackend::new(kv, DType::F16, device).unwrap();
        Session::new(b, SEQS, BLOCKS_PER_SEQ, BLOCK)
    };
    let (mut a, mut b) = (session(), session());
    let mut failures = Vec::new();
    let long = prompt(100, 7, vocab);
    let want = b.feed(&without, &[(0, &long)]).unwrap().to_vec();
    let got = a.feed(&with, &[(0, &long)]).unwrap().to_vec();
    let prefill_diff = want
        .iter()
        .zip(&got)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max);
    if prefill_diff != 0.0 || got.len() != want.len() {
        failures.push(format!(
            "a 100-token prefill's last logits differ by {prefill_diff:e} (must be 0)"
        ));
    }
    let mut next = vec![argmax(&got)];
    for s in 1..SEQS {
        let tokens = prompt(4 + s, s, vocab);
        b.feed(&without, &[(s, &tokens)]).unwrap();
        next.push(argmax(a.feed(&with, &[(s, &tokens)]).unwrap()));
    }
    let chunks: Vec<(usize, Vec<u32>)> = next
        .iter()
        .enumerate()
        .map(|(s, &t)| (s, vec![t]))
        .collect();
    let chunks: Vec<(usize, &[u32])> = chunks.iter().map(|(s, t)| (*s, t.as_slice())).collect();
    let want = b.feed(&without, &chunks).unwrap().to_vec();
    let got = a.feed(&with, &chunks).unwrap().to_vec();
    let mut worst = 0f32;
    let mut same = 0;
    for (g, w) in got.chunks_exact(vocab).zip(want.chunks_exact(vocab)) {
        worst = worst.max(rel_diff(g, w));
        same += usize::from(argmax(g) == argmax(w));
    }
    if worst > QUANTIZED_TOLERANCE || got.len() != want.len() {
        failures.push(format!(
            "16 sequences' decode step: max rel diff {worst:.2e} (tol {QUANTIZED_TOLERANCE:.1e})"
        ));
    }
    println!(
        "{label}: F16 copies vs none: 100-token prefill's last logits max abs diff {prefill_diff:e} (must be 0); \
         16 sequences' decode step max rel diff {worst:.2e}, greedy equal {same}/{SEQS}"
    );
    failures
}
