//! Matmul for weights stored in a compact code that is decoded to f32 one
//! row at a time inside the product (FP8 with block scales, bitsandbytes
//! 4-bit, F16/BF16): `y = x·Wᵀ` reads each row's codes once, decodes them
//! into an L1-sized buffer and dots that buffer with every token of the
//! step, so the full f32 matrix never exists and a decode step reads 1
//! (FP8), ½ (4-bit) or 2 (F16/BF16) bytes a weight instead of 4.
//!
//! In a step of fewer than [`GEMM_TOKENS`] tokens (decode, drafts to
//! verify) every output is one dot in one fixed order, the specification
//! the SIMD twins keep bit for bit: products `w[j]·x[j]` (a multiply, then an add:
//! never a fused multiply-add) summed into eight lanes `j mod 8` in `j`
//! order over the columns a multiple of eight covers, then the lanes summed
//! 0 to 7, then the last `cols mod 8` products summed on their own and
//! added ([`dot`]). The order is the same for every token, so a token's
//! result does not depend on the batch, and the twins are checked against
//! the portable code bit for bit (`tests::check_twins`).
//!
//! The portable twin here computes that dot row by row and token by token.
//! The x86 twins ([`super::decoded_simd`], AVX2 and AVX-512) decode with
//! the weight's own SIMD code ([`RowDecode::decode_row_avx2`],
//! [`RowDecode::decode_row_avx512`]) and keep a tile of rows × tokens of
//! 8-lane sums in registers, which is the same arithmetic per output.
//! Steps of up to four tokens skip the buffer where the weight allows it
//! ([`RowDecode::fusable`]): each 8 codes are decoded straight into a
//! register and multiplied there ([`super::decoded_simd::fused_avx2`]),
//! every thread one contiguous run of rows written straight into the
//! output.
//!
//! Longer steps (prefill) decode panels of rows to f32 and multiply them
//! with f32 GEMM ([`panels_gemm`]): the weight still never exists whole in
//! f32, and the prompt runs at GEMM speed (SmolLM2 as FP8, pp512 196 → 379
//! t/s on an AVX2 Zen 3, bench/results/fp8-nf4-float16-zen3-2026-12-07.md).

use candle_core::{CpuStorage, CustomOp1, Layout, Shape, Tensor};

use super::pool::{current_threads, for_each_thread};

/// A `[rows, cols]` weight that can write any row as f32 values.
pub trait RowDecode: Sync {
    fn rows(&self) -> usize;
    fn cols(&self) -> usize;
    /// Row `r` as f32, into `out` (`cols` values).
    fn decode_row(&self, r: usize, out: &mut [f32]);

    /// [`Self::decode_row`] with AVX2 instructions, the same values bit for
    /// bit (the default is the portable code).
    ///
    /// # Safety
    /// The CPU must have AVX2 and F16C.
    #[cfg(target_arch = "x86_64")]
    unsafe fn decode_row_avx2(&self, r: usize, out: &mut [f32]) {
        self.decode_row(r, out)
    }

    /// [`Self::decode_row`] with AVX-512 instructions, the same values bit
    /// for bit (the default is the AVX2 code).
    ///
    /// # Safety
    /// The CPU must have AVX2, F16C and AVX-512 F, BW and VL.
    #[cfg(target_arch = "x86_64")]
    unsafe fn decode_row_avx512(&self, r: usize, out: &mut [f32]) {
        // SAFETY: AVX-512 machines have AVX2 (the caller's promise).
        unsafe { self.decode_row_avx2(r, out) }
    }

    /// Whether the fused product for a few tokens
    /// ([`super::decoded_simd::fused_avx2`]) serves this weight: then
    /// [`Self::run`], [`Self::base`], [`Self::load8`], [`Self::value`] and
    /// [`Self::prefetch_line`] are its own (the defaults serve no weight).
    #[cfg(target_arch = "x86_64")]
    fn fusable(&self) -> bool {
        false
    }

    /// The run of 8-column chunks of row `r` from column `j` (a multiple of
    /// 8 with `j + 8 <= cols`) that [`Self::load8`] decodes with one scale:
    /// `Some((scale, end))` with `j < end <= cols` and `end - j` a multiple
    /// of 8; `None` where the chunk at `j` needs [`Self::value`].
    #[cfg(target_arch = "x86_64")]
    fn run(&self, _r: usize, _j: usize) -> Option<(f32, usize)> {
        None
    }

