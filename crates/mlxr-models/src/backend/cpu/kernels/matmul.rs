//! The matmul drivers: activation quantization, then the tile, row or
//! scalar kernels split over the thread pool (see the module above for the
//! float orders).

use std::ops::Range;

use super::pool::{current_threads, for_each_thread};
use super::q8::{self, BlockQ8, QK};
use super::rows::RowKernels;
#[cfg(target_arch = "x86_64")]
use super::TileKernels;
#[cfg(target_arch = "x86_64")]
use super::{kquant_tiles_avx2, q32_tiles, q32_tiles_avx2, q4k_tiles, q5k_tiles, q6k_tiles};
use super::{q8k, RowOrder, Tiles, WeightKind};

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

/// Tokens per tile: their quantized rows stay in L1 while weight rows stream.
const TOKEN_TILE: usize = 16;

/// The quantized activations of a matmul, kept between calls so a forward
/// pass over preallocated buffers allocates nothing.
#[derive(Default)]
pub struct MatmulScratch {
    q8: Vec<BlockQ8>,
    q8k: Vec<q8k::BlockQ8K>,
    /// The 16-row tiles' lane offsets (x86 only).
    #[cfg(target_arch = "x86_64")]
    offsets: Vec<[i32; 8]>,
}

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
    let scratch = &mut MatmulScratch::default();
    matmul_with(
        kind,
        w,
        None,
        x,
        (m, n, k),
        out,
        simd,
        RowOrder::Ggml,
        scratch,
    )
}

/// [`matmul`], with Q4_K weights optionally already in [`q4k_tiles`] form.
#[allow(clippy::too_many_arguments)]
pub(super) fn matmul_with(
    kind: WeightKind,
    w: &[u8],
    tiles: Option<&Tiles>,
    x: &[f32],
    (m, n, k): (usize, usize, usize),
    out: &mut [f32],
    simd: bool,
    order: RowOrder,
    scratch: &mut MatmulScratch,
) {
    // The tile kernels run wherever this CPU has them: on the tiles given
    // (built at load), else on tiles built here; `simd = false` never uses them.
    let built;
    let tiles = match tiles {
        _ if !simd => None,
        Some(t) => Some(t),
        None => {
            built = Tiles::new(kind, w, n, k);
            built.as_ref()
        }
    };
    if kind.is_k_quant() {
        return kquant_matmul(kind, w, tiles, x, (m, n, k), out, simd, order, scratch);
    }
    assert_eq!(k % QK, 0, "k must be a multiple of {QK}");
    let kb = k / QK;
    let row_bytes = kb * kind.block_bytes();
    assert_eq!(x.len(), m * k);
    assert_eq!(out.len(), m * n);
    if m == 0 || n == 0 {
        return;
    }

    let xq = &mut scratch.q8;
    xq.clear();
    xq.resize(m * kb, BlockQ8::default());
    let with_sum = kind.activation_has_sum();
    for_each_row(xq, kb, x, k, |_, xrow, row| {
        q8::quantize_row(xrow, row, with_sum)
    });
    let xq = &scratch.q8;

    #[cfg(target_arch = "x86_64")]
    if let Some(Tiles::Q32(tiles)) = tiles {
        assert_eq!(tiles.kind(), kind, "tiles of another weight type");
        q32_tiles::lane_offsets(kind, xq, &mut scratch.offsets);
        return q32_tile_matmul(tiles, xq, &scratch.offsets, (m, n, kb), out);
    }
    let _ = tiles;
    // Only this path reads the GGUF blocks (tiles, when given, replace them).
    assert!(w.len() >= n * row_bytes, "weight buffer too small");

    let rows = RowKernels::new(simd);
    let xrow = |tok: usize| &xq[tok * kb..(tok + 1) * kb];
    run_rows((m, n), out, |weights, tokens, out| {
        for r in weights {
            let wrow = &w[r * row_bytes..(r + 1) * row_bytes];
            row_tokens(
                tokens.clone(),
                Some(|tok| rows.dot32::<8>(kind, wrow, std::array::from_fn(|j| xrow(tok + j)))),
                |tok| rows.dot32::<4>(kind, wrow, std::array::from_fn(|j| xrow(tok + j))),
                |tok| rows.dot32::<1>(kind, wrow, [xrow(tok)])[0],
                |tok, v| out.set(tok, r, v),
            );
        }
    });
}

