//! CPU quantized matmul kernels that compute what ggml's x86 CPU backend
//! computes, bit for bit.
//!
//! `y[m, n] = x[m, k] · W[n, k]ᵀ` for `W` in Q4_1 (activations quantized to
//! Q8_1), Q5_0 or Q8_0 (activations quantized to Q8_0). ggml (AVX2/AVX-512 build)
//! runs `quantize_row_q8_1`/`quantize_row_q8_0` (round half to even, f32
//! scale and sum products) and `ggml_vec_dot_q4_1_q8_1`/`ggml_vec_dot_q5_0_q8_0`
//! per output element; for Q5_0 with several tokens llamafile's tinyBLAS
//! kernel runs instead, which performs the same per-element float operations.
//! See [`q8`] and [`dot`] for the exact rounding and order.
//!
//! Q4_K and Q6_K weights pair with Q8_K activations ([`q8k`]); the float order
//! depends on the token count as in ggml (see [`kquants`]).

pub mod affine;
pub mod attention;
pub mod dot;
pub mod ggml_f32;
pub mod kquants;
pub mod ops;
pub mod q32_tiles;
pub mod q4k_tiles;
pub mod q5k_tiles;
pub mod q8;
pub mod q8k;

use std::sync::{Arc, OnceLock};

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{CpuStorage, CustomOp1, Layout, Shape, Tensor};

use q8::{BlockQ8, QK};

/// Weight types with a kernel here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightKind {
    Q4_1,
    Q5_0,
    Q8_0,
    /// Only through the AVX-512 VNNI tiles ([`q32_tiles`]); elsewhere
    /// candle's kernel runs.
    Q4_0,
    /// Like [`Self::Q4_0`].
    Q5_1,
    /// Q4_K with Q8_K activations, as ggml's repacked `block_q4_Kx8` kernels
    /// compute it (the weight's row count must be a multiple of 8).
    Q4K,
    /// Q6_K with Q8_K activations (`ggml_vec_dot_q6_K_q8_K`).
    Q6K,
    /// Q5_K with Q8_K activations (`ggml_vec_dot_q5_K_q8_K`); like
    /// [`Self::Q4_0`], only through the tiles.
    Q5K,
}

impl WeightKind {
    pub fn from_dtype(dtype: GgmlDType) -> Option<Self> {
        match dtype {
            GgmlDType::Q4_1 => Some(Self::Q4_1),
            GgmlDType::Q5_0 => Some(Self::Q5_0),
            GgmlDType::Q8_0 => Some(Self::Q8_0),
            GgmlDType::Q4_0 => Some(Self::Q4_0),
            GgmlDType::Q5_1 => Some(Self::Q5_1),
            GgmlDType::Q4K => Some(Self::Q4K),
            GgmlDType::Q6K => Some(Self::Q6K),
            GgmlDType::Q5K => Some(Self::Q5K),
            _ => None,
        }
    }

    fn block_bytes(self) -> usize {
        match self {
            Self::Q4_1 => dot::Q4_1_BYTES,
            Self::Q5_0 => dot::Q5_0_BYTES,
            Self::Q8_0 => dot::Q8_0_BYTES,
            Self::Q4_0 => dot::Q4_0_BYTES,
            Self::Q5_1 => dot::Q5_1_BYTES,
            Self::Q4K => kquants::Q4_K_BYTES,
            Self::Q6K => kquants::Q6_K_BYTES,
            Self::Q5K => q5k_tiles::Q5_K_BYTES,
        }
    }

    /// Elements per weight block.
    pub fn block_elems(self) -> usize {
        if self.is_k_quant() {
            q8k::QK_K
        } else {
            QK
        }
    }

    fn is_k_quant(self) -> bool {
        matches!(self, Self::Q4K | Self::Q6K | Self::Q5K)
    }

    #[cfg(target_arch = "x86_64")]
    fn x86_code(self) -> u8 {
        match self {
            Self::Q4_1 => 0,
            Self::Q5_0 => 1,
            Self::Q8_0 => 2,
            Self::Q4_0 | Self::Q5_1 => unreachable!("Q4_0/Q5_1 run through the tiles"),
            Self::Q4K | Self::Q6K | Self::Q5K => unreachable!("K-quants use kquant_matmul"),
        }
    }

    /// Whether this kind has a kernel here only in [`q32_tiles`].
    fn tiles_only(self) -> bool {
        matches!(self, Self::Q4_0 | Self::Q5_1 | Self::Q5K)
    }

    /// Q4_1/Q5_1 pair with Q8_1 activations (which carry a sum), the others
    /// with Q8_0.
    fn activation_has_sum(self) -> bool {
        matches!(self, Self::Q4_1 | Self::Q5_1)
    }
}

type DotFn = fn(&[u8], &[BlockQ8]) -> f32;

fn simd_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            dot::x86::available()
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    })
}

#[cfg(target_arch = "x86_64")]
fn dot_q4_1_simd(w: &[u8], y: &[BlockQ8]) -> f32 {
    // SAFETY: only selected after `simd_available()`; `w` has `y.len()` blocks.
    unsafe { dot::x86::dot_q4_1_q8_1(w, y) }
}

#[cfg(target_arch = "x86_64")]
fn dot_q8_0_simd(w: &[u8], y: &[BlockQ8]) -> f32 {
    // SAFETY: only selected after `simd_available()`; `w` has `y.len()` blocks.
    unsafe { dot::x86::dot_q8_0_q8_0(w, y) }
}

#[cfg(target_arch = "x86_64")]
fn dot_q5_0_simd(w: &[u8], y: &[BlockQ8]) -> f32 {
    // SAFETY: only selected after `simd_available()`; `w` has `y.len()` blocks.
    unsafe { dot::x86::dot_q5_0_q8_0(w, y) }
}

fn dot_fn(kind: WeightKind, simd: bool) -> DotFn {
    #[cfg(target_arch = "x86_64")]
    if simd && simd_available() && !kind.tiles_only() {
        return match kind {
            WeightKind::Q4_1 => dot_q4_1_simd,
            WeightKind::Q5_0 => dot_q5_0_simd,
            WeightKind::Q8_0 => dot_q8_0_simd,
            _ => unreachable!("no single-row SIMD kernel for {kind:?}"),
        };
    }
    let _ = simd;
    match kind {
        WeightKind::Q4_1 => dot::dot_q4_1_q8_1_scalar,
        WeightKind::Q5_0 => dot::dot_q5_0_q8_0_scalar,
        WeightKind::Q8_0 => dot::dot_q8_0_q8_0_scalar,
        WeightKind::Q4_0 => dot::dot_q4_0_q8_0_scalar,
        WeightKind::Q5_1 => dot::dot_q5_1_q8_1_scalar,
        WeightKind::Q4K | WeightKind::Q6K | WeightKind::Q5K => {
            unreachable!("K-quants use kquant_matmul")
        }
    }
}

