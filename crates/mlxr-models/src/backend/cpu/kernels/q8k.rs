//! Q8_K activation quantization (super-blocks of 256), as ggml computes it.
//!
//! `quantize_row_q8_K_ref` (which ggml's x86 backend calls for single rows):
//! `max` is the signed value of the first element of largest magnitude,
//! `iscale = -127 / max`, `q = min(127, nearest_int(iscale * x))` (the f32
//! product rounded half to even by the 1.5·2²³ trick), `d = 1 / iscale`, and
//! `bsums[j]` = the sum of the 16 quants `16j..16j+16`.
//!
//! The 4-row interleaving quantizer of the repacked Q4_K path
//! (`ggml_quantize_mat_q8_K_4x8`, AVX2) computes the same numbers except for
//! the sign of `max`: it takes `+amax` whenever any element equals `+amax`
//! (the reference takes the first one). [`quantize_row`] does either.

/// Elements per Q8_K / Q4_K / Q6_K super-block.
pub const QK_K: usize = 256;

/// One quantized activation super-block: `x ≈ d * qs`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C, align(32))]
pub struct BlockQ8K {
    pub qs: [i8; QK_K],
    pub d: f32,
    pub bsums: [i16; QK_K / 16],
}

/// Block `b` of each of `T` activation rows, for the tile kernels. A loop,
/// not `array::from_fn`: a closure called through core's code, which lacks
/// the kernels' target features, was left out of line in one build, and
/// with it the intrinsics of such closures (Q6_K prefill at half speed under
/// AVX2); the kernels build their other per-tile arrays with loops too.
///
/// # Safety
/// `b < ys[r].len()` for every row.
#[inline(always)]
pub(super) unsafe fn blocks_at<const T: usize>(ys: [&[BlockQ8K]; T], b: usize) -> [&BlockQ8K; T] {
    let mut out = [&ys[0][0]; T];
    for (o, y) in out.iter_mut().zip(ys) {
        // SAFETY: the caller's.
        *o = unsafe { y.get_unchecked(b) };
    }
    out
}

impl Default for BlockQ8K {
    fn default() -> Self {
        Self {
            qs: [0; QK_K],
            d: 0.0,
            bsums: [0; QK_K / 16],
        }
    }
}

/// Which of ggml's two Q8_K quantizers to mirror (they differ only when both
/// `+amax` and `-amax` occur in a super-block).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Q8KFlavor {
    /// `quantize_row_q8_K_ref`: the first element of largest magnitude.
    Reference,
    /// `ggml_quantize_mat_q8_K_4x8`: positive if any element is `+amax`.
    Interleaved4x8,
}

#[inline(always)]
fn quantize_block(x: &[f32], flavor: Q8KFlavor) -> BlockQ8K {
    debug_assert_eq!(x.len(), QK_K);
    let mut amax = 0.0f32;
    let mut max = 0.0f32;
    for &v in x {
        let a = v.abs();
        if a > amax {
            amax = a;
            max = v;
        }
    }
    let mut b = BlockQ8K::default();
    if amax == 0.0 {
        return b;
    }
    if flavor == Q8KFlavor::Interleaved4x8 && x.contains(&amax) {
        max = amax;
    }
    let iscale = -127.0f32 / max;
    for (q, &v) in b.qs.iter_mut().zip(x) {
        *q = (iscale * v).round_ties_even().min(127.0) as i8;
    }
    for (s, chunk) in b.bsums.iter_mut().zip(b.qs.chunks_exact(16)) {
        *s = chunk.iter().map(|&q| q as i16).sum();
    }
    b.d = 1.0 / iscale;
    b
}

#[inline(always)]
fn quantize_row_portable(x: &[f32], out: &mut [BlockQ8K], flavor: Q8KFlavor) {
    for (b, chunk) in out.iter_mut().zip(x.chunks_exact(QK_K)) {
        *b = quantize_block(chunk, flavor);
    }
}

/// The same code with SSE4.1 enabled (`roundps` instead of a libm call).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.1")]
fn quantize_row_sse41(x: &[f32], out: &mut [BlockQ8K], flavor: Q8KFlavor) {
    quantize_row_portable(x, out, flavor);
}