/// Where one thread of [`run_rows`] stores its results: `out[tok, r]` for
/// the weight rows `r` it owns.
struct RowOut {
    ptr: OutPtr,
    m: usize,
    n: usize,
    rows: Range<usize>,
}

impl RowOut {
    fn set(&self, tok: usize, r: usize, v: f32) {
        assert!(
            tok < self.m && self.rows.contains(&r),
            "({tok}, {r}) outside this run"
        );
        // SAFETY: in bounds (checked); only this thread writes the columns of `rows`.
        unsafe { self.ptr.write(tok * self.n + r, v) }
    }
}

/// The driver of the row kernels: weight rows split over the pool (at
/// least 8 per thread), tokens in runs of [`TOKEN_TILE`];
/// `run(weight rows, tokens, out)` computes those rows for those tokens.
fn run_rows(
    (m, n): (usize, usize),
    out: &mut [f32],
    run: impl Fn(Range<usize>, Range<usize>, &RowOut) + Sync,
) {
    assert_eq!(out.len(), m * n);
    let n_threads = current_threads().clamp(1, n.div_ceil(8).max(1));
    let per_thread = n.div_ceil(n_threads);
    let ptr = OutPtr(out.as_mut_ptr());
    for_each_thread(n_threads, |t| {
        let rows = (t * per_thread).min(n)..((t + 1) * per_thread).min(n);
        let out = RowOut {
            ptr,
            m,
            n,
            rows: rows.clone(),
        };
        for t0 in (0..m).step_by(TOKEN_TILE) {
            run(rows.clone(), t0..(t0 + TOKEN_TILE).min(m), &out);
        }
    });
}

/// The tokens of one weight row in batches: 8 at a time through `eight`
/// where given, then 4 through `four`, then one at a time through `one`;
/// `set(tok, v)` stores each result.
fn row_tokens(
    tokens: Range<usize>,
    eight: Option<impl Fn(usize) -> [f32; 8]>,
    four: impl Fn(usize) -> [f32; 4],
    one: impl Fn(usize) -> f32,
    set: impl Fn(usize, f32),
) {
    let mut tok = tokens.start;
    if let Some(eight) = eight {
        while tok + 8 <= tokens.end {
            eight(tok)
                .into_iter()
                .enumerate()
                .for_each(|(j, v)| set(tok + j, v));
            tok += 8;
        }
    }
    while tok + 4 <= tokens.end {
        four(tok)
            .into_iter()
            .enumerate()
            .for_each(|(j, v)| set(tok + j, v));
        tok += 4;
    }
    for tok in tok..tokens.end {
        set(tok, one(tok));
    }
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
    const PARALLEL_FROM: usize = 16;
    let rows = out.len() / row_len.max(1);
    if rows < PARALLEL_FROM {
        return f(0, out);
    }
    let per_run = rows.div_ceil(4 * current_threads()).max(4);
    let runs = rows.div_ceil(per_run);
    let base = SendPtr(out.as_mut_ptr());
    for_each_thread(runs, |i| {
        let first = i * per_run;
        let len = per_run.min(rows - first) * row_len;
        // SAFETY: run i owns rows first..first + per_run of `out`, disjoint
        // from every other run's and in bounds.
        let run = unsafe { std::slice::from_raw_parts_mut(base.get().add(first * row_len), len) };
        f(first, run)
    });
}

/// A pointer handed to the threads of one region, which use disjoint parts.
pub(crate) struct SendPtr<T>(pub(crate) *mut T);

impl<T> Clone for SendPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for SendPtr<T> {}
// SAFETY: the region's threads touch disjoint elements.
unsafe impl<T: Send> Send for SendPtr<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for SendPtr<T> {}

impl<T> SendPtr<T> {
    pub(crate) fn get(&self) -> *mut T {
        self.0
    }
}

/// `W` tokens of one row group at once, where a tile kernel has it.
#[cfg(target_arch = "x86_64")]
type Wide<'a, const W: usize> = Option<&'a (dyn Fn(usize, usize) -> [[f32; TILE]; W] + Sync)>;
#[cfg(target_arch = "x86_64")]
type Four<'a> = Wide<'a, 4>;

