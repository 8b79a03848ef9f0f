//! mlxr-quantize: GGUF quantization bit-identical to llama.cpp's
//! `llama-quantize` without an importance matrix.
//!
//! - [`quantize`]: f32 rows to any of Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
//!   Q2_K-Q6_K, F16, BF16, F32 (ggml's `quantize_row_*_ref`).
//! - [`FileType`]: the mixes (`Q4_K_M`, `Q3_K_S`, ...) and
//!   [`plan_tensor_types`]: which type each tensor gets in one, as
//!   llama.cpp's `llama_tensor_get_type` chooses it.
//! - [`quantize_model`]: a GGUF file to a quantized GGUF file.

mod error;
mod file_type;
mod fp16;
mod k_common;
mod legacy;
mod model;
mod q2_k;
mod q3_k;
mod q4_k;
mod q5_k;
mod q6_k;
mod tensor_type;

use mlxr_formats::gguf::GgmlType;
use rayon::prelude::*;

pub use error::QuantizeError;
pub use file_type::FileType;
pub use model::{
    quantize_model, ModelProgress, QuantizeOptions, QuantizeSummary, QUANTIZATION_VERSION,
};
pub use tensor_type::{plan_tensor_types, ModelShape, TensorPlan};

/// Whether [`quantize`] can write this type.
pub fn can_quantize_to(ty: GgmlType) -> bool {
    use GgmlType::*;
    matches!(
        ty,
        F32 | F16 | BF16 | Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 | Q2_K | Q3_K | Q4_K | Q5_K | Q6_K
    )
}

/// Bytes of one row of `n_per_row` values, or `None` when the row is not a
/// whole number of blocks.
pub fn row_size(ty: GgmlType, n_per_row: usize) -> Option<usize> {
    let block = ty.block_size() as usize;
    n_per_row
        .is_multiple_of(block)
        .then(|| n_per_row / block * ty.type_size() as usize)
}

/// Quantizes `src`, rows of `n_per_row` values, to `ty`; rows are spread
/// over the current rayon pool. Each block is quantized on its own, so the
/// result does not depend on the number of threads.
pub fn quantize(ty: GgmlType, src: &[f32], n_per_row: usize) -> Result<Vec<u8>, QuantizeError> {
    if !can_quantize_to(ty) {
        return Err(QuantizeError::UnsupportedTarget(ty));
    }
    let shape_err = || QuantizeError::Shape {
        values: src.len(),
        n_per_row,
        block: ty.block_size() as usize,
        ty,
    };
    let row_bytes = row_size(ty, n_per_row)
        .filter(|_| n_per_row > 0)
        .ok_or_else(shape_err)?;
    if !src.len().is_multiple_of(n_per_row) {
        return Err(shape_err());
    }
    let rows = src.len() / n_per_row;
    let mut dst = vec![0u8; rows * row_bytes];
    // Chunks of at least 16384 values, as llama-quantize hands to its threads.
    let rows_per_chunk = 16384usize.div_ceil(n_per_row).max(1);
    dst.par_chunks_mut(rows_per_chunk * row_bytes)
        .zip(src.par_chunks(rows_per_chunk * n_per_row))
        .for_each(|(y, x)| quantize_blocks(ty, x, y));
    Ok(dst)
}