    /// Where row `r`'s codes start for [`Self::load8`] (formed with
    /// wrapping arithmetic: read only through `load8`).
    #[cfg(target_arch = "x86_64")]
    fn base(&self, _r: usize) -> *const u8 {
        std::ptr::null()
    }

    /// The decoded values of columns `j..j + 8` of the row whose
    /// [`Self::base`] is `base`, inside a run that [`Self::run`] gave with
    /// `scale` (broadcast): the values [`Self::decode_row`] writes, bit for
    /// bit (the default serves no weight).
    ///
    /// # Safety
    /// AVX2, FMA and F16C, AVX-512 F/BW/VL if `AVX512`; `j` inside such a run of
    /// that row.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8<const AVX512: bool>(
        &self,
        _base: *const u8,
        _j: usize,
        _scale: std::arch::x86_64::__m256,
    ) -> std::arch::x86_64::__m256 {
        unreachable!("not fusable")
    }

    /// Element `(r, j)` as [`Self::decode_row`] writes it.
    #[cfg(target_arch = "x86_64")]
    fn value(&self, r: usize, j: usize) -> f32 {
        let mut row = vec![0.0; self.cols()];
        self.decode_row(r, &mut row);
        row[j]
    }

    /// Asks for the line of row `r`'s codes that holds column `j`.
    #[cfg(target_arch = "x86_64")]
    fn prefetch_line(&self, _r: usize, _j: usize) {}

    /// The whole matrix as f32, `[rows, cols]` row-major.
    fn dequantize(&self) -> Vec<f32> {
        let cols = self.cols();
        let mut out = vec![0.0; self.rows() * cols];
        for (r, row) in out.chunks_exact_mut(cols).enumerate() {
            self.decode_row(r, row);
        }
        out
    }
}

/// Rows handed to one parallel task.
const ROWS_PER_TASK: usize = 16;

/// Which code computes the product: all of them give the same bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Twin {
    Portable,
    /// AVX2 + FMA + F16C (the FMA only for the compiler's register use: no
    /// fused multiply-adds are issued; F16C for F16 weights).
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// AVX-512 F/BW/VL decode and the AVX2 twin's dot on 32 registers.
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Twin {
    /// The fastest twin this CPU runs under `MLXR_CPU_ISA`.
    fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            use super::isa::{allows, Isa};
            use std::arch::is_x86_feature_detected as has;
            if allows(Isa::Avx2) && has!("avx2") && has!("fma") && has!("f16c") {
                if allows(Isa::Avx512) && has!("avx512f") && has!("avx512bw") && has!("avx512vl") {
                    return Twin::Avx512;
                }
                return Twin::Avx2;
            }
        }
        Twin::Portable
    }
}

/// Steps of at least this many tokens (prefill chunks) take
/// [`panels_gemm`]; shorter ones (decode, drafts to verify: at most 33
/// tokens a sequence) the fixed-order dot, so a token's result there does
/// not depend on the batch. A decoding token in a longer step (beside
/// another request's prompt chunk) gets GEMM's rounding instead: the price
/// of prefill at GEMM speed.
const GEMM_TOKENS: usize = 64;

/// Rows decoded into one panel of [`panels_gemm`].
const PANEL_ROWS: usize = 128;

/// `y[m, rows] = x[m, cols] · Wᵀ`.
pub fn matmul<W: RowDecode>(w: &W, x: &[f32], m: usize) -> Vec<f32> {
    if m >= GEMM_TOKENS {
        return panels_gemm(w, x, m, Twin::detect());
    }
    matmul_with(w, x, m, Twin::detect())
}

