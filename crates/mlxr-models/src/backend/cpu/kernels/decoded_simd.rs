//! The x86 twins of [`super::decoded`]'s product: the same dot per output
//! (eight lanes summed in column order, a multiply then an add, the lanes
//! summed 0 to 7, then the tail), computed for a tile of rows × tokens at
//! once so that it runs at the floating-point units' throughput instead of
//! one add's latency.
//!
//! One output's eight lanes are one chain of dependent adds: alone (the
//! portable twin) that chain runs at one add per add latency, ~2 products a
//! cycle. Here `R` decoded rows and `T` tokens keep `R·T` independent
//! chains in registers, and each 8-column step loads `R + T` vectors for
//! `R·T` products (the old twin loaded two a product). A step of one token
//! (decode) takes 8 rows, so 8 chains hide the add latency; larger steps
//! take 4 rows × 3 tokens on AVX2 (12 accumulators + 3 activations + 1
//! weight: its 16 registers) and 4 × 6 on AVX-512 (32 registers). Each
//! chain is still exactly the portable lane sum, so the bits are the same
//! whatever the tile or the batch.
//!
//! A step of more than [`TOKEN_BLOCK`] tokens decodes its task's rows once
//! and passes over them a block of tokens at a time, so the block's
//! activations stay in L2 while every row tile reads them.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;
use std::ops::Range;

use super::decoded::{finish, tail_dot, Out, RowDecode};
use super::prefetch;

/// Tokens a pass over a task's decoded rows reads.
const TOKEN_BLOCK: usize = 64;

/// How many rows ahead of the one they decode the decoders ask for codes:
/// a decode step streams the whole weight from memory, and without these
/// requests a one-token product of FP8 weights past the caches ran ~20%
/// slower (a Zen 4 EPYC).
pub(super) const AHEAD_ROWS: usize = 4;

/// Asks for the lines of the `len` bytes at `at`, which may lie past the
/// end of the weight (formed with wrapping arithmetic and only prefetched).
#[inline(always)]
pub(super) fn prefetch_bytes(at: *const u8, len: usize) {
    for i in (0..len).step_by(64) {
        prefetch::line(at.wrapping_add(i));
    }
}

/// 64 bytes of decoded values: the buffer's lines, so that the decoders'
/// 64-byte stores and the tiles' 32-byte loads never split across lines.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([f32; 16]);

/// A thread's decoded rows, kept across its tasks of one product (zeroing a
/// fresh buffer per task cost 5% of a decode step).
#[derive(Default)]
pub(super) struct Scratch(Vec<Line>);

/// [`super::decoded`]'s product of `rows` for every token, `[rows, m]`.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn rows_avx2<W: RowDecode>(
    w: &W,
    rows: Range<usize>,
    x: &[f32],
    m: usize,
    scratch: &mut Scratch,
) -> Vec<f32> {
    // SAFETY: this function's features.
    unsafe {
        if m == 1 {
            tiled::<W, false, 8, 1>(w, rows, x, m, scratch)
        } else {
            tiled::<W, false, 4, 3>(w, rows, x, m, scratch)
        }
    }
}

/// [`rows_avx2`] decoding with AVX-512 and on 32 vector registers.
///
/// # Safety
/// The CPU must have AVX2, FMA, F16C and AVX-512 F, BW and VL.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
pub(super) unsafe fn rows_avx512<W: RowDecode>(
    w: &W,
    rows: Range<usize>,
    x: &[f32],
    m: usize,
    scratch: &mut Scratch,
) -> Vec<f32> {
    // SAFETY: this function's features.
    unsafe {
        if m == 1 {
            tiled::<W, true, 8, 1>(w, rows, x, m, scratch)
        } else {
            tiled::<W, true, 4, 6>(w, rows, x, m, scratch)
        }
    }
}

