//! Our Q4_K/Q6_K CUDA matmuls, one matrix at a time, against the CPU
//! backend's own dot products (`kquants`, on activations quantized by its
//! `q8k`), and our Q4_0/Q4_1/Q5_0/Q8_0 ones against the dequantized weights
//! times the activations quantized on the host as the kernels do (a scale
//! per 256, or per 32 on widths that are not whole super-blocks), in f64:
//! every output within `KERNEL_TOLERANCE` of its row's largest, and each
//! token's outputs the same bits in every batch, and for Q4_K/Q6_K on the
//! tensor cores (kernels/mmq.cu) at every size too. The same for inputs
//! quantized in the launch of the RMSNorm or SwiGLU that made them, whose
//! f32 outputs are held to the CPU's `ggml_f32` within `KERNEL_TOLERANCE`.

use std::sync::Arc;

use candle_core::quantized::{ggml_file::qtensor_from_ggml, GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use mlxr_models::backend::cpu::kernels::ggml_f32;
use mlxr_models::backend::cpu::kernels::kquants::{dot_q4_k_scalar, dot_q6_k_scalar};
use mlxr_models::backend::cpu::kernels::q8k::{quantize_row, BlockQ8K, Q8KFlavor, QK_K};
use mlxr_models::backend::cuda::{MatVec, BLOCK_PER_ROW_MOST};
use mlxr_models::layers::{Linear, RmsNorm};
use mlxr_models::{Backend, CudaBackend, Glu, KvGeometry};
use rand::{Rng, SeedableRng};

use super::common::rel_diff;
use super::Outcome;

/// The same integers on both sides; only the float sums' order differs.
const KERNEL_TOLERANCE: f32 = 1e-5;

/// Rows not a multiple of the kernels' 4 per block or 2 and 4 per warp; k
/// of 5 super-blocks.
const N: usize = 259;
const K: usize = 5 * QK_K;
/// A width of 32-element blocks that is not whole super-blocks (38 blocks:
/// the last warp of the norm kernels and of the matmuls' sweeps partial).
const K_BLOCKS: usize = 38 * 32;
/// The types with 32-element blocks.
const BLOCK_TYPES: [GgmlDType; 4] = [
    GgmlDType::Q4_0,
    GgmlDType::Q4_1,
    GgmlDType::Q5_0,
    GgmlDType::Q8_0,
];
/// Every kernel (1, 2, 4 and 8 tokens per row), full and partial.
const TOKENS: [usize; 6] = [1, 2, 3, 4, 5, 8];
/// Launches of more tokens, in tiles of 8 (a partial last tile, whole
/// ones, the most the backend gives them): with plain and add + RMSNorm
/// inputs (the host's reference is the test's cost).
const WIDE_TOKENS: [usize; 3] = [9, 24, 64];

/// Where the matmul's input comes from.
#[derive(Clone, Copy, Debug)]
enum Input {
    /// Quantized by the matmul.
    Plain,
    /// An RMSNorm's output, quantized by it.
    RmsNorm,
    /// A SwiGLU's output, quantized by it.
    SwiGlu,
    /// A residual add and RMSNorm's output, quantized by them.
    AddRmsNorm,
}

const SHAPES: [MatVec; 5] = [
    MatVec::BlockPerRow,
    MatVec::WarpPerRow,
    MatVec::WarpPerRows(2),
    MatVec::WarpPerRows(4),
    MatVec::ByRows {
        block_most: BLOCK_PER_ROW_MOST,
    },
];

pub fn kernels(device: &Device) -> Vec<Outcome> {
    let mut out = Vec::new();
    let cases = [(GgmlDType::Q4K, K), (GgmlDType::Q6K, K)]
        .into_iter()
        .chain(BLOCK_TYPES.iter().flat_map(|&t| [(t, K), (t, K_BLOCKS)]));
    let cases: Vec<_> = cases.collect();
    for shape in SHAPES {
        for &(dtype, k) in &cases {
            for input in [
                Input::Plain,
                Input::RmsNorm,
                Input::SwiGlu,
                Input::AddRmsNorm,
            ] {
                out.push(Outcome {
                    label: format!(
                        "{dtype:?} matmul kernel, k = {k} ({shape:?}, {input:?} input) vs the CPU"
                    ),
                    failures: check(dtype, input, shape, k, device),
                });
            }
        }
        out.push(Outcome {
            label: format!("three weights in one launch vs each alone ({shape:?})"),
            failures: check_grouped(shape, device),
        });
    }
    out.push(Outcome {
        label: "F16 decode matmul kernel vs f32 on the host".into(),
        failures: check_half(device),
    });
    out
}

/// The F16 decode kernel (kernels/half_matvec.cu) against the f16 weights
/// widened to f32 and multiplied on the host in f64: within
/// `KERNEL_TOLERANCE` (f32 sums in another order), each token's outputs the
/// same bits in every batch, the bias added in the launch. k = 1,000: not a
/// multiple of the kernel's 1,024 elements a warp loads at a time.
fn check_half(device: &Device) -> Vec<String> {
    let k = 1000;
    let layer = layer_of(GgmlDType::F16, N, k, 7, device);
    let Some(half) = layer.half_weight() else {
        return vec!["an F16 weight on the GPU is not kept F16".into()];
    };
    let w: Vec<f32> = half
        .to_dtype(candle_core::DType::F32)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap();
    let bias: Vec<f32> = (0..N).map(|i| (i as f32 - 100.0) / 13.0).collect();
    let layer = layer
        .biased(Tensor::from_slice(&bias, N, device).unwrap())
        .unwrap();
    let mut b = backend(MatVec::default(), device);
    let mut failures = Vec::new();
    let xs: Vec<f32> = (0..8 * k)
        .map(|i| ((i * 53 % 211) as f32 - 105.0) / 31.0)
        .collect();
    let mut alone = Vec::new();
    for tokens in TOKENS {
        let x = Some(Tensor::from_slice(&xs[..tokens * k], (tokens, k), device).unwrap());
        let mut out = None;
        b.matmul(&x, &layer, &mut out).unwrap();
        let got = to_host(out);
        for t in 0..tokens {
            let row = &got[t * N..(t + 1) * N];
            let want: Vec<f32> = (0..N)
                .map(|n| {
                    let dot: f64 = (0..k)
                        .map(|i| w[n * k + i] as f64 * xs[t * k + i] as f64)
                        .sum();
                    (dot + bias[n] as f64) as f32
                })
                .collect();
            let diff = rel_diff(row, &want);
            if diff > KERNEL_TOLERANCE {
                failures.push(format!("{tokens} tokens: token {t} off by {diff:.2e}"));
            }
            if tokens == 1 {
                alone = row.to_vec();
            } else if t == 0 && row != alone.as_slice() {
                failures.push(format!("{tokens} tokens: token 0 differs from alone"));
            }
        }
    }
    println!(
        "F16 kernel, {N} x {k}, batches {TOKENS:?}: {}",
        if failures.is_empty() {
            "ok".to_string()
        } else {
            failures.join("; ")
        }
    );
    failures
}

/// `gpu --bench-kernels`: the decode matmuls of an 8B model's layer (1 to
/// 64 tokens: that many sequences decoding; the F16 ones past 8 are cuBLAS), each kernel shape, timed
/// over repeated launches. GB/s counts the weights' bytes once per launch.
pub fn bench(device: &Device) {
    let (hidden, ffn) = (4096, 14336);
    // (name, k, [(type, rows)]): one launch each.
    let weights = [
        (
            "q/k/v",
            hidden,
            vec![
                (GgmlDType::Q4K, hidden),
                (GgmlDType::Q4K, 1024),
                (GgmlDType::Q6K, 1024),
            ],
        ),
        ("o", hidden, vec![(GgmlDType::Q4K, hidden)]),
        (
            "gate/up",
            hidden,
            vec![(GgmlDType::Q4K, ffn), (GgmlDType::Q4K, ffn)],
        ),
        ("down Q4K", ffn, vec![(GgmlDType::Q4K, hidden)]),
        ("down Q6K", ffn, vec![(GgmlDType::Q6K, hidden)]),
        ("F16 o", hidden, vec![(GgmlDType::F16, hidden)]),
        ("F16 down", ffn, vec![(GgmlDType::F16, hidden)]),
    ];
    for (name, k, ws) in weights {
        let layers: Vec<Linear> = ws
            .iter()
            .enumerate()
            .map(|(i, &(dtype, rows))| layer_of(dtype, rows, k, i as u64, device))
            .collect();
        for tokens in [1, 2, 4, 8, 16, 32, 64] {
            bench_launches(name, k, &layers, tokens, device);
        }
    }
}

/// Times one launch of `layers` on `tokens` rows of activations, per shape.
fn bench_launches(name: &str, k: usize, layers: &[Linear], tokens: usize, device: &Device) {
    let x: Vec<f32> = (0..tokens * k)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
        .collect();
    let x = Some(Tensor::from_slice(&x, (tokens, k), device).unwrap());
    let bytes: usize = layers
        .iter()
        .map(|l| match (l.ggml_tensor(), l.half_weight()) {
            (Some(t), _) => t.storage_size_in_bytes(),
            (None, Some(h)) => h.elem_count() * 2,
            (None, None) => 0,
        })
        .sum();
    // The F16 kernels have one shape.
    let shapes: &[MatVec] = if name.starts_with("F16") {
        &[MatVec::WarpPerRow]
    } else {
        &SHAPES
    };
    // Each shape on the decode kernels (none on the tensor cores), then the
    // default shape with every step of the K-quants on the tensor cores.
    let kquants = layers.iter().all(|l| {
        l.ggml_tensor()
            .is_some_and(|t| matches!(t.dtype(), GgmlDType::Q4K | GgmlDType::Q6K))
    });
    let runs = shapes
        .iter()
        .map(|&s| (s, false))
        .chain(kquants.then_some((MatVec::default(), true)));
    for (shape, tensor_cores) in runs {
        let mut b = if tensor_cores {
            tensor_core_backend(shape, device)
        } else {
            let mut b = backend(shape, device);
            b.set_tensor_core_rows(1, 0);
            b
        };
        let mut outs: Vec<Option<Tensor>> = vec![None; layers.len()];
        let mut run = |b: &mut CudaBackend| {
            let mut refs: Vec<&mut Option<Tensor>> = outs.iter_mut().collect();
            b.matmuls(&x, layers, &mut refs).unwrap();
        };
        // Fewer under a profiler (MLXR_BENCH_LAUNCHES).
        let n: usize = std::env::var("MLXR_BENCH_LAUNCHES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(200);
        for _ in 0..n.min(10) {
            run(&mut b);
        }
        b.synchronize().unwrap();
        let start = std::time::Instant::now();
        for _ in 0..n {
            run(&mut b);
        }
        b.synchronize().unwrap();
        let s = start.elapsed().as_secs_f64() / n as f64;
        let kernel = if tensor_cores { "TensorCores" } else { "" };
        println!(
            "{name:8} {tokens} tok {shape:?}{kernel}: {:7.1} us, {:6.0} GB/s ({:.1} MB)",
            s * 1e6,
            bytes as f64 / s / 1e9,
            bytes as f64 / 1e6
        );
    }
}

/// `w` (`[rows, K]`, values from `seed`) quantized to `dtype`, as a layer on
/// `device`.
fn layer(dtype: GgmlDType, rows: usize, seed: u64, device: &Device) -> Linear {
    layer_of(dtype, rows, K, seed, device)
}

fn layer_of(dtype: GgmlDType, rows: usize, k: usize, seed: u64, device: &Device) -> Linear {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let w: Vec<f32> = (0..rows * k).map(|_| rng.random_range(-1.0..1.0)).collect();
    let q = QTensor::quantize(
        &Tensor::from_vec(w, (rows, k), &Device::Cpu).unwrap(),
        dtype,
    )
    .unwrap();
    let t = qtensor_from_ggml(dtype, &q.data().unwrap(), vec![rows, k], device).unwrap();
    Linear::ggml(Arc::new(t), None).unwrap()
}

fn backend(shape: MatVec, device: &Device) -> CudaBackend {
    let kv = KvGeometry {
        n_layers: 1,
        num_blocks: 1,
        block_size: 16,
        n_kv_heads: 1,
        head_dim: 64,
    };
    let mut b = CudaBackend::with_mat_vec(kv, candle_core::DType::F32, device, shape).unwrap();
    b.set_quant_rows(WIDE_TOKENS[WIDE_TOKENS.len() - 1]);
    b
}

/// [`backend`] with Q4_K/Q6_K steps of every size on the tensor cores.
fn tensor_core_backend(shape: MatVec, device: &Device) -> CudaBackend {
    let mut b = backend(shape, device);
    b.set_tensor_core_rows(1, WIDE_TOKENS[WIDE_TOKENS.len() - 1]);
    b
}

/// Q, K and V-like weights of mixed types and odd heights through
/// [`Backend::matmuls`] (one launch) equal each through [`Backend::matmul`]
/// bit for bit.
fn check_grouped(shape: MatVec, device: &Device) -> Vec<String> {
    let mut b = backend(shape, device);
    let mut failures = Vec::new();
    let groups = [
        [GgmlDType::Q4K, GgmlDType::Q6K, GgmlDType::Q4K],
        [GgmlDType::Q8_0, GgmlDType::Q4_1, GgmlDType::Q4_0],
        [GgmlDType::Q4K, GgmlDType::Q5_0, GgmlDType::Q6K],
    ];
    for (types, tokens) in groups.iter().flat_map(|g| [(g, 1), (g, 5), (g, 20)]) {
        let ws = [
            layer(types[0], 70, 1, device),
            layer(types[1], 37, 2, device),
            layer(types[2], 5, 3, device),
        ];
        let x: Vec<f32> = (0..tokens * K)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
            .collect();
        let x = Some(Tensor::from_slice(&x, (tokens, K), device).unwrap());
        let mut outs: [Option<Tensor>; 3] = Default::default();
        {
            let [a, c, d] = &mut outs;
            b.matmuls(&x, &ws, &mut [a, c, d]).unwrap();
        }
        for (j, (w, got)) in ws.iter().zip(outs).enumerate() {
            let mut alone = None;
            b.matmul(&x, w, &mut alone).unwrap();
            if to_host(got) != to_host(alone) {
                failures.push(format!("{types:?}, {tokens} tokens: weight {j} differs"));
            }
        }
    }
    // A bias added in the kernel equals the unbiased output plus the bias.
    let bias: Vec<f32> = (0..70).map(|i| (i as f32 - 35.0) / 9.0).collect();
    let bias = Tensor::from_slice(&bias, 70, device).unwrap();
    let plain_layer = layer(GgmlDType::Q4K, 70, 1, device);
    let biased = layer(GgmlDType::Q4K, 70, 1, device)
        .biased(bias.clone())
        .unwrap();
    for tokens in [1, 3] {
        let x: Vec<f32> = (0..tokens * K)
            .map(|i| ((i * 29 % 97) as f32 - 48.0) / 5.0)
            .collect();
        let x = Some(Tensor::from_slice(&x, (tokens, K), device).unwrap());
        let (mut got, mut plain) = (None, None);
        b.matmul(&x, &biased, &mut got).unwrap();
        b.matmul(&x, &plain_layer, &mut plain).unwrap();
        let want = plain.unwrap().broadcast_add(&bias).unwrap();
        if to_host(got) != to_host(Some(want)) {
            failures.push(format!(
                "{tokens} tokens: the bias added in the kernel differs"
            ));
        }
    }
    println!(
        "three weights in one launch, a bias ({shape:?}): {}",
        if failures.is_empty() {
            "ok".to_string()
        } else {
            failures.join("; ")
        }
    );
    failures
}

fn to_host(t: Option<Tensor>) -> Vec<f32> {
    t.unwrap().flatten_all().unwrap().to_vec1().unwrap()
}

/// The matmul's input for `input` on the device, and what the CPU computes
/// for it (the f32 activations the matmul is checked with).
fn prepare(
    backend: &mut CudaBackend,
    input: Input,
    (xs, k): (&[f32], usize),
    tokens: usize,
    device: &Device,
    failures: &mut Vec<String>,
) -> (Option<Tensor>, Vec<f32>) {
    let on = |v: &[f32]| Some(Tensor::from_slice(v, (tokens, k), device).unwrap());
    let mut out = None;
    let want: Vec<f32> = match input {
        Input::Plain => return (on(xs), xs.to_vec()),
        Input::RmsNorm => {
            let w: Vec<f32> = (0..k).map(|i| 0.5 + (i % 7) as f32 * 0.25).collect();
            let norm = RmsNorm::new(Tensor::from_slice(&w, k, device).unwrap(), 1e-6).unwrap();
            backend.rms_norm(&on(xs), &norm, &mut out).unwrap();
            let mut want = vec![0f32; xs.len()];
            for (x, y) in xs.chunks_exact(k).zip(want.chunks_exact_mut(k)) {
                ggml_f32::rms_norm(x, &w, 1e-6, y);
            }
            want
        }
        Input::AddRmsNorm => {
            let w: Vec<f32> = (0..k).map(|i| 0.5 + (i % 7) as f32 * 0.25).collect();
            let norm = RmsNorm::new(Tensor::from_slice(&w, k, device).unwrap(), 1e-6).unwrap();
            // Each token's own values, scaled (a token's row must not depend
            // on the batch).
            let residual: Vec<f32> = xs.iter().map(|v| 0.5 * v + 0.25).collect();
            let mut x = on(xs);
            backend
                .add_rms_norm(&mut x, &on(&residual), &norm, &mut out)
                .unwrap();
            let sum: Vec<f32> = xs.iter().zip(&residual).map(|(a, b)| a + b).collect();
            if to_host(x) != sum {
                failures.push(format!("{tokens} tokens: the residual sum differs"));
            }
            let mut want = vec![0f32; xs.len()];
            for (x, y) in sum.chunks_exact(k).zip(want.chunks_exact_mut(k)) {
                ggml_f32::rms_norm(x, &w, 1e-6, y);
            }
            want
        }
        Input::SwiGlu => {
            // Each token's own values reversed (a token's row must not
            // depend on the batch).
            let up: Vec<f32> = xs
                .chunks_exact(k)
                .flat_map(|r| r.iter().rev().copied())
                .collect();
            backend.glu(&on(xs), &on(&up), Glu::Silu, &mut out).unwrap();
            let mut want = vec![0f32; xs.len()];
            for ((g, u), y) in xs
                .chunks_exact(k)
                .zip(up.chunks_exact(k))
                .zip(want.chunks_exact_mut(k))
            {
                ggml_f32::swiglu_row(g, u, y);
            }
            want
        }
    };
    let got = to_host(out.clone());
    let diff = rel_diff(&got, &want);
    if diff > KERNEL_TOLERANCE {
        failures.push(format!("{input:?} output of {tokens} tokens: {diff:.2e}"));
    }
    // The matmul is checked on the device's own f32 output: its Q8_K must
    // be that output's.
    (out, got)
}

/// `x` in 8 bits as the kernels quantize it (quantize_row_q8_K_ref's rule
/// per group of `g`): the quants, and a scale per group.
fn quantize_groups(x: &[f32], g: usize) -> (Vec<i8>, Vec<f32>) {
    let mut q = vec![0i8; x.len()];
    let mut d = Vec::with_capacity(x.len() / g);
    for (xs, qs) in x.chunks_exact(g).zip(q.chunks_exact_mut(g)) {
        let (mut amax, mut max) = (0f32, 0f32);
        for &v in xs {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        if amax == 0.0 {
            d.push(0.0);
            continue;
        }
        let iscale = -127.0 / max;
        for (q, &v) in qs.iter_mut().zip(xs) {
            *q = (iscale * v).round_ties_even().min(127.0) as i8;
        }
        d.push(1.0 / iscale);
    }
    (q, d)
}

fn check(dtype: GgmlDType, input: Input, shape: MatVec, k: usize, device: &Device) -> Vec<String> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let w: Vec<f32> = (0..N * k).map(|_| rng.random_range(-1.0..1.0)).collect();
    let cpu_w =
        QTensor::quantize(&Tensor::from_vec(w, (N, k), &Device::Cpu).unwrap(), dtype).unwrap();
    let bytes = cpu_w.data().unwrap();
    let row_bytes = bytes.len() / N;
    let kquant = matches!(dtype, GgmlDType::Q4K | GgmlDType::Q6K);
    let dequantized: Vec<f32> = cpu_w
        .dequantize(&Device::Cpu)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap();
    let dev_w = qtensor_from_ggml(dtype, &bytes, vec![N, k], device).unwrap();
    let linear = Linear::ggml(Arc::new(dev_w), None).unwrap();
    let mut backend = backend(shape, device);
    let wide: &[usize] = match input {
        Input::Plain | Input::AddRmsNorm => &WIDE_TOKENS,
        Input::RmsNorm | Input::SwiGlu => &[],
    };
    let sizes: Vec<usize> = TOKENS.iter().chain(wide).copied().collect();
    let max_tokens = *sizes.iter().max().unwrap();
    // Activations of every scale, some with ties of +max and -max.
    let x: Vec<f32> = (0..max_tokens * k)
        .map(|i| match i % 97 {
            0 => 3.0,
            1 => -3.0,
            _ => rng.random_range(-2.0..2.0) * (1 + i % 5) as f32,
        })
        .collect();
    let mut failures = Vec::new();
    let mut first_seen: Vec<Vec<f32>> = Vec::new();
    // The K-quants again with every size on the tensor cores: the same bits.
    let mut cores = tensor_core_backend(shape, device);
    let runs: Vec<(usize, bool)> = sizes
        .iter()
        .map(|&t| (t, false))
        .chain(sizes.iter().filter(|_| kquant).map(|&t| (t, true)))
        .collect();
    for &(tokens, tensor_cores) in &runs {
        let backend = if tensor_cores {
            &mut cores
        } else {
            &mut backend
        };
        let (x_dev, xs) = prepare(
            backend,
            input,
            (&x[..tokens * k], k),
            tokens,
            device,
            &mut failures,
        );
        let mut out = None;
        backend.matmul(&x_dev, &linear, &mut out).unwrap();
        let got = to_host(out);
        for t in 0..tokens {
            let x_row = &xs[t * k..(t + 1) * k];
            let want: Vec<f32> = if kquant {
                let mut q = vec![BlockQ8K::default(); k / QK_K];
                quantize_row(x_row, &mut q, Q8KFlavor::Reference);
                (0..N)
                    .map(|r| {
                        let row = &bytes[r * row_bytes..(r + 1) * row_bytes];
                        match dtype {
                            GgmlDType::Q4K => dot_q4_k_scalar(row, &q, false),
                            _ => dot_q6_k_scalar(row, &q, false),
                        }
                    })
                    .collect()
            } else {
                let g = if k.is_multiple_of(QK_K) { QK_K } else { 32 };
                let (q, d) = quantize_groups(x_row, g);
                (0..N)
                    .map(|r| {
                        let w = &dequantized[r * k..(r + 1) * k];
                        let dot: f64 = (0..k)
                            .map(|i| w[i] as f64 * q[i] as f64 * d[i / g] as f64)
                            .sum();
                        dot as f32
                    })
                    .collect()
            };
            let row = &got[t * N..(t + 1) * N];
            let diff = rel_diff(row, &want);
            if diff > KERNEL_TOLERANCE {
                failures.push(format!(
                    "{tokens} tokens, token {t} (tensor cores: {tensor_cores}): {diff:.2e}"
                ));
            }
            match first_seen.get(t) {
                Some(first) if first.as_slice() != row => failures.push(format!(
                    "token {t} in a batch of {tokens} (tensor cores: {tensor_cores}) differs \
                     from a smaller batch"
                )),
                Some(_) => {}
                None => first_seen.push(row.to_vec()),
            }
        }
    }
    println!(
        "{dtype:?} kernel ({shape:?}), {input:?} input: {N} x {k}, batches {sizes:?}{}: {}",
        if kquant {
            " (and on the tensor cores)"
        } else {
            ""
        },
        if failures.is_empty() {
            "ok".to_string()
        } else {
            failures.join("; ")
        }
    );
    failures
}