/// The driver of every 16-row tile kernel: row groups split over
/// `n_threads`; in each group tokens go in runs of [`TOKEN_TILE`], while
/// `pairs(tok)` allows eight or four at a time through `eight(g, tok)` or
/// `four(g, tok)` where given, then two at a time through `two(g, tok)`,
/// else one at a time through `one(g, tok)`; each call's 16 results land in
/// `out[tok, 16g..16g + 16]`.
#[cfg(target_arch = "x86_64")]
fn run_tiles(
    n_threads: usize,
    (m, n): (usize, usize),
    out: &mut [f32],
    pairs: impl Fn(usize) -> bool + Sync,
    (eight, four): (Wide<8>, Four),
    two: impl Fn(usize, usize) -> [[f32; TILE]; 2] + Sync,
    one: impl Fn(usize, usize) -> [f32; TILE] + Sync,
) {
    let groups = n / TILE;
    let n_threads = n_threads.clamp(1, groups.max(1));
    let per_thread = groups.div_ceil(n_threads);
    let out_ptr = OutPtr(out.as_mut_ptr());
    for_each_thread(n_threads, |t| {
        let emit = |g: usize, tok: usize, v: [f32; TILE]| {
            for (i, v) in v.into_iter().enumerate() {
                // SAFETY: in bounds; only this thread owns the rows of group g.
                unsafe { out_ptr.write(tok * n + g * TILE + i, v) };
            }
        };
        for t0 in (0..m).step_by(TOKEN_TILE) {
            let t1 = (t0 + TOKEN_TILE).min(m);
            for g in (t * per_thread).min(groups)..((t + 1) * per_thread).min(groups) {
                let mut tok = t0;
                while let Some(eight) = eight.filter(|_| tok + 8 <= t1 && pairs(tok)) {
                    for (j, v) in eight(g, tok).into_iter().enumerate() {
                        emit(g, tok + j, v);
                    }
                    tok += 8;
                }
                while let Some(four) = four.filter(|_| tok + 4 <= t1 && pairs(tok)) {
                    for (j, v) in four(g, tok).into_iter().enumerate() {
                        emit(g, tok + j, v);
                    }
                    tok += 4;
                }
                while tok + 2 <= t1 && pairs(tok) {
                    let [a, b] = two(g, tok);
                    emit(g, tok, a);
                    emit(g, tok + 1, b);
                    tok += 2;
                }
                for tok in tok..t1 {
                    emit(g, tok, one(g, tok));
                }
            }
        }
    });
}

/// Whether a pass of `T` of `m` tokens from `tok` on should prefetch weight
/// tiles: passes of one or two tokens always; longer ones where all `m`
/// tokens are one token tile (decode steps of many sequences) and the pass
/// is the first of [`run_tiles`]' over a row group (the later ones find the
/// group in cache). Qwen2.5-Coder-1.5B on a Zen 5, AVX-512: 16 sequences'
/// decode 132-135 -> 196-201 tok/s; in prefill (longer `m`, bound by
/// arithmetic) the first passes' prefetches cost 4% of pp512.
#[cfg(target_arch = "x86_64")]
fn first_pass<const T: usize>(tok: usize, m: usize) -> bool {
    T <= 2 || (m <= TOKEN_TILE && tok.is_multiple_of(TOKEN_TILE))
}

/// Rows per tile, the same for every tile kind.
#[cfg(target_arch = "x86_64")]
const TILE: usize = q32_tiles::TILE_ROWS;

/// One row group of [`q32_tiles`] against `T` tokens, through the AVX-512
/// or the AVX2 kernel (with AVX-VNNI where `vnni`).
///
/// # Safety
/// As the kernels': this CPU runs `avx512`'s kernel (and has AVX-VNNI where
/// `vnni`); `gt` is one row group
/// of `ys[t].len()` blocks of `kind`, `os[t]` as many entries (Q4_0/Q5_0/Q8_0).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn q32_group<const T: usize>(
    (avx512, vnni): (bool, bool),
    kind: WeightKind,
    gt: &[q32_tiles::Line],
    ys: [&[BlockQ8]; T],
    os: [&[[i32; 8]]; T],
) -> [[f32; TILE]; T] {
    macro_rules! run {
        ($code:ident) => {
            // SAFETY: forwarded to the caller.
            unsafe {
                match (avx512, vnni) {
                    (true, _) => q32_tiles::x86::tile_rows::<$code, T>(gt, ys, os),
                    (false, false) => q32_tiles_avx2::x86::tile_rows::<$code, T>(gt, ys, os),
                    (false, true) => q32_tiles_avx2::x86::tile_rows_vnni::<$code, T>(gt, ys, os),
                }
            }
        };
    }
    use q32_tiles::x86::{Q4_0, Q4_1, Q5_0, Q5_1, Q8_0};
    match kind {
        WeightKind::Q4_1 => run!(Q4_1),
        WeightKind::Q5_0 => run!(Q5_0),
        WeightKind::Q4_0 => run!(Q4_0),
        WeightKind::Q5_1 => run!(Q5_1),
        _ => run!(Q8_0),
    }
}

