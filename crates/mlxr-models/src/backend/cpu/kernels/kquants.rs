//! Q4_K and Q6_K weight rows against Q8_K activation rows, in the float
//! order of ggml's x86 (AVX2/AVX-512) CPU backend.
//!
//! Integer parts are exact (no `maddubs` saturation is possible for these
//! ranges), so only where ints become floats and how floats are combined
//! matters:
//!
//! - **Q6_K** (`ggml_vec_dot_q6_K_q8_K`, not repacked on x86): per
//!   super-block, 8 i32 lanes; lane `l` sums the products of elements
//!   `32c + 4l .. 32c + 4l + 4` (`c = 0..8`) times their 16-element scale,
//!   minus `32 · (bsum[2l]·sc[2l] + bsum[2l+1]·sc[2l+1])`;
//!   `acc[l] = fma(d_x · f16(d_w), f32(lane), acc[l])`; the 8 lanes are
//!   reduced as in [`super::dot`].
//!   With 8 or more tokens ggml's tiled K-quant kernel (VNNI build) runs
//!   instead: per super-block the exact integer sum `s1` of those lanes,
//!   `acc = fma(f32(s1) · f16(d_w), d_x, acc)`.
//! - **Q4_K** is repacked to `block_q4_Kx8` when the row count is a multiple
//!   of 8 (always here). Per output element the two kernels do
//!   `acc = fma(f32(Σ sc_j·dot_j), f16(d_w) · d_x, acc)` and
//!   `accm = fma(f32(Σ m_j·bsum32_j), f16(dmin_w) · d_x, accm)`, result
//!   `acc - accm`; `ggml_gemv_q4_K_8x8_q8_K` (the last `m % 4` tokens) sums
//!   `j` over a whole super-block (8 sub-blocks) per FMA,
//!   `ggml_gemm_q4_K_8x8_q8_K` (groups of 4 tokens) over pairs of sub-blocks
//!   (4 FMAs per super-block).

use half::f16;

use super::q8k::{BlockQ8K, QK_K};

/// Bytes of one Q4_K block: `d, dmin: f16, scales: [u8; 12], qs: [u8; 128]`.
pub const Q4_K_BYTES: usize = 144;
/// Bytes of one Q6_K block: `ql: [u8; 128], qh: [u8; 64], scales: [i8; 16], d: f16`.
pub const Q6_K_BYTES: usize = 210;

#[inline(always)]
pub(super) fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

#[inline(always)]
fn hsum8(a: &[f32; 8]) -> f32 {
    let r0 = a[4] + a[0];
    let r1 = a[5] + a[1];
    let r2 = a[6] + a[2];
    let r3 = a[7] + a[3];
    (r0 + r2) + (r1 + r3)
}

/// The 8 six-bit scales and mins of a Q4_K block.
#[inline(always)]
pub fn q4k_scales_mins(s: &[u8]) -> ([u8; 8], [u8; 8]) {
    let mut sc = [0u8; 8];
    let mut mn = [0u8; 8];
    for j in 0..8 {
        if j < 4 {
            sc[j] = s[j] & 63;
            mn[j] = s[j + 4] & 63;
        } else {
            sc[j] = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
            mn[j] = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
        }
    }
    (sc, mn)
}

/// Integer dots of the 8 sub-blocks (32 elements each) of one Q4_K block
/// with one Q8_K block (portable).
#[inline(always)]
fn q4k_subdots_scalar(wb: &[u8], y: &BlockQ8K) -> [i32; 8] {
    let qs = &wb[16..144];
    let mut out = [0i32; 8];
    for j in 0..4 {
        let mut lo = 0i32;
        let mut hi = 0i32;
        for i in 0..32 {
            let q = qs[32 * j + i];
            lo += (q & 0xF) as i32 * y.qs[64 * j + i] as i32;
            hi += (q >> 4) as i32 * y.qs[64 * j + 32 + i] as i32;
        }
        out[2 * j] = lo;
        out[2 * j + 1] = hi;
    }
    out
}

