//! Q4_1, Q5_0 and Q8_0 weights regrouped for AVX-512 VNNI: 16 weight rows
//! side by side, so one `vpdpbusd` forms a 4-element integer dot product for
//! 16 rows at once — one of ggml's 8 accumulator lanes (see [`super::dot`]).
//!
//! Per row (one vector lane each) the float operations are exactly those of
//! the single-row dots: per block and ggml lane `acc = fma(d_w·d_x, Σ, acc)`,
//! the lanes reduced as `((a0+a4)+(a2+a6))+((a1+a5)+(a3+a7))`, plus Q4_1's
//! `summs`. Only the exact integer sums are formed differently: `vpdpbusd`
//! multiplies unsigned bytes by signed ones, so Q5_0 and Q8_0 weights are
//! stored with +16 / +128 and each sum starts from `-16·Σx` / `-128·Σx` of
//! the lane's four activations ([`lane_offsets`]). Weights stay as dense as in
//! the GGUF file (Q4_1 and Q5_0 nibbles stay packed), so decode reads no more
//! memory than before.
//!
//! Without AVX-512 the same tiles are read by the AVX2 kernel of
//! `q32_tiles_avx2.rs`.

use super::dot::{Q4_0_BYTES, Q4_1_BYTES, Q5_0_BYTES, Q5_1_BYTES, Q8_0_BYTES};
use super::q8::{BlockQ8, QK};
use super::WeightKind;

/// Rows per tile.
pub const TILE_ROWS: usize = 16;

/// One 64-byte cache line of tile data.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub struct Line(pub [u8; 64]);

/// Where the parts of one tile (16 rows × one 32-element block) lie. A tile
/// starts with its values: Q4_1/Q5_0 4 lines `[lane pair p][row c][4 bytes]`
/// = packed bytes `4p..4p+4` of row c (low nibbles: ggml lane p, high: lane
/// p+4); Q8_0 8 lines `[lane l][row c][4 bytes]` = values `4l..4l+4` plus 128.
/// Q5_0 adds one line of 8 u64 masks: bit `4c + j` of mask `l` is the fifth
/// bit of row c's element `4l + j`. Scales are 16 f16 `d` (32 bytes), for
/// Q4_1 followed by 16 f16 `m` in the same line; Q5_0 and Q8_0 tiles come in
/// pairs (blocks `2i`, `2i + 1`) that share one scale line, so no line is
/// half empty and decode streams no more bytes than the GGUF blocks hold.
#[derive(Clone, Copy, Debug)]
pub(super) struct TileShape {
    /// Lines of values (and Q5_0's masks) per tile.
    own_lines: usize,
    /// Q5_0: the mask line, counted from the tile's first line.
    pub(super) high_line: Option<usize>,
    /// Whether a pair of tiles shares one scale line.
    shared_scales: bool,
}

impl TileShape {
    pub(super) fn of(kind: WeightKind) -> Self {
        match kind {
            WeightKind::Q4_1 => Self {
                own_lines: 4,
                high_line: None,
                shared_scales: false,
            },
            WeightKind::Q5_0 => Self {
                own_lines: 5,
                high_line: Some(4),
                shared_scales: true,
            },
            WeightKind::Q8_0 => Self {
                own_lines: 8,
                high_line: None,
                shared_scales: true,
            },
            WeightKind::Q4_0 => Self {
                own_lines: 4,
                high_line: None,
                shared_scales: true,
            },
            WeightKind::Q5_1 => Self {
                own_lines: 5,
                high_line: Some(4),
                shared_scales: false,
            },
            WeightKind::Q4K | WeightKind::Q6K | WeightKind::Q5K => {
                unreachable!("K-quants have their own tiles")
            }
        }
    }

    /// Lines of one pair of tiles.
    pub(super) fn pair_lines(self) -> usize {
        if self.shared_scales {
            2 * self.own_lines + 1
        } else {
            2 * (self.own_lines + 1)
        }
    }