/// Quantizes whole blocks of `x` into `y` (sizes already checked).
fn quantize_blocks(ty: GgmlType, x: &[f32], y: &mut [u8]) {
    use GgmlType::*;
    match ty {
        F32 => {
            for (v, out) in x.iter().zip(y.chunks_exact_mut(4)) {
                out.copy_from_slice(&v.to_le_bytes());
            }
        }
        F16 => {
            for (v, out) in x.iter().zip(y.chunks_exact_mut(2)) {
                out.copy_from_slice(&fp16::f32_to_f16_bits(*v).to_le_bytes());
            }
        }
        BF16 => {
            for (v, out) in x.iter().zip(y.chunks_exact_mut(2)) {
                out.copy_from_slice(&fp16::f32_to_bf16_bits(*v).to_le_bytes());
            }
        }
        Q4_0 => legacy::quantize_row_q4_0(x, y),
        Q4_1 => legacy::quantize_row_q4_1(x, y),
        Q5_0 => legacy::quantize_row_q5_0(x, y),
        Q5_1 => legacy::quantize_row_q5_1(x, y),
        Q8_0 => legacy::quantize_row_q8_0(x, y),
        Q2_K => q2_k::quantize_row_q2_k(x, y),
        Q3_K => q3_k::quantize_row_q3_k(x, y),
        Q4_K => q4_k::quantize_row_q4_k(x, y),
        Q5_K => q5_k::quantize_row_q5_k(x, y),
        Q6_K => q6_k::quantize_row_q6_k(x, y),
        _ => unreachable!("checked by can_quantize_to"),
    }
}

/// `data`, values of `width` bytes, decoded by `decode` (bytes, outputs)
/// in chunks over the current rayon pool: the whole input passes through
/// here before any block is quantized (serially, 10% of a SmolLM2 F16 →
/// Q5_K_M run's time).
fn floats_in_parallel(
    data: &[u8],
    width: usize,
    decode: impl Fn(&[u8], &mut [f32]) + Sync,
) -> Vec<f32> {
    const CHUNK: usize = 1 << 16;
    let mut out = vec![0f32; data.len() / width];
    out.par_chunks_mut(CHUNK)
        .zip(data.par_chunks(CHUNK * width))
        .for_each(|(out, bytes)| decode(bytes, out));
    out
}

/// Decodes `data` (`n` values of type `ty`) to f32: F32, F16 and BF16
/// exactly, quantized types with candle's dequantizers (ggml's formulas).
pub fn dequantize(ty: GgmlType, data: &[u8], n: usize) -> Result<Vec<f32>, String> {
    let expected =
        row_size(ty, n).ok_or_else(|| format!("{n} values are not whole {ty} blocks"))?;
    if data.len() != expected {
        return Err(format!(
            "{} bytes for {n} {ty} values, expected {expected}",
            data.len()
        ));
    }
    match ty {
        GgmlType::F32 => Ok(floats_in_parallel(data, 4, |b, out| {
            for (v, b) in out.iter_mut().zip(b.chunks_exact(4)) {
                *v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
        })),
        GgmlType::F16 => Ok(floats_in_parallel(data, 2, fp16::f16_bytes_to_f32)),
        GgmlType::BF16 => Ok(floats_in_parallel(data, 2, |b, out| {
            for (v, b) in out.iter_mut().zip(b.chunks_exact(2)) {
                *v = f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16);
            }
        })),
        _ => {
            use candle_core::quantized::{ggml_file::qtensor_from_ggml, GgmlDType};
            let dtype = match ty {
                GgmlType::Q4_0 => GgmlDType::Q4_0,
                GgmlType::Q4_1 => GgmlDType::Q4_1,
                GgmlType::Q5_0 => GgmlDType::Q5_0,
                GgmlType::Q5_1 => GgmlDType::Q5_1,
                GgmlType::Q8_0 => GgmlDType::Q8_0,
                GgmlType::Q2_K => GgmlDType::Q2K,
                GgmlType::Q3_K => GgmlDType::Q3K,
                GgmlType::Q4_K => GgmlDType::Q4K,
                GgmlType::Q5_K => GgmlDType::Q5K,
                GgmlType::Q6_K => GgmlDType::Q6K,
                GgmlType::Q8_K => GgmlDType::Q8K,
                other => return Err(format!("cannot dequantize {other}")),
            };
            let device = candle_core::Device::Cpu;
            qtensor_from_ggml(dtype, data, vec![n], &device)
                .and_then(|q| q.dequantize(&device))
                .and_then(|t| t.to_vec1::<f32>())
                .map_err(|e| format!("cannot dequantize {ty}: {e}"))
        }
    }
}