/// `y = x·Wᵀ` for long steps: each thread decodes panels of
/// [`PANEL_ROWS`] rows into an f32 buffer (the twin's decode, the same
/// values) and multiplies each by all `m` tokens with candle's f32 GEMM (the
/// `gemm` crate, single-threaded inside the pool's threads), so a prefill
/// runs at f32 GEMM speed while the weight stays in its code. The sums are
/// GEMM's, in its order: within f32 rounding of [`dot`]'s, not its bits.
fn panels_gemm<W: RowDecode>(w: &W, x: &[f32], m: usize, twin: Twin) -> Vec<f32> {
    let (rows, cols) = (w.rows(), w.cols());
    let (y, out) = output(w, x, m);
    let panels = rows.div_ceil(PANEL_ROWS);
    let threads = current_threads().clamp(1, panels.max(1));
    for_each_thread(threads, |thread| {
        let mut panel = vec![0.0f32; PANEL_ROWS * cols];
        for p in (thread..panels).step_by(threads) {
            let range = p * PANEL_ROWS..((p + 1) * PANEL_ROWS).min(rows);
            let n = range.len();
            for (r, row) in range.clone().zip(panel.chunks_exact_mut(cols)) {
                match twin {
                    Twin::Portable => w.decode_row(r, row),
                    // SAFETY: `Twin::detect` found the twin's features.
                    #[cfg(target_arch = "x86_64")]
                    Twin::Avx2 => unsafe { w.decode_row_avx2(r, row) },
                    // SAFETY: as above.
                    #[cfg(target_arch = "x86_64")]
                    Twin::Avx512 => unsafe { w.decode_row_avx512(r, row) },
                }
            }
            // SAFETY: `dst` is columns `range` of the `[m, rows]` output,
            // which only this thread writes; `lhs` the `[m, cols]`
            // activations; `rhs` the panel's `[n, cols]` rows read as a
            // `[cols, n]` matrix. All strides stay inside those buffers.
            unsafe {
                gemm::gemm(
                    m,
                    n,
                    cols,
                    out.column(range.start),
                    1,
                    rows as isize,
                    false,
                    x.as_ptr(),
                    1,
                    cols as isize,
                    panel.as_ptr(),
                    cols as isize,
                    1,
                    0.0,
                    1.0,
                    false,
                    false,
                    false,
                    gemm::Parallelism::None,
                )
            };
        }
    });
    y
}

fn matmul_with<W: RowDecode>(w: &W, x: &[f32], m: usize, twin: Twin) -> Vec<f32> {
    let rows = w.rows();
    let (y, out) = output(w, x, m);
    // A step of a few tokens through the fused product: one contiguous run
    // of rows a thread (whole tiles of 8), written straight into `y`.
    #[cfg(target_arch = "x86_64")]
    if (1..=super::decoded_simd::FUSED_TOKENS).contains(&m) && twin != Twin::Portable && w.fusable()
    {
        let threads = current_threads().clamp(1, rows.div_ceil(8).max(1));
        let per = rows.div_ceil(threads).next_multiple_of(8);
        for_each_thread(threads, |thread| {
            let range = (thread * per).min(rows)..((thread + 1) * per).min(rows);
            // SAFETY: `Twin::detect` found the features of the twin; the
            // threads' row ranges are disjoint.
            unsafe {
                if twin == Twin::Avx512 {
                    super::decoded_simd::fused_avx512(w, range, x, m, &out)
                } else {
                    super::decoded_simd::fused_avx2(w, range, x, m, &out)
                }
            }
        });
        return y;
    }
    // On the CPU backend's spin pool where it is installed (rayon's threads
    // beside it fought the spinning workers for the cores: a fifth of a
    // SmolLM2-as-FP8 decode step in `pool::work`,
    // bench/results/fp8-nf4-2026-12-06.md), else on rayon.
    // Each thread takes every `threads`-th task with one decode buffer and
    // writes its outputs straight into `y`.
    let tasks = rows.div_ceil(ROWS_PER_TASK);
    let threads = current_threads().clamp(1, tasks.max(1));
    for_each_thread(threads, |thread| {
        #[cfg(target_arch = "x86_64")]
        let mut scratch = super::decoded_simd::Scratch::default();
        for task in (thread..tasks).step_by(threads) {
            let range = task * ROWS_PER_TASK..((task + 1) * ROWS_PER_TASK).min(rows);
            let first = range.start;
            let part = match twin {
                Twin::Portable => rows_product(w, range, x, m),
                // SAFETY: `Twin::detect` found AVX2 and FMA on this CPU.
                #[cfg(target_arch = "x86_64")]
                Twin::Avx2 => unsafe {
                    super::decoded_simd::rows_avx2(w, range, x, m, &mut scratch)
                },
                // SAFETY: `Twin::detect` found AVX2, FMA and AVX-512 F/BW/VL.
                #[cfg(target_arch = "x86_64")]
                Twin::Avx512 => unsafe {
                    super::decoded_simd::rows_avx512(w, range, x, m, &mut scratch)
                },
            };
            for (i, row) in part.chunks_exact(m).enumerate() {
                for (t, &v) in row.iter().enumerate() {
                    // SAFETY: `t < m`, `first + i < rows`, and the tasks'
                    // rows are disjoint.
                    unsafe { out.set(t, first + i, v) };
                }
            }
        }
    });
    y
}