    /// Asks for the lines of the pair of tiles [`super::prefetch::AHEAD`]
    /// pairs after the one starting at line `first` of the row group at
    /// `group` (past the group's end: the next group's, which a thread
    /// usually reads next).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    pub(super) fn prefetch_pair(self, group: *const u8, first: usize) {
        let ahead = group.wrapping_add(64 * (first + super::prefetch::AHEAD * self.pair_lines()));
        for i in 0..self.pair_lines() {
            super::prefetch::line(ahead.wrapping_add(64 * i));
        }
    }

    /// Lines of one row group of `blocks` tiles.
    pub(super) fn group_lines(self, blocks: usize) -> usize {
        blocks.div_ceil(2) * self.pair_lines()
    }

    /// Tile `b` of a group: (its first line, its scale line, byte offset of
    /// its `d` in that line).
    #[inline(always)]
    pub(super) fn locate(self, b: usize) -> (usize, usize, usize) {
        let (base, half) = ((b / 2) * self.pair_lines(), b % 2);
        if self.shared_scales {
            (
                base + half * self.own_lines,
                base + 2 * self.own_lines,
                32 * half,
            )
        } else {
            let first = base + half * (self.own_lines + 1);
            (first, first + self.own_lines, 0)
        }
    }
}

/// All tiles of a `[n, k]` Q4_1/Q5_0/Q8_0 matrix (`n` a multiple of 16), row
/// group major (see [`TileShape`] for the lines of one group).
pub struct Q32Tiles {
    kind: WeightKind,
    lines: Vec<Line>,
    group_lines: usize,
}

/// Whether this CPU runs [`x86::tile_rows`].
pub fn available() -> bool {
    super::q4k_tiles::available()
}

/// The bytes of block `b` of `row`.
fn block(kind: WeightKind, row: &[u8], b: usize) -> &[u8] {
    let bytes = match kind {
        WeightKind::Q4_1 => Q4_1_BYTES,
        WeightKind::Q5_0 => Q5_0_BYTES,
        WeightKind::Q4_0 => Q4_0_BYTES,
        WeightKind::Q5_1 => Q5_1_BYTES,
        _ => Q8_0_BYTES,
    };
    &row[b * bytes..(b + 1) * bytes]
}

impl Q32Tiles {
    /// Regroups the raw GGUF blocks `w` of an `[n, k]` matrix.
    pub fn new(kind: WeightKind, w: &[u8], n: usize, k: usize) -> Self {
        assert_eq!(n % TILE_ROWS, 0, "rows must come in groups of {TILE_ROWS}");
        assert_eq!(k % QK, 0);
        let shape = TileShape::of(kind);
        let blocks = k / QK;
        let group_lines = shape.group_lines(blocks);
        let row_bytes = blocks * kind.block_bytes();
        let mut lines = vec![Line([0; 64]); n / TILE_ROWS * group_lines];
        for (g, group) in lines.chunks_exact_mut(group_lines).enumerate() {
            for b in 0..blocks {
                let (first, scale_line, d_at) = shape.locate(b);
                for c in 0..TILE_ROWS {
                    let r = g * TILE_ROWS + c;
                    let wb = block(kind, &w[r * row_bytes..(r + 1) * row_bytes], b);
                    let scales = &mut group[scale_line].0;
                    scales[d_at + 2 * c..d_at + 2 * c + 2].copy_from_slice(&wb[0..2]);
                    if kind.activation_has_sum() {
                        scales[32 + 2 * c..34 + 2 * c].copy_from_slice(&wb[2..4]);
                    }
                    let tile = &mut group[first..first + shape.own_lines];
                    // Where the packed nibbles and the fifth bits lie.
                    let (qs_at, qh_at) = match kind {
                        WeightKind::Q4_1 => (Some(4), None),
                        WeightKind::Q5_0 => (Some(6), Some(2)),
                        WeightKind::Q4_0 => (Some(2), None),
                        WeightKind::Q5_1 => (Some(8), Some(4)),
                        _ => (None, None),
                    };
                    match qs_at {
                        Some(at) => {
                            for p in 0..4 {
                                tile[p].0[4 * c..4 * c + 4]
                                    .copy_from_slice(&wb[at + 4 * p..at + 4 + 4 * p]);
                            }
                            if let Some(h) = qh_at {
                                let qh =
                                    u32::from_le_bytes([wb[h], wb[h + 1], wb[h + 2], wb[h + 3]]);
                                let high = &mut tile[shape.high_line.expect("fifth bits")].0;
                                for l in 0..8 {
                                    let bits = (qh >> (4 * l)) & 0xF;
                                    high[8 * l + c / 2] |= (bits as u8) << (4 * (c % 2));
                                }
                            }
                        }
                        None => {
                            for l in 0..8 {
                                for j in 0..4 {
                                    tile[l].0[4 * c + j] = wb[2 + 4 * l + j] ^ 0x80;
                                }
                            }
                        }
                    }
                }
            }
        }
        Self {
            kind,
            lines,
            group_lines,
        }
    }

    pub fn kind(&self) -> WeightKind {
        self.kind
    }