/// [`quantize_block`] in AVX2, bit for bit: the largest magnitude as a
/// vector max, then the first element that has it (the scalar loop's
/// `max`), the products rounded half to even by `roundps`.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{BlockQ8K, Q8KFlavor, QK_K};
    use crate::backend::cpu::kernels::kquants::x86::hsum_i32;

    #[target_feature(enable = "avx2")]
    fn hmax(v: __m256) -> f32 {
        let m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        let m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
        _mm_cvtss_f32(m)
    }

    #[target_feature(enable = "avx2")]
    pub fn quantize_block(x: &[f32; QK_K], flavor: Q8KFlavor) -> BlockQ8K {
        let p = x.as_ptr();
        let sign = _mm256_set1_ps(-0.0);
        let load = |i: usize| {
            // SAFETY: `i < QK_K / 8`, so 8 floats at `8i` are in `x`.
            unsafe { _mm256_loadu_ps(p.add(8 * i)) }
        };
        let mut amax = _mm256_setzero_ps();
        for i in 0..QK_K / 8 {
            // NaN in `x` leaves `amax` as it was, as the scalar `a > amax`.
            amax = _mm256_max_ps(_mm256_andnot_ps(sign, load(i)), amax);
        }
        let amax = hmax(amax);
        let mut b = BlockQ8K::default();
        if amax == 0.0 || amax.is_nan() {
            return b;
        }
        let max = if flavor == Q8KFlavor::Interleaved4x8 && x.contains(&amax) {
            amax
        } else {
            let target = _mm256_set1_ps(amax);
            let mut first = x[0];
            for i in 0..QK_K / 8 {
                let hit = _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_EQ_OQ>(
                    _mm256_andnot_ps(sign, load(i)),
                    target,
                ));
                if hit != 0 {
                    first = x[8 * i + hit.trailing_zeros() as usize];
                    break;
                }
            }
            first
        };
        let iscale = -127.0f32 / max;
        let scale = _mm256_set1_ps(iscale);
        let top = _mm256_set1_ps(127.0);
        let q = b.qs.as_mut_ptr();
        for j in 0..QK_K / 16 {
            let quant = |i: usize| {
                let v = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
                    _mm256_mul_ps(scale, load(i)),
                );
                _mm256_cvtps_epi32(_mm256_min_ps(v, top))
            };
            let (lo, hi) = (quant(2 * j), quant(2 * j + 1));
            b.bsums[j] = hsum_i32(_mm256_add_epi32(lo, hi)) as i16;
            // i32 -> i16 -> i8 per 128-bit lane, then the lanes in order.
            let w = _mm256_packs_epi32(lo, hi);
            let w = _mm256_permute4x64_epi64::<0b11_01_10_00>(w);
            let bytes = _mm_packs_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
            // SAFETY: 16 bytes at `16j` of the 256 quants.
            unsafe { _mm_storeu_si128(q.add(16 * j) as *mut __m128i, bytes) };
        }
        b.d = 1.0 / iscale;
        b
    }

    #[target_feature(enable = "avx2")]
    pub fn quantize_row(x: &[f32], out: &mut [BlockQ8K], flavor: Q8KFlavor) {
        for (b, chunk) in out.iter_mut().zip(x.chunks_exact(QK_K)) {
            *b = quantize_block(chunk.try_into().unwrap(), flavor);
        }
    }
}

/// Quantizes a row (length a multiple of [`QK_K`]) into `out`.
pub fn quantize_row(x: &[f32], out: &mut [BlockQ8K], flavor: Q8KFlavor) {
    assert_eq!(x.len(), out.len() * QK_K);
    #[cfg(target_arch = "x86_64")]
    if super::isa::allows(super::isa::Isa::Avx2) {
        if is_x86_feature_detected!("avx2") {
            // SAFETY: the feature was just detected.
            return unsafe { avx2::quantize_row(x, out, flavor) };
        }
        if is_x86_feature_detected!("sse4.1") {
            // SAFETY: the feature was just detected.
            return unsafe { quantize_row_sse41(x, out, flavor) };
        }
    }
    quantize_row_portable(x, out, flavor);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_ties_to_even_and_follows_the_sign_of_max() {
        let mut x = vec![0.0f32; QK_K];
        x[0] = -127.0;
        x[1] = 0.5;
        x[2] = 1.5;
        x[3] = -2.5;
        x[4] = 127.0;
        let mut b = [BlockQ8K::default()];
        quantize_row(&x, &mut b, Q8KFlavor::Reference);
        // max = -127 → iscale = 1.
        assert_eq!(&b[0].qs[..5], &[-127, 0, 2, -2, 127]);
        assert_eq!(b[0].d, 1.0);
        assert_eq!(b[0].bsums[0], 0);
        quantize_row(&x, &mut b, Q8KFlavor::Interleaved4x8);
        // max = +127 → iscale = -1: the quants flip sign.
        assert_eq!(&b[0].qs[..5], &[127, 0, -2, 2, -127]);
        assert_eq!(b[0].d, -1.0);
    }

    /// The AVX2 quantizer against the portable one: random rows, ties at
    /// .5, both signs of the largest magnitude, zeros and a NaN.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_equals_portable() {
        // Every machine that runs the x86 tests (CI's included) has AVX2.
        assert!(
            is_x86_feature_detected!("avx2"),
            "no AVX2 here: the AVX2 quantizer cannot be tested"
        );
        let mut seed = 12345u64;
        let mut next = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 33) as f32 / (1u64 << 31) as f32) * 2.0 - 1.0
        };
        let mut rows: Vec<Vec<f32>> = (0..64)
            .map(|r| (0..QK_K).map(|_| next() * (1 + r) as f32).collect())
            .collect();
        let mut ties: Vec<f32> = (0..QK_K).map(|i| (i as f32 - 128.0) * 0.5).collect();
        ties[3] = -64.0;
        rows.push(ties.clone());
        ties[200] = 64.0; // +amax after -amax
        rows.push(ties);
        rows.push(vec![0.0; QK_K]);
        let mut nan: Vec<f32> = (0..QK_K).map(|_| next()).collect();
        nan[17] = f32::NAN;
        rows.push(nan);
        for (r, row) in rows.iter().enumerate() {
            for flavor in [Q8KFlavor::Reference, Q8KFlavor::Interleaved4x8] {
                let mut want = [BlockQ8K::default()];
                let mut got = [BlockQ8K::default()];
                quantize_row_portable(row, &mut want, flavor);
                // SAFETY: AVX2 was detected above.
                unsafe { avx2::quantize_row(row, &mut got, flavor) };
                assert_eq!(got[0].qs, want[0].qs, "row {r} {flavor:?}");
                assert_eq!(got[0].bsums, want[0].bsums, "row {r} {flavor:?}");
                assert_eq!(
                    got[0].d.to_bits(),
                    want[0].d.to_bits(),
                    "row {r} {flavor:?}"
                );
            }
        }
    }
}