/// A raw output pointer shared by threads that write disjoint elements.
#[derive(Clone, Copy)]
struct OutPtr(*mut f32);
// SAFETY: every thread writes a disjoint set of output elements.
unsafe impl Send for OutPtr {}
// SAFETY: as above.
unsafe impl Sync for OutPtr {}

impl OutPtr {
    /// # Safety
    /// `i` is in bounds and no other thread writes element `i`.
    unsafe fn write(self, i: usize, v: f32) {
        unsafe { *self.0.add(i) = v }
    }
}

/// How a quantized matmul orders each row's float arithmetic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RowOrder {
    /// As ggml computes it: for K-quants a row's order depends on how many
    /// rows share the call (gemm for groups of 4, tiled kernels from 8), so
    /// results are bit-identical to llama.cpp on the same batch.
    #[default]
    Ggml,
    /// Every row as ggml computes a single token. Results never depend on
    /// the batch, which a batching engine needs (batched equals alone).
    Independent,
}

/// Weights regrouped for the AVX-512 VNNI kernels (built once at load).
pub enum Tiles {
    Q4K(q4k_tiles::Q4KTiles),
    Q6K(q4k_tiles::Q6KTiles),
    Q32(q32_tiles::Q32Tiles),
    Q5K(q5k_tiles::Q5KTiles),
}

impl Tiles {
    /// The tiles of `w` (`[n, k]` raw GGUF blocks), when this CPU has the
    /// kernels and `n` is a multiple of their 16 rows.
    pub fn new(kind: WeightKind, w: &[u8], n: usize, k: usize) -> Option<Self> {
        if n % q4k_tiles::TILE_ROWS != 0 || !q4k_tiles::available() {
            return None;
        }
        Some(match kind {
            WeightKind::Q4K => Self::Q4K(q4k_tiles::Q4KTiles::new(w, n, k)),
            WeightKind::Q6K => Self::Q6K(q4k_tiles::Q6KTiles::new(w, n, k)),
            WeightKind::Q5K => Self::Q5K(q5k_tiles::Q5KTiles::new(w, n, k)),
            _ => Self::Q32(q32_tiles::Q32Tiles::new(kind, w, n, k)),
        })
    }
}

/// Tokens per tile: their quantized rows stay in L1 while weight rows stream.
const TOKEN_TILE: usize = 16;

/// `out[m, n] = x[m, k] · W[n, k]ᵀ` with `w` the raw GGUF blocks of `W`.
/// `simd = false` forces the portable path (same results).
pub fn matmul(
    kind: WeightKind,
    w: &[u8],
    x: &[f32],
    (m, n, k): (usize, usize, usize),
    out: &mut [f32],
    simd: bool,
) {
    matmul_with(kind, w, None, x, (m, n, k), out, simd, RowOrder::Ggml)
}

/// [`matmul`], with Q4_K weights optionally already in [`q4k_tiles`] form.
#[allow(clippy::too_many_arguments)]
fn matmul_with(
    kind: WeightKind,
    w: &[u8],
    tiles: Option<&Tiles>,
    x: &[f32],
    (m, n, k): (usize, usize, usize),
    out: &mut [f32],
    simd: bool,
    order: RowOrder,
) {
    if kind.is_k_quant() {
        return kquant_matmul(kind, w, tiles, x, (m, n, k), out, simd, order);
    }
    assert_eq!(k % QK, 0, "k must be a multiple of {QK}");
    let kb = k / QK;
    let row_bytes = kb * kind.block_bytes();
    assert_eq!(x.len(), m * k);
    assert_eq!(out.len(), m * n);
    if m == 0 || n == 0 {
        return;
    }

    let mut xq = vec![BlockQ8::default(); m * kb];
    let with_sum = kind.activation_has_sum();
    for_each_row(&mut xq, kb, x, k, |_, xrow, row| {
        q8::quantize_row(xrow, row, with_sum)
    });

    #[cfg(target_arch = "x86_64")]
    if simd && n % q32_tiles::TILE_ROWS == 0 && q32_tiles::available() {
        let local;
        let tiles = match tiles {
            Some(Tiles::Q32(t)) if t.kind() == kind => t,
            _ => {
                local = q32_tiles::Q32Tiles::new(kind, w, n, k);
                &local
            }
        };
        return q32_tile_matmul(tiles, &xq, (m, n, kb), out);
    }
    let _ = tiles;
    // Only this path reads the GGUF blocks (tiles, when given, replace them).
    assert!(w.len() >= n * row_bytes, "weight buffer too small");

    let dot = dot_fn(kind, simd);
    #[cfg(target_arch = "x86_64")]
    let multi = simd && simd_available() && !kind.tiles_only();
    #[cfg(not(target_arch = "x86_64"))]
    let multi = false;
    let n_threads = candle_core::utils::get_num_threads().clamp(1, n.div_ceil(8).max(1));
    let per_thread = n.div_ceil(n_threads);
    let out_ptr = OutPtr(out.as_mut_ptr());
    let xq = &xq;
    let xrow = |tok: usize| &xq[tok * kb..(tok + 1) * kb];
    candle_core::cpu::kernels::par_for_each(n_threads, |t| {
        let lo = (t * per_thread).min(n);
        let hi = ((t + 1) * per_thread).min(n);
        for t0 in (0..m).step_by(TOKEN_TILE) {
            let t1 = (t0 + TOKEN_TILE).min(m);
            for r in lo..hi {
                let wrow = &w[r * row_bytes..(r + 1) * row_bytes];
                let mut tok = t0;
                #[cfg(target_arch = "x86_64")]
                if multi {
                    while tok + 8 <= t1 {
                        let rows = std::array::from_fn(|j| xrow(tok + j));
                        // SAFETY: `multi` implies the CPU features; `wrow`
                        // holds `kb` blocks, as does every activation row.
                        let v = unsafe { dot::x86::dot_rows::<8>(kind.x86_code(), wrow, rows) };
                        for (j, v) in v.into_iter().enumerate() {
                            // SAFETY: in bounds; only this thread owns column r.
                            unsafe { out_ptr.write((tok + j) * n + r, v) };
                        }
                        tok += 8;
                    }
                    while tok + 4 <= t1 {
                        // SAFETY: `multi` implies the CPU features; `wrow`
                        // holds `kb` blocks, as does every activation row.
                        let v = unsafe {
                            dot::x86::dot_rows::<4>(
                                kind.x86_code(),
                                wrow,
                                [xrow(tok), xrow(tok + 1), xrow(tok + 2), xrow(tok + 3)],
                            )
                        };
                        for (j, v) in v.into_iter().enumerate() {
                            // SAFETY: in bounds; only this thread owns column r.
                            unsafe { out_ptr.write((tok + j) * n + r, v) };
                        }
                        tok += 4;
                    }
                }
                let _ = multi;
                for tok in tok..t1 {
                    let v = dot(wrow, xrow(tok));
                    // SAFETY: (tok, r) is in bounds and only this thread owns
                    // output column r.
                    unsafe { out_ptr.write(tok * n + r, v) };
                }
            }
        }
    });
}