/// Decodes `rows` (with AVX-512 if `AVX512`) and multiplies them in tiles
/// of `R` rows × up to `T` tokens. Returns `[rows.len(), m]`.
///
/// # Safety
/// AVX2 and FMA, and AVX-512 F/BW/VL if `AVX512`.
#[inline(always)]
unsafe fn tiled<W: RowDecode, const AVX512: bool, const R: usize, const T: usize>(
    w: &W,
    rows: Range<usize>,
    x: &[f32],
    m: usize,
    scratch: &mut Scratch,
) -> Vec<f32> {
    let (n, cols) = (rows.len(), w.cols());
    debug_assert_eq!(x.len(), m * cols);
    let mut part = vec![0.0f32; n * m];
    // R rows at a time while the step is one token block (the buffer stays
    // in L1), else all of them once for every block.
    let chunk = if m <= TOKEN_BLOCK { R } else { n };
    let lines = &mut scratch.0;
    let len = chunk.min(n) * cols;
    lines.resize(lines.len().max(len.div_ceil(16)), Line([0.0; 16]));
    // SAFETY: `lines` holds at least `len` f32 values, contiguous and
    // initialised; `buf` borrows it mutably for this call.
    let buf = unsafe { std::slice::from_raw_parts_mut(lines.as_mut_ptr().cast::<f32>(), len) };
    for c0 in (0..n).step_by(chunk) {
        let c_n = chunk.min(n - c0);
        for (i, out) in buf.chunks_exact_mut(cols).take(c_n).enumerate() {
            let r = rows.start + c0 + i;
            // SAFETY: the caller's features.
            unsafe {
                if AVX512 {
                    w.decode_row_avx512(r, out);
                } else {
                    w.decode_row_avx2(r, out);
                }
            }
        }
        for t0 in (0..m).step_by(TOKEN_BLOCK) {
            let t_end = (t0 + TOKEN_BLOCK).min(m);
            for r0 in (0..c_n).step_by(R) {
                let r_n = R.min(c_n - r0);
                // Missing rows of the last tile repeat its first row; their
                // outputs are dropped.
                let ws: [&[f32]; R] = std::array::from_fn(|i| {
                    let i = r0 + if i < r_n { i } else { 0 };
                    &buf[i * cols..(i + 1) * cols]
                });
                let mut t = t0;
                while t < t_end {
                    let t_n = T.min(t_end - t);
                    let xs = |k: usize| &x[(t + k) * cols..(t + k + 1) * cols];
                    let mut put = |i: usize, k: usize, v: f32| {
                        if i < r_n {
                            part[(c0 + r0 + i) * m + t + k] = v;
                        }
                    };
                    // SAFETY: the caller's features.
                    unsafe {
                        match t_n {
                            1 => tile::<R, 1>(ws, [xs(0)], &mut put),
                            2 => tile::<R, 2>(ws, std::array::from_fn(xs), &mut put),
                            3 => tile::<R, 3>(ws, std::array::from_fn(xs), &mut put),
                            4 => tile::<R, 4>(ws, std::array::from_fn(xs), &mut put),
                            5 => tile::<R, 5>(ws, std::array::from_fn(xs), &mut put),
                            _ => tile::<R, 6>(ws, std::array::from_fn(xs), &mut put),
                        }
                    }
                    t += t_n;
                }
            }
        }
    }
    part
}

