//! Q4_K weights regrouped for AVX-512 VNNI: 16 weight rows side by side, so
//! one `vpdpbusd` computes 4-element dot products for 16 rows at once (Q6_K's
//! tiles are in `q6k_tiles.rs`, Q5_K's in `q5k_tiles.rs`).
//!
//! Only the integer partial sums are computed differently; per row (one
//! vector lane each) the float operations are exactly those of
//! [`super::kquants::dot_q4_k_scalar`] (ggml's repacked gemv/gemm order).
//!
//! Without AVX-512 the same tiles are read by the AVX2 kernels of
//! `kquant_tiles_avx2.rs`.

use super::kquants::{f16_at, q4k_scales_mins, Q4_K_BYTES};

/// Rows per tile.
pub const TILE_ROWS: usize = 16;

/// One tile: 16 rows × one 256-element block.
#[derive(Clone)]
#[repr(C, align(64))]
pub struct Tile {
    /// `[pair p][group g][row c][4 bytes]`: bytes `32p + 4g .. 32p + 4g + 4`
    /// of row `c`'s packed nibbles (low nibble: sub-block `2p`, high: `2p + 1`).
    pub qs: [[u8; TILE_ROWS * 4]; 32],
    /// Six-bit scales and mins per sub-block and row (widened in the kernel).
    pub scales: [[u8; TILE_ROWS]; 8],
    pub mins: [[u8; TILE_ROWS]; 8],
    pub d: [f32; TILE_ROWS],
    pub dmin: [f32; TILE_ROWS],
}

/// All tiles of a `[n, k]` Q4_K matrix (`n` a multiple of 16), row group
/// major: tile `(group, block)` at `group * blocks + block`.
pub struct Q4KTiles {
    pub tiles: Vec<Tile>,
    pub blocks: usize,
}

