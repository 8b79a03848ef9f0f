//! The AVX2 (+FMA, F16C) kernels of the 16-row Q4_K, Q5_K and Q6_K tiles
//! ([`super::q4k_tiles`], [`super::q5k_tiles`], [`super::q6k_tiles`]): no AVX-512, no VNNI. Each 64-byte line of a tile
//! is read as two 32-byte halves (rows 0..8, then rows 8..16), one i32 or
//! f32 lane per row; per row the float operations are exactly those of the
//! AVX-512 kernels (and so of [`super::kquants::dot_q4_k_scalar`],
//! [`super::q5k_tiles::dot_q5_k_scalar`] and [`super::kquants::dot_q6_k_scalar`]).
//!
//! The integer sums are formed with `_mm256_maddubs_epi16` (pairs of
//! `u8 × i8` products in i16) and `_mm256_madd_epi16` against each row's
//! scale duplicated into both i16 halves of its i32 lane, which adds
//! `scale · Σ` in one step. All of it is exact: a Q4_K pair is at most
//! 2·15·128 = 3840, so the 8 groups of a sub-block still fit in i16 before
//! scaling; a Q5_K pair at most 2·31·128 = 7936 and a Q6_K pair
//! 2·63·128 = 16128, both scaled per group (a Q6_K tiled sum per two groups).

#[cfg(target_arch = "x86_64")]
pub mod x86 {
    use std::arch::x86_64::*;

    use crate::backend::cpu::kernels::prefetch;
    use crate::backend::cpu::kernels::q4k_tiles::Tile;
    use crate::backend::cpu::kernels::q5k_tiles::Tile5;
    use crate::backend::cpu::kernels::q6k_tiles::{line_place, Tile6};
    use crate::backend::cpu::kernels::q8k::{blocks_at, BlockQ8K};

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn bcast4(qs: &[i8; 256], at: usize) -> __m256i {
        assert!(at + 4 <= qs.len());
        // SAFETY: 4 readable bytes at `at` (checked above).
        _mm256_set1_epi32(unsafe { std::ptr::read_unaligned(qs.as_ptr().add(at) as *const i32) })
    }

    /// 8 i32 lanes from 8 bytes (`signed`: sign-extended), each duplicated
    /// into both i16 halves of its lane (the `madd_epi16` multiplier).
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn dup16(bytes: [u8; 8], signed: bool) -> __m256i {
        let b = _mm_cvtsi64_si128(i64::from_le_bytes(bytes));
        let v = if signed {
            _mm256_cvtepi8_epi32(b)
        } else {
            _mm256_cvtepu8_epi32(b)
        };
        _mm256_or_si256(
            _mm256_and_si256(v, _mm256_set1_epi32(0xFFFF)),
            _mm256_slli_epi32(v, 16),
        )
    }

    /// The first 8 bytes of a tile's scales.
    #[inline(always)]
    fn eight<T: Copy>(xs: &[T]) -> [T; 8] {
        std::array::from_fn(|i| xs[i])
    }