/// The dots of `R` rows with `T` tokens (all `cols` long), handed to `put`
/// as (row, token, value).
///
/// # Safety
/// AVX2.
#[inline(always)]
unsafe fn tile<const R: usize, const T: usize>(
    ws: [&[f32]; R],
    xs: [&[f32]; T],
    put: &mut impl FnMut(usize, usize, f32),
) {
    let cols = ws[0].len();
    debug_assert!(ws.iter().chain(&xs).all(|v| v.len() == cols));
    let body = cols - cols % 8;
    // SAFETY: AVX2 (the caller's); every load reads 8 values at `j + 8 <=
    // body <= cols` of a slice of `cols` values.
    unsafe {
        let mut acc = [[_mm256_setzero_ps(); T]; R];
        let mut j = 0;
        while j < body {
            // Loops, not `array::from_fn` closures: those may stay out of
            // line in a `target_feature` function.
            let mut xv = [_mm256_setzero_ps(); T];
            for k in 0..T {
                xv[k] = _mm256_loadu_ps(xs[k].as_ptr().add(j));
            }
            for i in 0..R {
                let wv = _mm256_loadu_ps(ws[i].as_ptr().add(j));
                for k in 0..T {
                    acc[i][k] = _mm256_add_ps(acc[i][k], _mm256_mul_ps(wv, xv[k]));
                }
            }
            j += 8;
        }
        for i in 0..R {
            for k in 0..T {
                let mut lanes = [0.0f32; 8];
                _mm256_storeu_ps(lanes.as_mut_ptr(), acc[i][k]);
                put(
                    i,
                    k,
                    finish(&lanes, tail_dot(&ws[i][body..], &xs[k][body..])),
                );
            }
        }
    }
}

/// The most tokens a step may have for the fused product.
pub(super) const FUSED_TOKENS: usize = 4;

/// The product of `rows` for a step of `m <= FUSED_TOKENS` tokens without
/// a decode buffer: each tile's codes decoded 8 at a time straight into a
/// register ([`RowDecode::load8`]) and multiplied there, the outputs
/// written into `out`. The same dot per output, bit for bit.
///
/// # Safety
/// AVX2, FMA and F16C; [`RowDecode::fusable`]; `1 <= m <= FUSED_TOKENS` and
/// `x` holds `m` tokens; `out` is `[m, w.rows()]` and no other thread
/// writes `rows`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn fused_avx2<W: RowDecode>(
    w: &W,
    rows: Range<usize>,
    x: &[f32],
    m: usize,
    out: &Out,
) {
    // SAFETY: this function's features, the caller's rows.
    unsafe { fused_tiles::<W, false>(w, rows, x, m, out) }
}

/// [`fused_avx2`] with AVX-512 decodes and 32 vector registers.
///
/// # Safety
/// AVX2, FMA, F16C and AVX-512 F/BW/VL; as [`fused_avx2`].
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
pub(super) unsafe fn fused_avx512<W: RowDecode>(
    w: &W,
    rows: Range<usize>,
    x: &[f32],
    m: usize,
    out: &Out,
) {
    // SAFETY: this function's features, the caller's rows.
    unsafe { fused_tiles::<W, true>(w, rows, x, m, out) }
}

/// The tile shape for `m` tokens: 8 rows for one, else 4.
///
/// # Safety
/// As [`fused_avx2`] (and AVX-512 F/BW/VL if `AVX512`).
#[inline(always)]
unsafe fn fused_tiles<W: RowDecode, const AVX512: bool>(
    w: &W,
    rows: Range<usize>,
    x: &[f32],
    m: usize,
    out: &Out,
) {
    // SAFETY: the caller's features and rows.
    unsafe {
        match m {
            1 => fused::<W, AVX512, 8, 1>(w, rows, x, out),
            2 => fused::<W, AVX512, 4, 2>(w, rows, x, out),
            3 => fused::<W, AVX512, 4, 3>(w, rows, x, out),
            _ => fused::<W, AVX512, 4, 4>(w, rows, x, out),
        }
    }
}

