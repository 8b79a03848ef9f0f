//! Q6_K weights regrouped for the tile kernels: 16 rows side by side (one
//! vector lane per row), the six-bit values packed 4 + 2 bits as GGUF keeps
//! them, and the lines stored in the order the kernels read them.
//!
//! Decode streams every weight from memory once per token and waits on it:
//! on a Zen 4 EPYC (AVX-512) the earlier unpacked tiles (a byte per value,
//! 4,416 bytes a tile against these 3,392) and their strided reads made
//! Qwen2.5-1.5B's Q6_K matrices run at half the Q4_K kernels' bytes per
//! second. Per row the float operations are exactly those of
//! [`super::kquants::dot_q6_k_scalar`]: ggml's `vec_dot` order (8 lane sums
//! per block, each FMA'd on its own, then `hsum_float_8`) or, with `tiled`,
//! its tiled kernel's (`acc = fma(f32(Σ) · d_w, d_x, acc)` per block).
//! AVX-512 VNNI kernels here; the AVX2 ones in `kquant_tiles_avx2.rs`.

use super::kquants::{f16_at, q6k_values, Q6_K_BYTES};
use super::q4k_tiles::{row_group_tiles, TILE_ROWS};

/// 16 rows' Q6_K blocks with one byte per value: how the tiles are built
/// (and checked), not what the kernels read.
pub struct Values6 {
    /// `[line i][row c][4 bytes]`: the six-bit values (0..64, 32 the zero)
    /// of elements `4i .. 4i + 4` of row `c` (sub-block `i / 4`).
    pub qs: [[u8; TILE_ROWS * 4]; 64],
    /// Signed 8-bit scales per sub-block and row.
    pub scales: [[i8; TILE_ROWS]; 16],
    pub d: [f32; TILE_ROWS],
}

impl Values6 {
    pub fn new(rows: [&[u8]; TILE_ROWS]) -> Self {
        let mut t = Values6 {
            qs: [[0; TILE_ROWS * 4]; 64],
            scales: [[0; TILE_ROWS]; 16],
            d: [0.0; TILE_ROWS],
        };
        for (c, wb) in rows.iter().enumerate() {
            t.d[c] = f16_at(wb, 208);
            for s in 0..16 {
                t.scales[s][c] = wb[192 + s] as i8;
            }
            let v = q6k_values(wb);
            for i in 0..64 {
                t.qs[i][4 * c..4 * c + 4].copy_from_slice(&v[4 * i..4 * i + 4]);
            }
        }
        t
    }
}

/// Where value line `i` (`Values6::qs[i]`) lives in a [`Tile6`]: its lane
/// group, the group line holding its low 4 bits and their shift, the shift
/// of its high 2 bits in the group's last line.
///
/// ggml's `vec_dot` lane `l` gathers lines `i` with `i % 16 = m` for
/// `m ∈ {l, l + 8}`: group `2l + k` holds the four lines `m + 16q` of
/// `m = l + 8k`, so a lane's lines lie side by side in memory.
#[inline(always)]
pub fn line_place(i: usize) -> (usize, usize, u32, u32) {
    let (m, q) = (i % 16, i / 16);
    (2 * (m % 8) + m / 8, q % 2, 4 * (q / 2) as u32, 2 * q as u32)
}

/// One Q6_K tile: 16 rows × one 256-element block, 3,392 bytes.
#[derive(Clone)]
#[repr(C, align(64))]
pub struct Tile6 {
    /// Lane group `g = 2l + k` (`m = l + 8k`): `[0]` the low 4 bits of
    /// value lines `m` (low nibbles) and `m + 32` (high), `[1]` those of
    /// lines `m + 16` and `m + 48`, `[2]` the high 2 bits of lines `m`,
    /// `m + 16`, `m + 32`, `m + 48` (bits 0–1, 2–3, 4–5, 6–7).
    pub groups: [[[u8; TILE_ROWS * 4]; 3]; 16],
    /// Signed 8-bit scales per sub-block and row (widened in the kernels).
    pub scales: [[i8; TILE_ROWS]; 16],
    pub d: [f32; TILE_ROWS],
}

impl Tile6 {
    pub fn pack(v: &Values6) -> Self {
        let mut t = Tile6 {
            groups: [[[0; TILE_ROWS * 4]; 3]; 16],
            scales: v.scales,
            d: v.d,
        };
        for (i, line) in v.qs.iter().enumerate() {
            let (g, low, low_shift, high_shift) = line_place(i);
            for (b, &q) in line.iter().enumerate() {
                t.groups[g][low][b] |= (q & 15) << low_shift;
                t.groups[g][2][b] |= (q >> 4) << high_shift;
            }
        }
        t
    }