    /// The 8 lanes of the vec_dot order summed as ggml's `hsum_float_8`
    /// leaves them before its horizontal step: `((a4 + a0) + (a6 + a2)) +
    /// ((a5 + a1) + (a7 + a3))`, per row.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn lanes8(a: &[__m256; 8]) -> __m256 {
        let r0 = _mm256_add_ps(a[4], a[0]);
        let r1 = _mm256_add_ps(a[5], a[1]);
        let r2 = _mm256_add_ps(a[6], a[2]);
        let r3 = _mm256_add_ps(a[7], a[3]);
        _mm256_add_ps(_mm256_add_ps(r0, r2), _mm256_add_ps(r1, r3))
    }

    /// Rows `8h..8h + 8` of the four value lines `m + 16q` (`q` 0..4) of
    /// a Q6_K tile, with the tile's lane group of `m` (and the group
    /// [`prefetch::AHEAD`] tiles on, once per tile) asked for with `prefetch`.
    ///
    /// # Safety
    /// AVX2; `m < 16`, `h < 2`.
    #[inline(always)]
    unsafe fn q6k_lines(t: &Tile6, m: usize, h: usize, prefetch: bool) -> [__m256i; 4] {
        let (g, ..) = line_place(m);
        if prefetch && h == 0 {
            for j in 0..3 {
                prefetch::tile_line(t, 3 * g + j);
            }
        }
        let line = |j: usize| t.groups[g][j].as_ptr().wrapping_add(32 * h) as *const __m256i;
        // SAFETY: 64-byte aligned lines; AVX2 (the caller's).
        let [a, b, hi] = unsafe {
            [
                _mm256_load_si256(line(0)),
                _mm256_load_si256(line(1)),
                _mm256_load_si256(line(2)),
            ]
        };
        let (nib, top) = (_mm256_set1_epi8(0x0F), _mm256_set1_epi8(0x30));
        // 16-bit shifts: what they bring in from the next byte falls outside
        // each byte's mask.
        let value = |low: __m256i, high: __m256i| {
            _mm256_or_si256(_mm256_and_si256(low, nib), _mm256_and_si256(high, top))
        };
        [
            value(a, _mm256_slli_epi16::<4>(hi)),
            value(b, _mm256_slli_epi16::<2>(hi)),
            value(_mm256_srli_epi16::<4>(a), hi),
            value(_mm256_srli_epi16::<4>(b), _mm256_srli_epi16::<2>(hi)),
        ]
    }

    /// `(lo as u16) | hi << 16` broadcast: two i16 multipliers per lane.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn pair16(lo: i32, hi: i32) -> __m256i {
        _mm256_set1_epi32((lo & 0xFFFF) | (hi << 16))
    }

    /// 16 Q4_K rows (one row group's `tiles`, one per block) against `T`
    /// Q8_K rows, as [`crate::backend::cpu::kernels::q4k_tiles::x86::gemv_tiles`]:
    /// `pairs[t]`, ggml's gemm order (an FMA per pair of sub-blocks), else
    /// its gemv order (an FMA per block). `prefetch`: ask for the tiles
    /// ahead (`matmul::first_pass` decides, as for the AVX-512 kernels).
    /// Returns `[token][row]`.
    ///
    /// # Safety
    /// The CPU must support AVX2, FMA and F16C; `tiles.len() == ys[t].len()`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn q4k_tiles<const T: usize>(
        tiles: &[Tile],
        ys: [&[BlockQ8K]; T],
        pairs: [bool; T],
        prefetch: bool,
    ) -> [[f32; 16]; T] {
        let mut acc = [[_mm256_setzero_ps(); T]; 2];
        let mut accm = [[_mm256_setzero_ps(); T]; 2];
        for (b, t) in tiles.iter().enumerate() {
            // SAFETY: every row has one block per tile.
            let yb: [&BlockQ8K; T] = unsafe { blocks_at(ys, b) };
            for h in 0..2 {
                // SAFETY: h < 2.
                unsafe { q4k_block_half(t, yb, (pairs, prefetch), h, &mut acc[h], &mut accm[h]) };
            }
        }
        let mut out = [[0.0f32; 16]; T];
        for (h, (acc, accm)) in acc.iter().zip(&accm).enumerate() {
            for r in 0..T {
                let v = _mm256_sub_ps(acc[r], accm[r]);
                // SAFETY: 32 writable bytes.
                unsafe { _mm256_storeu_ps(out[r][8 * h..].as_mut_ptr(), v) };
            }
        }
        out
    }

    /// One block of [`q4k_tiles`] for rows `8h..8h + 8`, into their
    /// accumulators (both halves of each line are read while it is loaded).
    ///
    /// # Safety
    /// AVX2, FMA and F16C; `h < 2`.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn q4k_block_half<const T: usize>(
        t: &Tile,
        yb: [&BlockQ8K; T],
        (pairs, prefetch): ([bool; T], bool),
        h: usize,
        acc: &mut [__m256; T],
        accm: &mut [__m256; T],
    ) {
        let mask = _mm256_set1_epi8(0x0F);
        let mut isums = [[_mm256_setzero_si256(); T]; 4];
        let mut imins = [[_mm256_setzero_si256(); T]; 4];
        for p in 0..4 {
            let mut ia = [_mm256_setzero_si256(); T];
            let mut ib = [_mm256_setzero_si256(); T];
            for g in 0..8 {
                if prefetch {
                    prefetch::tile_line(t, 8 * p + g + 32 * h);
                }
                // SAFETY: `qs[8p + g]` is a 64-byte aligned line.
                let w = unsafe {
                    _mm256_load_si256(t.qs[8 * p + g].as_ptr().add(32 * h) as *const __m256i)
                };
                let lo = _mm256_and_si256(w, mask);
                let hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), mask);
                for r in 0..T {
                    let xa = bcast4(&yb[r].qs, 64 * p + 4 * g);
                    let xb = bcast4(&yb[r].qs, 64 * p + 32 + 4 * g);
                    ia[r] = _mm256_add_epi16(ia[r], _mm256_maddubs_epi16(lo, xa));
                    ib[r] = _mm256_add_epi16(ib[r], _mm256_maddubs_epi16(hi, xb));
                }
            }
            let (a, bb) = (2 * p, 2 * p + 1);
            let sa = dup16(eight(&t.scales[a][8 * h..]), false);
            let sb = dup16(eight(&t.scales[bb][8 * h..]), false);
            // SAFETY: 8 readable bytes each.
            let (ma, mb) = unsafe {
                (
                    _mm256_cvtepu8_epi32(_mm_loadl_epi64(
                        t.mins[a][8 * h..].as_ptr() as *const __m128i
                    )),
                    _mm256_cvtepu8_epi32(_mm_loadl_epi64(
                        t.mins[bb][8 * h..].as_ptr() as *const __m128i
                    )),
                )
            };
            let mins = _mm256_or_si256(ma, _mm256_slli_epi32(mb, 16));
            for r in 0..T {
                let b32 = |j: usize| yb[r].bsums[2 * j] as i32 + yb[r].bsums[2 * j + 1] as i32;
                isums[p][r] =
                    _mm256_add_epi32(_mm256_madd_epi16(ia[r], sa), _mm256_madd_epi16(ib[r], sb));
                imins[p][r] = _mm256_madd_epi16(mins, pair16(b32(a), b32(bb)));
            }
        }
        // SAFETY: 8 readable f32 each.
        let (d, dmin) = unsafe {
            (
                _mm256_loadu_ps(t.d[8 * h..].as_ptr()),
                _mm256_loadu_ps(t.dmin[8 * h..].as_ptr()),
            )
        };
        for r in 0..T {
            let yd = _mm256_set1_ps(yb[r].d);
            let (dd, dm) = (_mm256_mul_ps(d, yd), _mm256_mul_ps(dmin, yd));
            if pairs[r] {
                for p in 0..4 {
                    acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isums[p][r]), dd, acc[r]);
                    accm[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(imins[p][r]), dm, accm[r]);
                }
            } else {
                let mut isum = _mm256_setzero_si256();
                let mut imin = _mm256_setzero_si256();
                for p in 0..4 {
                    isum = _mm256_add_epi32(isum, isums[p][r]);
                    imin = _mm256_add_epi32(imin, imins[p][r]);
                }
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), dd, acc[r]);
                accm[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(imin), dm, accm[r]);
            }
        }
    }

    /// 16 Q6_K rows against `T` Q8_K rows: with `TILED` the order of ggml's
    /// tiled kernel,
    /// else `ggml_vec_dot_q6_K_q8_K`'s
    /// ([`crate::backend::cpu::kernels::q6k_tiles::x86::q6k_tiles`]: 8
    /// lanes per row, lane `l` gathering group `l % 4` of the sub-blocks `s`
    /// with `s % 2 == l / 4`, less `32·(bsums·scales)` of sub-blocks `2l`
    /// and `2l + 1`). `prefetch` as in [`q4k_tiles`]. Returns `[token][row]`.
    ///
    /// # Safety
    /// The CPU must support AVX2, FMA and F16C; `tiles.len() == ys[t].len()`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn q6k_tiles<const T: usize, const TILED: bool>(
        tiles: &[Tile6],
        ys: [&[BlockQ8K]; T],
        prefetch: bool,
    ) -> [[f32; 16]; T] {
        let mut acc = [[[_mm256_setzero_ps(); 8]; T]; 2];
        let mut tacc = [[_mm256_setzero_ps(); T]; 2];
        for (b, t) in tiles.iter().enumerate() {
            // SAFETY: every row has one block per tile.
            let yb: [&BlockQ8K; T] = unsafe { blocks_at(ys, b) };
            for h in 0..2 {
                // SAFETY: h < 2.
                unsafe {
                    q6k_block_half::<T, TILED>(t, yb, (h, prefetch), &mut acc[h], &mut tacc[h])
                };
            }
        }
        let mut out = [[0.0f32; 16]; T];
        for h in 0..2 {
            for r in 0..T {
                let v = if TILED {
                    tacc[h][r]
                } else {
                    lanes8(&acc[h][r])
                };
                // SAFETY: 32 writable bytes.
                unsafe { _mm256_storeu_ps(out[r][8 * h..].as_mut_ptr(), v) };
            }
        }
        out
    }

    /// One block of [`q6k_tiles`] for rows `8h..8h + 8`, into their
    /// accumulators (`acc`: the vec_dot order's 8 lanes, `tacc`: the tiled order's).
    ///
    /// # Safety
    /// AVX2, FMA and F16C; `h < 2`.
    #[inline]
    // `l` also picks the lane's lines and offsets, not only its accumulator.
    #[allow(clippy::needless_range_loop)]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn q6k_block_half<const T: usize, const TILED: bool>(
        t: &Tile6,
        yb: [&BlockQ8K; T],
        (h, prefetch): (usize, bool),
        acc: &mut [[__m256; 8]; T],
        tacc: &mut [__m256; T],
    ) {
        let mut sc = [_mm256_setzero_si256(); 16];
        for (s, sc) in sc.iter_mut().enumerate() {
            let mut bytes = [0u8; 8];
            for (b, &x) in bytes.iter_mut().zip(&t.scales[s][8 * h..]) {
                *b = x as u8;
            }
            *sc = dup16(bytes, true);
        }
        // SAFETY: 8 readable f32.
        let d = unsafe { _mm256_loadu_ps(t.d[8 * h..].as_ptr()) };
        let mut dd = [d; T];
        for (dd, y) in dd.iter_mut().zip(yb) {
            *dd = _mm256_mul_ps(d, _mm256_set1_ps(y.d));
        }
        if prefetch && h == 0 {
            // The scales and d.
            for i in 48..53 {
                prefetch::tile_line(t, i);
            }
        }
        if TILED {
            let mut sum = [_mm256_setzero_si256(); T];
            // Lines `m + 16q` and `m + 1 + 16q` (`m` even) are groups `m % 4`
            // and `m % 4 + 1` of one sub-block: their pairs are summed in i16
            // (at most 2·16128, exact) before one scaling `madd`; the tiled
            // order only needs the total.
            for m in (0..16).step_by(2) {
                // SAFETY: m + 1 < 16, h < 2; AVX2.
                let (w0, w1) = unsafe {
                    (
                        q6k_lines(t, m, h, prefetch),
                        q6k_lines(t, m + 1, h, prefetch),
                    )
                };
                for q in 0..4 {
                    let i = m + 16 * q;
                    for r in 0..T {
                        let p = _mm256_add_epi16(
                            _mm256_maddubs_epi16(w0[q], bcast4(&yb[r].qs, 4 * i)),
                            _mm256_maddubs_epi16(w1[q], bcast4(&yb[r].qs, 4 * i + 4)),
                        );
                        sum[r] = _mm256_add_epi32(sum[r], _mm256_madd_epi16(p, sc[i / 4]));
                    }
                }
            }
            for l in 0..8 {
                let off = q6k_offsets::<T>(&sc, yb, l);
                for r in 0..T {
                    sum[r] = _mm256_sub_epi32(sum[r], off[r]);
                }
            }
            for r in 0..T {
                let f = _mm256_mul_ps(_mm256_cvtepi32_ps(sum[r]), d);
                tacc[r] = _mm256_fmadd_ps(f, _mm256_set1_ps(yb[r].d), tacc[r]);
            }
            return;
        }
        // Lane `l` gathers lines `i` with `i % 16 ∈ {l, l + 8}` (group
        // `l % 4` of the sub-blocks `s` with `s % 2 == l / 4`); one lane at
        // a time keeps only `T` integer sums live (an exact sum in any order).
        for l in 0..8 {
            let mut sum = [_mm256_setzero_si256(); T];
            for m in [l, l + 8] {
                // SAFETY: m < 16, h < 2; AVX2.
                let w = unsafe { q6k_lines(t, m, h, prefetch) };
                for q in 0..4 {
                    let i = m + 16 * q;
                    for r in 0..T {
                        let x = bcast4(&yb[r].qs, 4 * i);
                        let p = _mm256_madd_epi16(_mm256_maddubs_epi16(w[q], x), sc[i / 4]);
                        sum[r] = _mm256_add_epi32(sum[r], p);
                    }
                }
            }
            let off = q6k_offsets::<T>(&sc, yb, l);
            for r in 0..T {
                let v = _mm256_sub_epi32(sum[r], off[r]);
                acc[r][l] = _mm256_fmadd_ps(dd[r], _mm256_cvtepi32_ps(v), acc[r][l]);
            }
        }
    }

    /// The `-32` of every Q6_K value that lane `l` of the vec_dot order
    /// subtracts, `32 Σ scale · bsum` over sub-blocks `2l` and `2l + 1`, per token.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn q6k_offsets<const T: usize>(
        sc: &[__m256i; 16],
        yb: [&BlockQ8K; T],
        l: usize,
    ) -> [__m256i; T] {
        // Low i16 of each lane: scale 2l; high: scale 2l + 1.
        let scales = _mm256_blend_epi16(sc[2 * l], sc[2 * l + 1], 0xAA);
        let mut out = [scales; T];
        for (o, y) in out.iter_mut().zip(yb) {
            let bs = pair16(y.bsums[2 * l] as i32, y.bsums[2 * l + 1] as i32);
            *o = _mm256_slli_epi32(_mm256_madd_epi16(scales, bs), 5);
        }
        out
    }

    /// 16 Q5_K rows against `T` Q8_K rows: with `TILED` the order of ggml's
    /// tiled kernel, else `ggml_vec_dot_q5_K_q8_K`'s (8 lanes per row, lane
    /// `g` gathering group `g` of every sub-block, the mins summed apart), as
    /// [`crate::backend::cpu::kernels::q5k_tiles::x86::gemv_tile`]. Returns
    /// `[token][row]`.
    ///
    /// # Safety
    /// The CPU must support AVX2, FMA and F16C; `tiles.len() == ys[t].len()`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn q5k_tiles<const T: usize, const TILED: bool>(
        tiles: &[Tile5],
        ys: [&[BlockQ8K]; T],
    ) -> [[f32; 16]; T] {
        let mut acc = [[[_mm256_setzero_ps(); 8]; T]; 2];
        let mut summs = [[_mm256_setzero_ps(); T]; 2];
        let mut tacc = [[_mm256_setzero_ps(); T]; 2];
        for (b, t) in tiles.iter().enumerate() {
            // SAFETY: every row has one block per tile.
            let yb: [&BlockQ8K; T] = unsafe { blocks_at(ys, b) };
            for h in 0..2 {
                let sums = (&mut acc[h], &mut summs[h], &mut tacc[h]);
                // SAFETY: h < 2.
                unsafe { q5k_block_half::<T, TILED>(t, yb, h, sums) };
            }
        }
        let mut out = [[0.0f32; 16]; T];
        for h in 0..2 {
            for r in 0..T {
                let v = if TILED {
                    tacc[h][r]
                } else {
                    _mm256_add_ps(lanes8(&acc[h][r]), summs[h][r])
                };
                // SAFETY: 32 writable bytes.
                unsafe { _mm256_storeu_ps(out[r][8 * h..].as_mut_ptr(), v) };
            }
        }
        out
    }

    /// The float sums of [`q5k_tiles`] for 8 rows: the vec_dot order's 8
    /// lanes and mins, the tiled order's total.
    type Q5kSums<'a, const T: usize> = (
        &'a mut [[__m256; 8]; T],
        &'a mut [__m256; T],
        &'a mut [__m256; T],
    );

    /// One block of [`q5k_tiles`] for rows `8h..8h + 8`.
    ///
    /// # Safety
    /// AVX2, FMA and F16C; `h < 2`.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn q5k_block_half<const T: usize, const TILED: bool>(
        t: &Tile5,
        yb: [&BlockQ8K; T],
        h: usize,
        (acc, summs, tacc): Q5kSums<'_, T>,
    ) {
        let mut sc = [_mm256_setzero_si256(); 8];
        for (s, sc) in sc.iter_mut().enumerate() {
            *sc = dup16(eight(&t.scales[s][8 * h..]), false);
        }
        // The tiled order only needs the exact total: lane 0.
        let mut lanes = [[_mm256_setzero_si256(); 8]; T];
        for (s, &scale) in sc.iter().enumerate() {
            for g in 0..8 {
                prefetch::tile_line(t, 8 * s + g + 64 * h);
                // SAFETY: `qs[8s + g]` is a 64-byte aligned line.
                let w = unsafe {
                    _mm256_load_si256(t.qs[8 * s + g].as_ptr().add(32 * h) as *const __m256i)
                };
                let l = if TILED { 0 } else { g };
                for r in 0..T {
                    let x = bcast4(&yb[r].qs, 32 * s + 4 * g);
                    let p = _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), scale);
                    lanes[r][l] = _mm256_add_epi32(lanes[r][l], p);
                }
            }
        }
        let mut mins = [_mm256_setzero_si256(); T];
        for p in 0..4 {
            let (a, bb) = (2 * p, 2 * p + 1);
            let ma = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(i64::from_le_bytes(eight(
                &t.mins[a][8 * h..],
            ))));
            let mb = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(i64::from_le_bytes(eight(
                &t.mins[bb][8 * h..],
            ))));
            let m = _mm256_or_si256(ma, _mm256_slli_epi32(mb, 16));
            for r in 0..T {
                let b32 = |j: usize| yb[r].bsums[2 * j] as i32 + yb[r].bsums[2 * j + 1] as i32;
                mins[r] = _mm256_add_epi32(mins[r], _mm256_madd_epi16(m, pair16(b32(a), b32(bb))));
            }
        }
        // SAFETY: 8 readable f32 each.
        let (d, dmin) = unsafe {
            (
                _mm256_loadu_ps(t.d[8 * h..].as_ptr()),
                _mm256_loadu_ps(t.dmin[8 * h..].as_ptr()),
            )
        };
        for r in 0..T {
            let mins = _mm256_cvtepi32_ps(mins[r]);
            if TILED {
                let s1 = _mm256_cvtepi32_ps(lanes[r][0]);
                let v = _mm256_fnmadd_ps(dmin, mins, _mm256_mul_ps(s1, d));
                tacc[r] = _mm256_fmadd_ps(v, _mm256_set1_ps(yb[r].d), tacc[r]);
                continue;
            }
            let dd = _mm256_mul_ps(_mm256_set1_ps(yb[r].d), d);
            let dm = _mm256_mul_ps(_mm256_set1_ps(-yb[r].d), dmin);
            summs[r] = _mm256_fmadd_ps(dm, mins, summs[r]);
            for (a, &lane) in acc[r].iter_mut().zip(&lanes[r]) {
                *a = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(lane), *a);
            }
        }
    }
}