/// [`matmul`] for Q4_1/Q5_0/Q8_0 with [`q32_tiles`]: threads split the row
/// groups; tokens go two at a time (AVX-512) or up to eight at a time, lane
/// by lane (AVX2), through each group's tiles.
#[cfg(target_arch = "x86_64")]
fn q32_tile_matmul(
    tiles: &q32_tiles::Q32Tiles,
    xq: &[BlockQ8],
    offsets: &[[i32; 8]],
    (m, n, kb): (usize, usize, usize),
    out: &mut [f32],
) {
    let kind = tiles.kind();
    let avx512 = TileKernels::detect() == Some(TileKernels::Avx512Vnni);
    let isas = (avx512, !avx512 && super::isa::avx_vnni());
    let xrow = |tok: usize| &xq[tok * kb..(tok + 1) * kb];
    let offsets_of = |tok: usize| {
        if offsets.is_empty() {
            &[][..]
        } else {
            &offsets[tok * kb..(tok + 1) * kb]
        }
    };
    let n_threads = current_threads();
    let two = |g: usize, tok: usize| {
        let (gt, ys) = (tiles.group(g), [xrow(tok), xrow(tok + 1)]);
        let os = [offsets_of(tok), offsets_of(tok + 1)];
        // SAFETY: the tiles exist only where the CPU has the features; each group has one
        // tile per activation block, `offsets_of` one entry per block.
        unsafe { q32_group::<2>(isas, kind, gt, ys, os) }
    };
    let one = |g: usize, tok: usize| {
        let (gt, ys, os) = (tiles.group(g), [xrow(tok)], [offsets_of(tok)]);
        // SAFETY: as above.
        let [v] = unsafe { q32_group::<1>(isas, kind, gt, ys, os) };
        v
    };
    // AVX2 runs several tokens lane by lane (`q32_tiles_avx2`: each
    // unpacked lane shared, only that lane's sums live), AVX-512 two at a
    // time through all lanes.
    let four = |g: usize, tok: usize| {
        let gt = tiles.group(g);
        let ys: [&[BlockQ8]; 4] = std::array::from_fn(|j| xrow(tok + j));
        let os: [&[[i32; 8]]; 4] = std::array::from_fn(|j| offsets_of(tok + j));
        // SAFETY: as above.
        unsafe { q32_group::<4>(isas, kind, gt, ys, os) }
    };
    let eight = |g: usize, tok: usize| {
        let gt = tiles.group(g);
        let ys: [&[BlockQ8]; 8] = std::array::from_fn(|j| xrow(tok + j));
        let os: [&[[i32; 8]]; 8] = std::array::from_fn(|j| offsets_of(tok + j));
        // SAFETY: as above.
        unsafe { q32_group::<8>(isas, kind, gt, ys, os) }
    };
    let (eight, four): (Wide<8>, Four) = if avx512 {
        (None, None)
    } else {
        (Some(&eight), Some(&four))
    };
    run_tiles(n_threads, (m, n), out, |_| true, (eight, four), two, one);
}