/// Float part shared by the SIMD and portable Q4_K paths.
/// `pairs`: FMA per pair of sub-blocks (gemm) instead of per super-block (gemv).
#[inline(always)]
pub(super) fn q4k_block_acc(
    wb: &[u8],
    y: &BlockQ8K,
    sub: &[i32; 8],
    pairs: bool,
    acc: &mut f32,
    accm: &mut f32,
) {
    let (sc, mn) = q4k_scales_mins(&wb[4..16]);
    let dd = f16_at(wb, 0) * y.d;
    let dm = f16_at(wb, 2) * y.d;
    let b32 = |j: usize| y.bsums[2 * j] as i32 + y.bsums[2 * j + 1] as i32;
    if pairs {
        for p in 0..4 {
            let (a, b) = (2 * p, 2 * p + 1);
            let isum = sc[a] as i32 * sub[a] + sc[b] as i32 * sub[b];
            let imin = mn[a] as i32 * b32(a) + mn[b] as i32 * b32(b);
            *acc = (isum as f32).mul_add(dd, *acc);
            *accm = (imin as f32).mul_add(dm, *accm);
        }
    } else {
        let mut isum = 0i32;
        let mut imin = 0i32;
        for j in 0..8 {
            isum += sc[j] as i32 * sub[j];
            imin += mn[j] as i32 * b32(j);
        }
        *acc = (isum as f32).mul_add(dd, *acc);
        *accm = (imin as f32).mul_add(dm, *accm);
    }
}

/// Portable Q4_K · Q8_K (repacked-kernel order; `pairs` = gemm, else gemv).
pub fn dot_q4_k_scalar(w: &[u8], y: &[BlockQ8K], pairs: bool) -> f32 {
    let mut acc = 0.0f32;
    let mut accm = 0.0f32;
    for (wb, yb) in w.chunks_exact(Q4_K_BYTES).zip(y) {
        let sub = q4k_subdots_scalar(wb, yb);
        q4k_block_acc(wb, yb, &sub, pairs, &mut acc, &mut accm);
    }
    acc - accm
}

/// The 256 six-bit values of a Q6_K block in element order (unsigned, 0..64).
#[inline(always)]
pub fn q6k_values(wb: &[u8]) -> [u8; QK_K] {
    let ql = &wb[0..128];
    let qh = &wb[128..192];
    let mut v = [0u8; QK_K];
    for j in 0..2 {
        for i in 0..32 {
            let l0 = ql[64 * j + i];
            let l1 = ql[64 * j + 32 + i];
            let h = qh[32 * j + i];
            v[128 * j + i] = (l0 & 15) | ((h & 3) << 4);
            v[128 * j + 32 + i] = (l1 & 15) | (((h >> 2) & 3) << 4);
            v[128 * j + 64 + i] = (l0 >> 4) | (((h >> 4) & 3) << 4);
            v[128 * j + 96 + i] = (l1 >> 4) | (((h >> 6) & 3) << 4);
        }
    }
    v
}

/// `lanes[l] -= 32 · (bsums[2l] · sc[2l] + bsums[2l+1] · sc[2l+1])`: the
/// offset of Q6_K's values (stored + 32) taken out per lane, as ggml does.
#[inline(always)]
pub(super) fn q6k_subtract_bsums(lanes: &mut [i32; 8], yb: &BlockQ8K, sc: &[i32; 16]) {
    for (l, lane) in lanes.iter_mut().enumerate() {
        *lane -=
            32 * (yb.bsums[2 * l] as i32 * sc[2 * l] + yb.bsums[2 * l + 1] as i32 * sc[2 * l + 1]);
    }
}

/// The float part of a Q6_K row dot, shared by the portable and NEON paths.
#[derive(Clone, Copy, Default)]
pub(super) struct Q6kAcc {
    acc: [f32; 8],
    tacc: f32,
}

