//! Q5_K weights with Q8_K activations in ggml's x86 float orders
//! ([`dot_q5_k_scalar`]), and the same arithmetic for 16 rows at once with
//! AVX-512 VNNI ([`x86::gemv_tile`]).
//!
//! `vec_dot` order (one token, and every token of a batch-invariant engine):
//! per block, lane `u` (of 8) sums `scale[s] · Σ q·x` over elements
//! `32s + 4u .. 32s + 4u + 4` of the 8 sub-blocks `s` (exact in i32), then
//! `acc[u] = fma(y.d · d, lane, acc[u])`; the mins go to a separate
//! `summs = fma(-y.d · dmin, Σ_s min[s] · (bsums[2s] + bsums[2s+1]), summs)`;
//! the result is `hsum_float_8(acc) + summs`. Tiled order (ggml's tiled
//! K-quant kernel, batches of 8 or more tokens): per block the whole scaled
//! sum `s1` and min sum `s2` in i32, `r = fma(-dmin, s2, s1 · d)`, then
//! `acc = fma(r, y.d, acc)`.

use super::kquants::f16_at;
use super::kquants::q4k_scales_mins;
use super::q4k_tiles::{k_header, row_group_tiles};
use super::q8k::{BlockQ8K, QK_K};

/// Bytes of one Q5_K block: `d, dmin: f16, scales: [u8; 12], qh: [u8; 32],
/// qs: [u8; 128]`.
pub const Q5_K_BYTES: usize = 176;

/// Rows per tile.
pub const TILE_ROWS: usize = 16;

/// The 256 five-bit values (0..32) of a Q5_K block.
pub fn q5k_values(wb: &[u8]) -> [u8; QK_K] {
    let (qh, qs) = (&wb[16..48], &wb[48..176]);
    std::array::from_fn(|e| {
        let (chunk, t) = (e / 64, e % 64);
        let byte = qs[32 * chunk + t % 32];
        let nibble = if t < 32 { byte & 0x0F } else { byte >> 4 };
        nibble | (((qh[e % 32] >> (e / 32)) & 1) << 4)
    })
}

/// `Σ_s min[s] · (bsums[2s] + bsums[2s + 1])` (exact).
fn min_sum(mins: &[u8; 8], yb: &BlockQ8K) -> i32 {
    (0..8)
        .map(|s| mins[s] as i32 * (yb.bsums[2 * s] as i32 + yb.bsums[2 * s + 1] as i32))
        .sum()
}

/// The float part of a Q5_K row dot, shared by the portable and NEON paths.
#[derive(Clone, Copy, Default)]
pub(super) struct Q5kAcc {
    acc: [f32; 8],
    summs: f32,
    tacc: f32,
}

impl Q5kAcc {
    /// Adds one block's 8 exact scaled lanes (`tiled`: ggml's tiled order).
    #[inline(always)]
    pub(super) fn add(
        &mut self,
        wb: &[u8],
        yb: &BlockQ8K,
        lanes: &[i32; 8],
        mins: &[u8; 8],
        tiled: bool,
    ) {
        if tiled {
            let s1: i32 = lanes.iter().sum();
            let r = (-f16_at(wb, 2)).mul_add(min_sum(mins, yb) as f32, s1 as f32 * f16_at(wb, 0));
            self.tacc = r.mul_add(yb.d, self.tacc);
            return;
        }
        let d = yb.d * f16_at(wb, 0);
        let dmin = -yb.d * f16_at(wb, 2);
        self.summs = dmin.mul_add(min_sum(mins, yb) as f32, self.summs);
        for (a, &lane) in self.acc.iter_mut().zip(lanes) {
            *a = d.mul_add(lane as f32, *a);
        }
    }

    pub(super) fn result(&self, tiled: bool) -> f32 {
        if tiled {
            return self.tacc;
        }
        let a = &self.acc;
        let r0 = a[4] + a[0];
        let r1 = a[5] + a[1];
        let r2 = a[6] + a[2];
        let r3 = a[7] + a[3];
        ((r0 + r2) + (r1 + r3)) + self.summs
    }
}

/// Portable Q5_K · Q8_K in ggml's x86 order: `tiled` (batches of 8 or more
/// tokens) is its tiled K-quant kernel, else `ggml_vec_dot_q5_K_q8_K`.
pub fn dot_q5_k_scalar(w: &[u8], y: &[BlockQ8K], tiled: bool) -> f32 {
    let mut acc = Q5kAcc::default();
    for (wb, yb) in w.chunks_exact(Q5_K_BYTES).zip(y) {
        let (scales, mins) = q4k_scales_mins(&wb[4..16]);
        let v = q5k_values(wb);
        let lanes: [i32; 8] = std::array::from_fn(|u| {
            let mut lane = 0i32;
            for (s, &sc) in scales.iter().enumerate() {
                let at = 32 * s + 4 * u;
                for (&q, &x) in v[at..at + 4].iter().zip(&yb.qs[at..at + 4]) {
                    lane += sc as i32 * q as i32 * x as i32;
                }
            }
            lane
        });
        acc.add(wb, yb, &lanes, &mins, tiled);
    }
    acc.result(tiled)
}

