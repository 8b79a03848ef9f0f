//! Sessions over each backend for the model tests.
#![allow(dead_code)]

pub mod rounded;

use candle_core::{DType, Device};
use mlxr_models::{CpuBackend, DecoderModel, KvGeometry, ReferenceBackend, Session};

pub const BLOCK: usize = 16;

/// The FP8 and bitsandbytes 4-bit checkpoints of tests/fixtures/fp8-nf4
/// (scripts/fixtures/fp8-nf4.py).
pub const CODED_FOLDERS: [&str; 8] = [
    "llama-fp8-b128",
    "qwen2-fp8-b64",
    "qwen2-fp8-b48x80",
    "llama-ct-fp8-channel",
    "qwen2-ct-fp8-tensor",
    "llama-nf4",
    "qwen2-nf4-dq",
    "llama-fp4-dq",
];

/// MLX's floating-point modes, each for both models (qwen2-mlx-nvfp4's
/// down_proj layers are mxfp8 through per-layer `quantization` entries).
pub const MLX_FP_FOLDERS: [&str; 6] = [
    "llama-mlx-mxfp4",
    "qwen2-mlx-mxfp4",
    "llama-mlx-mxfp8",
    "qwen2-mlx-mxfp8",
    "llama-mlx-nvfp4",
    "qwen2-mlx-nvfp4",
];

fn geometry(model: &DecoderModel, n_seqs: usize, blocks_per_seq: usize) -> KvGeometry {
    KvGeometry::new(model.config(), n_seqs * blocks_per_seq, BLOCK)
}

/// `n_seqs` sequences of up to `blocks_per_seq * BLOCK` tokens on the CPU
/// backend, the cache in `dtype` (F32: llama.cpp's exact attention).
pub fn cpu(
    model: &DecoderModel,
    n_seqs: usize,
    blocks_per_seq: usize,
    dtype: DType,
) -> Session<CpuBackend> {
    let kv = geometry(model, n_seqs, blocks_per_seq);
    Session::new(
        CpuBackend::new(kv, dtype).unwrap(),
        n_seqs,
        blocks_per_seq,
        BLOCK,
    )
}

/// The same on the reference backend (candle's ops, on the CPU).
pub fn reference(
    model: &DecoderModel,
    n_seqs: usize,
    blocks_per_seq: usize,
) -> Session<ReferenceBackend> {
    let kv = geometry(model, n_seqs, blocks_per_seq);
    Session::new(
        ReferenceBackend::new(kv, &Device::Cpu).unwrap(),
        n_seqs,
        blocks_per_seq,
        BLOCK,
    )
}

pub fn argmax(v: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best as u32
}

/// The largest difference between `got` and `want` relative to `want`'s
/// largest magnitude (at least 1); a NaN anywhere is the worst there is.
pub fn rel_diff(got: &[f32], want: &[f32]) -> f32 {
    assert_eq!(got.len(), want.len(), "compared rows differ in length");
    let scale = want.iter().fold(1f32, |m, v| m.max(v.abs()));
    got.iter()
        .zip(want)
        .map(|(a, b)| (a - b).abs() / scale)
        .map(|d| if d.is_nan() { f32::INFINITY } else { d })
        .fold(0f32, f32::max)
}
