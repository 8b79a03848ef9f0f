//! 8-bit activation quantization, rounded exactly as ggml's x86 CPU backend
//! rounds it on an AVX2/AVX-512 build.
//!
//! Per block of 32 floats: `amax = max |x|`, `d = amax / 127` (f32 division),
//! `id = 127 / amax` (0 when `amax == 0`), `q = round_ties_even(x * id)`.
//! The stored scale is `f16(d)`; for Q8_1 the stored sum is `f16(d * Σq)` with
//! the product taken in f32 (not in f16). Both halves are kept here as the f32
//! value of the f16, which is exact.

use half::f16;

/// Elements per block (Q4_1, Q5_0, Q8_0 and Q8_1 all use 32).
pub const QK: usize = 32;

/// One quantized activation block: `x ≈ d * qs`; `s = d * Σ qs` (Q8_1 only).
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C, align(16))]
pub struct BlockQ8 {
    pub qs: [i8; QK],
    /// `f16(d)` widened to f32.
    pub d: f32,
    /// `f16(d * Σ qs)` widened to f32 (0 for Q8_0 blocks).
    pub s: f32,
}

impl Default for BlockQ8 {
    fn default() -> Self {
        Self {
            qs: [0; QK],
            d: 0.0,
            s: 0.0,
        }
    }
}

#[inline]
fn round_f16(x: f32) -> f32 {
    f16::from_f32(x).to_f32()
}

/// Quantizes one block. `with_sum` selects Q8_1 (sum stored) over Q8_0.
#[inline(always)]
fn quantize_block(x: &[f32], with_sum: bool) -> BlockQ8 {
    debug_assert_eq!(x.len(), QK);
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
    let mut qs = [0i8; QK];
    let mut sum = 0i32;
    for (q, &v) in qs.iter_mut().zip(x) {
        let r = (v * id).round_ties_even().clamp(-128.0, 127.0) as i32;
        sum += r;
        *q = r as i8;
    }
    BlockQ8 {
        qs,
        d: round_f16(d),
        s: if with_sum {
            round_f16(d * sum as f32)
        } else {
            0.0
        },
    }
}

/// Quantizes a row (length a multiple of [`QK`]) into `out` (Q8_1 if
/// `with_sum`, else Q8_0).
pub fn quantize_row(x: &[f32], out: &mut [BlockQ8], with_sum: bool) {
    debug_assert_eq!(x.len(), out.len() * QK);
    #[cfg(target_arch = "x86_64")]
    if super::isa::allows(super::isa::Isa::Avx2) && is_x86_feature_detected!("sse4.1") {
        // SAFETY: the feature was just detected.
        return unsafe { quantize_row_sse41(x, out, with_sum) };
    }
    quantize_row_portable(x, out, with_sum);
}

#[inline(always)]
fn quantize_row_portable(x: &[f32], out: &mut [BlockQ8], with_sum: bool) {
    for (b, chunk) in out.iter_mut().zip(x.chunks_exact(QK)) {
        *b = quantize_block(chunk, with_sum);
    }
}

/// The same code with SSE4.1 enabled, so that `round_ties_even` becomes one
/// `roundps` instead of a libm call (same results).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.1")]
fn quantize_row_sse41(x: &[f32], out: &mut [BlockQ8], with_sum: bool) {
    quantize_row_portable(x, out, with_sum);
}