/// The zeroed `[m, rows]` output of `w` for the `m` tokens of `x`, and the
/// handle its threads write it through (the buffer does not move with the
/// `Vec`).
fn output<W: RowDecode>(w: &W, x: &[f32], m: usize) -> (Vec<f32>, Out) {
    assert_eq!(x.len(), m * w.cols(), "activations do not match the weight");
    let mut y = vec![0.0f32; m * w.rows()];
    let out = Out {
        ptr: y.as_mut_ptr(),
        rows: w.rows(),
    };
    (y, out)
}

/// The `[m, rows]` output that the threads of one product write, each its
/// own rows.
pub(super) struct Out {
    ptr: *mut f32,
    rows: usize,
}

// SAFETY: the threads write disjoint elements (`Out::set`'s contract) of a
// buffer that outlives them.
unsafe impl Sync for Out {}

impl Out {
    /// Where column `r` of the first token's row is (formed with wrapping
    /// arithmetic; written only through the caller's own strides).
    #[inline(always)]
    fn column(&self, r: usize) -> *mut f32 {
        self.ptr.wrapping_add(r)
    }

    /// `y[t, r] = v`.
    ///
    /// # Safety
    /// `t < m`, `r < rows`, and no other thread writes row `r`.
    #[inline(always)]
    pub(super) unsafe fn set(&self, t: usize, r: usize, v: f32) {
        // SAFETY: inside the buffer (the caller's bounds).
        unsafe { *self.ptr.add(t * self.rows + r) = v }
    }
}

/// Outputs of `rows` for every token, row-major `[rows.len(), m]`: the
/// portable twin, one [`dot`] per output.
fn rows_product<W: RowDecode>(
    w: &W,
    rows: std::ops::Range<usize>,
    x: &[f32],
    m: usize,
) -> Vec<f32> {
    let cols = w.cols();
    let mut part = vec![0.0f32; rows.len() * m];
    let mut row = vec![0.0f32; cols];
    for (i, r) in rows.enumerate() {
        w.decode_row(r, &mut row);
        for (t, xs) in x.chunks_exact(cols).enumerate() {
            part[i * m + t] = dot(&row, xs);
        }
    }
    part
}

/// The dot every twin computes (see the module docs).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (ac, bc) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail = tail_dot(ac.remainder(), bc.remainder());
    for (x, y) in ac.zip(bc) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    finish(&acc, tail)
}

/// The products of the last `cols mod 8` columns, summed in order.
#[inline(always)]
pub(super) fn tail_dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The eight lanes summed 0 to 7, then the tail.
#[inline(always)]
pub(super) fn finish(lanes: &[f32; 8], tail: f32) -> f32 {
    lanes.iter().sum::<f32>() + tail
}

/// [`matmul`] as a candle op on `[.., cols]` f32 activations.
pub struct DecodedMatMul<'a, W: RowDecode>(pub &'a W);

impl<W: RowDecode> DecodedMatMul<'_, W> {
    pub fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        x.contiguous()?.apply_op1_no_bwd(self)
    }
}

