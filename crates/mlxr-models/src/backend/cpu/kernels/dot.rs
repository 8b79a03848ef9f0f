//! Dot products of one quantized weight row with one quantized activation row,
//! in ggml's float order on x86 (AVX2/AVX-512 builds).
//!
//! Per block `b`, the 32 integer products are summed in 8 lanes of 4
//! consecutive elements each (exact in i32), converted to f32 and accumulated
//! with one FMA per lane: `acc[l] = fma(d_w * d_x, Σ_l, acc[l])`. After the
//! last block the 8 lanes are reduced as
//! `((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7))`. For Q4_1 the offset
//! term is a separate scalar `summs = fma(m_w, s_x, summs)` added at the end.
//! The SIMD and scalar versions below perform the same float operations in
//! the same order, so they agree bit for bit.

use half::f16;

use super::q8::{BlockQ8, QK};

/// Bytes of one Q4_1 block: `d: f16, m: f16, qs: [u8; 16]`.
pub const Q4_1_BYTES: usize = 20;
/// Bytes of one Q5_0 block: `d: f16, qh: [u8; 4], qs: [u8; 16]`.
pub const Q5_0_BYTES: usize = 22;
/// Bytes of one Q8_0 block: `d: f16, qs: [i8; 32]`.
pub const Q8_0_BYTES: usize = 34;
/// Bytes of one Q4_0 block: `d: f16, qs: [u8; 16]` (values `nibble - 8`).
pub const Q4_0_BYTES: usize = 18;
/// Bytes of one Q5_1 block: `d: f16, m: f16, qh: [u8; 4], qs: [u8; 16]`.
pub const Q5_1_BYTES: usize = 24;

