//! The AVX2 (+FMA, F16C) kernel of the 16-row [`super::q32_tiles`]: no
//! AVX-512, no VNNI. Each 64-byte tile line is read as two 32-byte halves
//! (rows 0..8, then rows 8..16), one f32 lane per row.
//!
//! Per row the float operations are those of the single-row dots
//! ([`super::dot`]): per block and ggml lane `acc = fma(d_w·d_x, Σ, acc)`,
//! the lanes reduced as `((a0+a4)+(a2+a6))+((a1+a5)+(a3+a7))`, plus
//! `summs` for Q4_1/Q5_1. The exact 4-element sums `Σ` are
//! `_mm256_maddubs_epi16` then `_mm256_madd_epi16` against ones: no pair of
//! products reaches i16's range for nibbles or Q5_0's offset values (with
//! the tiles' `-offset · Σx` start, [`super::q32_tiles::lane_offsets`]);
//! Q8_0's stored `q + 128` would, so its values are turned back to signed
//! bytes and their signs moved onto the activations, as ggml's AVX2 dot does.
//! Where the CPU has AVX-VNNI (Intel since Alder Lake) one `vpdpbusd` forms
//! the same exact sums (the `_vnni` entry points).

#[cfg(target_arch = "x86_64")]
pub mod x86 {
    use std::arch::x86_64::*;
    use std::mem::MaybeUninit;

    use crate::backend::cpu::kernels::dot::x86::fifth_bits;
    use crate::backend::cpu::kernels::q32_tiles::x86::{kind_of, with_sum, Q4_0, Q5_0, Q5_1, Q8_0};
    use crate::backend::cpu::kernels::q32_tiles::{Line, TileShape};
    use crate::backend::cpu::kernels::q8::BlockQ8;

    /// Whether a lane's sum starts from the tiles' `-offset · Σx`.
    const fn offset(code: u8) -> bool {
        code == Q5_0 || code == Q4_0
    }

