//! Q4_K and Q6_K weights regrouped for AVX-512 VNNI: 16 weight rows side by
//! side, so one `vpdpbusd` computes 4-element dot products for 16 rows at once.
//!
//! Only the integer partial sums are computed differently; per row (one
//! vector lane each) the float operations are exactly those of
//! [`super::kquants::dot_q4_k_scalar`] (ggml's repacked gemv/gemm order) and
//! of [`super::kquants::dot_q6_k_scalar`] with `tiled` (ggml's tiled kernel;
//! the vec_dot order of short batches has per-row lanes and stays in AVX2).
//!
//! Without AVX-512 the same tiles are read by the AVX2 kernels of
//! `kquant_tiles_avx2.rs`.

use super::kquants::{f16_at, q4k_scales_mins, q6k_values, Q4_K_BYTES, Q6_K_BYTES};

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

/// One Q6_K tile: 16 rows × one 256-element block.
#[derive(Clone)]
#[repr(C, align(64))]
pub struct Tile6 {
    /// `[sub-block s][group g][row c][4 bytes]`: the six-bit values (0..64) of
    /// elements `16s + 4g .. 16s + 4g + 4` of row `c`.
    pub qs: [[u8; TILE_ROWS * 4]; 64],
    /// Signed 8-bit scales per sub-block and row (widened in the kernel).
    pub scales: [[i8; TILE_ROWS]; 16],
    pub d: [f32; TILE_ROWS],
}

/// All tiles of a `[n, k]` Q6_K matrix, laid out like [`Q4KTiles`].
pub struct Q6KTiles {
    pub tiles: Vec<Tile6>,
    pub blocks: usize,
}

impl Q6KTiles {
    pub fn new(w: &[u8], n: usize, k: usize) -> Self {
        Self {
            tiles: row_group_tiles(w, n, k, Q6_K_BYTES, q6k_tile),
            blocks: k / 256,
        }
    }
}

/// The unpacked Q6_K tile of 16 rows' blocks.
fn q6k_tile(rows: [&[u8]; TILE_ROWS]) -> Tile6 {
    let mut t = Tile6 {
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
        for sg in 0..64 {
            t.qs[sg][4 * c..4 * c + 4].copy_from_slice(&v[4 * sg..4 * sg + 4]);
        }
    }
    t
}

/// The parts of a Q6_K tile a row's values are read from, whichever way the
/// tile keeps them.
pub trait Q6Values {
    /// The six-bit value (32 the zero) of element `e` of row `c`.
    fn value(&self, c: usize, e: usize) -> u8;
    fn scale(&self, c: usize, sub_block: usize) -> i8;
    fn d(&self, c: usize) -> f32;
}

impl Q6Values for Tile6 {
    fn value(&self, c: usize, e: usize) -> u8 {
        self.qs[e / 4][4 * c + e % 4]
    }
    fn scale(&self, c: usize, sub_block: usize) -> i8 {
        self.scales[sub_block][c]
    }
    fn d(&self, c: usize) -> f32 {
        self.d[c]
    }
}

/// Row `r` (`out.len()` values) of a Q6_K matrix from its row-group-major
/// tiles, as candle dequantizes it: `(d · scale) · (q − 32)` per element.
/// Lets a tied embedding read its rows from the output projection's tiles.
fn q6k_row<U: Q6Values>(tiles: &[U], blocks: usize, r: usize, out: &mut [f32]) {
    let (g, c) = (r / TILE_ROWS, r % TILE_ROWS);
    for (tile, out) in tiles[g * blocks..(g + 1) * blocks]
        .iter()
        .zip(out.chunks_exact_mut(256))
    {
        let d = tile.d(c);
        for (e, y) in out.iter_mut().enumerate() {
            let q = tile.value(c, e) as i8 - 32;
            *y = d * tile.scale(c, e / 16) as f32 * q as f32;
        }
    }
}

impl Q6KTiles {
    /// See [`q6k_row`]; `out` holds the `k` values of row `r < n`.
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        q6k_row(&self.tiles, self.blocks, r, out)
    }
}