/// `f(t, x row t, out row t)` for every row (see [`par_rows`]).
fn for_each_row<B: Send>(
    out: &mut [B],
    out_len: usize,
    x: &[f32],
    k: usize,
    f: impl Fn(usize, &[f32], &mut [B]) + Send + Sync,
) {
    par_rows(out, out_len, |first, rows| {
        let xs = &x[first * k..];
        for (i, (row, xrow)) in rows
            .chunks_exact_mut(out_len)
            .zip(xs.chunks_exact(k))
            .enumerate()
        {
            f(first + i, xrow, row);
        }
    });
}

/// `f(first row, rows)` over runs of whole rows of `out` (`row_len` each),
/// on the thread pool when there are enough rows to be worth it (prefill),
/// as one run on this thread otherwise. Row results must not depend on the
/// split (every caller's rows are independent).
pub(crate) fn par_rows<B: Send>(
    out: &mut [B],
    row_len: usize,
    f: impl Fn(usize, &mut [B]) + Send + Sync,
) {
    use rayon::prelude::*;
    const PARALLEL_FROM: usize = 16;
    let rows = out.len() / row_len.max(1);
    if rows < PARALLEL_FROM {
        return f(0, out);
    }
    let per_run = rows.div_ceil(4 * rayon::current_num_threads()).max(4);
    out.par_chunks_mut(per_run * row_len)
        .enumerate()
        .for_each(|(i, run)| f(i * per_run, run));
}

/// [`matmul`] for Q4_1/Q5_0/Q8_0 with [`q32_tiles`]: threads split the row
/// groups; tokens go two at a time through each group's tiles.
#[cfg(target_arch = "x86_64")]
fn q32_tile_matmul(
    tiles: &q32_tiles::Q32Tiles,
    xq: &[BlockQ8],
    (m, n, kb): (usize, usize, usize),
    out: &mut [f32],
) {
    use q32_tiles::{x86::tile_rows, TILE_ROWS};
    let kind = tiles.kind();
    let offsets = q32_tiles::lane_offsets(kind, xq);
    let groups = n / TILE_ROWS;
    let n_threads = candle_core::utils::get_num_threads().clamp(1, groups);
    let per_thread = groups.div_ceil(n_threads);
    let out_ptr = OutPtr(out.as_mut_ptr());
    let xrow = |tok: usize| &xq[tok * kb..(tok + 1) * kb];
    let offsets_of = |tok: usize| {
        if offsets.is_empty() {
            &[][..]
        } else {
            &offsets[tok * kb..(tok + 1) * kb]
        }
    };
    candle_core::cpu::kernels::par_for_each(n_threads, |t| {
        let lo = (t * per_thread).min(groups);
        let hi = ((t + 1) * per_thread).min(groups);
        for t0 in (0..m).step_by(TOKEN_TILE) {
            let t1 = (t0 + TOKEN_TILE).min(m);
            for g in lo..hi {
                let gt = tiles.group(g);
                let mut tok = t0;
                let emit = |tok: usize, v: [f32; TILE_ROWS]| {
                    for (i, v) in v.into_iter().enumerate() {
                        // SAFETY: in bounds; only this thread owns rows of group g.
                        unsafe { out_ptr.write(tok * n + g * TILE_ROWS + i, v) };
                    }
                };
                while tok + 2 <= t1 {
                    let ys = [xrow(tok), xrow(tok + 1)];
                    let os = [offsets_of(tok), offsets_of(tok + 1)];
                    // SAFETY: `available()` checked the CPU features; `gt` has
                    // one tile per activation block, `os` one entry per block.
                    let v = unsafe {
                        match kind {
                            WeightKind::Q4_1 => tile_rows::<0, 2>(gt, ys, os),
                            WeightKind::Q5_0 => tile_rows::<1, 2>(gt, ys, os),
                            WeightKind::Q4_0 => tile_rows::<3, 2>(gt, ys, os),
                            WeightKind::Q5_1 => tile_rows::<4, 2>(gt, ys, os),
                            _ => tile_rows::<2, 2>(gt, ys, os),
                        }
                    };
                    emit(tok, v[0]);
                    emit(tok + 1, v[1]);
                    tok += 2;
                }
                if tok < t1 {
                    let (ys, os) = ([xrow(tok)], [offsets_of(tok)]);
                    // SAFETY: as above.
                    let v = unsafe {
                        match kind {
                            WeightKind::Q4_1 => tile_rows::<0, 1>(gt, ys, os),
                            WeightKind::Q5_0 => tile_rows::<1, 1>(gt, ys, os),
                            WeightKind::Q4_0 => tile_rows::<3, 1>(gt, ys, os),
                            WeightKind::Q5_1 => tile_rows::<4, 1>(gt, ys, os),
                            _ => tile_rows::<2, 1>(gt, ys, os),
                        }
                    };
                    emit(tok, v[0]);
                }
            }
        }
    });
}