    /// The six-bit value (32 the zero) of element `e` of row `c`.
    pub fn value(&self, c: usize, e: usize) -> u8 {
        let (g, low, low_shift, high_shift) = line_place(e / 4);
        let b = 4 * c + e % 4;
        (self.groups[g][low][b] >> low_shift) & 15 | ((self.groups[g][2][b] >> high_shift) & 3) << 4
    }
}

/// All tiles of a `[n, k]` Q6_K matrix (`n` a multiple of 16), row group
/// major: tile `(group, block)` at `group * blocks + block`.
pub struct Q6KTiles {
    pub tiles: Vec<Tile6>,
    pub blocks: usize,
}

impl Q6KTiles {
    pub fn new(w: &[u8], n: usize, k: usize) -> Self {
        Self {
            tiles: row_group_tiles(w, n, k, Q6_K_BYTES, |rows| Tile6::pack(&Values6::new(rows))),
            blocks: k / 256,
        }
    }

    /// Row `r < n` (`out.len() == k` values), as candle dequantizes it:
    /// `(d · scale) · (q − 32)` per element. Lets a tied embedding read its
    /// rows from the output projection's tiles.
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let (g, c) = (r / TILE_ROWS, r % TILE_ROWS);
        let tiles = &self.tiles[g * self.blocks..(g + 1) * self.blocks];
        for (tile, out) in tiles.iter().zip(out.chunks_exact_mut(256)) {
            for (e, y) in out.iter_mut().enumerate() {
                let q = tile.value(c, e) as i8 - 32;
                *y = tile.d[c] * tile.scales[e / 16][c] as f32 * q as f32;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
// The AVX-512 intrinsics are stable since Rust 1.89 (see q4k_tiles.rs).
#[allow(clippy::incompatible_msrv)]
pub mod x86 {
    use std::arch::x86_64::*;

    use super::super::kquant_tiles_avx2::x86::q6k_tiles as avx2;
    use super::super::prefetch;
    use super::super::q4k_tiles::x86::bcast4;
    use super::super::q8k::{blocks_at, BlockQ8K};
    use super::{line_place, Tile6};

    /// 16 signed bytes as 16 i32.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    fn widen_i8(v: &[i8; 16]) -> __m512i {
        // SAFETY: 16 readable bytes.
        _mm512_cvtepi8_epi32(unsafe { _mm_loadu_si128(v.as_ptr() as *const __m128i) })
    }

    /// The four value lines `m + 16q` (`q` 0..4) of lane group `g`.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    fn unpack(g: &[[u8; 64]; 3]) -> [__m512i; 4] {
        // SAFETY: 64-byte aligned lines of a 64-byte aligned tile.
        let [a, b, h] = unsafe {
            [
                _mm512_load_si512(g[0].as_ptr() as *const _),
                _mm512_load_si512(g[1].as_ptr() as *const _),
                _mm512_load_si512(g[2].as_ptr() as *const _),
            ]
        };
        let (nib, top) = (_mm512_set1_epi8(0x0F), _mm512_set1_epi8(0x30));
        // 16-bit shifts: what they bring in from the next byte falls outside
        // each byte's mask.
        let value = |low: __m512i, high: __m512i| {
            _mm512_or_si512(_mm512_and_si512(low, nib), _mm512_and_si512(high, top))
        };
        [
            value(a, _mm512_slli_epi16::<4>(h)),
            value(b, _mm512_slli_epi16::<2>(h)),
            value(_mm512_srli_epi16::<4>(a), h),
            value(_mm512_srli_epi16::<4>(b), _mm512_srli_epi16::<2>(h)),
        ]
    }

    /// [`q6k_tiles`] (`avx512`) or its AVX2 twin, in the tiled order
    /// (`tiled`) or the vec_dot one; `prefetch` as in
    /// [`super::super::q4k_tiles::x86::gemv_tiles`].
    ///
    /// # Safety
    /// This CPU has the kernel's features; `tiles.len() == ys[t].len()`.
    #[inline(always)]
    pub unsafe fn pass<const T: usize>(
        (tiled, avx512): (bool, bool),
        tiles: &[Tile6],
        ys: [&[BlockQ8K]; T],
        prefetch: bool,
    ) -> [[f32; 16]; T] {
        // SAFETY: forwarded.
        unsafe {
            match (avx512, tiled) {
                (true, true) => q6k_tiles::<T, true>(tiles, ys, prefetch),
                (true, false) => q6k_tiles::<T, false>(tiles, ys, prefetch),
                (false, true) => avx2::<T, true>(tiles, ys, prefetch),
                (false, false) => avx2::<T, false>(tiles, ys, prefetch),
            }
        }
    }

    /// 16 Q6_K rows (one row group's `tiles`, one per block) against `T`
    /// Q8_K rows: with `TILED` the order of ggml's tiled kernel, else
    /// `ggml_vec_dot_q6_K_q8_K`'s (lane `l` of a block: group `l % 4` of the
    /// sub-blocks `s` with `s % 2 == l / 4`, less `32·(bsums·scales)` of
    /// sub-blocks `2l` and `2l + 1`). Each line is unpacked once for all
    /// `T` rows and every row's arithmetic is that of the kernel alone.
    /// `prefetch`: ask for the tiles ahead. Returns `[token][row]`.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F/BW/VNNI; `tiles.len() == ys[t].len()`.
    // `l` also picks the lane's groups and offsets, not only its accumulator.
    #[allow(clippy::needless_range_loop)]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub unsafe fn q6k_tiles<const T: usize, const TILED: bool>(
        tiles: &[Tile6],
        ys: [&[BlockQ8K]; T],
        prefetch: bool,
    ) -> [[f32; 16]; T] {
        let low16 = _mm512_set1_epi32(0xFFFF);
        let mut acc = [[_mm512_setzero_ps(); 8]; T];
        let mut tacc = [_mm512_setzero_ps(); T];
        for (b, t) in tiles.iter().enumerate() {
            // SAFETY: every row has one block per tile.
            let yb: [&BlockQ8K; T] = unsafe { blocks_at(ys, b) };
            // Each 4-element sum fits in i16 (|Σ| ≤ 4·63·127), so `vpdpwssd`
            // against the scale's low 16 bits (high half cleared) adds
            // `scale · Σ` exactly in one instruction.
            // (A loop, not `array::from_fn`: see `blocks_at`.)
            let mut sc = [low16; 16];
            for (sc, scales) in sc.iter_mut().zip(&t.scales) {
                *sc = _mm512_and_si512(widen_i8(scales), low16);
            }
            // SAFETY: 64-byte aligned.
            let d = unsafe { _mm512_load_ps(t.d.as_ptr()) };
            let mut total = [_mm512_setzero_si512(); T];
            // One lane at a time (an exact integer sum in any order): only
            // `T` sums stay live, and the lane's groups are read in order.
            for l in 0..8 {
                let mut lane = [_mm512_setzero_si512(); T];
                for m in [l, l + 8] {
                    let (g, ..) = line_place(m);
                    // As in the Q4_K tiles: passes that read a row group first.
                    if prefetch {
                        for j in 0..3 {
                            prefetch::tile_line(t, 3 * g + j);
                        }
                    }
                    for (q, w) in unpack(&t.groups[g]).into_iter().enumerate() {
                        let i = m + 16 * q;
                        for r in 0..T {
                            let zero = _mm512_setzero_si512();
                            let p = _mm512_dpbusd_epi32(zero, w, bcast4(&yb[r].qs, 4 * i));
                            lane[r] = _mm512_dpwssd_epi32(lane[r], p, sc[i / 4]);
                        }
                    }
                }
                for r in 0..T {
                    let off = |s: usize| {
                        let bsum = _mm512_set1_epi32(32 * yb[r].bsums[s] as i32);
                        _mm512_mullo_epi32(widen_i8(&t.scales[s]), bsum)
                    };
                    let v = _mm512_sub_epi32(lane[r], _mm512_add_epi32(off(2 * l), off(2 * l + 1)));
                    if TILED {
                        total[r] = _mm512_add_epi32(total[r], v);
                    } else {
                        let dd = _mm512_mul_ps(d, _mm512_set1_ps(yb[r].d));
                        acc[r][l] = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(v), acc[r][l]);
                    }
                }
            }
            if TILED {
                for r in 0..T {
                    let f = _mm512_mul_ps(_mm512_cvtepi32_ps(total[r]), d);
                    tacc[r] = _mm512_fmadd_ps(f, _mm512_set1_ps(yb[r].d), tacc[r]);
                }
            }
        }
        let mut out = [[0.0f32; 16]; T];
        for r in 0..T {
            let v = if TILED {
                tacc[r]
            } else {
                // ggml's `hsum_float_8` before its horizontal step.
                let a = &acc[r];
                let (r0, r1) = (_mm512_add_ps(a[4], a[0]), _mm512_add_ps(a[5], a[1]));
                let (r2, r3) = (_mm512_add_ps(a[6], a[2]), _mm512_add_ps(a[7], a[3]));
                _mm512_add_ps(_mm512_add_ps(r0, r2), _mm512_add_ps(r1, r3))
            };
            // SAFETY: 64 writable bytes.
            unsafe { _mm512_storeu_ps(out[r].as_mut_ptr(), v) };
        }
        out
    }
}
