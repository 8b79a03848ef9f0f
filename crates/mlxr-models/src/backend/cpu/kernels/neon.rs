//! NEON row kernels for aarch64 (Apple Silicon, Graviton, Ampere…).
//!
//! Each computes the integer sums of its portable twin with NEON — 4-element
//! groups of `i8 × i8` products, by `SDOT` where the CPU has the dot-product
//! extension, by widening multiplies and pairwise adds otherwise (the same
//! exact integers) — then performs the twin's float operations in the twin's
//! order: ggml's x86 lanes map onto two `float32x4_t` accumulators (lanes
//! 0–3 and 4–7). Results equal the portable functions, and so ggml's x86
//! dumps, bit for bit.
//!
//! Built and tested only under emulation (qemu-aarch64, with and without the
//! dot-product extension): no ARM machine was available to time them.

use std::arch::aarch64::*;
use std::arch::asm;

use super::kquants::{self, Q4_K_BYTES, Q6_K_BYTES};
use super::q5k_tiles::{self, Q5_K_BYTES};
use super::q8::BlockQ8;
use super::q8k::BlockQ8K;
use super::{dot, WeightKind};

/// Whether this CPU has the dot-product extension (`SDOT`), checked once.
fn has_dotprod() -> bool {
    std::arch::is_aarch64_feature_detected!("dotprod")
}