/// Tiles of `R` rows × all `T` tokens: per 8 columns, each row's values
/// decoded into a register by [`RowDecode::load8`] (or by
/// [`RowDecode::value`] where a chunk leaves its run) and multiplied into
/// the tile's `R·T` lane sums.
///
/// # Safety
/// As [`fused_avx2`], AVX-512 F/BW/VL if `AVX512`; `x` holds `T` tokens.
#[inline(always)]
unsafe fn fused<W: RowDecode, const AVX512: bool, const R: usize, const T: usize>(
    w: &W,
    rows: Range<usize>,
    x: &[f32],
    out: &Out,
) {
    let cols = w.cols();
    debug_assert_eq!(x.len(), T * cols);
    let body = cols - cols % 8;
    let mut r0 = rows.start;
    while r0 < rows.end {
        let r_n = R.min(rows.end - r0);
        // Missing rows of the last tile repeat its first row; their
        // outputs are dropped.
        let mut rs = [r0; R];
        for (i, r) in rs.iter_mut().enumerate().take(r_n) {
            *r = r0 + i;
        }
        let mut base = [std::ptr::null(); R];
        for i in 0..R {
            base[i] = w.base(rs[i]);
        }
        let next = r0 + R * AHEAD_TILES;
        // SAFETY: the caller's features; the loads of `x` read 8 values at
        // `j + 8 <= body <= cols` of each token's `cols`.
        unsafe {
            let mut acc = [[_mm256_setzero_ps(); T]; R];
            let mut j = 0;
            while j < body {
                // The run every row of the tile decodes with one scale.
                let mut end = body;
                let mut scale = [_mm256_setzero_ps(); R];
                let mut whole = true;
                for i in 0..R {
                    match w.run(rs[i], j) {
                        Some((s, e)) => {
                            scale[i] = _mm256_set1_ps(s);
                            end = end.min(e);
                        }
                        None => whole = false,
                    }
                }
                if !whole {
                    // One chunk element by element.
                    let mut xv = [_mm256_setzero_ps(); T];
                    for (k, v) in xv.iter_mut().enumerate() {
                        *v = _mm256_loadu_ps(x.as_ptr().add(k * cols + j));
                    }
                    for i in 0..R {
                        let mut v = [0.0f32; 8];
                        for (l, v) in v.iter_mut().enumerate() {
                            *v = w.value(rs[i], j + l);
                        }
                        let wv = _mm256_loadu_ps(v.as_ptr());
                        for k in 0..T {
                            acc[i][k] = _mm256_add_ps(acc[i][k], _mm256_mul_ps(wv, xv[k]));
                        }
                    }
                    j += 8;
                    continue;
                }
                while j < end {
                    // One line a step: a tile's 8 steps over 64 columns
                    // ask for that span of every row `AHEAD_TILES` on.
                    w.prefetch_line(next + (j / 8) % R, j);
                    let mut xv = [_mm256_setzero_ps(); T];
                    for (k, v) in xv.iter_mut().enumerate() {
                        *v = _mm256_loadu_ps(x.as_ptr().add(k * cols + j));
                    }
                    for i in 0..R {
                        let wv = w.load8::<AVX512>(base[i], j, scale[i]);
                        for k in 0..T {
                            acc[i][k] = _mm256_add_ps(acc[i][k], _mm256_mul_ps(wv, xv[k]));
                        }
                    }
                    j += 8;
                }
            }
            for i in 0..r_n {
                let mut tail = [0.0f32; 8];
                for (c, v) in tail.iter_mut().enumerate().take(cols - body) {
                    *v = w.value(rs[i], body + c);
                }
                for k in 0..T {
                    let mut lanes = [0.0f32; 8];
                    _mm256_storeu_ps(lanes.as_mut_ptr(), acc[i][k]);
                    let xs = &x[k * cols + body..(k + 1) * cols];
                    let v = finish(&lanes, tail_dot(&tail[..cols - body], xs));
                    out.set(k, rs[i], v);
                }
            }
        }
        r0 += R;
    }
}

/// How many tiles ahead of the one it multiplies the fused product asks for
/// codes, one line a step: a SmolLM2-135M-as-FP8 decode step ran 55 → 87
/// tok/s with these (AVX-512, 2 threads), where asking for a tile's rows
/// all at once when it starts did not pay (52 → 55).
const AHEAD_TILES: usize = 2;