impl Q6kAcc {
    /// Adds one block's 8 exact lanes.
    #[inline(always)]
    pub(super) fn add(&mut self, wb: &[u8], yb: &BlockQ8K, lanes: &[i32; 8], tiled: bool) {
        let dw = f16_at(wb, 208);
        if tiled {
            let s1: i32 = lanes.iter().sum();
            self.tacc = (s1 as f32 * dw).mul_add(yb.d, self.tacc);
        } else {
            let d = yb.d * dw;
            for (a, &s) in self.acc.iter_mut().zip(lanes) {
                *a = d.mul_add(s as f32, *a);
            }
        }
    }

    pub(super) fn result(&self, tiled: bool) -> f32 {
        if tiled {
            self.tacc
        } else {
            hsum8(&self.acc)
        }
    }
}

/// Portable Q6_K · Q8_K in ggml's x86 order: `tiled` (batches of 8 or more
/// tokens) is the tiled K-quant kernel, else `ggml_vec_dot_q6_K_q8_K`.
pub fn dot_q6_k_scalar(w: &[u8], y: &[BlockQ8K], tiled: bool) -> f32 {
    let mut acc = Q6kAcc::default();
    for (wb, yb) in w.chunks_exact(Q6_K_BYTES).zip(y) {
        let v = q6k_values(wb);
        let sc: [i32; 16] = std::array::from_fn(|i| wb[192 + i] as i8 as i32);
        let mut lanes: [i32; 8] = std::array::from_fn(|l| {
            (0..8)
                .flat_map(|c| 32 * c + 4 * l..32 * c + 4 * l + 4)
                .map(|e| sc[e / 16] * v[e] as i32 * yb.qs[e] as i32)
                .sum()
        });
        q6k_subtract_bsums(&mut lanes, yb, &sc);
        acc.add(wb, yb, &lanes, tiled);
    }
    acc.result(tiled)
}

#[cfg(target_arch = "x86_64")]
pub mod x86 {
    //! AVX2 + FMA + F16C versions (callers check the features first).

    use std::arch::x86_64::*;

    use super::{BlockQ8K, Q4_K_BYTES, Q6_K_BYTES};