/// [`matmul`] for Q4_K/Q6_K weights: activations in Q8_K; for Q4_K the
/// first `m - m % 4` tokens take ggml's gemm order (and its 4-row quantizer),
/// the rest its gemv order, as in ggml's repack `forward_mul_mat`
/// ([`RowOrder::Independent`]: every token in the one-token order).
#[allow(clippy::too_many_arguments)]
fn kquant_matmul(
    kind: WeightKind,
    w: &[u8],
    tiles: Option<&Tiles>,
    x: &[f32],
    (m, n, k): (usize, usize, usize),
    out: &mut [f32],
    simd: bool,
    order: RowOrder,
) {
    use q8k::{BlockQ8K, Q8KFlavor, QK_K};
    assert_eq!(k % QK_K, 0, "k must be a multiple of {QK_K}");
    if kind == WeightKind::Q4K {
        assert_eq!(
            n % 8,
            0,
            "Q4_K rows must come in groups of 8 (ggml repacks them)"
        );
    }
    let kb = k / QK_K;
    let row_bytes = kb * kind.block_bytes();
    assert_eq!(x.len(), m * k);
    assert_eq!(out.len(), m * n);
    if m == 0 || n == 0 {
        return;
    }
    let batched = order == RowOrder::Ggml;
    let m4 = if kind == WeightKind::Q4K && batched {
        m - m % 4
    } else {
        0
    };
    // ggml's tiled K-quant kernel takes non-repacked K-quant weights from 8 tokens on.
    let tiled = kind == WeightKind::Q6K && m >= 8 && batched;
    let mut xq = vec![BlockQ8K::default(); m * kb];
    for_each_row(&mut xq, kb, x, k, |t, xrow, row| {
        let flavor = if t < m4 {
            Q8KFlavor::Interleaved4x8
        } else {
            Q8KFlavor::Reference
        };
        q8k::quantize_row(xrow, row, flavor);
    });

    if kind == WeightKind::Q5K {
        let tiled = m >= 8 && batched;
        return q5k_matmul(tiles, w, &xq, (m, n, k), out, simd, tiled);
    }
    #[cfg(target_arch = "x86_64")]
    let simd = simd && simd_available();
    #[cfg(not(target_arch = "x86_64"))]
    let simd = false;
    let n_threads = candle_core::utils::get_num_threads().clamp(1, n.div_ceil(8).max(1));
    let per_thread = n.div_ceil(n_threads);
    let out_ptr = OutPtr(out.as_mut_ptr());
    let xq = &xq;
    let xrow = |tok: usize| &xq[tok * kb..(tok + 1) * kb];

    #[cfg(target_arch = "x86_64")]
    if simd && kind == WeightKind::Q4K && n % q4k_tiles::TILE_ROWS == 0 && q4k_tiles::available() {
        let local;
        let tiles = match tiles {
            Some(Tiles::Q4K(t)) => t,
            _ => {
                local = q4k_tiles::Q4KTiles::new(w, n, k);
                &local
            }
        };
        let groups = n / q4k_tiles::TILE_ROWS;
        // Only tiny products stay on one thread (measured: single-threaded
        // decode rows of Gemma's 640x1024 made the whole step slower).
        let n_threads = if m * n * k < (1 << 16) {
            1
        } else {
            n_threads.min(groups)
        };
        let per_thread = groups.div_ceil(n_threads);
        candle_core::cpu::kernels::par_for_each(n_threads, |t| {
            let lo = (t * per_thread).min(groups);
            let hi = ((t + 1) * per_thread).min(groups);
            for g in lo..hi {
                let gt = &tiles.tiles[g * kb..(g + 1) * kb];
                let emit = |tok: usize, v: [f32; 16]| {
                    for (i, v) in v.into_iter().enumerate() {
                        // SAFETY: in bounds; only this thread owns rows of group g.
                        unsafe { out_ptr.write(tok * n + g * q4k_tiles::TILE_ROWS + i, v) };
                    }
                };
                let mut tok = 0;
                while tok + 2 <= m {
                    // SAFETY: `available()` checked the CPU features; `gt`
                    // has one tile per activation block.
                    let [a, b] = unsafe {
                        q4k_tiles::x86::gemv_tiles::<2>(
                            gt,
                            [xrow(tok), xrow(tok + 1)],
                            [tok < m4, tok + 1 < m4],
                        )
                    };
                    emit(tok, a);
                    emit(tok + 1, b);
                    tok += 2;
                }
                if tok < m {
                    // SAFETY: as above.
                    emit(tok, unsafe {
                        q4k_tiles::x86::gemv_tile(gt, xrow(tok), tok < m4)
                    });
                }
            }
        });
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if simd && kind == WeightKind::Q6K && n % q4k_tiles::TILE_ROWS == 0 && q4k_tiles::available() {
        let local;
        let tiles = match tiles {
            Some(Tiles::Q6K(t)) => t,
            _ => {
                local = q4k_tiles::Q6KTiles::new(w, n, k);
                &local
            }
        };
        let groups = n / q4k_tiles::TILE_ROWS;
        let n_threads = n_threads.min(groups);
        let per_thread = groups.div_ceil(n_threads);
        candle_core::cpu::kernels::par_for_each(n_threads, |t| {
            let lo = (t * per_thread).min(groups);
            let hi = ((t + 1) * per_thread).min(groups);
            for g in lo..hi {
                let gt = &tiles.tiles[g * kb..(g + 1) * kb];
                let emit = |tok: usize, v: [f32; 16]| {
                    for (i, v) in v.into_iter().enumerate() {
                        // SAFETY: in bounds; only this thread owns rows of group g.
                        unsafe { out_ptr.write(tok * n + g * q4k_tiles::TILE_ROWS + i, v) };
                    }
                };
                let mut tok = 0;
                while !tiled && tok + 2 <= m {
                    // SAFETY: `available()` checked the CPU features; `gt`
                    // has one tile per activation block.
                    let [a, b] = unsafe {
                        q4k_tiles::x86::q6k_gemv_tiles::<2>(gt, [xrow(tok), xrow(tok + 1)])
                    };
                    emit(tok, a);
                    emit(tok + 1, b);
                    tok += 2;
                }
                for tok in tok..m {
                    // SAFETY: as above.
                    emit(tok, unsafe {
                        if tiled {
                            q4k_tiles::x86::q6k_tiled_tile(gt, xrow(tok))
                        } else {
                            q4k_tiles::x86::q6k_gemv_tile(gt, xrow(tok))
                        }
                    });
                }
            }
        });
        return;
    }
    let _ = tiles;
    // Only the paths below read the GGUF blocks (tiles, when given, replace them).
    assert!(w.len() >= n * row_bytes, "weight buffer too small");

    candle_core::cpu::kernels::par_for_each(n_threads, |t| {
        let lo = (t * per_thread).min(n);
        let hi = ((t + 1) * per_thread).min(n);
        for t0 in (0..m).step_by(TOKEN_TILE) {
            let t1 = (t0 + TOKEN_TILE).min(m);
            let mut r = lo;
            // Tokens in the gemv order (decode; the last m % 4 of a batch):
            // 8 weight rows at once.
            #[cfg(target_arch = "x86_64")]
            if simd && kind == WeightKind::Q4K && t0 >= m4 {
                while r + 8 <= hi {
                    for tok in t0..t1 {
                        // SAFETY: `simd` implies the CPU features; rows r..r+8 exist.
                        let v = unsafe {
                            kquants::x86::dot_q4_k_gemv8(&w[r * row_bytes..], row_bytes, xrow(tok))
                        };
                        for (i, v) in v.into_iter().enumerate() {
                            // SAFETY: in bounds; only this thread owns columns r..r+8.
                            unsafe { out_ptr.write(tok * n + r + i, v) };
                        }
                    }
                    r += 8;
                }
            }
            for r in r..hi {
                let wrow = &w[r * row_bytes..(r + 1) * row_bytes];
                let mut tok = t0;
                #[cfg(target_arch = "x86_64")]
                if simd {
                    while tok + 4 <= t1 {
                        let ys = [xrow(tok), xrow(tok + 1), xrow(tok + 2), xrow(tok + 3)];
                        let pairs = [tok < m4, tok + 1 < m4, tok + 2 < m4, tok + 3 < m4];
                        // SAFETY: `simd` implies the CPU features; `wrow` holds
                        // `kb` blocks, as does every activation row.
                        let v = unsafe {
                            if kind == WeightKind::Q4K {
                                kquants::x86::dot_q4_k_rows::<4>(wrow, ys, pairs)
                            } else {
                                kquants::x86::dot_q6_k_rows::<4>(wrow, ys, tiled)
                            }
                        };
                        for (j, v) in v.into_iter().enumerate() {
                            // SAFETY: in bounds; only this thread owns column r.
                            unsafe { out_ptr.write((tok + j) * n + r, v) };
                        }
                        tok += 4;
                    }
                }
                for tok in tok..t1 {
                    let y = xrow(tok);
                    #[cfg(target_arch = "x86_64")]
                    let v = if simd {
                        // SAFETY: as above.
                        unsafe {
                            if kind == WeightKind::Q4K {
                                kquants::x86::dot_q4_k_rows::<1>(wrow, [y], [tok < m4])[0]
                            } else {
                                kquants::x86::dot_q6_k_rows::<1>(wrow, [y], tiled)[0]
                            }
                        }
                    } else if kind == WeightKind::Q4K {
                        kquants::dot_q4_k_scalar(wrow, y, tok < m4)
                    } else {
                        kquants::dot_q6_k_scalar(wrow, y, tiled)
                    };
                    #[cfg(not(target_arch = "x86_64"))]
                    let v = if kind == WeightKind::Q4K {
                        kquants::dot_q4_k_scalar(wrow, y, tok < m4)
                    } else {
                        kquants::dot_q6_k_scalar(wrow, y, tiled)
                    };
                    // SAFETY: (tok, r) is in bounds and only this thread owns
                    // output column r.
                    unsafe { out_ptr.write(tok * n + r, v) };
                }
            }
        }
    });
}

/// [`matmul`] for Q5_K: the 16-row tiles where this CPU has them (built here
/// unless given), else the portable dot per row and token (same results);
/// `tiled`: ggml's tiled-kernel order (see [`q5k_tiles`]).
fn q5k_matmul(
    tiles: Option<&Tiles>,
    w: &[u8],
    xq: &[q8k::BlockQ8K],
    (m, n, k): (usize, usize, usize),
    out: &mut [f32],
    simd: bool,
    tiled: bool,
) {
    let kb = k / q8k::QK_K;
    let row_bytes = kb * q5k_tiles::Q5_K_BYTES;
    let out_ptr = OutPtr(out.as_mut_ptr());
    let xrow = |tok: usize| &xq[tok * kb..(tok + 1) * kb];
    #[cfg(target_arch = "x86_64")]
    if simd && n % q5k_tiles::TILE_ROWS == 0 && q4k_tiles::available() {
        let local;
        let tiles = match tiles {
            Some(Tiles::Q5K(t)) => t,
            _ => {
                local = q5k_tiles::Q5KTiles::new(w, n, k);
                &local
            }
        };
        let groups = n / q5k_tiles::TILE_ROWS;
        let n_threads = candle_core::utils::get_num_threads().clamp(1, groups);
        let per_thread = groups.div_ceil(n_threads);
        candle_core::cpu::kernels::par_for_each(n_threads, |t| {
            for g in (t * per_thread).min(groups)..((t + 1) * per_thread).min(groups) {
                let gt = &tiles.tiles[g * kb..(g + 1) * kb];
                for tok in 0..m {
                    // SAFETY: `available()` checked the CPU features; `gt`
                    // has one tile per activation block.
                    let v = unsafe { q5k_tiles::x86::gemv_tile(gt, xrow(tok), tiled) };
                    for (i, v) in v.into_iter().enumerate() {
                        // SAFETY: in bounds; only this thread owns rows of group g.
                        unsafe { out_ptr.write(tok * n + g * q5k_tiles::TILE_ROWS + i, v) };
                    }
                }
            }
        });
        return;
    }
    let _ = (tiles, simd);
    assert!(w.len() >= n * row_bytes, "weight buffer too small");
    for r in 0..n {
        let wrow = &w[r * row_bytes..(r + 1) * row_bytes];
        for tok in 0..m {
            // SAFETY: (tok, r) is in bounds; this loop is single-threaded.
            unsafe {
                out_ptr.write(
                    tok * n + r,
                    q5k_tiles::dot_q5_k_scalar(wrow, xrow(tok), tiled),
                )
            };
        }
    }
}

/// Where a [`QuantMatMul`]'s weights live.
enum WeightData {
    /// The GGUF blocks as candle loaded them.
    Blocks(Arc<QTensor>),
    /// Regrouped for the VNNI kernels; the blocks are not kept (every path
    /// for this weight reads the tiles), so the weight is in memory once.
    Tiles(Box<Tiles>),
}

/// `x · Wᵀ` as a candle op for a GGML-quantized `W` on the CPU.
pub struct QuantMatMul {
    data: WeightData,
    order: RowOrder,
    kind: WeightKind,
    n: usize,
    k: usize,
}

impl QuantMatMul {
    /// `Some` when `w` is a 2-D `[n, k]` Q4_1/Q5_0/Q8_0 tensor on the CPU with `k`
    /// a multiple of 32, or Q4_K/Q6_K with `k` a multiple of 256 (and, for
    /// Q4_K, `n` a multiple of 8: otherwise ggml does not repack it); Q4_0,
    /// Q5_1 and Q5_K only where the 16-row tiles are built. With tiles, this
    /// op drops its reference to `w` (see [`Self::replaces_blocks`]).
    pub fn new(w: Arc<QTensor>, order: RowOrder) -> Option<Self> {
        let kind = WeightKind::from_dtype(w.dtype())?;
        if !w.device().is_cpu() {
            return None;
        }
        let &[n, k] = w.shape().dims() else {
            return None;
        };
        if k % kind.block_elems() != 0 || (kind == WeightKind::Q4K && n % 8 != 0) {
            return None;
        }
        if kind.tiles_only() && (n % q32_tiles::TILE_ROWS != 0 || !q32_tiles::available()) {
            return None;
        }
        let data = match Tiles::new(kind, &w.data().ok()?, n, k) {
            Some(tiles) => WeightData::Tiles(Box::new(tiles)),
            None => WeightData::Blocks(w),
        };
        Some(Self {
            data,
            order,
            kind,
            n,
            k,
        })
    }

    pub fn kind(&self) -> WeightKind {
        self.kind
    }

    /// Whether this op holds the weights in its own form, so the caller can
    /// drop the `QTensor` (it computes every input itself).
    pub fn replaces_blocks(&self) -> bool {
        matches!(self.data, WeightData::Tiles(_))
    }

    /// Whether [`Self::dequantize_row`] works (tiles of the 32-element types).
    pub fn has_rows(&self) -> bool {
        matches!(&self.data, WeightData::Tiles(t) if matches!(**t, Tiles::Q32(_)))
    }

    /// Row `r` of `W` (`k` values) as candle would dequantize it, from the
    /// tiles; `false` when this op has no such rows (see [`Self::has_rows`]).
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) -> bool {
        match &self.data {
            WeightData::Tiles(t) => match &**t {
                Tiles::Q32(t) if r < self.n && out.len() == self.k => {
                    t.dequantize_row(r, out);
                    true
                }
                _ => false,
            },
            WeightData::Blocks(_) => false,
        }
    }

    /// Rows of `W`.
    pub fn rows(&self) -> usize {
        self.n
    }

    /// Columns of `W` (the input width).
    pub fn cols(&self) -> usize {
        self.k
    }

    /// `x`: `[.., k]` f32 on the CPU → `[.., n]`.
    pub fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        x.contiguous()?.apply_op1_no_bwd(self)
    }
}