/// The Q6_K tile kernels of `isa` = `(tiled, avx512)` (AVX-512 VNNI with
/// `avx512`, else AVX2) over `tiles` against the Q8_K rows `xq` (`kb`
/// blocks each): ggml's tiled order with `tiled` (each token's exact sum),
/// else its vec_dot order; up
/// to eight tokens share each unpacked line.
#[cfg(target_arch = "x86_64")]
fn q6k_tile_kernels(
    tiles: &[q6k_tiles::Tile6],
    xq: &[q8k::BlockQ8K],
    kb: usize,
    isa: (bool, bool),
    n_threads: usize,
    (m, n): (usize, usize),
    out: &mut [f32],
) {
    /// Tokens `tok..tok + T` (of `m`) through the kernel of `tiled`'s order.
    ///
    /// # Safety
    /// As [`q6k_tiles::x86::pass`]'s; `xq` holds `kb` blocks for each of the tokens.
    #[inline(always)]
    unsafe fn wide<const T: usize>(
        isa: (bool, bool),
        group: &[q6k_tiles::Tile6],
        (xq, kb, tok, m): (&[q8k::BlockQ8K], usize, usize, usize),
    ) -> [[f32; TILE]; T] {
        let ys = std::array::from_fn(|j| &xq[(tok + j) * kb..(tok + j + 1) * kb]);
        // SAFETY: forwarded.
        unsafe { q6k_tiles::x86::pass::<T>(isa, group, ys, first_pass::<T>(tok, m)) }
    }
    let group = |g: usize| &tiles[g * kb..(g + 1) * kb];
    // SAFETY (all kernels): the tiles exist only where the CPU has the
    // features; each group has one tile per activation block.
    let one = |g: usize, tok: usize| unsafe { wide::<1>(isa, group(g), (xq, kb, tok, m))[0] };
    // SAFETY: as above.
    let two = |g: usize, tok: usize| unsafe { wide::<2>(isa, group(g), (xq, kb, tok, m)) };
    // SAFETY: as above.
    let four = |g: usize, tok: usize| unsafe { wide::<4>(isa, group(g), (xq, kb, tok, m)) };
    // SAFETY: as above.
    let eight = |g: usize, tok: usize| unsafe { wide::<8>(isa, group(g), (xq, kb, tok, m)) };
    run_tiles(
        n_threads,
        (m, n),
        out,
        |_| true,
        (Some(&eight), Some(&four)),
        two,
        one,
    );
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
    scratch: &mut MatmulScratch,
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
    let tiled = kind != WeightKind::Q4K && m >= 8 && batched;
    let xq = &mut scratch.q8k;
    xq.clear();
    xq.resize(m * kb, BlockQ8K::default());
    for_each_row(xq, kb, x, k, |t, xrow, row| {
        let flavor = if t < m4 {
            Q8KFlavor::Interleaved4x8
        } else {
            Q8KFlavor::Reference
        };
        q8k::quantize_row(xrow, row, flavor);
    });

    let rows = RowKernels::new(simd);
    #[cfg(target_arch = "x86_64")]
    let n_threads = current_threads().clamp(1, n.div_ceil(8).max(1));
    let xq = &scratch.q8k;
    let xrow = |tok: usize| &xq[tok * kb..(tok + 1) * kb];

    #[cfg(target_arch = "x86_64")]
    let avx512 = TileKernels::detect() == Some(TileKernels::Avx512Vnni);
    #[cfg(target_arch = "x86_64")]
    if let Some(Tiles::Q4K(tiles)) = tiles {
        // Only tiny products stay on one thread (measured: single-threaded
        // decode rows of Gemma's 640x1024 made the whole step slower).
        let n_threads = if m * n * k < (1 << 16) { 1 } else { n_threads };
        let group = |g: usize| &tiles.tiles[g * kb..(g + 1) * kb];
        // SAFETY (both kernels): the tiles exist only where the CPU has the features; each
        // group has one tile per activation block.
        let two = |g: usize, tok: usize| unsafe {
            let (ys, pairs) = ([xrow(tok), xrow(tok + 1)], [tok < m4, tok + 1 < m4]);
            if avx512 {
                q4k_tiles::x86::gemv_tiles::<2>(group(g), ys, pairs, first_pass::<2>(tok, m))
            } else {
                kquant_tiles_avx2::x86::q4k_tiles::<2>(group(g), ys, pairs, first_pass::<2>(tok, m))
            }
        };
        // SAFETY: as above.
        let one = |g: usize, tok: usize| unsafe {
            if avx512 {
                q4k_tiles::x86::gemv_tile(group(g), xrow(tok), tok < m4)
            } else {
                kquant_tiles_avx2::x86::q4k_tiles::<1>(group(g), [xrow(tok)], [tok < m4], true)[0]
            }
        };
        // SAFETY: as above (four tokens share each unpacked line).
        let four = |g: usize, tok: usize| unsafe {
            let ys = std::array::from_fn(|j| xrow(tok + j));
            let pairs = std::array::from_fn(|j| tok + j < m4);
            if avx512 {
                q4k_tiles::x86::gemv_tiles::<4>(group(g), ys, pairs, first_pass::<4>(tok, m))
            } else {
                kquant_tiles_avx2::x86::q4k_tiles::<4>(group(g), ys, pairs, first_pass::<4>(tok, m))
            }
        };
        // Eight tokens at once spill the Q4_K kernels' sums (measured slower).
        run_tiles(
            n_threads,
            (m, n),
            out,
            |_| true,
            (None, Some(&four)),
            two,
            one,
        );
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if let Some(Tiles::Q6K(tiles)) = tiles {
        q6k_tile_kernels(
            &tiles.tiles,
            xq,
            kb,
            (tiled, avx512),
            n_threads,
            (m, n),
            out,
        );
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if let Some(Tiles::Q5K(tiles)) = tiles {
        use kquant_tiles_avx2::x86::q5k_tiles as q5k_avx2;
        let group = |g: usize| &tiles.tiles[g * kb..(g + 1) * kb];
        // SAFETY (all kernels): the tiles exist only where the CPU has the features; each
        // group has one tile per activation block.
        let one = |g: usize, tok: usize| unsafe {
            match (avx512, tiled) {
                (true, _) => q5k_tiles::x86::gemv_tile(group(g), xrow(tok), tiled),
                (false, true) => q5k_avx2::<1, true>(group(g), [xrow(tok)])[0],
                (false, false) => q5k_avx2::<1, false>(group(g), [xrow(tok)])[0],
            }
        };
        // SAFETY: as above (AVX2 only: AVX-512 goes one token at a time).
        let two = |g: usize, tok: usize| unsafe {
            let ys = [xrow(tok), xrow(tok + 1)];
            if tiled {
                q5k_avx2::<2, true>(group(g), ys)
            } else {
                q5k_avx2::<2, false>(group(g), ys)
            }
        };
        // SAFETY: as above (the tiled order: four tokens share each line).
        let four = |g: usize, tok: usize| unsafe {
            q5k_avx2::<4, true>(group(g), std::array::from_fn(|j| xrow(tok + j)))
        };
        let four: Four = (!avx512 && tiled).then_some(&four);
        let n_threads = if avx512 { current_threads() } else { n_threads };
        run_tiles(n_threads, (m, n), out, |_| !avx512, (None, four), two, one);
        return;
    }
    let _ = tiles;
    // Only the paths below read the GGUF blocks (tiles, when given, replace them).
    assert!(w.len() >= n * row_bytes, "weight buffer too small");

    run_rows((m, n), out, |weights, tokens, out| {
        #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
        let mut first = weights.start;
        // Tokens in the gemv order (decode; the last m % 4 of a batch):
        // 8 weight rows at once.
        #[cfg(target_arch = "x86_64")]
        if rows == RowKernels::Avx2 && kind == WeightKind::Q4K && tokens.start >= m4 {
            while first + 8 <= weights.end {
                for tok in tokens.clone() {
                    // SAFETY: `Avx2` implies the CPU features; rows first..first+8 exist.
                    let v = unsafe {
                        super::kquants::x86::dot_q4_k_gemv8(
                            &w[first * row_bytes..],
                            row_bytes,
                            xrow(tok),
                        )
                    };
                    v.into_iter()
                        .enumerate()
                        .for_each(|(i, v)| out.set(tok, first + i, v));
                }
                first += 8;
            }
        }
        for r in first..weights.end {
            let wrow = &w[r * row_bytes..(r + 1) * row_bytes];
            row_tokens(
                tokens.clone(),
                None::<fn(usize) -> [f32; 8]>,
                |tok| {
                    let ys = std::array::from_fn(|j| xrow(tok + j));
                    let pairs = std::array::from_fn(|j| tok + j < m4);
                    rows.kquant::<4>(kind, wrow, ys, pairs, tiled)
                },
                |tok| rows.kquant::<1>(kind, wrow, [xrow(tok)], [tok < m4], tiled)[0],
                |tok, v| out.set(tok, r, v),
            );
        }
    });
}