/// One tile: 16 rows × one 256-element block.
#[derive(Clone)]
#[repr(C, align(64))]
pub struct Tile5 {
    /// `[sub-block s][group g][row c][4 bytes]` at `8s + g`: the values
    /// (0..32) of elements `32s + 4g .. 32s + 4g + 4` of row `c`.
    pub qs: [[u8; TILE_ROWS * 4]; 64],
    /// Six-bit scales and mins per sub-block and row (widened to i32 in the
    /// kernel, high 16 bits clear: `vpdpwssd` operands).
    pub scales: [[u8; TILE_ROWS]; 8],
    pub mins: [[u8; TILE_ROWS]; 8],
    pub d: [f32; TILE_ROWS],
    pub dmin: [f32; TILE_ROWS],
}

/// All tiles of a `[n, k]` Q5_K matrix (`n` a multiple of 16), row group
/// major: tile `(group, block)` at `group * blocks + block`. The values are
/// unpacked to bytes (1 byte per weight against the file's 0.69).
pub struct Q5KTiles {
    pub tiles: Vec<Tile5>,
    pub blocks: usize,
}

impl Q5KTiles {
    pub fn new(w: &[u8], n: usize, k: usize) -> Self {
        let tiles = row_group_tiles(w, n, k, Q5_K_BYTES, |rows| {
            let mut t = Tile5 {
                qs: [[0; TILE_ROWS * 4]; 64],
                scales: [[0; TILE_ROWS]; 8],
                mins: [[0; TILE_ROWS]; 8],
                d: [0.0; TILE_ROWS],
                dmin: [0.0; TILE_ROWS],
            };
            for (c, wb) in rows.iter().enumerate() {
                k_header(c, wb, &mut t.d, &mut t.dmin, &mut t.scales, &mut t.mins);
                let v = q5k_values(wb);
                for sg in 0..64 {
                    t.qs[sg][4 * c..4 * c + 4].copy_from_slice(&v[4 * sg..4 * sg + 4]);
                }
            }
            t
        });
        Self {
            tiles,
            blocks: k / QK_K,
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[allow(clippy::incompatible_msrv)]
pub mod x86 {
    use std::arch::x86_64::*;

    use super::super::q4k_tiles::x86::widen_u8;
    use super::{f16_at, q4k_scales_mins, BlockQ8K, Tile5, Q5_K_BYTES};

    /// One Q5_K weight row against `R` Q8_K rows with AVX2 (the block is
    /// unpacked once): per sub-block `maddubs` (values ≤ 31, no saturation)
    /// then `madd` with its scale gives the 8 exact lanes of
    /// [`super::dot_q5_k_scalar`], whose float operations follow lane-wise.
    ///
    /// # Safety
    /// The CPU must support AVX2, FMA and F16C; `w` holds `ys[r].len()`
    /// blocks and all `ys` have the same length.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn dot_q5_k_rows<const R: usize>(
        w: &[u8],
        ys: [&[BlockQ8K]; R],
        tiled: bool,
    ) -> [f32; R] {
        use super::super::kquants::x86::{hsum8, hsum_i32};
        let mut acc = [_mm256_setzero_ps(); R];
        let mut summs = [0.0f32; R];
        let mut tacc = [0.0f32; R];
        let m4 = _mm256_set1_epi8(0x0F);
        for (b, wb) in w.chunks_exact(Q5_K_BYTES).take(ys[0].len()).enumerate() {
            let (scales, mins) = q4k_scales_mins(&wb[4..16]);
            let (dw, dmin) = (f16_at(wb, 0), f16_at(wb, 2));
            // SAFETY: `wb` is one whole block: qh at 16..48, qs at 48..176.
            let q: [__m256i; 8] = unsafe {
                let qh = _mm256_loadu_si256(wb.as_ptr().add(16) as *const __m256i);
                std::array::from_fn(|s| {
                    let raw =
                        _mm256_loadu_si256(wb.as_ptr().add(48 + 32 * (s / 2)) as *const __m256i);
                    let nibble = if s % 2 == 0 {
                        _mm256_and_si256(raw, m4)
                    } else {
                        _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4)
                    };
                    let bit = _mm256_set1_epi8(1 << s);
                    let set = _mm256_cmpeq_epi8(_mm256_and_si256(qh, bit), bit);
                    _mm256_or_si256(nibble, _mm256_and_si256(set, _mm256_set1_epi8(0x10)))
                })
            };
            let scv: [__m256i; 8] = std::array::from_fn(|s| _mm256_set1_epi16(scales[s] as i16));
            // Each min twice: `madd` with the 16 bsums gives min[s] · (bsums[2s] + bsums[2s+1]).
            let mins2 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(
                _mm_loadl_epi64(mins.as_ptr() as *const __m128i),
                _mm_loadl_epi64(mins.as_ptr() as *const __m128i),
            ));
            for r in 0..R {
                let yb = &ys[r][b];
                let mut lanes = _mm256_setzero_si256();
                for s in 0..8 {
                    // SAFETY: `qs` has 256 bytes.
                    let y =
                        unsafe { _mm256_loadu_si256(yb.qs.as_ptr().add(32 * s) as *const __m256i) };
                    let p = _mm256_maddubs_epi16(q[s], y);
                    lanes = _mm256_add_epi32(lanes, _mm256_madd_epi16(p, scv[s]));
                }
                // SAFETY: 16 bsums.
                let bsums = unsafe { _mm256_loadu_si256(yb.bsums.as_ptr() as *const __m256i) };
                let mins = hsum_i32(_mm256_madd_epi16(bsums, mins2)) as f32;
                if tiled {
                    let r1 = (-dmin).mul_add(mins, hsum_i32(lanes) as f32 * dw);
                    tacc[r] = r1.mul_add(yb.d, tacc[r]);
                } else {
                    summs[r] = (-yb.d * dmin).mul_add(mins, summs[r]);
                    let d = _mm256_set1_ps(yb.d * dw);
                    acc[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lanes), acc[r]);
                }
            }
        }
        std::array::from_fn(|r| {
            if tiled {
                tacc[r]
            } else {
                hsum8(acc[r]) + summs[r]
            }
        })
    }

    /// 16 rows (one row group's `tiles`, one per block) against one Q8_K row,
    /// bit-identical per row to [`super::dot_q5_k_scalar`] with the same `tiled`. Each 4-element
    /// sum fits in i16 (|Σ| ≤ 4·31·127), so `vpdpwssd` against a scale
    /// (high half clear) adds `scale · Σ` exactly.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F/BW/VNNI; `tiles.len() == y.len()`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub unsafe fn gemv_tile(tiles: &[Tile5], y: &[BlockQ8K], tiled: bool) -> [f32; 16] {
        let mut acc = [_mm512_setzero_ps(); 8];
        let mut summs = _mm512_setzero_ps();
        let mut tacc = _mm512_setzero_ps();
        for (t, yb) in tiles.iter().zip(y) {
            let x = yb.qs.as_ptr() as *const i32;
            let mut lanes = [_mm512_setzero_si512(); 8];
            let mut mins = _mm512_setzero_si512();
            for s in 0..8 {
                // SAFETY: 64-byte aligned rows of 16 i32 / 64 bytes; `x`
                // points at 256 activation bytes, read 4 at a time.
                unsafe {
                    let sc = widen_u8(&t.scales[s]);
                    for (g, lane) in lanes.iter_mut().enumerate() {
                        let w = _mm512_load_si512(t.qs[8 * s + g].as_ptr() as *const _);
                        let xs = _mm512_set1_epi32(std::ptr::read_unaligned(x.add(8 * s + g)));
                        let p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, xs);
                        *lane = _mm512_dpwssd_epi32(*lane, p, sc);
                    }
                    let pair = yb.bsums[2 * s] as i32 + yb.bsums[2 * s + 1] as i32;
                    let mn = widen_u8(&t.mins[s]);
                    mins = _mm512_add_epi32(mins, _mm512_mullo_epi32(mn, _mm512_set1_epi32(pair)));
                }
            }
            // SAFETY: 64-byte aligned.
            let (d, dmin) = unsafe {
                (
                    _mm512_load_ps(t.d.as_ptr()),
                    _mm512_load_ps(t.dmin.as_ptr()),
                )
            };
            if tiled {
                let s1 = lanes
                    .iter()
                    .fold(_mm512_setzero_si512(), |a, &l| _mm512_add_epi32(a, l));
                let r = _mm512_fnmadd_ps(
                    dmin,
                    _mm512_cvtepi32_ps(mins),
                    _mm512_mul_ps(_mm512_cvtepi32_ps(s1), d),
                );
                tacc = _mm512_fmadd_ps(r, _mm512_set1_ps(yb.d), tacc);
                continue;
            }
            let dd = _mm512_mul_ps(_mm512_set1_ps(yb.d), d);
            let dm = _mm512_mul_ps(_mm512_set1_ps(-yb.d), dmin);
            summs = _mm512_fmadd_ps(dm, _mm512_cvtepi32_ps(mins), summs);
            for (a, lane) in acc.iter_mut().zip(lanes) {
                *a = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(lane), *a);
            }
        }
        let r0 = _mm512_add_ps(acc[4], acc[0]);
        let r1 = _mm512_add_ps(acc[5], acc[1]);
        let r2 = _mm512_add_ps(acc[6], acc[2]);
        let r3 = _mm512_add_ps(acc[7], acc[3]);
        let v = _mm512_add_ps(
            _mm512_add_ps(_mm512_add_ps(r0, r2), _mm512_add_ps(r1, r3)),
            summs,
        );
        let mut out = [0.0f32; 16];
        // SAFETY: 64 writable bytes.
        unsafe { _mm512_storeu_ps(out.as_mut_ptr(), if tiled { tacc } else { v }) };
        out
    }
}
