//! Times our quantized matmul next to candle's `QMatMul` on the same random
//! weights and activations:
//! `cargo run --release -p mlxr-models --example matmul_bench -- q4_1 16 1536 576`
//! (type, tokens m, rows n, columns k; threads from RAYON_NUM_THREADS).

use std::sync::Arc;
use std::time::Instant;

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};
use mlxr_models::backend::cpu::kernels::{QuantMatMul, RowOrder};

/// Mean seconds per call of `f` over about 2 s of work.
fn time(macs: usize, mut f: impl FnMut() -> anyhow::Result<()>) -> anyhow::Result<f64> {
    f()?;
    let reps = (2e9 / macs as f64).clamp(3.0, 10_000.0) as usize;
    let start = Instant::now();
    for _ in 0..reps {
        f()?;
    }
    Ok(start.elapsed().as_secs_f64() / reps as f64)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dtype = match args.first().map(String::as_str).unwrap_or("q4_1") {
        "q4_0" => GgmlDType::Q4_0,
        "q4_1" => GgmlDType::Q4_1,
        "q5_0" => GgmlDType::Q5_0,
        "q5_1" => GgmlDType::Q5_1,
        "q8_0" => GgmlDType::Q8_0,
        "q4_k" => GgmlDType::Q4K,
        "q5_k" => GgmlDType::Q5K,
        "q6_k" => GgmlDType::Q6K,
        other => anyhow::bail!("unknown type {other}"),
    };
    let dim = |i: usize, d: usize| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let (m, n, k) = (dim(1, 16), dim(2, 1536), dim(3, 576));
    let w = Tensor::randn(0f32, 1.0, (n, k), &Device::Cpu)?;
    let qt = Arc::new(QTensor::quantize(&w, dtype)?);
    let ours = QuantMatMul::new(qt.clone(), RowOrder::Independent)
        .ok_or_else(|| anyhow::anyhow!("no kernel of ours for {dtype:?} here"))?;
    let candle = QMatMul::from_arc(qt)?;
    let x = Tensor::randn(0f32, 1.0, (m, k), &Device::Cpu)?;
    let macs = m * n * k;
    let ours_s = time(macs, || Ok(ours.forward(&x).map(drop)?))?;
    let candle_s = time(macs, || Ok(candle.forward(&x).map(drop)?))?;
    let gmacs = |s: f64| macs as f64 / s / 1e9;
    println!(
        "{dtype:?} m={m} n={n} k={k}: ours {:.1} us ({:.1} GMAC/s), candle {:.1} us ({:.1} GMAC/s), {:.2}x",
        ours_s * 1e6,
        gmacs(ours_s),
        candle_s * 1e6,
        gmacs(candle_s),
        candle_s / ours_s
    );
    Ok(())
}