/// A Q6_K tile with its six-bit values packed 4 + 2 bits as GGUF keeps
/// them: 3,392 bytes against [`Tile6`]'s 4,416. The AVX2 kernels unpack a
/// line as they read it; decode streams every weight from memory each
/// token, and on AVX2-only CPUs it waits on memory (Qwen2.5-1.5B's output
/// matrix, 151,936 × 1,536, is Q6_K).
#[derive(Clone)]
#[repr(C, align(64))]
pub struct Tile6p {
    /// Line `j`: the low 4 bits of [`Tile6::qs`] line `j` (low nibbles)
    /// and of line `j + 32` (high nibbles).
    pub ql: [[u8; TILE_ROWS * 4]; 32],
    /// Line `m`: the high 2 bits of lines `m`, `m + 16`, `m + 32` and
    /// `m + 48` (bits 0–1, 2–3, 4–5, 6–7).
    pub qh: [[u8; TILE_ROWS * 4]; 16],
    pub scales: [[i8; TILE_ROWS]; 16],
    pub d: [f32; TILE_ROWS],
}

impl Tile6p {
    pub fn pack(t: &Tile6) -> Self {
        let mut p = Tile6p {
            ql: [[0; TILE_ROWS * 4]; 32],
            qh: [[0; TILE_ROWS * 4]; 16],
            scales: t.scales,
            d: t.d,
        };
        for (j, line) in p.ql.iter_mut().enumerate() {
            for (i, b) in line.iter_mut().enumerate() {
                *b = (t.qs[j][i] & 15) | (t.qs[j + 32][i] & 15) << 4;
            }
        }
        for (m, line) in p.qh.iter_mut().enumerate() {
            for (i, b) in line.iter_mut().enumerate() {
                *b = (0..4).fold(0, |acc, q| acc | (t.qs[m + 16 * q][i] >> 4) << (2 * q));
            }
        }
        p
    }
}

impl Q6Values for Tile6p {
    fn value(&self, c: usize, e: usize) -> u8 {
        let (line, i) = (e / 4, 4 * c + e % 4);
        let low = if line < 32 {
            self.ql[line][i] & 15
        } else {
            self.ql[line - 32][i] >> 4
        };
        low | ((self.qh[line % 16][i] >> (2 * (line / 16))) & 3) << 4
    }
    fn scale(&self, c: usize, sub_block: usize) -> i8 {
        self.scales[sub_block][c]
    }
    fn d(&self, c: usize) -> f32 {
        self.d[c]
    }
}

/// All packed tiles of a `[n, k]` Q6_K matrix (the AVX2 kernels' layout),
/// row group major like [`Q6KTiles`].
pub struct Q6KPackedTiles {
    pub tiles: Vec<Tile6p>,
    pub blocks: usize,
}

impl Q6KPackedTiles {
    pub fn new(w: &[u8], n: usize, k: usize) -> Self {
        Self {
            tiles: row_group_tiles(w, n, k, Q6_K_BYTES, |rows| Tile6p::pack(&q6k_tile(rows))),
            blocks: k / 256,
        }
    }

    /// See [`q6k_row`]; `out` holds the `k` values of row `r < n`.
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        q6k_row(&self.tiles, self.blocks, r, out)
    }
}

#[cfg(target_arch = "x86_64")]
// The AVX-512 intrinsics are stable since Rust 1.89; candle-core 0.11.1 (its
// own x86 repack kernels) already needs them, so no supported build is older.
#[allow(clippy::incompatible_msrv)]
pub mod x86 {
    use std::arch::x86_64::*;

    use super::super::prefetch;
    use super::super::q8k::BlockQ8K;
    use super::{Tile, Tile6};

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    fn bcast4(qs: &[i8; 256], at: usize) -> __m512i {
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

    /// 16 signed bytes as 16 i32.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    fn widen_i8(v: &[i8; 16]) -> __m512i {
        // SAFETY: 16 readable bytes.
        _mm512_cvtepi8_epi32(unsafe { _mm_loadu_si128(v.as_ptr() as *const __m128i) })
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
        unsafe { gemv_tiles::<1>(tiles, [y], [pairs])[0] }
    }