impl CustomOp1 for QuantMatMul {
    fn name(&self) -> &'static str {
        "mlxr-quant-matmul"
    }

    fn cpu_fwd(
        &self,
        storage: &CpuStorage,
        layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let CpuStorage::F32(data) = storage else {
            candle_core::bail!("{}: only f32 activations are supported", self.name());
        };
        let Some((start, end)) = layout.contiguous_offsets() else {
            candle_core::bail!("{}: activations must be contiguous", self.name());
        };
        let dims = layout.shape().dims();
        match dims.last() {
            Some(&k) if k == self.k => {}
            _ => candle_core::bail!(
                "{}: activations {:?} do not end in {}",
                self.name(),
                dims,
                self.k
            ),
        }
        let x = &data[start..end];
        let m = x.len() / self.k;
        let (w, tiles) = match &self.data {
            WeightData::Blocks(w) => (w.data()?, None),
            WeightData::Tiles(t) => (std::borrow::Cow::Borrowed(&[][..]), Some(&**t)),
        };
        let mut out = vec![0.0f32; m * self.n];
        matmul_with(
            self.kind,
            &w,
            tiles,
            x,
            (m, self.n, self.k),
            &mut out,
            true,
            self.order,
        );
        let mut out_dims = dims.to_vec();
        *out_dims.last_mut().expect("non-empty dims") = self.n;
        Ok((CpuStorage::F32(out), Shape::from(out_dims)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::quantized::QMatMul;
    use candle_core::{Device, Module};

    /// Deterministic pseudo-random floats in [-1, 1) (xorshift).
    fn rand_vec(len: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect()
    }

    fn f16_at(b: &[u8], at: usize) -> f64 {
        half::f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f64()
    }

    /// With `RowOrder::Independent` a row's result is the same whatever
    /// batch it is computed in (what "batched equals alone" rests on).
    #[test]
    fn independent_rows_do_not_depend_on_the_batch() {
        use candle_core::quantized::{GgmlDType, QTensor};
        let (n, k) = (64, 512);
        for dtype in [GgmlDType::Q4K, GgmlDType::Q6K] {
            let w = Tensor::from_vec(rand_vec(n * k, 7), (n, k), &Device::Cpu).unwrap();
            let qt = Arc::new(QTensor::quantize(&w, dtype).unwrap());
            let op = QuantMatMul::new(qt, RowOrder::Independent).unwrap();
            let m = 11;
            let x = Tensor::from_vec(rand_vec(m * k, 9), (m, k), &Device::Cpu).unwrap();
            let all = op.forward(&x).unwrap().to_vec2::<f32>().unwrap();
            for (r, row) in all.iter().enumerate() {
                let alone = op.forward(&x.narrow(0, r, 1).unwrap()).unwrap();
                let alone = alone.to_vec2::<f32>().unwrap().remove(0);
                assert!(
                    row.iter()
                        .zip(&alone)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{dtype:?}: row {r} differs in a batch of {m}"
                );
            }
        }
    }

    /// Plain f64 evaluation of the same quantized math.
    fn reference(
        kind: WeightKind,
        w: &[u8],
        x: &[f32],
        (m, n, k): (usize, usize, usize),
    ) -> Vec<f64> {
        let kb = k / QK;
        let bb = kind.block_bytes();
        let mut out = vec![0.0f64; m * n];
        for i in 0..m {
            let mut xq = vec![BlockQ8::default(); kb];
            q8::quantize_row(&x[i * k..(i + 1) * k], &mut xq, kind.activation_has_sum());
            for r in 0..n {
                let mut acc = 0.0f64;
                for (b, yb) in xq.iter().enumerate() {
                    let wb = &w[(r * kb + b) * bb..(r * kb + b + 1) * bb];
                    for e in 0..QK {
                        let y = yb.d as f64 * yb.qs[e] as f64;
                        let qs = match kind {
                            WeightKind::Q4_1 => &wb[4..20],
                            WeightKind::Q5_0 => &wb[6..22],
                            WeightKind::Q8_0 => &wb[2..34],
                            WeightKind::Q4_0 => &wb[2..18],
                            WeightKind::Q5_1 => &wb[8..24],
                            WeightKind::Q4K | WeightKind::Q6K | WeightKind::Q5K => unreachable!(),
                        };
                        let high = |at: usize| {
                            let qh =
                                u32::from_le_bytes([wb[at], wb[at + 1], wb[at + 2], wb[at + 3]]);
                            ((qh >> e) & 1) as f64 * 16.0
                        };
                        let nib = if e < 16 { qs[e] & 15 } else { qs[e - 16] >> 4 } as f64;
                        let wv = match kind {
                            WeightKind::Q4_1 => f16_at(wb, 0) * nib + f16_at(wb, 2),
                            WeightKind::Q5_0 => f16_at(wb, 0) * (nib + high(2) - 16.0),
                            WeightKind::Q8_0 => f16_at(wb, 0) * (qs[e] as i8) as f64,
                            WeightKind::Q4_0 => f16_at(wb, 0) * (nib - 8.0),
                            WeightKind::Q5_1 => f16_at(wb, 0) * (nib + high(4)) + f16_at(wb, 2),
                            WeightKind::Q4K | WeightKind::Q6K | WeightKind::Q5K => unreachable!(),
                        };
                        if kind == WeightKind::Q4_1 {
                            // the offset term uses the stored sum s = d * Σq
                            acc += f16_at(wb, 0) * nib * y;
                        } else if kind == WeightKind::Q5_1 {
                            acc += f16_at(wb, 0) * (nib + high(4)) * y;
                        } else {
                            acc += wv * y;
                        }
                    }
                    if kind.activation_has_sum() {
                        acc += f16_at(wb, 2) * yb.s as f64;
                    }
                }
                out[i * n + r] = acc;
            }
        }
        out
    }

    fn check(kind: WeightKind, dtype: GgmlDType, (m, n, k): (usize, usize, usize)) {
        let dev = Device::Cpu;
        let wf = Tensor::from_vec(rand_vec(n * k, 7 + n as u64), (n, k), &dev).unwrap();
        let qt = Arc::new(QTensor::quantize(&wf, dtype).unwrap());
        let xv: Vec<f32> = rand_vec(m * k, 11 + m as u64)
            .iter()
            .map(|v| v * 3.0)
            .collect();
        let w = qt.data().unwrap().into_owned();

        let mut simd = vec![0.0f32; m * n];
        let mut scalar = vec![0.0f32; m * n];
        matmul(kind, &w, &xv, (m, n, k), &mut simd, true);
        matmul(kind, &w, &xv, (m, n, k), &mut scalar, false);
        for (a, b) in simd.iter().zip(&scalar) {
            assert_eq!(a.to_bits(), b.to_bits(), "simd {a} != scalar {b}");
        }

        let r = reference(kind, &w, &xv, (m, n, k));
        let scale = r.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        for (a, b) in simd.iter().zip(&r) {
            assert!(
                ((*a as f64) - b).abs() <= 1e-4 * scale.max(b.abs()),
                "{a} vs f64 {b}"
            );
        }

        // vs candle's QMatMul (its own quantizer and order: close, not equal).
        let x = Tensor::from_vec(xv, (m, k), &dev).unwrap();
        let op = QuantMatMul::new(qt.clone(), RowOrder::Ggml).unwrap();
        let ours = op.forward(&x).unwrap();
        assert_eq!(ours.dims(), &[m, n]);
        let ours: Vec<f32> = ours.flatten_all().unwrap().to_vec1().unwrap();
        assert_eq!(ours, simd);
        let theirs: Vec<f32> = QMatMul::from_arc(qt)
            .unwrap()
            .forward(&x)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        for (a, b) in ours.iter().zip(&theirs) {
            assert!((a - b).abs() <= 1e-2 * scale as f32, "{a} vs candle {b}");
        }
    }

    /// K-quants: SIMD and portable paths agree bit for bit, and both are
    /// close to candle's QMatMul.
    fn check_k(kind: WeightKind, dtype: GgmlDType, (m, n, k): (usize, usize, usize)) {
        let dev = Device::Cpu;
        let wf = Tensor::from_vec(rand_vec(n * k, 3 + n as u64), (n, k), &dev).unwrap();
        let qt = Arc::new(QTensor::quantize(&wf, dtype).unwrap());
        let xv: Vec<f32> = rand_vec(m * k, 5 + m as u64)
            .iter()
            .map(|v| v * 3.0)
            .collect();
        let w = qt.data().unwrap().into_owned();
        let mut simd = vec![0.0f32; m * n];
        let mut scalar = vec![0.0f32; m * n];
        matmul(kind, &w, &xv, (m, n, k), &mut simd, true);
        matmul(kind, &w, &xv, (m, n, k), &mut scalar, false);
        for (a, b) in simd.iter().zip(&scalar) {
            assert_eq!(a.to_bits(), b.to_bits(), "simd {a} != scalar {b}");
        }
        let x = Tensor::from_vec(xv, (m, k), &dev).unwrap();
        let ours: Vec<f32> = QuantMatMul::new(qt.clone(), RowOrder::Ggml)
            .unwrap()
            .forward(&x)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        assert_eq!(ours, simd);
        let theirs: Vec<f32> = QMatMul::from_arc(qt)
            .unwrap()
            .forward(&x)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        let scale = theirs.iter().fold(0.0f32, |a, v| a.max(v.abs()));
        for (a, b) in ours.iter().zip(&theirs) {
            assert!((a - b).abs() <= 1e-2 * scale, "{a} vs candle {b}");
        }
    }

    #[test]
    fn k_quants_simd_equals_scalar_and_are_close_to_candle() {
        for m in [1, 2, 5, 8, 19] {
            check_k(WeightKind::Q4K, GgmlDType::Q4K, (m, 40, 512));
            // n a multiple of 16: the AVX-512 VNNI tile path where available.
            check_k(WeightKind::Q4K, GgmlDType::Q4K, (m, 48, 768));
            check_k(WeightKind::Q6K, GgmlDType::Q6K, (m, 36, 768));
            check_k(WeightKind::Q6K, GgmlDType::Q6K, (m, 32, 512));
            if q4k_tiles::available() {
                check_k(WeightKind::Q5K, GgmlDType::Q5K, (m, 48, 768));
                check_k(WeightKind::Q5K, GgmlDType::Q5K, (m, 32, 512));
            }
        }
    }

    #[test]
    fn q4_1_matches_reference_and_candle() {
        check(WeightKind::Q4_1, GgmlDType::Q4_1, (19, 40, 576));
        // n a multiple of 16: the AVX-512 VNNI tile path where available.
        for m in [1, 2, 3, 5, 18, 19] {
            check(WeightKind::Q4_1, GgmlDType::Q4_1, (m, 48, 576));
        }
        check(WeightKind::Q4_1, GgmlDType::Q4_1, (2, 16, 32));
        check(WeightKind::Q4_1, GgmlDType::Q4_1, (3, 32, 96));
    }

    #[test]
    fn q5_0_matches_reference_and_candle() {
        check(WeightKind::Q5_0, GgmlDType::Q5_0, (19, 40, 640));
        // n a multiple of 16: the AVX-512 VNNI tile path where available.
        for m in [1, 2, 3, 5, 18, 19] {
            check(WeightKind::Q5_0, GgmlDType::Q5_0, (m, 48, 640));
        }
        check(WeightKind::Q5_0, GgmlDType::Q5_0, (2, 16, 32));
        check(WeightKind::Q5_0, GgmlDType::Q5_0, (3, 32, 96));
    }

    #[test]
    fn q8_0_matches_reference_and_candle() {
        check(WeightKind::Q8_0, GgmlDType::Q8_0, (19, 40, 640));
        // n a multiple of 16: the AVX-512 VNNI tile path where available.
        for m in [1, 2, 3, 5, 18, 19] {
            check(WeightKind::Q8_0, GgmlDType::Q8_0, (m, 48, 640));
        }
        check(WeightKind::Q8_0, GgmlDType::Q8_0, (2, 16, 32));
        check(WeightKind::Q8_0, GgmlDType::Q8_0, (3, 32, 96));
    }

    /// With tiles, the op keeps no reference to the GGUF blocks (the weight
    /// is in memory once); without, it shares the caller's tensor.
    #[test]
    fn tiled_ops_let_go_of_the_blocks() {
        for dtype in [
            GgmlDType::Q4_1,
            GgmlDType::Q8_0,
            GgmlDType::Q4K,
            GgmlDType::Q6K,
        ] {
            let k = 512;
            let w = Tensor::from_vec(rand_vec(48 * k, 5), (48, k), &Device::Cpu).unwrap();
            let qt = Arc::new(QTensor::quantize(&w, dtype).unwrap());
            let op = QuantMatMul::new(qt.clone(), RowOrder::Independent).unwrap();
            assert_eq!(op.replaces_blocks(), q4k_tiles::available(), "{dtype:?}");
            let refs = if op.replaces_blocks() { 1 } else { 2 };
            assert_eq!(Arc::strong_count(&qt), refs, "{dtype:?}");
            let x = Tensor::from_vec(rand_vec(3 * k, 6), (3, k), &Device::Cpu).unwrap();
            let ours = op
                .forward(&x)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap();
            let data = qt.data().unwrap();
            let mut blocks = vec![0.0f32; 3 * 48];
            let kind = WeightKind::from_dtype(dtype).unwrap();
            matmul_with(
                kind,
                &data,
                None,
                &x.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
                (3, 48, k),
                &mut blocks,
                true,
                RowOrder::Independent,
            );
            assert_eq!(ours, blocks, "{dtype:?}");
        }
    }

    /// Rows read back from the tiles equal candle's dequantization.
    #[test]
    fn tile_rows_dequantize_like_candle() {
        if !q32_tiles::available() {
            return;
        }
        for dtype in [
            GgmlDType::Q4_0,
            GgmlDType::Q4_1,
            GgmlDType::Q5_0,
            GgmlDType::Q5_1,
            GgmlDType::Q8_0,
        ] {
            let (n, k) = (48, 96);
            let w = Tensor::from_vec(rand_vec(n * k, 8), (n, k), &Device::Cpu).unwrap();
            let qt = Arc::new(QTensor::quantize(&w, dtype).unwrap());
            let expected = qt
                .dequantize(&Device::Cpu)
                .unwrap()
                .to_vec2::<f32>()
                .unwrap();
            let op = QuantMatMul::new(qt, RowOrder::Independent).unwrap();
            assert!(op.has_rows(), "{dtype:?}");
            for (r, want) in expected.iter().enumerate() {
                let mut row = vec![0.0f32; k];
                assert!(op.dequantize_row(r, &mut row));
                assert_eq!(&row, want, "{dtype:?} row {r}");
            }
            assert!(!op.dequantize_row(n, &mut vec![0.0; k]));
        }
    }

    #[test]
    fn q4_0_and_q5_1_match_reference_and_candle() {
        for (kind, dtype) in [
            (WeightKind::Q4_0, GgmlDType::Q4_0),
            (WeightKind::Q5_1, GgmlDType::Q5_1),
        ] {
            if !q32_tiles::available() {
                // Only the tile kernel exists; candle's kernel runs elsewhere.
                let qt = QTensor::quantize(
                    &Tensor::zeros((16, 64), candle_core::DType::F32, &Device::Cpu).unwrap(),
                    dtype,
                )
                .unwrap();
                assert!(QuantMatMul::new(Arc::new(qt), RowOrder::Ggml).is_none());
                continue;
            }
            for m in [1, 2, 3, 5, 18, 19] {
                check(kind, dtype, (m, 48, 640));
            }
            check(kind, dtype, (2, 16, 32));
            check(kind, dtype, (3, 32, 96));
        }
    }

    /// Compares against dumps of ggml's own CPU `mul_mat`, committed in
    /// tests/fixtures/ggml-matmul (written by scripts/llamacpp-reference/ggml-matmul-dump.c
    /// against the llama.cpp reference build: `<type>_m<m>.bin` holds u32 type, m, n, k,
    /// weight blocks, x as f32, y as f32). Q4_K comes from ggml's CPU_REPACK buffer
    /// (gemm for the first m - m % 4 rows, gemv for the rest, as in llama.cpp); Q6_K
    /// from a plain buffer (vec_dot below 8 rows, the tiled kernel from 8 on).
    #[test]
    fn bit_identical_to_ggml_dumps() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/ggml-matmul");
        let mut files = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            let u = |i: usize| u32::from_le_bytes(bytes[i * 4..i * 4 + 4].try_into().unwrap());
            let kind = match u(0) {
                2 => WeightKind::Q4_0,
                3 => WeightKind::Q4_1,
                6 => WeightKind::Q5_0,
                7 => WeightKind::Q5_1,
                8 => WeightKind::Q8_0,
                12 => WeightKind::Q4K,
                13 => WeightKind::Q5K,
                14 => WeightKind::Q6K,
                t => panic!("{}: ggml type {t}", path.display()),
            };
            let (m, n, k) = (u(1) as usize, u(2) as usize, u(3) as usize);
            let wlen = n * k / kind.block_elems() * kind.block_bytes();
            let w = &bytes[16..16 + wlen];
            let floats = |at: usize, len: usize| -> Vec<f32> {
                bytes[at..at + 4 * len]
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                    .collect()
            };
            let x = floats(16 + wlen, m * k);
            let expected = floats(16 + wlen + 4 * m * k, m * n);
            // All rows, then (through the 16-row tile kernels where this CPU
            // has them) the first rows that fill whole tiles.
            let tiled_n = n - n % 16;
            for (rows, simd) in [(n, true), (n, false), (tiled_n, true)] {
                let w = &w[..rows * k / kind.block_elems() * kind.block_bytes()];
                let mut out = vec![0.0f32; m * rows];
                matmul(kind, w, &x, (m, rows, k), &mut out, simd);
                for (i, a) in out.iter().enumerate() {
                    let b = expected[i / rows * n + i % rows];
                    assert_eq!(
                        a.to_bits(),
                        b.to_bits(),
                        "{} ({rows} rows): [{i}] {a} vs ggml {b}",
                        path.display()
                    );
                }
            }
            files += 1;
        }
        assert_eq!(files, 32, "expected 8 weight types x 4 token counts");
        eprintln!("{files} ggml dumps matched bit for bit");
    }

    #[test]
    fn q8_rounds_ties_to_even_and_stores_f32_sum_product() {
        // amax = 127 → id = 1, d = 1: 0.5 → 0, 1.5 → 2, 2.5 → 2, -0.5 → -0.
        let mut x = vec![0.0f32; QK];
        x[0] = 127.0;
        x[1] = 0.5;
        x[2] = 1.5;
        x[3] = 2.5;
        x[4] = -0.5;
        let mut b = [BlockQ8::default()];
        q8::quantize_row(&x, &mut b, true);
        assert_eq!(&b[0].qs[..5], &[127, 0, 2, 2, 0]);
        assert_eq!(b[0].d, 1.0);
        assert_eq!(b[0].s, 131.0);
    }
}