#[inline(always)]
fn f16_at(b: &[u8], at: usize) -> f32 {
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

/// The 4-bit value of element `e` of a block's packed nibbles.
#[inline(always)]
fn nibble(qs: &[u8], e: usize) -> u8 {
    if e < QK / 2 {
        qs[e] & 0x0F
    } else {
        qs[e - QK / 2] >> 4
    }
}

/// Portable Q4_1 · Q8_1 in ggml's x86 order.
pub fn dot_q4_1_q8_1_scalar(w: &[u8], y: &[BlockQ8]) -> f32 {
    let mut acc = [0.0f32; 8];
    let mut summs = 0.0f32;
    for (wb, yb) in w.chunks_exact(Q4_1_BYTES).zip(y) {
        let d = f16_at(wb, 0);
        let m = f16_at(wb, 2);
        summs = m.mul_add(yb.s, summs);
        let dd = d * yb.d;
        let qs = &wb[4..20];
        for (lane, a) in acc.iter_mut().enumerate() {
            let s: i32 = (lane * 4..lane * 4 + 4)
                .map(|e| nibble(qs, e) as i32 * yb.qs[e] as i32)
                .sum();
            *a = dd.mul_add(s as f32, *a);
        }
    }
    hsum8(&acc) + summs
}

/// Portable Q5_0 · Q8_0 in ggml's x86 order.
pub fn dot_q5_0_q8_0_scalar(w: &[u8], y: &[BlockQ8]) -> f32 {
    let mut acc = [0.0f32; 8];
    for (wb, yb) in w.chunks_exact(Q5_0_BYTES).zip(y) {
        let dd = f16_at(wb, 0) * yb.d;
        let qh = u32::from_le_bytes([wb[2], wb[3], wb[4], wb[5]]);
        let qs = &wb[6..22];
        for (lane, a) in acc.iter_mut().enumerate() {
            let s: i32 = (lane * 4..lane * 4 + 4)
                .map(|e| {
                    let v = (nibble(qs, e) | ((((qh >> e) & 1) as u8) << 4)) as i32 - 16;
                    v * yb.qs[e] as i32
                })
                .sum();
            *a = dd.mul_add(s as f32, *a);
        }
    }
    hsum8(&acc)
}

/// Portable Q4_0 · Q8_0 in ggml's x86 order (its vec_dot; Q4_0 has only
/// the 16-row tile kernel here, and candle's kernel elsewhere).
pub fn dot_q4_0_q8_0_scalar(w: &[u8], y: &[BlockQ8]) -> f32 {
    let mut acc = [0.0f32; 8];
    for (wb, yb) in w.chunks_exact(Q4_0_BYTES).zip(y) {
        let dd = f16_at(wb, 0) * yb.d;
        let qs = &wb[2..18];
        for (lane, a) in acc.iter_mut().enumerate() {
            let s: i32 = (lane * 4..lane * 4 + 4)
                .map(|e| (nibble(qs, e) as i32 - 8) * yb.qs[e] as i32)
                .sum();
            *a = dd.mul_add(s as f32, *a);
        }
    }
    hsum8(&acc)
}

/// Portable Q5_1 · Q8_1 in ggml's x86 order (as Q4_1, with a fifth bit).
pub fn dot_q5_1_q8_1_scalar(w: &[u8], y: &[BlockQ8]) -> f32 {
    let mut acc = [0.0f32; 8];
    let mut summs = 0.0f32;
    for (wb, yb) in w.chunks_exact(Q5_1_BYTES).zip(y) {
        let d = f16_at(wb, 0);
        let m = f16_at(wb, 2);
        summs = m.mul_add(yb.s, summs);
        let dd = d * yb.d;
        let qh = u32::from_le_bytes([wb[4], wb[5], wb[6], wb[7]]);
        let qs = &wb[8..24];
        for (lane, a) in acc.iter_mut().enumerate() {
            let s: i32 = (lane * 4..lane * 4 + 4)
                .map(|e| {
                    let v = nibble(qs, e) as i32 | ((((qh >> e) & 1) as i32) << 4);
                    v * yb.qs[e] as i32
                })
                .sum();
            *a = dd.mul_add(s as f32, *a);
        }
    }
    hsum8(&acc) + summs
}

/// Portable Q8_0 · Q8_0 in ggml's x86 order.
pub fn dot_q8_0_q8_0_scalar(w: &[u8], y: &[BlockQ8]) -> f32 {
    let mut acc = [0.0f32; 8];
    for (wb, yb) in w.chunks_exact(Q8_0_BYTES).zip(y) {
        let dd = f16_at(wb, 0) * yb.d;
        let qs = &wb[2..34];
        for (lane, a) in acc.iter_mut().enumerate() {
            let s: i32 = (lane * 4..lane * 4 + 4)
                .map(|e| qs[e] as i8 as i32 * yb.qs[e] as i32)
                .sum();
            *a = dd.mul_add(s as f32, *a);
        }
    }
    hsum8(&acc)
}

#[cfg(target_arch = "x86_64")]
pub mod x86 {
    //! AVX2 + FMA + F16C versions (callers check the features first).

    use std::arch::x86_64::*;

    use super::{BlockQ8, Q4_0_BYTES, Q4_1_BYTES, Q5_0_BYTES, Q5_1_BYTES, Q8_0_BYTES};

    /// Whether this CPU can run the functions of this module.
    pub fn available() -> bool {
        crate::backend::cpu::kernels::isa::allows(crate::backend::cpu::kernels::isa::Isa::Avx2)
            && is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c")
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn f16_at(p: *const u8) -> f32 {
        // SAFETY: callers pass a pointer to 2 readable bytes.
        let bits = unsafe { std::ptr::read_unaligned(p as *const u16) };
        _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32)))
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn hsum8(acc: __m256) -> f32 {
        let mut r = _mm_add_ps(_mm256_extractf128_ps(acc, 1), _mm256_castps256_ps128(acc));
        r = _mm_add_ps(r, _mm_movehl_ps(r, r));
        r = _mm_add_ss(r, _mm_movehdup_ps(r));
        _mm_cvtss_f32(r)
    }

    /// 16 packed bytes → 32 bytes: low nibbles then high nibbles.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn unpack_nibbles(p: *const u8) -> __m256i {
        // SAFETY: callers pass a pointer to 16 readable bytes.
        let lo = unsafe { _mm_loadu_si128(p as *const __m128i) };
        let both = _mm256_set_m128i(_mm_srli_epi16(lo, 4), lo);
        _mm256_and_si256(both, _mm256_set1_epi8(0x0F))
    }

    /// Sums of 4 consecutive `u8 × i8` products per i32 lane, as f32.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn dot_u8_i8(u: __m256i, s: __m256i) -> __m256 {
        let pairs = _mm256_maddubs_epi16(u, s);
        _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_set1_epi16(1), pairs))
    }

    /// Where each byte of a block's 32 stands its fifth bit (from the `qh`
    /// word at `p`): `0xFF` where set.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(in super::super) unsafe fn fifth_bits(p: *const u8) -> __m256i {
        // Byte i of the broadcast qh word goes to output bytes 8i..8i+8; each
        // output byte then tests its own bit.
        let spread = _mm256_set_epi64x(
            0x0303_0303_0303_0303,
            0x0202_0202_0202_0202,
            0x0101_0101_0101_0101,
            0,
        );
        let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
        // SAFETY: callers pass a pointer to 4 readable bytes.
        let qh = unsafe { std::ptr::read_unaligned(p as *const i32) };
        let bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(qh), spread);
        _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit)
    }

    /// Weight block → (scale, min, unsigned bytes, sign source) for the
    /// `u8 × i8` product: Q4_1/Q5_1 values are already unsigned; Q5_0, Q8_0
    /// and Q4_0 values are signed, so their absolute values multiply
    /// sign-transferred activations.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn weight_block(kind: u8, p: *const u8) -> (f32, f32, __m256i, Option<__m256i>) {
        // SAFETY: `p` points at one whole block of the given kind.
        unsafe {
            match kind {
                0 => (f16_at(p), f16_at(p.add(2)), unpack_nibbles(p.add(4)), None),
                1 => {
                    let set = fifth_bits(p.add(2));
                    let high = _mm256_set1_epi8(0xF0u8 as i8);
                    let qx =
                        _mm256_or_si256(unpack_nibbles(p.add(6)), _mm256_andnot_si256(set, high));
                    (f16_at(p), 0.0, _mm256_sign_epi8(qx, qx), Some(qx))
                }
                3 => {
                    let qx = _mm256_sub_epi8(unpack_nibbles(p.add(2)), _mm256_set1_epi8(8));
                    (f16_at(p), 0.0, _mm256_sign_epi8(qx, qx), Some(qx))
                }
                4 => {
                    let set = fifth_bits(p.add(4));
                    let qx = _mm256_or_si256(
                        unpack_nibbles(p.add(8)),
                        _mm256_and_si256(set, _mm256_set1_epi8(0x10)),
                    );
                    (f16_at(p), f16_at(p.add(2)), qx, None)
                }
                _ => {
                    let qx = _mm256_loadu_si256(p.add(2) as *const __m256i);
                    (f16_at(p), 0.0, _mm256_sign_epi8(qx, qx), Some(qx))
                }
            }
        }
    }

    /// One weight row against `R` activation rows at once (the weight block
    /// is unpacked once); each result has exactly the float operations of
    /// the single-row functions above. `kind`: 0 = Q4_1, 1 = Q5_0, 2 = Q8_0,
    /// 3 = Q4_0, 4 = Q5_1 (as `ggml_vec_dot_q4_0_q8_0`/`..._q5_1_q8_1`).
    ///
    /// # Safety
    /// The CPU must support AVX2, FMA and F16C; `w` holds `ys[i].len()` blocks
    /// of the given kind and all `ys` have the same length.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn dot_rows<const R: usize>(kind: u8, w: &[u8], ys: [&[BlockQ8]; R]) -> [f32; R] {
        let nb = ys[0].len();
        let block_bytes = match kind {
            0 => Q4_1_BYTES,
            1 => Q5_0_BYTES,
            3 => Q4_0_BYTES,
            4 => Q5_1_BYTES,
            _ => Q8_0_BYTES,
        };
        debug_assert!(w.len() >= nb * block_bytes);
        let mut acc = [_mm256_setzero_ps(); R];
        let mut summs = [0.0f32; R];
        let mut p = w.as_ptr();
        for b in 0..nb {
            // SAFETY: `p` walks the `nb` blocks of `w`; every `ys[r]` has `nb` blocks.
            unsafe {
                let (d, m, ux, sign) = weight_block(kind, p);
                for r in 0..R {
                    let yb = ys[r].get_unchecked(b);
                    let qy = _mm256_loadu_si256(yb.qs.as_ptr() as *const __m256i);
                    let sy = match sign {
                        Some(qx) => _mm256_sign_epi8(qy, qx),
                        None => {
                            summs[r] = m.mul_add(yb.s, summs[r]);
                            qy
                        }
                    };
                    let dd = _mm256_set1_ps(d * yb.d);
                    acc[r] = _mm256_fmadd_ps(dd, dot_u8_i8(ux, sy), acc[r]);
                }
                p = p.add(block_bytes);
            }
        }
        let mut out = [0.0f32; R];
        for r in 0..R {
            out[r] = if kind == 0 || kind == 4 {
                hsum8(acc[r]) + summs[r]
            } else {
                hsum8(acc[r])
            };
        }
        out
    }
}
