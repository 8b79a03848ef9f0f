//! Matmul for weights stored in a compact code that is decoded to f32 one
//! row at a time inside the product (FP8 with block scales, bitsandbytes
//! 4-bit): `y = x·Wᵀ` reads each row's codes once, decodes them into an
//! L1-sized buffer and dots that buffer with every token of the step, so
//! the full f32 matrix never exists and a decode step reads 1 (FP8) or ½
//! (4-bit) byte a weight instead of 4.
//!
//! The dot sums eight lanes (`j mod 8`) and then the lanes, the same for
//! every token, so a token's result does not depend on the batch. The AVX2
//! twin decodes with the weight's AVX2 code ([`RowDecode::decode_row_avx2`])
//! and runs the same dot compiled with AVX2 + FMA (no contraction: the same
//! float operations in the same order); it is checked bit for bit against
//! the portable one.

use std::sync::Mutex;

use candle_core::{CpuStorage, CustomOp1, Layout, Shape, Tensor};

use super::pool::for_each_thread;

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
    /// The CPU must have AVX2.
    #[cfg(target_arch = "x86_64")]
    unsafe fn decode_row_avx2(&self, r: usize, out: &mut [f32]) {
        self.decode_row(r, out)
    }

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

/// `y[m, rows] = x[m, cols] · Wᵀ`.
pub fn matmul<W: RowDecode>(w: &W, x: &[f32], m: usize) -> Vec<f32> {
    matmul_with(w, x, m, avx2())
}

fn avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        super::isa::allows(super::isa::Isa::Avx2)
            && std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

fn matmul_with<W: RowDecode>(w: &W, x: &[f32], m: usize, use_avx2: bool) -> Vec<f32> {
    let (rows, cols) = (w.rows(), w.cols());
    assert_eq!(x.len(), m * cols, "activations do not match the weight");
    // On the CPU backend's spin pool where it is installed (rayon's threads
    // beside it fought the spinning workers for the cores: a fifth of a
    // SmolLM2-as-FP8 decode step in `pool::work`,
    // bench/results/fp8-nf4-2026-12-06.md), else on rayon.
    let tasks = rows.div_ceil(ROWS_PER_TASK);
    let parts: Vec<Mutex<Vec<f32>>> = (0..tasks).map(|_| Mutex::new(Vec::new())).collect();
    for_each_thread(tasks, |task| {
        let range = task * ROWS_PER_TASK..((task + 1) * ROWS_PER_TASK).min(rows);
        #[cfg(target_arch = "x86_64")]
        let part = if use_avx2 {
            // SAFETY: only true when the CPU has AVX2 and FMA (`avx2()`).
            unsafe { rows_avx2(w, range, x, m) }
        } else {
            rows_product::<W, false>(w, range, x, m)
        };
        #[cfg(not(target_arch = "x86_64"))]
        let part = {
            let _ = use_avx2;
            rows_product::<W, false>(w, range, x, m)
        };
        *parts[task].lock().unwrap_or_else(|e| e.into_inner()) = part;
    });
    let mut y = vec![0.0f32; m * rows];
    for (task, part) in parts.into_iter().enumerate() {
        let part = part.into_inner().unwrap_or_else(|e| e.into_inner());
        let first = task * ROWS_PER_TASK;
        for (i, row) in part.chunks_exact(m).enumerate() {
            for (t, &v) in row.iter().enumerate() {
                y[t * rows + first + i] = v;
            }
        }
    }
    y
}

/// [`rows_product`] compiled for AVX2 + FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rows_avx2<W: RowDecode>(
    w: &W,
    rows: std::ops::Range<usize>,
    x: &[f32],
    m: usize,
) -> Vec<f32> {
    rows_product::<W, true>(w, rows, x, m)
}

/// Outputs of `rows` for every token, row-major `[rows.len(), m]`; `AVX2`:
/// decode with the weight's AVX2 code (only inside [`rows_avx2`]).
#[inline(always)]
fn rows_product<W: RowDecode, const AVX2: bool>(
    w: &W,
    rows: std::ops::Range<usize>,
    x: &[f32],
    m: usize,
) -> Vec<f32> {
    let cols = w.cols();
    let mut part = vec![0.0f32; rows.len() * m];
    let mut row = vec![0.0f32; cols];
    for (i, r) in rows.enumerate() {
        #[cfg(target_arch = "x86_64")]
        if AVX2 {
            // SAFETY: AVX2 is only true in `rows_avx2`, run on AVX2 CPUs.
            unsafe { w.decode_row_avx2(r, &mut row) };
        } else {
            w.decode_row(r, &mut row);
        }
        #[cfg(not(target_arch = "x86_64"))]
        w.decode_row(r, &mut row);
        for (t, xs) in x.chunks_exact(cols).enumerate() {
            part[i * m + t] = dot(&row, xs);
        }
    }
    part
}

#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (ac, bc) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ac
        .remainder()
        .iter()
        .zip(bc.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ac.zip(bc) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    acc.iter().sum::<f32>() + tail
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

    /// The AVX2 twin equals the portable kernel bit for bit (when the CPU
    /// has AVX2), both match an f64 dot, and a token's result does not
    /// depend on the batch.
    pub fn check_twins<W: RowDecode>(w: &W, seed: u64) {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let (rows, cols) = (w.rows(), w.cols());
        let dense = w.dequantize();
        for m in [1, 3, 17] {
            let x: Vec<f32> = (0..m * cols).map(|_| rng.random_range(-1.0..1.0)).collect();
            let portable = matmul_with(w, &x, m, false);
            if avx2() {
                assert_eq!(matmul_with(w, &x, m, true), portable, "AVX2 twin, m = {m}");
            }
            for t in 0..m {
                let alone = matmul_with(w, &x[t * cols..(t + 1) * cols], 1, false);
                assert_eq!(alone, portable[t * rows..(t + 1) * rows], "batch, m = {m}");
                for r in 0..rows {
                    let want: f64 = (0..cols)
                        .map(|j| x[t * cols + j] as f64 * dense[r * cols + j] as f64)
                        .sum();
                    let got = portable[t * rows + r] as f64;
                    assert!(
                        (got - want).abs() <= 1e-4 * (1.0 + want.abs()),
                        "y[{t},{r}] = {got}, want {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn dense_rows_match_f64() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let (rows, cols) = (37, 75);
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