impl<W: RowDecode> CustomOp1 for DecodedMatMul<'_, W> {
    fn name(&self) -> &'static str {
        "mlxr-decoded-matmul"
    }

    fn cpu_fwd(
        &self,
        storage: &CpuStorage,
        layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let cols = self.0.cols();
        let (x, mut dims) = super::matmul_input(self.name(), storage, layout, cols)?;
        let y = matmul(self.0, x, x.len() / cols);
        *dims.last_mut().expect("checked") = self.0.rows();
        Ok((CpuStorage::F32(y), Shape::from(dims)))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A dense matrix behind the trait, for the driver's own tests.
    pub struct Dense {
        pub rows: usize,
        pub cols: usize,
        pub w: Vec<f32>,
    }

    impl RowDecode for Dense {
        fn rows(&self) -> usize {
            self.rows
        }
        fn cols(&self) -> usize {
            self.cols
        }
        fn decode_row(&self, r: usize, out: &mut [f32]) {
            out.copy_from_slice(&self.w[r * self.cols..(r + 1) * self.cols]);
        }
    }

    /// The twins this CPU runs (under `MLXR_CPU_ISA`).
    fn twins() -> Vec<Twin> {
        let mut twins = vec![Twin::Portable];
        #[cfg(target_arch = "x86_64")]
        match Twin::detect() {
            Twin::Avx512 => twins.extend([Twin::Avx2, Twin::Avx512]),
            Twin::Avx2 => twins.push(Twin::Avx2),
            Twin::Portable => {}
        }
        twins
    }

    /// Every twin the CPU runs equals the portable kernel bit for bit, the
    /// results match an f64 dot (where finite; to 1e-4 of the products'
    /// magnitudes), and a token's result does
    /// not depend on the batch. `m` covers every token tile remainder and
    /// more tokens than one token block.
    pub fn check_twins<W: RowDecode>(w: &W, seed: u64) {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let (rows, cols) = (w.rows(), w.cols());
        let dense = w.dequantize();
        let bits = |y: &[f32]| y.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        for m in [1, 2, 3, 4, 5, 6, 7, 17, 64, 67, 131] {
            let x: Vec<f32> = (0..m * cols).map(|_| rng.random_range(-1.0..1.0)).collect();
            let portable = matmul_with(w, &x, m, Twin::Portable);
            for twin in twins() {
                let y = matmul_with(w, &x, m, twin);
                assert_eq!(bits(&y), bits(&portable), "{twin:?} twin, m = {m}");
            }
            for t in 0..m {
                let alone = matmul_with(w, &x[t * cols..(t + 1) * cols], 1, Twin::Portable);
                assert_eq!(
                    bits(&alone),
                    bits(&portable[t * rows..(t + 1) * rows]),
                    "batch, m = {m}"
                );
                for r in 0..rows {
                    let terms =
                        (0..cols).map(|j| x[t * cols + j] as f64 * dense[r * cols + j] as f64);
                    let want: f64 = terms.clone().sum();
                    let size: f64 = terms.map(f64::abs).sum();
                    let got = portable[t * rows + r] as f64;
                    assert!(
                        !want.is_finite() || (got - want).abs() <= 1e-4 * (1.0 + size),
                        "y[{t},{r}] = {got}, want {want}"
                    );
                }
            }
        }
    }

    /// Steps of [`GEMM_TOKENS`] or more take the panels through GEMM: the
    /// same bits under every twin's decode, within f32 rounding of the
    /// fixed-order dot, for row counts inside one panel and across several.
    #[test]
    fn long_steps_take_gemm_within_rounding() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for (rows, cols) in [(300, 72), (37, 131)] {
            let w = Dense {
                rows,
                cols,
                w: (0..rows * cols)
                    .map(|_| rng.random_range(-1.0..1.0))
                    .collect(),
            };
            for m in [GEMM_TOKENS, 131] {
                let x: Vec<f32> = (0..m * cols).map(|_| rng.random_range(-1.0..1.0)).collect();
                let y = matmul(&w, &x, m);
                for twin in twins() {
                    let again = panels_gemm(&w, &x, m, twin);
                    assert!(y
                        .iter()
                        .zip(&again)
                        .all(|(a, b)| a.to_bits() == b.to_bits()));
                }
                let fixed = matmul_with(&w, &x, m, Twin::Portable);
                let worst = y
                    .iter()
                    .zip(&fixed)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0f32, f32::max);
                // Sums of `cols` products of magnitude below 1.
                assert!(
                    worst <= 1e-5 * cols as f32,
                    "[{rows}, {cols}], m = {m}: {worst}"
                );
                assert!(worst > 0.0 || cols < 8, "GEMM did not run");
            }
        }
    }

    #[test]
    fn dense_rows_match_f64() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        for (rows, cols) in [(37, 75), (16, 64), (5, 8), (3, 7)] {
            let w = Dense {
                rows,
                cols,
                w: (0..rows * cols)
                    .map(|_| rng.random_range(-1.0..1.0))
                    .collect(),
            };
            check_twins(&w, 2);
        }
    }
}