    /// f16 at byte `at` of `b`, via F16C (exact, like `half`'s conversion).
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn f16_at(b: &[u8], at: usize) -> f32 {
        let bits = u16::from_le_bytes([b[at], b[at + 1]]);
        _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32)))
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(in super::super) fn hsum8(acc: __m256) -> f32 {
        let mut r = _mm_add_ps(_mm256_extractf128_ps(acc, 1), _mm256_castps256_ps128(acc));
        r = _mm_add_ps(r, _mm_movehl_ps(r, r));
        r = _mm_add_ss(r, _mm_movehdup_ps(r));
        _mm_cvtss_f32(r)
    }

    /// Exact sum of 8 i32 lanes.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(in super::super) fn hsum_i32(v: __m256i) -> i32 {
        let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
        let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01));
        _mm_cvtsi128_si32(s)
    }

    /// 4 vectors of 8 i32 → their 4 horizontal sums (exact).
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn hsum4(v: [__m256i; 4]) -> [i32; 4] {
        let a = _mm256_hadd_epi32(v[0], v[1]);
        let b = _mm256_hadd_epi32(v[2], v[3]);
        let c = _mm256_hadd_epi32(a, b);
        let s = _mm_add_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
        let mut out = [0i32; 4];
        // SAFETY: 16 writable bytes.
        unsafe { _mm_storeu_si128(out.as_mut_ptr() as *mut __m128i, s) };
        out
    }

    /// One Q4_K weight row against `R` Q8_K activation rows (the weight
    /// block is unpacked once); each result equals
    /// [`super::dot_q4_k_scalar`] with the same `pairs[r]`.
    ///
    /// # Safety
    /// The CPU must support AVX2, FMA and F16C; `w` holds `ys[r].len()` Q4_K
    /// blocks and all `ys` have the same length.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn dot_q4_k_rows<const R: usize>(
        w: &[u8],
        ys: [&[BlockQ8K]; R],
        pairs: [bool; R],
    ) -> [f32; R] {
        let nb = ys[0].len();
        debug_assert!(w.len() >= nb * Q4_K_BYTES);
        let m4 = _mm256_set1_epi8(0x0F);
        let mut acc = [0.0f32; R];
        let mut accm = [0.0f32; R];
        for b in 0..nb {
            let wb = &w[b * Q4_K_BYTES..(b + 1) * Q4_K_BYTES];
            let dw = f16_at(wb, 0);
            let dmin = f16_at(wb, 2);
            // ggml's unpacking of the 6-bit scales (bytes 0..8) and mins (8..16).
            // SAFETY: bytes 4..16 of the block.
            let u = |i: usize| unsafe {
                std::ptr::read_unaligned(wb.as_ptr().add(4 + 4 * i) as *const u32).to_le()
            };
            let (u0, u1, u2) = (u(0), u(1), u(2));
            const KM1: u32 = 0x3f3f_3f3f;
            const KM2: u32 = 0x0f0f_0f0f;
            const KM3: u32 = 0x0303_0303;
            let t3 = ((u2 >> 4) & KM2) | (((u1 >> 6) & KM3) << 4);
            let t2 = u1 & KM1;
            let t1 = (u2 & KM2) | (((u0 >> 6) & KM3) << 4);
            let t0 = u0 & KM1;
            let ms =
                _mm256_cvtepu8_epi16(_mm_set_epi32(t3 as i32, t2 as i32, t1 as i32, t0 as i32));
            let sc128 = _mm256_castsi256_si128(ms);
            let mins = _mm256_extracti128_si256(ms, 1);
            let scales = _mm256_set_m128i(sc128, sc128);
            for r in 0..R {
                // SAFETY: every `ys[r]` has `nb` blocks.
                let yb = unsafe { ys[r].get_unchecked(b) };
                let p = yb.qs.as_ptr();
                // Per pair of sub-blocks (64 elements): exact i32 lanes.
                let mut v = [_mm256_setzero_si256(); 4];
                for (j, vj) in v.iter_mut().enumerate() {
                    let sl = (4 * j as i16) | ((4 * j as i16 + 1) << 8);
                    let sh = (4 * j as i16 + 2) | ((4 * j as i16 + 3) << 8);
                    // SAFETY: `wb` is one whole block (qs at 16..144); `qs` has 256 bytes.
                    unsafe {
                        let raw =
                            _mm256_loadu_si256(wb.as_ptr().add(16 + 32 * j) as *const __m256i);
                        let lo = _mm256_and_si256(raw, m4);
                        let hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
                        let yl = _mm256_loadu_si256(p.add(64 * j) as *const __m256i);
                        let yh = _mm256_loadu_si256(p.add(64 * j + 32) as *const __m256i);
                        let pl = _mm256_madd_epi16(
                            _mm256_maddubs_epi16(lo, yl),
                            _mm256_shuffle_epi8(scales, _mm256_set1_epi16(sl)),
                        );
                        let ph = _mm256_madd_epi16(
                            _mm256_maddubs_epi16(hi, yh),
                            _mm256_shuffle_epi8(scales, _mm256_set1_epi16(sh)),
                        );
                        *vj = _mm256_add_epi32(pl, ph);
                    }
                }
                // SAFETY: `bsums` has 16 i16.
                let bs = unsafe { _mm256_loadu_si256(yb.bsums.as_ptr() as *const __m256i) };
                let q8s =
                    _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
                // Lane p: mins[2p]·bsum32[2p] + mins[2p+1]·bsum32[2p+1].
                let pmin = _mm_madd_epi16(mins, q8s);
                let dd = dw * yb.d;
                let dm = dmin * yb.d;
                if pairs[r] {
                    let isum = hsum4(v);
                    let mut imin = [0i32; 4];
                    // SAFETY: 16 writable bytes.
                    unsafe { _mm_storeu_si128(imin.as_mut_ptr() as *mut __m128i, pmin) };
                    for pi in 0..4 {
                        acc[r] = (isum[pi] as f32).mul_add(dd, acc[r]);
                        accm[r] = (imin[pi] as f32).mul_add(dm, accm[r]);
                    }
                } else {
                    let t = _mm256_add_epi32(
                        _mm256_add_epi32(v[0], v[1]),
                        _mm256_add_epi32(v[2], v[3]),
                    );
                    let isum = hsum_i32(t);
                    let m2 = _mm_add_epi32(pmin, _mm_unpackhi_epi64(pmin, pmin));
                    let imin = _mm_cvtsi128_si32(_mm_add_epi32(m2, _mm_shuffle_epi32(m2, 0b01)));
                    acc[r] = (isum as f32).mul_add(dd, acc[r]);
                    accm[r] = (imin as f32).mul_add(dm, accm[r]);
                }
            }
        }
        let mut out = [0.0f32; R];
        for r in 0..R {
            out[r] = acc[r] - accm[r];
        }
        out
    }

    /// Q4_K scales/mins of one block, unpacked as ggml does: 16 u16 (8 scales, 8 mins).
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn q4k_mins_scales(wb: &[u8]) -> __m256i {
        // SAFETY: bytes 4..16 of the block.
        let u = |i: usize| unsafe {
            std::ptr::read_unaligned(wb.as_ptr().add(4 + 4 * i) as *const u32).to_le()
        };
        let (u0, u1, u2) = (u(0), u(1), u(2));
        const KM1: u32 = 0x3f3f_3f3f;
        const KM2: u32 = 0x0f0f_0f0f;
        const KM3: u32 = 0x0303_0303;
        let t3 = ((u2 >> 4) & KM2) | (((u1 >> 6) & KM3) << 4);
        let t2 = u1 & KM1;
        let t1 = (u2 & KM2) | (((u0 >> 6) & KM3) << 4);
        let t0 = u0 & KM1;
        _mm256_cvtepu8_epi16(_mm_set_epi32(t3 as i32, t2 as i32, t1 as i32, t0 as i32))
    }

    /// 8 consecutive Q4_K weight rows (`row_bytes` apart) against one Q8_K
    /// activation row in the gemv order; lane `i` of the result equals
    /// [`super::dot_q4_k_scalar`]`(row i, y, false)` (the same FMAs, one
    /// lane per row).
    ///
    /// # Safety
    /// The CPU must support AVX2, FMA and F16C; `w` holds 8 rows of
    /// `y.len()` Q4_K blocks each, `row_bytes` apart.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn dot_q4_k_gemv8(w: &[u8], row_bytes: usize, y: &[BlockQ8K]) -> [f32; 8] {
        debug_assert!(w.len() >= 7 * row_bytes + y.len() * Q4_K_BYTES);
        let m4 = _mm256_set1_epi8(0x0F);
        let mut acc = _mm256_setzero_ps();
        let mut accm = _mm256_setzero_ps();
        for (b, yb) in y.iter().enumerate() {
            let p = yb.qs.as_ptr();
            // SAFETY: `bsums` has 16 i16.
            let bs = unsafe { _mm256_loadu_si256(yb.bsums.as_ptr() as *const __m256i) };
            let q8s = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
            let yd = _mm256_set1_ps(yb.d);
            let mut t = [_mm256_setzero_si256(); 8];
            let mut pm = [_mm_setzero_si128(); 8];
            let mut dbits = [0u16; 8];
            let mut mbits = [0u16; 8];
            for i in 0..8 {
                let at = i * row_bytes + b * Q4_K_BYTES;
                let wb = &w[at..at + Q4_K_BYTES];
                dbits[i] = u16::from_le_bytes([wb[0], wb[1]]);
                mbits[i] = u16::from_le_bytes([wb[2], wb[3]]);
                let ms = q4k_mins_scales(wb);
                let sc128 = _mm256_castsi256_si128(ms);
                let scales = _mm256_set_m128i(sc128, sc128);
                pm[i] = _mm_madd_epi16(_mm256_extracti128_si256(ms, 1), q8s);
                let mut v = _mm256_setzero_si256();
                for j in 0..4 {
                    let sl = (4 * j as i16) | ((4 * j as i16 + 1) << 8);
                    let sh = (4 * j as i16 + 2) | ((4 * j as i16 + 3) << 8);
                    // SAFETY: `wb` is one whole block; `qs` has 256 bytes.
                    unsafe {
                        let raw =
                            _mm256_loadu_si256(wb.as_ptr().add(16 + 32 * j) as *const __m256i);
                        let lo = _mm256_and_si256(raw, m4);
                        let hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
                        let yl = _mm256_loadu_si256(p.add(64 * j) as *const __m256i);
                        let yh = _mm256_loadu_si256(p.add(64 * j + 32) as *const __m256i);
                        let pl = _mm256_madd_epi16(
                            _mm256_maddubs_epi16(lo, yl),
                            _mm256_shuffle_epi8(scales, _mm256_set1_epi16(sl)),
                        );
                        let ph = _mm256_madd_epi16(
                            _mm256_maddubs_epi16(hi, yh),
                            _mm256_shuffle_epi8(scales, _mm256_set1_epi16(sh)),
                        );
                        v = _mm256_add_epi32(v, _mm256_add_epi32(pl, ph));
                    }
                }
                t[i] = v;
            }
            let isum = hsum8x8(t);
            let lo4 = _mm_hadd_epi32(_mm_hadd_epi32(pm[0], pm[1]), _mm_hadd_epi32(pm[2], pm[3]));
            let hi4 = _mm_hadd_epi32(_mm_hadd_epi32(pm[4], pm[5]), _mm_hadd_epi32(pm[6], pm[7]));
            let imin = _mm256_set_m128i(hi4, lo4);
            // SAFETY: 16 readable bytes each.
            let (dw, dm) = unsafe {
                (
                    _mm256_cvtph_ps(_mm_loadu_si128(dbits.as_ptr() as *const __m128i)),
                    _mm256_cvtph_ps(_mm_loadu_si128(mbits.as_ptr() as *const __m128i)),
                )
            };
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, yd), acc);
            accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(imin), _mm256_mul_ps(dm, yd), accm);
        }
        let mut out = [0.0f32; 8];
        // SAFETY: 32 writable bytes.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), _mm256_sub_ps(acc, accm)) };
        out
    }

    /// 8 vectors of 8 i32 → their 8 horizontal sums (exact).
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn hsum8x8(v: [__m256i; 8]) -> __m256i {
        let h01 = _mm256_hadd_epi32(v[0], v[1]);
        let h23 = _mm256_hadd_epi32(v[2], v[3]);
        let h45 = _mm256_hadd_epi32(v[4], v[5]);
        let h67 = _mm256_hadd_epi32(v[6], v[7]);
        let a = _mm256_hadd_epi32(h01, h23);
        let b = _mm256_hadd_epi32(h45, h67);
        _mm256_add_epi32(
            _mm256_permute2x128_si256(a, b, 0x20),
            _mm256_permute2x128_si256(a, b, 0x31),
        )
    }

    /// One Q6_K weight row against `R` Q8_K activation rows: with `tiled`
    /// the tiled kernel's order, else `ggml_vec_dot_q6_K_q8_K`'s (AVX2
    /// branch); same results as [`super::dot_q6_k_scalar`].
    ///
    /// # Safety
    /// The CPU must support AVX2, FMA and F16C; `w` holds `ys[r].len()` Q6_K
    /// blocks and all `ys` have the same length.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn dot_q6_k_rows<const R: usize>(
        w: &[u8],
        ys: [&[BlockQ8K]; R],
        tiled: bool,
    ) -> [f32; R] {
        let nb = ys[0].len();
        debug_assert!(w.len() >= nb * Q6_K_BYTES);
        let m3 = _mm256_set1_epi8(3);
        let m15 = _mm256_set1_epi8(15);
        let mut acc = [_mm256_setzero_ps(); R];
        let mut tacc = [0.0f32; R];
        for b in 0..nb {
            let wb = &w[b * Q6_K_BYTES..(b + 1) * Q6_K_BYTES];
            let dw = f16_at(wb, 208);
            let x = wb.as_ptr();
            let mut q = [_mm256_setzero_si256(); 8];
            let mut scv = [_mm256_setzero_si256(); 8];
            // SAFETY: `wb` is one whole block (210 bytes).
            let scales_16 = unsafe {
                let scales = _mm_loadu_si128(x.add(192) as *const __m128i);
                for j in 0..2 {
                    let b1 = _mm256_loadu_si256(x.add(64 * j) as *const __m256i);
                    let b2 = _mm256_loadu_si256(x.add(64 * j + 32) as *const __m256i);
                    let bh = _mm256_loadu_si256(x.add(128 + 32 * j) as *const __m256i);
                    let h0 = _mm256_slli_epi16(_mm256_and_si256(bh, m3), 4);
                    let h1 = _mm256_slli_epi16(_mm256_and_si256(bh, _mm256_set1_epi8(12)), 2);
                    let h2 = _mm256_and_si256(bh, _mm256_set1_epi8(48));
                    let h3 = _mm256_srli_epi16(_mm256_and_si256(bh, _mm256_set1_epi8(-64)), 2);
                    q[4 * j] = _mm256_or_si256(_mm256_and_si256(b1, m15), h0);
                    q[4 * j + 1] = _mm256_or_si256(_mm256_and_si256(b2, m15), h1);
                    q[4 * j + 2] =
                        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b1, 4), m15), h2);
                    q[4 * j + 3] =
                        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b2, 4), m15), h3);
                }
                for (c, s) in scv.iter_mut().enumerate() {
                    let lo = (2 * c) as i8;
                    let hi = (2 * c + 1) as i8;
                    let mask = _mm_set_epi8(
                        hi, hi, hi, hi, hi, hi, hi, hi, lo, lo, lo, lo, lo, lo, lo, lo,
                    );
                    *s = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, mask));
                }
                _mm256_cvtepi8_epi16(scales)
            };
            for r in 0..R {
                // SAFETY: every `ys[r]` has `nb` blocks; `qs` has 256 bytes.
                unsafe {
                    let yb = ys[r].get_unchecked(b);
                    let p = yb.qs.as_ptr();
                    let q8sums = _mm256_loadu_si256(yb.bsums.as_ptr() as *const __m256i);
                    let q8sclsub = _mm256_slli_epi32(_mm256_madd_epi16(q8sums, scales_16), 5);
                    let mut v = [_mm256_setzero_si256(); 8];
                    for c in 0..8 {
                        let y = _mm256_loadu_si256(p.add(32 * c) as *const __m256i);
                        v[c] = _mm256_madd_epi16(scv[c], _mm256_maddubs_epi16(q[c], y));
                    }
                    let mut sumi = _mm256_add_epi32(
                        _mm256_add_epi32(
                            _mm256_add_epi32(v[0], v[1]),
                            _mm256_add_epi32(v[2], v[3]),
                        ),
                        _mm256_add_epi32(
                            _mm256_add_epi32(v[4], v[5]),
                            _mm256_add_epi32(v[6], v[7]),
                        ),
                    );
                    sumi = _mm256_sub_epi32(sumi, q8sclsub);
                    if tiled {
                        tacc[r] = (hsum_i32(sumi) as f32 * dw).mul_add(yb.d, tacc[r]);
                    } else {
                        let d = yb.d * dw;
                        acc[r] =
                            _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc[r]);
                    }
                }
            }
        }
        let mut out = [0.0f32; R];
        for r in 0..R {
            out[r] = if tiled { tacc[r] } else { hsum8(acc[r]) };
        }
        out
    }
}
