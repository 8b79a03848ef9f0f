//! The launch of kernels/half_matvec.cu: decode matmuls (up to 8 rows) of
//! F16 or BF16 weights against f32 activations, accumulated in f32. cuBLAS's GEMM
//! with one row streamed the 8B model's F16 weights at 2.4 TB/s, these
//! kernels at 2.9 TB/s (bench/results/gpu-2026-12-03-s33.md).

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{LaunchConfig, PushKernelArg};
use candle_core::cuda_backend::WrapErr;
use candle_core::{DType, Storage, Tensor};

use super::quant_matmul::{f32_view, tensor};
use crate::{ModelError, Result};

const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/half_matvec.ptx"));
const MODULE: &str = "mlxr_half_matvec";
/// Rows of activations the kernels take.
pub const MAX_TOKENS: usize = 8;
/// Weight rows per thread block (a warp each: `ROWS` in the kernel).
const ROWS: usize = 4;

/// Whether [`matmul`] takes `x` (`[tokens, k]` f32) against `w` (`[n, k]`
/// F16 or BF16) with `bias` (f32 `[n]`) when there is one.
pub fn takes(x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> bool {
    let Ok((tokens, k)) = x.dims2() else {
        return false;
    };
    let bias_fits = bias.is_none_or(|b| {
        b.dtype() == DType::F32 && b.dims() == [w.dim(0).unwrap_or(0)] && b.is_contiguous()
    });
    x.dtype() == DType::F32
        && (1..=MAX_TOKENS).contains(&tokens)
        && k % 8 == 0
        && matches!(w.dtype(), DType::F16 | DType::BF16)
        && w.dims2().is_ok_and(|(_, wk)| wk == k)
        && w.is_contiguous()
        && w.layout().start_offset().is_multiple_of(8)
        && bias_fits
}

/// `x · wᵀ (+ bias)`: `[tokens, n]` f32 (see [`takes`]).
pub fn matmul(x: &Tensor, w: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    if !takes(x, w, bias) {
        return Err(ModelError::InvalidBatch(format!(
            "a 16-bit decode matmul of {:?} against {:?}",
            x.shape(),
            w.shape()
        )));
    }
    let x = aligned(x)?;
    let (tokens, k) = x.dims2()?;
    let n = w.dim(0)?;
    let (xs, _) = x.storage_and_layout();
    let (ws, _) = w.storage_and_layout();
    let bias_storage = bias.map(|b| b.storage_and_layout().0);
    let (Storage::Cuda(xc), Storage::Cuda(wc)) = (&*xs, &*ws) else {
        return Err(ModelError::InvalidBatch("16-bit matmul off the GPU".into()));
    };
    let dev = xc.device().clone();
    let x_view = f32_view(&xs, &x)?;
    let start = w.layout().start_offset();
    let (w_view, name) = match w.dtype() {
        // SAFETY: the same n·k 16-bit words, read by the kernel as BF16.
        DType::BF16 => (
            unsafe {
                wc.as_cuda_slice::<half::bf16>()?
                    .slice(start..)
                    .transmute::<half::f16>(n * k)
            },
            "bf16",
        ),
        _ => (
            Some(wc.as_cuda_slice::<half::f16>()?.slice(start..)),
            "half",
        ),
    };
    let w_view =
        w_view.ok_or_else(|| ModelError::InvalidBatch("a BF16 weight too short".into()))?;
    let bias_view = match (bias, &bias_storage) {
        (Some(b), Some(storage)) => Some(f32_view(storage, b)?),
        _ => None,
    };
    let per = tokens_variant(tokens);
    let func = dev.get_or_load_custom_func(&format!("{name}_mv{per}"), MODULE, PTX)?;
    // SAFETY: the kernel writes every output.
    let mut y = unsafe { dev.alloc::<f32>(tokens * n) }?;
    let cfg = warp_per_row(n);
    let dims = [n, k, tokens].map(|d| i32::try_from(d).unwrap_or(i32::MAX));
    let mut b = func.builder();
    let no_bias = 0u64;
    b.arg(&w_view).arg(&x_view);
    match &bias_view {
        Some(view) => b.arg(view),
        None => b.arg(&no_bias),
    };
    b.arg(&mut y);
    for d in &dims {
        b.arg(d);
    }
    // SAFETY: `w` holds n rows of k F16 or BF16 and `x` tokens rows of k f32 (checked
    // by `takes`; both from 16-byte aligned starts), the bias (when not null)
    // n f32; warp r of block i writes row 4i + r < n of y's tokens rows.
    unsafe { b.launch(cfg) }.w()?;
    drop(bias_storage);
    drop(ws);
    drop(xs);
    Ok(tensor(y, &dev, (tokens, n)))
}

/// `x`, or a copy of it, contiguous from a 16-byte aligned start (a fresh
/// copy starts at offset 0).
pub(super) fn aligned(x: &Tensor) -> Result<Tensor> {
    Ok(match x.layout().start_offset() % 4 {
        0 if x.is_contiguous() => x.clone(),
        _ => x.copy()?,
    })
}

/// The kernel variant (its token count: 1, 2, 4 or 8) for `tokens` rows.
pub(super) fn tokens_variant(tokens: usize) -> usize {
    match tokens {
        1 => 1,
        2 => 2,
        3 | 4 => 4,
        _ => 8,
    }
}

/// A warp per weight row, `ROWS` warps a block, over `n` rows (this file's
/// and decoded_matvec.cu's decode kernels).
fn warp_per_row(n: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n.div_ceil(ROWS) as u32, 1, 1),
        block_dim: (32 * ROWS as u32, 1, 1),
        shared_mem_bytes: 0,
    }
}