    /// Row `r` of the matrix as f32, as candle dequantizes it (`q · d`, plus
    /// `m` for Q4_1/Q5_1): lets a tied embedding read its rows here.
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let shape = TileShape::of(self.kind);
        let (group, c) = (self.group(r / TILE_ROWS), r % TILE_ROWS);
        let f16_at = |line: usize, at: usize| {
            let b = &group[line].0;
            half::f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
        };
        for (b, out) in out.chunks_exact_mut(QK).enumerate() {
            let (first, scale_line, d_at) = shape.locate(b);
            let d = f16_at(scale_line, d_at + 2 * c);
            let m = f16_at(scale_line, 32 + 2 * c);
            let tile = &group[first..first + shape.own_lines];
            for (e, y) in out.iter_mut().enumerate() {
                if self.kind == WeightKind::Q8_0 {
                    *y = ((tile[e / 4].0[4 * c + e % 4] ^ 0x80) as i8) as f32 * d;
                    continue;
                }
                let byte = tile[(e % 16) / 4].0[4 * c + e % 4];
                let nibble = if e < 16 { byte & 0x0F } else { byte >> 4 } as i32;
                let high = shape.high_line.map_or(0, |h| {
                    let mask = &tile[h].0[8 * (e / 4)..8 * (e / 4) + 8];
                    let mask = u64::from_le_bytes(mask.try_into().expect("8 bytes"));
                    ((mask >> (4 * c + e % 4)) & 1) as i32
                });
                let q = nibble | (high << 4);
                *y = match self.kind {
                    WeightKind::Q4_1 | WeightKind::Q5_1 => q as f32 * d + m,
                    WeightKind::Q5_0 => (q - 16) as f32 * d,
                    _ => (q - 8) as f32 * d,
                };
            }
        }
    }

    /// The tiles of row group `g`.
    pub fn group(&self, g: usize) -> &[Line] {
        &self.lines[g * self.group_lines..(g + 1) * self.group_lines]
    }
}

/// What each ggml lane's integer sum starts from for Q5_0/Q8_0 weights
/// (stored with an offset): `-offset · Σ` of the lane's four activations,
/// written into `out` (left empty for Q4_1/Q5_1, whose sums start from 0).
pub fn lane_offsets(kind: WeightKind, y: &[BlockQ8], out: &mut Vec<[i32; 8]>) {
    out.clear();
    let offset = match kind {
        WeightKind::Q4_0 => 8,
        WeightKind::Q5_0 => 16,
        WeightKind::Q8_0 => 128,
        _ => return,
    };
    out.extend(y.iter().map(|yb| {
        std::array::from_fn(|l| {
            -offset
                * yb.qs[4 * l..4 * l + 4]
                    .iter()
                    .map(|&q| q as i32)
                    .sum::<i32>()
        })
    }));
}

#[cfg(target_arch = "x86_64")]
#[allow(clippy::incompatible_msrv)]
pub mod x86 {
    use std::arch::x86_64::*;

    use super::{BlockQ8, Line, TileShape};
    use crate::backend::cpu::kernels::WeightKind;

    // The kernels' `KIND` codes (the AVX2 kernels, q32_tiles_avx2.rs, take
    // the same).
    pub(in crate::backend::cpu::kernels) const Q4_1: u8 = 0;
    pub(in crate::backend::cpu::kernels) const Q5_0: u8 = 1;
    pub(in crate::backend::cpu::kernels) const Q8_0: u8 = 2;
    pub(in crate::backend::cpu::kernels) const Q4_0: u8 = 3;
    pub(in crate::backend::cpu::kernels) const Q5_1: u8 = 4;

    pub(in crate::backend::cpu::kernels) fn kind_of(code: u8) -> WeightKind {
        match code {
            Q4_1 => WeightKind::Q4_1,
            Q5_0 => WeightKind::Q5_0,
            Q4_0 => WeightKind::Q4_0,
            Q5_1 => WeightKind::Q5_1,
            _ => WeightKind::Q8_0,
        }
    }

    /// Whether the activations carry a sum (Q8_1) for an `m · s` term.
    pub(in crate::backend::cpu::kernels) const fn with_sum(code: u8) -> bool {
        code == Q4_1 || code == Q5_1
    }

