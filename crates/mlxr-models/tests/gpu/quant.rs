//! Our Q4_K/Q6_K CUDA matmuls, one matrix at a time, against the CPU
//! backend's own dot products (`kquants`, on activations quantized by its
//! `q8k`): every output within `KERNEL_TOLERANCE` of its row's largest, and
//! each token's outputs the same bits in every batch.

use std::sync::Arc;

use candle_core::quantized::{ggml_file::qtensor_from_ggml, GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use mlxr_models::backend::cpu::kernels::kquants::{dot_q4_k_scalar, dot_q6_k_scalar};
use mlxr_models::backend::cpu::kernels::q8k::{quantize_row, BlockQ8K, Q8KFlavor, QK_K};
use mlxr_models::layers::Linear;
use mlxr_models::{Backend, CudaBackend, KvGeometry};
use rand::{Rng, SeedableRng};

use super::Outcome;

/// The same integers on both sides; only the float sums' order differs.
const KERNEL_TOLERANCE: f32 = 1e-5;

/// Rows not a multiple of the kernel's 4 per block; k of 5 super-blocks.
const N: usize = 259;
const K: usize = 5 * QK_K;
/// Every kernel (1, 2, 4 and 8 tokens per row), full and partial; the
/// backend takes candle's matmul beyond 8.
const TOKENS: [usize; 6] = [1, 2, 3, 4, 5, 8];

pub fn kernels(device: &Device) -> Vec<Outcome> {
    [GgmlDType::Q4K, GgmlDType::Q6K]
        .into_iter()
        .map(|dtype| Outcome {
            label: format!("{dtype:?} matmul kernel vs the CPU's dot products"),
            failures: check(dtype, device),
        })
        .collect()
}

fn check(dtype: GgmlDType, device: &Device) -> Vec<String> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let w: Vec<f32> = (0..N * K).map(|_| rng.random_range(-1.0..1.0)).collect();
    let cpu_w =
        QTensor::quantize(&Tensor::from_vec(w, (N, K), &Device::Cpu).unwrap(), dtype).unwrap();
    let bytes = cpu_w.data().unwrap();
    let row_bytes = bytes.len() / N;
    let dev_w = qtensor_from_ggml(dtype, &bytes, vec![N, K], device).unwrap();
    let linear = Linear::ggml(Arc::new(dev_w), None).unwrap();
    let kv = KvGeometry {
        n_layers: 1,
        num_blocks: 1,
        block_size: 16,
        n_kv_heads: 1,
        head_dim: 64,
    };
    let mut backend = CudaBackend::new(kv, candle_core::DType::F32, device).unwrap();
    let max_tokens = *TOKENS.iter().max().unwrap();
    // Activations of every scale, some with ties of +max and -max.
    let x: Vec<f32> = (0..max_tokens * K)
        .map(|i| match i % 97 {
            0 => 3.0,
            1 => -3.0,
            _ => rng.random_range(-2.0..2.0) * (1 + i % 5) as f32,
        })
        .collect();
    let mut failures = Vec::new();
    let mut first_seen: Vec<Vec<f32>> = Vec::new();
    for tokens in TOKENS {
        let xs = &x[..tokens * K];
        let input = Some(Tensor::from_slice(xs, (tokens, K), device).unwrap());
        let mut out = None;
        backend.matmul(&input, &linear, &mut out).unwrap();
        let got: Vec<f32> = out.unwrap().flatten_all().unwrap().to_vec1().unwrap();
        for t in 0..tokens {
            let mut q = vec![BlockQ8K::default(); K / QK_K];
            quantize_row(&xs[t * K..(t + 1) * K], &mut q, Q8KFlavor::Reference);
            let want: Vec<f32> = (0..N)
                .map(|r| {
                    let row = &bytes[r * row_bytes..(r + 1) * row_bytes];
                    match dtype {
                        GgmlDType::Q4K => dot_q4_k_scalar(row, &q, false),
                        _ => dot_q6_k_scalar(row, &q, false),
                    }
                })
                .collect();
            let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
            let row = &got[t * N..(t + 1) * N];
            let worst = row
                .iter()
                .zip(&want)
                .map(|(g, w)| (g - w).abs() / scale)
                .fold(0f32, f32::max);
            if !(worst <= KERNEL_TOLERANCE) {
                failures.push(format!("{tokens} tokens, token {t}: {worst:.2e}"));
            }
            match first_seen.get(t) {
                Some(first) if first.as_slice() != row => failures.push(format!(
                    "token {t} in a batch of {tokens} differs from a smaller batch"
                )),
                Some(_) => {}
                None => first_seen.push(row.to_vec()),
            }
        }
    }
    println!(
        "{dtype:?} kernel: {N} x {K}, batches {TOKENS:?}: {}",
        if failures.is_empty() {
            "ok".to_string()
        } else {
            failures.join("; ")
        }
    );
    failures
}