/// `pub fn NAME<const R: usize>(..)` running `INNER::<true, R>` compiled
/// with the dot-product extension where the CPU has it, `INNER::<false, R>`
/// otherwise.
macro_rules! with_sdot {
    ($(#[$doc:meta])* pub fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty = $inner:ident;) => {
        $(#[$doc])*
        pub fn $name<const R: usize>($($arg: $ty),*) -> $ret {
            #[target_feature(enable = "neon,dotprod")]
            fn sdot<const R: usize>($($arg: $ty),*) -> $ret {
                $inner::<true, R>($($arg),*)
            }
            if has_dotprod() {
                // SAFETY: the CPU has the dot-product extension.
                unsafe { sdot::<R>($($arg),*) }
            } else {
                // SAFETY: NEON is part of every aarch64 target.
                unsafe { $inner::<false, R>($($arg),*) }
            }
        }
    };
}

/// `acc + (Σ of each 4 consecutive a·b products)`: lane `i` adds elements
/// `4i .. 4i + 4`.
#[inline]
#[target_feature(enable = "neon")]
fn dot4<const SDOT: bool>(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    if SDOT {
        let mut acc = acc;
        // SAFETY: `SDOT` is true only below `with_sdot!`'s dot-product functions, which
        // run after `has_dotprod()`; the instruction touches registers only.
        unsafe {
            asm!(
                ".arch_extension dotprod",
                "sdot {acc:v}.4s, {a:v}.16b, {b:v}.16b",
                acc = inout(vreg) acc,
                a = in(vreg) a,
                b = in(vreg) b,
                options(pure, nomem, nostack),
            );
        }
        acc
    } else {
        // |i8 · i8| <= 16384 fits i16; pairwise widening adds stay exact.
        let lo = vpaddlq_s16(vmull_s8(vget_low_s8(a), vget_low_s8(b)));
        let hi = vpaddlq_s16(vmull_high_s8(a, b));
        vaddq_s32(acc, vpaddq_s32(lo, hi))
    }
}

/// Both halves of a 32-element dot: lanes 0–3 and 4–7.
#[inline]
#[target_feature(enable = "neon")]
fn dot32<const SDOT: bool>(w: [int8x16_t; 2], y: [int8x16_t; 2]) -> [int32x4_t; 2] {
    let zero = vdupq_n_s32(0);
    [
        dot4::<SDOT>(zero, w[0], y[0]),
        dot4::<SDOT>(zero, w[1], y[1]),
    ]
}

/// `((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7))` for lanes 0–3 in
/// `lo` and 4–7 in `hi`, as ggml's `hsum_float_8`.
#[inline]
#[target_feature(enable = "neon")]
fn hsum8(lo: float32x4_t, hi: float32x4_t) -> f32 {
    let r = vaddq_f32(hi, lo);
    let t = vadd_f32(vget_low_f32(r), vget_high_f32(r));
    vget_lane_f32::<0>(t) + vget_lane_f32::<1>(t)
}

#[inline]
#[target_feature(enable = "neon")]
fn f16_at(p: &[u8], at: usize) -> f32 {
    half::f16::from_bits(u16::from_le_bytes([p[at], p[at + 1]])).to_f32()
}

/// 16 packed bytes → (low nibbles, high nibbles): elements 0–15 and 16–31
/// of a 32-element block.
#[inline]
#[target_feature(enable = "neon")]
fn nibbles(qs: &[u8]) -> [uint8x16_t; 2] {
    assert!(qs.len() >= 16);
    // SAFETY: 16 readable bytes (checked above).
    let raw = unsafe { vld1q_u8(qs.as_ptr()) };
    [vandq_u8(raw, vdupq_n_u8(0x0F)), vshrq_n_u8::<4>(raw)]
}

/// Per element of a 32-element block, `0xFF` where its bit of the little-
/// endian `qh` word is set.
#[inline]
#[target_feature(enable = "neon")]
fn fifth_bits(qh: &[u8]) -> [uint8x16_t; 2] {
    const BITS: [u8; 16] = [1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128];
    // SAFETY: a 16-byte constant.
    let bits = unsafe { vld1q_u8(BITS.as_ptr()) };
    let spread = |a: u8, b: u8| vcombine_u8(vdup_n_u8(a), vdup_n_u8(b));
    [
        vtstq_u8(spread(qh[0], qh[1]), bits),
        vtstq_u8(spread(qh[2], qh[3]), bits),
    ]
}

/// A 32-element weight block as signed bytes (elements 0–15, 16–31), its
/// scale and (Q4_1/Q5_1) min.
#[inline]
#[target_feature(enable = "neon")]
fn weight_block(kind: WeightKind, b: &[u8]) -> (f32, f32, [int8x16_t; 2]) {
    let s = vreinterpretq_s8_u8;
    match kind {
        WeightKind::Q4_1 => {
            let [lo, hi] = nibbles(&b[4..20]);
            (f16_at(b, 0), f16_at(b, 2), [s(lo), s(hi)])
        }
        WeightKind::Q5_0 => {
            // nibble - 16 where the fifth bit is clear is nibble | 0xF0.
            let [lo, hi] = nibbles(&b[6..22]);
            let [slo, shi] = fifth_bits(&b[2..6]);
            let high = vdupq_n_u8(0xF0);
            let v = |n, set| s(vorrq_u8(n, vbicq_u8(high, set)));
            (f16_at(b, 0), 0.0, [v(lo, slo), v(hi, shi)])
        }
        WeightKind::Q4_0 => {
            let [lo, hi] = nibbles(&b[2..18]);
            let eight = vdupq_n_s8(8);
            (
                f16_at(b, 0),
                0.0,
                [vsubq_s8(s(lo), eight), vsubq_s8(s(hi), eight)],
            )
        }
        WeightKind::Q5_1 => {
            let [lo, hi] = nibbles(&b[8..24]);
            let [slo, shi] = fifth_bits(&b[4..8]);
            let bit = vdupq_n_u8(0x10);
            let v = |n, set| s(vorrq_u8(n, vandq_u8(set, bit)));
            (f16_at(b, 0), f16_at(b, 2), [v(lo, slo), v(hi, shi)])
        }
        WeightKind::Q8_0 => {
            assert!(b.len() >= dot::Q8_0_BYTES);
            // SAFETY: 32 readable bytes after the scale (checked above).
            let q = unsafe {
                [
                    vld1q_s8(b[2..].as_ptr() as _),
                    vld1q_s8(b[18..].as_ptr() as _),
                ]
            };
            (f16_at(b, 0), 0.0, q)
        }
        WeightKind::Q4K | WeightKind::Q6K | WeightKind::Q5K => {
            unreachable!("K-quants have their own kernels")
        }
    }
}

#[inline]
#[target_feature(enable = "neon")]
fn load32(q: &[i8]) -> [int8x16_t; 2] {
    assert!(q.len() >= 32);
    // SAFETY: 32 readable bytes (checked above).
    unsafe { [vld1q_s8(q.as_ptr()), vld1q_s8(q[16..].as_ptr())] }
}

with_sdot! {
    /// One weight row of a 32-element type against `R` Q8 activation rows (the
    /// weight block is unpacked once); each result equals the portable
    /// `dot::dot_*_scalar` of that kind.
    pub fn dot_rows(kind: WeightKind, w: &[u8], ys: [&[BlockQ8]; R]) -> [f32; R] = dot_rows_in;
}

#[inline]
#[target_feature(enable = "neon")]
fn dot_rows_in<const SDOT: bool, const R: usize>(
    kind: WeightKind,
    w: &[u8],
    ys: [&[BlockQ8]; R],
) -> [f32; R] {
    let block_bytes = kind.block_bytes();
    let has_min = kind.activation_has_sum();
    let mut acc = [[vdupq_n_f32(0.0); 2]; R];
    let mut summs = [0.0f32; R];
    for (b, wb) in w.chunks_exact(block_bytes).take(ys[0].len()).enumerate() {
        let (d, m, q) = weight_block(kind, wb);
        for r in 0..R {
            let yb = &ys[r][b];
            if has_min {
                summs[r] = m.mul_add(yb.s, summs[r]);
            }
            let s = dot32::<SDOT>(q, load32(&yb.qs));
            let dd = vdupq_n_f32(d * yb.d);
            for h in 0..2 {
                acc[r][h] = vfmaq_f32(acc[r][h], vcvtq_f32_s32(s[h]), dd);
            }
        }
    }
    std::array::from_fn(|r| {
        let h = hsum8(acc[r][0], acc[r][1]);
        if has_min {
            h + summs[r]
        } else {
            h
        }
    })
}

with_sdot! {
    /// One Q4_K weight row against `R` Q8_K rows; each result equals
    /// [`kquants::dot_q4_k_scalar`] with the same `pairs[r]`.
    pub fn dot_q4_k_rows(w: &[u8], ys: [&[BlockQ8K]; R], pairs: [bool; R]) -> [f32; R] = q4k_rows_in;
}

#[inline]
#[target_feature(enable = "neon")]
fn q4k_rows_in<const SDOT: bool, const R: usize>(
    w: &[u8],
    ys: [&[BlockQ8K]; R],
    pairs: [bool; R],
) -> [f32; R] {
    let mut acc = [0.0f32; R];
    let mut accm = [0.0f32; R];
    for (b, wb) in w.chunks_exact(Q4_K_BYTES).take(ys[0].len()).enumerate() {
        // Sub-blocks 2j and 2j + 1 are the low and high nibbles of bytes
        // 32j .. 32j + 32.
        let mut q = [[vdupq_n_s8(0); 2]; 8];
        for j in 0..4 {
            let [lo0, hi0] = nibbles(&wb[16 + 32 * j..]);
            let [lo1, hi1] = nibbles(&wb[32 + 32 * j..]);
            q[2 * j] = [vreinterpretq_s8_u8(lo0), vreinterpretq_s8_u8(lo1)];
            q[2 * j + 1] = [vreinterpretq_s8_u8(hi0), vreinterpretq_s8_u8(hi1)];
        }
        for r in 0..R {
            let yb = &ys[r][b];
            let sub: [i32; 8] = std::array::from_fn(|s| {
                let [a, c] = dot32::<SDOT>(q[s], load32(&yb.qs[32 * s..]));
                vaddvq_s32(vaddq_s32(a, c))
            });
            kquants::q4k_block_acc(wb, yb, &sub, pairs[r], &mut acc[r], &mut accm[r]);
        }
    }
    std::array::from_fn(|r| acc[r] - accm[r])
}

with_sdot! {
    /// One Q6_K weight row against `R` Q8_K rows; each result equals
    /// [`kquants::dot_q6_k_scalar`] with the same `tiled`.
    pub fn dot_q6_k_rows(w: &[u8], ys: [&[BlockQ8K]; R], tiled: bool) -> [f32; R] = q6k_rows_in;
}

#[inline]
#[target_feature(enable = "neon")]
fn q6k_rows_in<const SDOT: bool, const R: usize>(
    w: &[u8],
    ys: [&[BlockQ8K]; R],
    tiled: bool,
) -> [f32; R] {
    let mut acc = [kquants::Q6kAcc::default(); R];
    for (b, wb) in w.chunks_exact(Q6_K_BYTES).take(ys[0].len()).enumerate() {
        let q = q6k_values(wb);
        let sc: [i32; 16] = std::array::from_fn(|i| wb[192 + i] as i8 as i32);
        for r in 0..R {
            let yb = &ys[r][b];
            // Chunk c (elements 32c .. 32c + 32) has scale 2c for its first
            // 16 elements (lanes 0–3) and 2c + 1 for the rest (lanes 4–7).
            let mut lo = vdupq_n_s32(0);
            let mut hi = vdupq_n_s32(0);
            for c in 0..8 {
                let [a, h] = dot32::<SDOT>(q[c], load32(&yb.qs[32 * c..]));
                lo = vmlaq_n_s32(lo, a, sc[2 * c]);
                hi = vmlaq_n_s32(hi, h, sc[2 * c + 1]);
            }
            let mut lanes = [0i32; 8];
            // SAFETY: 8 writable i32.
            unsafe {
                vst1q_s32(lanes.as_mut_ptr(), lo);
                vst1q_s32(lanes[4..].as_mut_ptr(), hi);
            }
            kquants::q6k_subtract_bsums(&mut lanes, yb, &sc);
            acc[r].add(wb, yb, &lanes, tiled);
        }
    }
    std::array::from_fn(|r| acc[r].result(tiled))
}

/// A Q6_K block's 256 six-bit values (0..64) as 8 chunks of 32 bytes
/// (the layout of [`kquants::q6k_values`]).
#[inline]
#[target_feature(enable = "neon")]
#[allow(clippy::needless_range_loop)] // `half` picks both the bytes and the output half
fn q6k_values(wb: &[u8]) -> [[int8x16_t; 2]; 8] {
    assert!(wb.len() >= Q6_K_BYTES);
    let ld = |at: usize| {
        // SAFETY: `at + 16 <= 192` for every call below.
        unsafe { vld1q_u8(wb[at..].as_ptr()) }
    };
    let m15 = vdupq_n_u8(15);
    let mut q = [[vdupq_n_s8(0); 2]; 8];
    for j in 0..2 {
        for half in 0..2 {
            let i = 16 * half;
            let (l0, l1, h) = (ld(64 * j + i), ld(64 * j + 32 + i), ld(128 + 32 * j + i));
            let v = [
                vorrq_u8(
                    vandq_u8(l0, m15),
                    vshlq_n_u8::<4>(vandq_u8(h, vdupq_n_u8(3))),
                ),
                vorrq_u8(
                    vandq_u8(l1, m15),
                    vshlq_n_u8::<2>(vandq_u8(h, vdupq_n_u8(12))),
                ),
                vorrq_u8(vshrq_n_u8::<4>(l0), vandq_u8(h, vdupq_n_u8(48))),
                vorrq_u8(
                    vshrq_n_u8::<4>(l1),
                    vshrq_n_u8::<2>(vandq_u8(h, vdupq_n_u8(192))),
                ),
            ];
            for (c, v) in v.into_iter().enumerate() {
                q[4 * j + c][half] = vreinterpretq_s8_u8(v);
            }
        }
    }
    q
}

with_sdot! {
    /// One Q5_K weight row against `R` Q8_K rows; each result equals
    /// [`q5k_tiles::dot_q5_k_scalar`] with the same `tiled`.
    pub fn dot_q5_k_rows(w: &[u8], ys: [&[BlockQ8K]; R], tiled: bool) -> [f32; R] = q5k_rows_in;
}

#[inline]
#[target_feature(enable = "neon")]
fn q5k_rows_in<const SDOT: bool, const R: usize>(
    w: &[u8],
    ys: [&[BlockQ8K]; R],
    tiled: bool,
) -> [f32; R] {
    let mut acc = [q5k_tiles::Q5kAcc::default(); R];
    for (b, wb) in w.chunks_exact(Q5_K_BYTES).take(ys[0].len()).enumerate() {
        let (scales, mins) = kquants::q4k_scales_mins(&wb[4..16]);
        // Sub-block s: nibbles of bytes 32(s/2) .. +32 (low for even s),
        // fifth bit s of qh[0..32].
        let mut q = [[vdupq_n_s8(0); 2]; 8];
        // SAFETY: a whole block: qh at 16..48.
        let qh = unsafe { [vld1q_u8(wb[16..].as_ptr()), vld1q_u8(wb[32..].as_ptr())] };
        for j in 0..4 {
            let [lo0, hi0] = nibbles(&wb[48 + 32 * j..]);
            let [lo1, hi1] = nibbles(&wb[64 + 32 * j..]);
            for (s, n) in [(2 * j, [lo0, lo1]), (2 * j + 1, [hi0, hi1])] {
                let bit = vdupq_n_u8(1 << s);
                let five = vdupq_n_u8(0x10);
                q[s] = std::array::from_fn(|h| {
                    vreinterpretq_s8_u8(vorrq_u8(n[h], vandq_u8(vtstq_u8(qh[h], bit), five)))
                });
            }
        }
        for r in 0..R {
            let yb = &ys[r][b];
            let mut lo = vdupq_n_s32(0);
            let mut hi = vdupq_n_s32(0);
            for (s, &sc) in scales.iter().enumerate() {
                let [a, h] = dot32::<SDOT>(q[s], load32(&yb.qs[32 * s..]));
                lo = vmlaq_n_s32(lo, a, sc as i32);
                hi = vmlaq_n_s32(hi, h, sc as i32);
            }
            let mut lanes = [0i32; 8];
            // SAFETY: 8 writable i32.
            unsafe {
                vst1q_s32(lanes.as_mut_ptr(), lo);
                vst1q_s32(lanes[4..].as_mut_ptr(), hi);
            }
            acc[r].add(wb, yb, &lanes, &mins, tiled);
        }
    }
    std::array::from_fn(|r| acc[r].result(tiled))
}