    /// ggml lane `l` of one half tile (8 rows × 4 bytes) at `tile` (the
    /// tile's first line, already moved to the half): unsigned values, or
    /// for Q8_0 the signed ones.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn lane<const KIND: u8>(tile: *const u8, s: TileShape, h: usize, l: usize) -> __m256i {
        // SAFETY (whole body): `tile` points at one whole tile of `s`'s shape.
        unsafe {
            if KIND == Q8_0 {
                let v = _mm256_load_si256(tile.add(64 * l) as *const __m256i);
                return _mm256_xor_si256(v, _mm256_set1_epi8(0x80u8 as i8));
            }
            let v = _mm256_load_si256(tile.add(64 * (l % 4)) as *const __m256i);
            let v = if l < 4 { v } else { _mm256_srli_epi16(v, 4) };
            let v = _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
            if KIND == Q5_0 || KIND == Q5_1 {
                // Mask l holds bit 4c + j for row c: this half's rows are
                // its 32 bits at byte 4h, one bit per byte of `v`.
                let line = s.high_line.unwrap_unchecked();
                let mask = tile.sub(32 * h).add(64 * line + 8 * l + 4 * h);
                let set = fifth_bits(mask);
                return _mm256_or_si256(v, _mm256_and_si256(set, _mm256_set1_epi8(16)));
            }
            v
        }
    }

    /// The exact 4-element sums of lane values `w` (one row per i32) with the
    /// 4 activations broadcast in `x`, plus `start` (the tiles' `-offset ·
    /// Σx` for Q5_0/Q4_0, else zero): with `VNNI` one AVX-VNNI `vpdpbusd`
    /// (u8 × i8 products summed into i32), else `maddubs` then `madd`.
    ///
    /// # Safety
    /// AVX2, and AVX-VNNI with `VNNI`.
    #[inline(always)]
    unsafe fn lane_sum<const KIND: u8, const VNNI: bool>(
        w: __m256i,
        x: __m256i,
        start: __m256i,
    ) -> __m256i {
        // SAFETY: the caller's features.
        unsafe {
            let (w, x) = if KIND == Q8_0 {
                (_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w))
            } else {
                (w, x)
            };
            if VNNI {
                return _mm256_dpbusd_avx_epi32(start, w, x);
            }
            let sum = _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), _mm256_set1_epi16(1));
            if offset(KIND) {
                _mm256_add_epi32(sum, start)
            } else {
                sum
            }
        }
    }

    /// The `start` of [`lane_sum`] for lane `l` of block `b` of a token.
    ///
    /// # Safety
    /// AVX2; `offsets` holds block `b` (Q5_0/Q4_0).
    #[inline(always)]
    unsafe fn lane_start<const KIND: u8>(offsets: &[[i32; 8]], b: usize, l: usize) -> __m256i {
        // SAFETY: the caller's features and bounds.
        unsafe {
            if offset(KIND) {
                _mm256_set1_epi32(offsets.get_unchecked(b)[l])
            } else {
                _mm256_setzero_si256()
            }
        }
    }

    /// 16 rows (one row group's tiles, one per block) against `T` tokens'
    /// activation rows, as [`crate::backend::cpu::kernels::q32_tiles::x86::tile_rows`]
    /// computes them (several tokens lane by lane, [`by_lane`]). Returns
    /// `[token][row]`.
    ///
    /// # Safety
    /// The CPU must support AVX2, FMA and F16C; `tiles` is one row group of
    /// `ys[t].len()` blocks of `KIND` (0 = Q4_1, 1 = Q5_0, 2 = Q8_0, 3 =
    /// Q4_0, 4 = Q5_1) and every `offsets[t]` (for Q5_0/Q4_0) as many entries.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn tile_rows<const KIND: u8, const T: usize>(
        tiles: &[Line],
        ys: [&[BlockQ8]; T],
        offsets: [&[[i32; 8]]; T],
    ) -> [[f32; 16]; T] {
        // SAFETY: forwarded.
        unsafe { rows::<KIND, T, false>(tiles, ys, offsets) }
    }

    /// [`tile_rows`] with AVX-VNNI dot products (the same exact sums, so
    /// the same bits).
    ///
    /// # Safety
    /// As [`tile_rows`], and the CPU must support AVX-VNNI.
    #[target_feature(enable = "avx2,fma,f16c,avxvnni")]
    pub unsafe fn tile_rows_vnni<const KIND: u8, const T: usize>(
        tiles: &[Line],
        ys: [&[BlockQ8]; T],
        offsets: [&[[i32; 8]]; T],
    ) -> [[f32; 16]; T] {
        // SAFETY: forwarded.
        unsafe { rows::<KIND, T, true>(tiles, ys, offsets) }
    }

    /// The body of [`tile_rows`] (inlined into its entry points, which
    /// enable the features): one token through all 8 lanes at once, more
    /// lane by lane ([`by_lane`]).
    #[inline(always)]
    unsafe fn rows<const KIND: u8, const T: usize, const VNNI: bool>(
        tiles: &[Line],
        ys: [&[BlockQ8]; T],
        offsets: [&[[i32; 8]]; T],
    ) -> [[f32; 16]; T] {
        if T > 1 {
            // SAFETY: forwarded.
            return unsafe { by_lane::<KIND, T, VNNI>(tiles, ys, offsets) };
        }
        let mut out = [[0.0f32; 16]; T];
        for h in 0..2 {
            // SAFETY: forwarded.
            let half = unsafe { half_rows::<KIND, T, VNNI>(tiles, ys, offsets, h) };
            for t in 0..T {
                out[t][8 * h..8 * h + 8].copy_from_slice(&half[t]);
            }
        }
        out
    }

    /// Rows `8h..8h + 8` of [`tile_rows`].
    ///
    /// # Safety
    /// As [`tile_rows`] (and AVX-VNNI with `VNNI`).
    #[allow(clippy::needless_range_loop)] // `l` picks the lane, its activations and its offset
    #[inline(always)]
    unsafe fn half_rows<const KIND: u8, const T: usize, const VNNI: bool>(
        tiles: &[Line],
        ys: [&[BlockQ8]; T],
        offsets: [&[[i32; 8]]; T],
        h: usize,
    ) -> [[f32; 8]; T] {
        let s = TileShape::of(kind_of(KIND));
        let blocks = ys[0].len();
        debug_assert!(tiles.len() >= s.group_lines(blocks));
        let base = tiles.as_ptr() as *const u8;
        // SAFETY (whole body): the caller's features; tile `b` and block `b`
        // of every token exist for `b < blocks` (see above).
        unsafe {
            let mut acc = [[_mm256_setzero_ps(); 8]; T];
            let mut summs = [_mm256_setzero_ps(); T];
            for b in 0..blocks {
                let (first, scale_line, d_at) = s.locate(b);
                if h == 0 && b % 2 == 0 {
                    // The pair of tiles two pairs ahead; the
                    // second half re-reads lines already in cache.
                    s.prefetch_pair(base, first);
                }
                let tile = base.add(64 * first + 32 * h);
                let scales = base.add(64 * scale_line + d_at + 16 * h);
                let d = _mm256_cvtph_ps(_mm_loadu_si128(scales as *const __m128i));
                let mut dd = [_mm256_setzero_ps(); T];
                for t in 0..T {
                    let yb = ys[t].get_unchecked(b);
                    dd[t] = _mm256_mul_ps(d, _mm256_set1_ps(yb.d));
                    if with_sum(KIND) {
                        let m = _mm256_cvtph_ps(_mm_loadu_si128(scales.add(32) as *const __m128i));
                        summs[t] = _mm256_fmadd_ps(m, _mm256_set1_ps(yb.s), summs[t]);
                    }
                }
                for l in 0..8 {
                    let w = lane::<KIND>(tile, s, h, l);
                    for t in 0..T {
                        let q = ys[t].get_unchecked(b).qs.as_ptr() as *const i32;
                        let x = _mm256_set1_epi32(std::ptr::read_unaligned(q.add(l)));
                        let start = lane_start::<KIND>(offsets[t], b, l);
                        let sum = lane_sum::<KIND, VNNI>(w, x, start);
                        acc[t][l] = _mm256_fmadd_ps(dd[t], _mm256_cvtepi32_ps(sum), acc[t][l]);
                    }
                }
            }
            reduce::<KIND, T>(&acc, &summs)
        }
    }

    /// Blocks per pass of [`by_lane`]: their `d_w·d_x` products
    /// are kept on the stack for the lanes' passes (8 KiB at 8 tokens).
    const CHUNK: usize = 32;

    /// [`tile_rows`] for several tokens: each lane formed in a pass of its
    /// own over a chunk of blocks, the `T` tokens sharing each unpacked
    /// lane and only their `T` accumulators of that lane live (all `8·T`
    /// spill beyond one token). The same float operations in the same order
    /// per row and lane, so the same bits.
    ///
    /// # Safety
    /// As [`tile_rows`] (and AVX-VNNI with `VNNI`).
    #[allow(clippy::needless_range_loop)] // `l` picks the lane, its activations and its offset
    #[inline(always)]
    unsafe fn by_lane<const KIND: u8, const T: usize, const VNNI: bool>(
        tiles: &[Line],
        ys: [&[BlockQ8]; T],
        offsets: [&[[i32; 8]]; T],
    ) -> [[f32; 16]; T] {
        let s = TileShape::of(kind_of(KIND));
        let blocks = ys[0].len();
        debug_assert!(tiles.len() >= s.group_lines(blocks));
        let base = tiles.as_ptr() as *const u8;
        // SAFETY (whole body): the caller's features; tile `b` and block `b`
        // of every token exist for `b < blocks` (see above).
        unsafe {
            let mut acc = [[[_mm256_setzero_ps(); T]; 8]; 2];
            let mut summs = [[_mm256_setzero_ps(); T]; 2];
            // Written for a chunk's blocks before its lanes read them: not
            // zeroed (an 8 KiB memset per call was 3% of a Gemma 3 prefill).
            let mut dd = [[MaybeUninit::<__m256>::uninit(); T]; CHUNK];
            for b0 in (0..blocks).step_by(CHUNK) {
                let chunk = b0..(b0 + CHUNK).min(blocks);
                for h in 0..2 {
                    for b in chunk.clone() {
                        let (_, scale_line, d_at) = s.locate(b);
                        let scales = base.add(64 * scale_line + d_at + 16 * h);
                        let d = _mm256_cvtph_ps(_mm_loadu_si128(scales as *const __m128i));
                        for t in 0..T {
                            let yb = ys[t].get_unchecked(b);
                            dd[b - b0][t].write(_mm256_mul_ps(d, _mm256_set1_ps(yb.d)));
                            if with_sum(KIND) {
                                let m = _mm256_cvtph_ps(_mm_loadu_si128(
                                    scales.add(32) as *const __m128i
                                ));
                                summs[h][t] = _mm256_fmadd_ps(m, _mm256_set1_ps(yb.s), summs[h][t]);
                            }
                        }
                    }
                    for l in 0..8 {
                        let mut a = acc[h][l];
                        for b in chunk.clone() {
                            let (first, _, _) = s.locate(b);
                            if h == 0 && l == 0 && b % 2 == 0 {
                                // As in `half_rows`: the first pass reads
                                // the tiles from memory, the others from cache.
                                s.prefetch_pair(base, first);
                            }
                            let w = lane::<KIND>(base.add(64 * first + 32 * h), s, h, l);
                            for t in 0..T {
                                let q = ys[t].get_unchecked(b).qs.as_ptr() as *const i32;
                                let x = _mm256_set1_epi32(std::ptr::read_unaligned(q.add(l)));
                                let start = lane_start::<KIND>(offsets[t], b, l);
                                let sum = lane_sum::<KIND, VNNI>(w, x, start);
                                let dd = dd[b - b0][t].assume_init();
                                a[t] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(sum), a[t]);
                            }
                        }
                        acc[h][l] = a;
                    }
                }
            }
            let mut out = [[0.0f32; 16]; T];
            for h in 0..2 {
                let lanes: [[__m256; 8]; T] =
                    std::array::from_fn(|t| std::array::from_fn(|l| acc[h][l][t]));
                let half = reduce::<KIND, T>(&lanes, &summs[h]);
                for t in 0..T {
                    out[t][8 * h..8 * h + 8].copy_from_slice(&half[t]);
                }
            }
            out
        }
    }

    /// ggml's reduction of each row's 8 lanes, plus Q4_1/Q5_1's `summs`.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn reduce<const KIND: u8, const T: usize>(
        acc: &[[__m256; 8]; T],
        summs: &[__m256; T],
    ) -> [[f32; 8]; T] {
        let mut out = [[0.0f32; 8]; T];
        for t in 0..T {
            let a = &acc[t];
            let r0 = _mm256_add_ps(a[0], a[4]);
            let r1 = _mm256_add_ps(a[1], a[5]);
            let r2 = _mm256_add_ps(a[2], a[6]);
            let r3 = _mm256_add_ps(a[3], a[7]);
            let mut v = _mm256_add_ps(_mm256_add_ps(r0, r2), _mm256_add_ps(r1, r3));
            if with_sum(KIND) {
                v = _mm256_add_ps(v, summs[t]);
            }
            // SAFETY: `out[t]` holds 8 f32.
            unsafe { _mm256_storeu_ps(out[t].as_mut_ptr(), v) };
        }
        out
    }
}
