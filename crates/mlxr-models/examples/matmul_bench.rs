//! Times the quantized matmul kernels on random data:
//! `cargo run --release -p mlxr-models --example matmul_bench -- q4_1 16 1536 576`.

use std::sync::Arc;
use std::time::Instant;

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use mlxr_models::kernels::{QuantMatMul, RowOrder};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dtype = match args.first().map(String::as_str).unwrap_or("q4_1") {
        "q4_1" => GgmlDType::Q4_1,
        "q5_0" => GgmlDType::Q5_0,
        "q8_0" => GgmlDType::Q8_0,
        "q4_k" => GgmlDType::Q4K,
        "q6_k" => GgmlDType::Q6K,
        other => anyhow::bail!("unknown type {other}"),
    };
    let dim = |i: usize, d: usize| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let (m, n, k) = (dim(1, 16), dim(2, 1536), dim(3, 576));
    let w = Tensor::randn(0f32, 1.0, (n, k), &Device::Cpu)?;
    let w = QuantMatMul::new(
        Arc::new(QTensor::quantize(&w, dtype)?),
        RowOrder::Independent,
    )
    .expect("a kernel for this type");
    let x = Tensor::randn(0f32, 1.0, (m, k), &Device::Cpu)?;
    w.forward(&x)?;
    let reps = (2e9 / (m * n * k) as f64).clamp(3.0, 10_000.0) as usize;
    let start = Instant::now();
    for _ in 0..reps {
        w.forward(&x)?;
    }
    let secs = start.elapsed().as_secs_f64() / reps as f64;
    println!(
        "{dtype:?} m={m} n={n} k={k}: {:.1} us, {:.1} GMAC/s",
        secs * 1e6,
        (m * n * k) as f64 / secs / 1e9
    );
    Ok(())
}