    /// [`gemv_tile`] for `T` activation rows at once: each weight group is
    /// loaded and unpacked once for all of them; every row's float
    /// operations are those of [`gemv_tile`] alone.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F/BW/VNNI; `tiles.len() == ys[t].len()`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub unsafe fn gemv_tiles<const T: usize>(
        tiles: &[Tile],
        ys: [&[BlockQ8K]; T],
        pairs: [bool; T],
    ) -> [[f32; 16]; T] {
        let mask = _mm512_set1_epi8(0x0F);
        let mut acc = [_mm512_setzero_ps(); T];
        let mut accm = [_mm512_setzero_ps(); T];
        for (b, t) in tiles.iter().enumerate() {
            // SAFETY: 64-byte aligned tile fields.
            let (d, dmin) = unsafe {
                (
                    _mm512_load_ps(t.d.as_ptr()),
                    _mm512_load_ps(t.dmin.as_ptr()),
                )
            };
            let mut isum_blk = [_mm512_setzero_si512(); T];
            let mut imin_blk = [_mm512_setzero_si512(); T];
            let mut isums = [[_mm512_setzero_si512(); T]; 4];
            let mut imins = [[_mm512_setzero_si512(); T]; 4];
            for p in 0..4 {
                let mut ia = [_mm512_setzero_si512(); T];
                let mut ib = [_mm512_setzero_si512(); T];
                for g in 0..8 {
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
                let (sa, sb, ma, mb) = {
                    (
                        widen_u8(&t.scales[a]),
                        widen_u8(&t.scales[bb]),
                        widen_u8(&t.mins[a]),
                        widen_u8(&t.mins[bb]),
                    )
                };
                for r in 0..T {
                    // SAFETY: as above.
                    let yb = unsafe { ys[r].get_unchecked(b) };
                    let b32 = |j: usize| yb.bsums[2 * j] as i32 + yb.bsums[2 * j + 1] as i32;
                    isums[p][r] = _mm512_add_epi32(
                        _mm512_mullo_epi32(sa, ia[r]),
                        _mm512_mullo_epi32(sb, ib[r]),
                    );
                    imins[p][r] = _mm512_add_epi32(
                        _mm512_mullo_epi32(ma, _mm512_set1_epi32(b32(a))),
                        _mm512_mullo_epi32(mb, _mm512_set1_epi32(b32(bb))),
                    );
                }
            }
            for r in 0..T {
                // SAFETY: as above.
                let yd = _mm512_set1_ps(unsafe { ys[r].get_unchecked(b) }.d);
                let (dd, dm) = (_mm512_mul_ps(d, yd), _mm512_mul_ps(dmin, yd));
                if pairs[r] {
                    for p in 0..4 {
                        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isums[p][r]), dd, acc[r]);
                        accm[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(imins[p][r]), dm, accm[r]);
                    }
                } else {
                    for p in 0..4 {
                        isum_blk[r] = _mm512_add_epi32(isum_blk[r], isums[p][r]);
                        imin_blk[r] = _mm512_add_epi32(imin_blk[r], imins[p][r]);
                    }
                    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum_blk[r]), dd, acc[r]);
                    accm[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(imin_blk[r]), dm, accm[r]);
                }
            }
        }
        let mut out = [[0.0f32; 16]; T];
        for r in 0..T {
            // SAFETY: 64 writable bytes.
            unsafe { _mm512_storeu_ps(out[r].as_mut_ptr(), _mm512_sub_ps(acc[r], accm[r])) };
        }
        out
    }

    /// 16 Q6_K rows against one Q8_K row in ggml's `vec_dot` order (8 lane
    /// sums per block, each lane FMA'd on its own, then ggml's `hsum_float_8`):
    /// bit-identical to [`crate::backend::cpu::kernels::kquants::dot_q6_k_scalar`] without
    /// `tiled`. Lane `l` of a block gathers elements `32c + 4l .. 32c + 4l + 4`
    /// (sub-block `2c + l/4`, group `l%4` of the tile) and subtracts the offset
    /// 32 of sub-blocks `2l` and `2l + 1`.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F/BW/VNNI; `tiles.len() == y.len()`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub unsafe fn q6k_gemv_tile(tiles: &[Tile6], y: &[BlockQ8K]) -> [f32; 16] {
        // SAFETY: forwarded.
        unsafe { q6k_gemv_tiles::<1>(tiles, [y])[0] }
    }

    /// [`q6k_gemv_tile`] for `T` activation rows at once (each weight line
    /// loaded once for all of them; every row's arithmetic unchanged).
    ///
    /// # Safety
    /// The CPU must support AVX-512 F/BW/VNNI; `tiles.len() == ys[t].len()`.
    // `l` also picks the lane's lines and offsets, not only its accumulator.
    #[allow(clippy::needless_range_loop)]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub unsafe fn q6k_gemv_tiles<const T: usize>(
        tiles: &[Tile6],
        ys: [&[BlockQ8K]; T],
    ) -> [[f32; 16]; T] {
        let mut acc = [[_mm512_setzero_ps(); 8]; T];
        for (b, t) in tiles.iter().enumerate() {
            // SAFETY: every row has one block per tile.
            let yb: [&BlockQ8K; T] = std::array::from_fn(|r| unsafe { ys[r].get_unchecked(b) });
            let scale = |s: usize| widen_i8(&t.scales[s]);
            // The lanes below read the lines out of order, which the
            // hardware prefetcher does not follow: ask for the tiles ahead.
            prefetch::tile(t);
            // Each 4-element sum fits in i16 (|Σ| ≤ 4·63·127), so `vpdpwssd`
            // against the scale's low 16 bits (high half cleared) adds
            // `scale · Σ` exactly in one instruction.
            let low16 = _mm512_set1_epi32(0xFFFF);
            let sc: [__m512i; 16] = std::array::from_fn(|s| _mm512_and_si512(scale(s), low16));
            // SAFETY: 64-byte aligned.
            let d = unsafe { _mm512_load_ps(t.d.as_ptr()) };
            // One lane at a time (an exact integer sum in any order): only
            // `T` sums stay live, so eight tokens fit in the registers.
            for l in 0..8 {
                let g = l % 4;
                let mut lane = [_mm512_setzero_si512(); T];
                for s in (l / 4..16).step_by(2) {
                    // SAFETY: `qs[4s + g]` is 64 readable bytes.
                    let w = unsafe { _mm512_loadu_si512(t.qs[4 * s + g].as_ptr() as *const _) };
                    for r in 0..T {
                        let p = _mm512_dpbusd_epi32(
                            _mm512_setzero_si512(),
                            w,
                            bcast4(&yb[r].qs, 16 * s + 4 * g),
                        );
                        lane[r] = _mm512_dpwssd_epi32(lane[r], p, sc[s]);
                    }
                }
                for r in 0..T {
                    let dd = _mm512_mul_ps(d, _mm512_set1_ps(yb[r].d));
                    let off = |s: usize| {
                        _mm512_mullo_epi32(scale(s), _mm512_set1_epi32(32 * yb[r].bsums[s] as i32))
                    };
                    let v = _mm512_sub_epi32(lane[r], _mm512_add_epi32(off(2 * l), off(2 * l + 1)));
                    acc[r][l] = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(v), acc[r][l]);
                }
            }
        }
        let mut out = [[0.0f32; 16]; T];
        for (acc, out) in acc.iter().zip(out.iter_mut()) {
            let r0 = _mm512_add_ps(acc[4], acc[0]);
            let r1 = _mm512_add_ps(acc[5], acc[1]);
            let r2 = _mm512_add_ps(acc[6], acc[2]);
            let r3 = _mm512_add_ps(acc[7], acc[3]);
            let v = _mm512_add_ps(_mm512_add_ps(r0, r2), _mm512_add_ps(r1, r3));
            // SAFETY: 64 writable bytes.
            unsafe { _mm512_storeu_ps(out.as_mut_ptr(), v) };
        }
        out
    }

    /// 16 Q6_K rows against one Q8_K row in the order of ggml's tiled
    /// kernel: per block `acc = fma(f32(s1) · d_w, d_x, acc)`.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F/BW/VNNI; `tiles.len() == y.len()`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub unsafe fn q6k_tiled_tile(tiles: &[Tile6], y: &[BlockQ8K]) -> [f32; 16] {
        let mut acc = _mm512_setzero_ps();
        for (t, yb) in tiles.iter().zip(y) {
            let mut s1 = _mm512_setzero_si512();
            for s in 0..16 {
                let mut is = _mm512_setzero_si512();
                for g in 0..4 {
                    // SAFETY: `qs[4s + g]` is 64 readable bytes.
                    let w = unsafe { _mm512_loadu_si512(t.qs[4 * s + g].as_ptr() as *const _) };
                    is = _mm512_dpbusd_epi32(is, w, bcast4(&yb.qs, 16 * s + 4 * g));
                }
                let corr = _mm512_set1_epi32(32 * yb.bsums[s] as i32);
                let sc = widen_i8(&t.scales[s]);
                s1 = _mm512_add_epi32(s1, _mm512_mullo_epi32(sc, _mm512_sub_epi32(is, corr)));
            }
            // SAFETY: 64-byte aligned.
            let dw = unsafe { _mm512_load_ps(t.d.as_ptr()) };
            let f = _mm512_mul_ps(_mm512_cvtepi32_ps(s1), dw);
            acc = _mm512_fmadd_ps(f, _mm512_set1_ps(yb.d), acc);
        }
        let mut out = [0.0f32; 16];
        // SAFETY: 64 writable bytes.
        unsafe { _mm512_storeu_ps(out.as_mut_ptr(), acc) };
        out
    }
}