    /// The 8 ggml lanes of one tile as unsigned bytes, 16 rows each.
    #[inline(always)]
    unsafe fn lanes<const KIND: u8>(tile: *const Line, s: TileShape) -> [__m512i; 8] {
        // SAFETY (whole body): `tile` points at one whole tile of `s`'s shape.
        unsafe {
            let load = |i: usize| _mm512_load_si512(tile.add(i) as *const __m512i);
            if KIND != Q8_0 {
                let low = _mm512_set1_epi8(0x0F);
                let mut w = [_mm512_setzero_si512(); 8];
                for p in 0..4 {
                    let v = load(p);
                    w[p] = _mm512_and_si512(v, low);
                    w[p + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
                }
                if KIND == Q5_0 || KIND == Q5_1 {
                    let high = tile.add(s.high_line.unwrap_unchecked()) as *const __mmask64;
                    let sixteen = _mm512_set1_epi8(16);
                    for (l, w) in w.iter_mut().enumerate() {
                        let mask = std::ptr::read(high.add(l));
                        *w = _mm512_mask_add_epi8(*w, mask, *w, sixteen);
                    }
                }
                w
            } else {
                std::array::from_fn(load)
            }
        }
    }

    /// 16 rows (one row group's tiles, one per block) against `T` tokens'
    /// activation rows; `offsets[t]`: [`super::lane_offsets`] of token t
    /// (unused for Q4_1/Q5_1). Returns `[token][row]`.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F/BW/VNNI; `tiles` is one row group
    /// ([`super::Q32Tiles::group`]) of `ys[t].len()` blocks of `KIND` (0 =
    /// Q4_1, 1 = Q5_0, 2 = Q8_0, 3 = Q4_0, 4 = Q5_1) and every `offsets[t]`
    /// (for Q5_0/Q8_0/Q4_0) as many entries.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub unsafe fn tile_rows<const KIND: u8, const T: usize>(
        tiles: &[Line],
        ys: [&[BlockQ8]; T],
        offsets: [&[[i32; 8]]; T],
    ) -> [[f32; 16]; T] {
        let s = TileShape::of(kind_of(KIND));
        let blocks = ys[0].len();
        debug_assert!(tiles.len() >= s.group_lines(blocks));
        let mut acc = [[_mm512_setzero_ps(); 8]; T];
        let mut summs = [_mm512_setzero_ps(); T];
        for b in 0..blocks {
            // SAFETY: tile `b` and block `b` of every token exist (see above).
            unsafe {
                let (first, scale_line, d_at) = s.locate(b);
                if b % 2 == 0 {
                    // As the AVX2 kernel does (the AVX-512 one runs only
                    // passes of one or two tokens).
                    s.prefetch_pair(tiles.as_ptr() as *const u8, first);
                }
                let w = lanes::<KIND>(tiles.as_ptr().add(first), s);
                let scales = (tiles.as_ptr().add(scale_line) as *const u8).add(d_at);
                let d = _mm512_cvtph_ps(_mm256_load_si256(scales as *const __m256i));
                let m = if with_sum(KIND) {
                    _mm512_cvtph_ps(_mm256_load_si256(scales.add(32) as *const __m256i))
                } else {
                    _mm512_setzero_ps()
                };
                for t in 0..T {
                    let yb = ys[t].get_unchecked(b);
                    let dd = _mm512_mul_ps(d, _mm512_set1_ps(yb.d));
                    if with_sum(KIND) {
                        summs[t] = _mm512_fmadd_ps(m, _mm512_set1_ps(yb.s), summs[t]);
                    }
                    let q = yb.qs.as_ptr() as *const i32;
                    for l in 0..8 {
                        let x = _mm512_set1_epi32(std::ptr::read_unaligned(q.add(l)));
                        let start = if with_sum(KIND) {
                            _mm512_setzero_si512()
                        } else {
                            _mm512_set1_epi32(offsets[t].get_unchecked(b)[l])
                        };
                        let sum = _mm512_dpbusd_epi32(start, w[l], x);
                        acc[t][l] = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(sum), acc[t][l]);
                    }
                }
            }
        }
        let mut out = [[0.0f32; 16]; T];
        for t in 0..T {
            let a = &acc[t];
            let r0 = _mm512_add_ps(a[0], a[4]);
            let r1 = _mm512_add_ps(a[1], a[5]);
            let r2 = _mm512_add_ps(a[2], a[6]);
            let r3 = _mm512_add_ps(a[3], a[7]);
            let mut v = _mm512_add_ps(_mm512_add_ps(r0, r2), _mm512_add_ps(r1, r3));
            if with_sum(KIND) {
                v = _mm512_add_ps(v, summs[t]);
            }
            // SAFETY: `out[t]` holds 16 f32.
            unsafe { _mm512_storeu_ps(out[t].as_mut_ptr(), v) };
        }
        out
    }
}