/// Whether this CPU runs [`x86::gemv_tile`].
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        super::isa::allows(super::isa::Isa::Avx512)
            && is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Row `c`'s share of a Q4_K or Q5_K block `wb`'s header (d, dmin and the
/// 6-bit scales and mins) in a tile's columns.
pub(super) fn k_header(
    c: usize,
    wb: &[u8],
    d: &mut [f32; TILE_ROWS],
    dmin: &mut [f32; TILE_ROWS],
    scales: &mut [[u8; TILE_ROWS]; 8],
    mins: &mut [[u8; TILE_ROWS]; 8],
) {
    d[c] = f16_at(wb, 0);
    dmin[c] = f16_at(wb, 2);
    let (sc, mn) = q4k_scales_mins(&wb[4..16]);
    for s in 0..8 {
        scales[s][c] = sc[s];
        mins[s][c] = mn[s];
    }
}

impl Q4KTiles {
    pub fn new(w: &[u8], n: usize, k: usize) -> Self {
        let tiles = row_group_tiles(w, n, k, Q4_K_BYTES, |rows| {
            let mut t = Tile {
                qs: [[0; TILE_ROWS * 4]; 32],
                scales: [[0; TILE_ROWS]; 8],
                mins: [[0; TILE_ROWS]; 8],
                d: [0.0; TILE_ROWS],
                dmin: [0.0; TILE_ROWS],
            };
            for (c, wb) in rows.iter().enumerate() {
                k_header(c, wb, &mut t.d, &mut t.dmin, &mut t.scales, &mut t.mins);
                for pg in 0..32 {
                    t.qs[pg][4 * c..4 * c + 4].copy_from_slice(&wb[16 + 4 * pg..20 + 4 * pg]);
                }
            }
            t
        });
        Self {
            tiles,
            blocks: k / 256,
        }
    }
}

/// Every tile of a `[n, k]` matrix of 256-element blocks of `block_bytes`
/// bytes (`n` a multiple of 16), row group major: tile `(group, block)` at
/// `group * blocks + block`, made by `tile` from its 16 rows' blocks.
pub(super) fn row_group_tiles<U>(
    w: &[u8],
    n: usize,
    k: usize,
    block_bytes: usize,
    tile: impl Fn([&[u8]; TILE_ROWS]) -> U,
) -> Vec<U> {
    assert_eq!(n % TILE_ROWS, 0);
    let blocks = k / 256;
    let row_bytes = blocks * block_bytes;
    let mut tiles = Vec::with_capacity(n / TILE_ROWS * blocks);
    for g in 0..n / TILE_ROWS {
        for b in 0..blocks {
            tiles.push(tile(std::array::from_fn(|c| {
                let at = (g * TILE_ROWS + c) * row_bytes + b * block_bytes;
                &w[at..at + block_bytes]
            })));
        }
    }
    tiles
}

#[cfg(target_arch = "x86_64")]
// The AVX-512 intrinsics are stable since Rust 1.89; candle-core 0.11.1 (its
// own x86 repack kernels) already needs them, so no supported build is older.
#[allow(clippy::incompatible_msrv)]
pub mod x86 {
    use std::arch::x86_64::*;

    use super::super::prefetch;
    use super::super::q8k::BlockQ8K;
    use super::Tile;

    /// Bytes `at..at + 4` of an activation block in every i32 lane.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(in super::super) fn bcast4(qs: &[i8; 256], at: usize) -> __m512i {
        // SAFETY: `at + 4 <= 256` for every caller.
        let v = unsafe { std::ptr::read_unaligned(qs.as_ptr().add(at) as *const i32) };
        _mm512_set1_epi32(v)
    }

    /// 16 unsigned bytes as 16 i32.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(in super::super) fn widen_u8(v: &[u8; 16]) -> __m512i {
        // SAFETY: 16 readable bytes.
        _mm512_cvtepu8_epi32(unsafe { _mm_loadu_si128(v.as_ptr() as *const __m128i) })
    }

    /// 16 rows (one row group's `tiles`, one per block) against one Q8_K
    /// row; `pairs`: ggml's gemm order (an FMA per pair of sub-blocks),
    /// else its gemv order (an FMA per block).
    ///
    /// # Safety
    /// The CPU must support AVX-512 F/BW/VNNI; `tiles.len() == y.len()`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub unsafe fn gemv_tile(tiles: &[Tile], y: &[BlockQ8K], pairs: bool) -> [f32; 16] {
        // SAFETY: forwarded.
        unsafe { gemv_tiles::<1>(tiles, [y], [pairs], true)[0] }
    }

    /// [`gemv_tile`] for `T` activation rows at once: each weight group is
    /// loaded and unpacked once for all of them; every row's float
    /// operations are those of [`gemv_tile`] alone. `prefetch`: ask for
    /// the tiles ahead (`matmul::first_pass` decides). The mins' products,
    /// which need no weight values, come in a pass of their own ([`mins`]):
    /// in this loop their sums spilled.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F/BW/VNNI; `tiles.len() == ys[t].len()`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub unsafe fn gemv_tiles<const T: usize>(
        tiles: &[Tile],
        ys: [&[BlockQ8K]; T],
        pairs: [bool; T],
        prefetch: bool,
    ) -> [[f32; 16]; T] {
        let mask = _mm512_set1_epi8(0x0F);
        let mut acc = [_mm512_setzero_ps(); T];
        for (b, t) in tiles.iter().enumerate() {
            // SAFETY: 64-byte aligned tile fields.
            let d = unsafe { _mm512_load_ps(t.d.as_ptr()) };
            // SAFETY: every row has one block per tile.
            let yd = |r: usize| _mm512_set1_ps(unsafe { ys[r].get_unchecked(b) }.d);
            // Per token the block's integer sum (ggml's gemv order), or an
            // FMA per pair of sub-blocks (its gemm order).
            let mut isum = [_mm512_setzero_si512(); T];
            for p in 0..4 {
                let mut ia = [_mm512_setzero_si512(); T];
                let mut ib = [_mm512_setzero_si512(); T];
                for g in 0..8 {
                    // The tile AHEAD on: its 32 value lines, then its 6
                    // lines of scales, mins, d and dmin; with `prefetch`,
                    // which the callers give passes that read a row group
                    // first (the later passes over it for more tokens find
                    // it in cache: prefetching in every pass cost
                    // Qwen2.5-Coder-1.5B pp512 17%).
                    if prefetch {
                        prefetch::tile_line(t, 8 * p + g);
                        if 8 * p + g < 6 {
                            prefetch::tile_line(t, 32 + 8 * p + g);
                        }
                    }
                    // SAFETY: `qs[8p + g]` is 64 readable bytes.
                    let w = unsafe { _mm512_loadu_si512(t.qs[8 * p + g].as_ptr() as *const _) };
                    let lo = _mm512_and_si512(w, mask);
                    let hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), mask);
                    for r in 0..T {
                        // SAFETY: every row has one block per tile.
                        let yb = unsafe { ys[r].get_unchecked(b) };
                        ia[r] = _mm512_dpbusd_epi32(ia[r], lo, bcast4(&yb.qs, 64 * p + 4 * g));
                        ib[r] = _mm512_dpbusd_epi32(ib[r], hi, bcast4(&yb.qs, 64 * p + 32 + 4 * g));
                    }
                }
                let (a, bb) = (2 * p, 2 * p + 1);
                let (sa, sb) = (widen_u8(&t.scales[a]), widen_u8(&t.scales[bb]));
                for r in 0..T {
                    let pair = _mm512_add_epi32(
                        _mm512_mullo_epi32(sa, ia[r]),
                        _mm512_mullo_epi32(sb, ib[r]),
                    );
                    if pairs[r] {
                        let dd = _mm512_mul_ps(d, yd(r));
                        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(pair), dd, acc[r]);
                    } else {
                        isum[r] = _mm512_add_epi32(isum[r], pair);
                    }
                }
            }
            for r in 0..T {
                if !pairs[r] {
                    let dd = _mm512_mul_ps(d, yd(r));
                    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r]), dd, acc[r]);
                }
            }
        }
        let accm = mins(tiles, ys, pairs);
        let mut out = [[0.0f32; 16]; T];
        for r in 0..T {
            // SAFETY: 64 writable bytes.
            unsafe { _mm512_storeu_ps(out[r].as_mut_ptr(), _mm512_sub_ps(acc[r], accm[r])) };
        }
        out
    }

    /// The mins' side of [`gemv_tiles`] per token: `Σ dmin·d_x·(Σ_s
    /// min_s·bsum_s)`, with its FMAs in the same order (per pair of
    /// sub-blocks where `pairs`, else per block). Each pair's integer sum
    /// is one `vpdpwssd`: the two mins as i16 against the two bsums.
    ///
    /// # Safety
    /// As [`gemv_tiles`].
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn mins<const T: usize>(
        tiles: &[Tile],
        ys: [&[BlockQ8K]; T],
        pairs: [bool; T],
    ) -> [__m512; T] {
        let mut accm = [_mm512_setzero_ps(); T];
        for (b, t) in tiles.iter().enumerate() {
            // SAFETY: 64-byte aligned tile field.
            let dmin = unsafe { _mm512_load_ps(t.dmin.as_ptr()) };
            // SAFETY: every row has one block per tile.
            let yb = |r: usize| unsafe { ys[r].get_unchecked(b) };
            let mut iblk = [_mm512_setzero_si512(); T];
            for p in 0..4 {
                // Row c's i32 lane: (min of sub-block 2p, of 2p + 1) as i16.
                // SAFETY: 16 readable bytes each.
                let (lo, hi) = unsafe {
                    (
                        _mm_loadu_si128(t.mins[2 * p].as_ptr() as *const __m128i),
                        _mm_loadu_si128(t.mins[2 * p + 1].as_ptr() as *const __m128i),
                    )
                };
                let m = _mm512_cvtepu8_epi16(_mm256_set_m128i(
                    _mm_unpackhi_epi8(lo, hi),
                    _mm_unpacklo_epi8(lo, hi),
                ));
                for r in 0..T {
                    let bs = &yb(r).bsums;
                    let b32 = |j: usize| (bs[2 * j] as i32 + bs[2 * j + 1] as i32) as u16 as u32;
                    let x = _mm512_set1_epi32((b32(2 * p) | (b32(2 * p + 1) << 16)) as i32);
                    if pairs[r] {
                        let dm = _mm512_mul_ps(dmin, _mm512_set1_ps(yb(r).d));
                        let im = _mm512_dpwssd_epi32(_mm512_setzero_si512(), m, x);
                        accm[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(im), dm, accm[r]);
                    } else {
                        iblk[r] = _mm512_dpwssd_epi32(iblk[r], m, x);
                    }
                }
            }
            for r in 0..T {
                if !pairs[r] {
                    let dm = _mm512_mul_ps(dmin, _mm512_set1_ps(yb(r).d));
                    accm[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(iblk[r]), dm, accm[r]);
                }
            }
        }
        accm
    }
}
