//! FP8 weights with block scales, multiplied without being widened in
//! memory (see [`super::decoded`]).
//!
//! Layout: one E4M3 or E5M2 byte per weight, row-major `[rows, cols]`, and
//! f32 scales `[⌈rows/bn⌉, ⌈cols/bk⌉]` for blocks `[bn, bk]` (edge blocks
//! partial): `w[i, j] = f32(q[i, j]) · s[i / bn, j / bk]` — DeepSeek's and
//! Qwen3-FP8's `weight_scale_inv`; a tensor scale is one `[rows, cols]`
//! block, a channel scale `[1, cols]` blocks. Each decoded value is exactly
//! the f32 product transformers' `_dequantize_fp8_weight` computes.

use mlxr_formats::float8::Float8;

use super::decoded::RowDecode;

pub struct Fp8Weight {
    rows: usize,
    cols: usize,
    block: [usize; 2],
    codes: Vec<u8>,
    scales: Vec<f32>,
    table: [f32; 256],
}

impl std::fmt::Debug for Fp8Weight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Fp8Weight [{}, {}] in blocks {:?}",
            self.rows, self.cols, self.block
        )
    }
}

impl Fp8Weight {
    /// Checks the sizes: `codes` `rows·cols`, `scales` one per block.
    pub fn new(
        format: Float8,
        rows: usize,
        cols: usize,
        codes: Vec<u8>,
        scales: Vec<f32>,
        block: [usize; 2],
    ) -> Result<Self, String> {
        if block[0] == 0 || block[1] == 0 {
            return Err(format!("block {block:?} is empty"));
        }
        let grid = rows.div_ceil(block[0]) * cols.div_ceil(block[1]);
        if codes.len() != rows * cols || scales.len() != grid {
            return Err(format!(
                "[{rows}, {cols}] in blocks {block:?}: expected {} codes and {grid} scales, \
                 found {} and {}",
                rows * cols,
                codes.len(),
                scales.len()
            ));
        }
        Ok(Self {
            rows,
            cols,
            block,
            codes,
            scales,
            table: format.table(),
        })
    }
}

impl RowDecode for Fp8Weight {
    fn rows(&self) -> usize {
        self.rows
    }

    fn cols(&self) -> usize {
        self.cols
    }

    #[inline(always)]
    fn decode_row(&self, r: usize, out: &mut [f32]) {
        let [bn, bk] = self.block;
        let scale_cols = self.cols.div_ceil(bk);
        let scales = &self.scales[(r / bn) * scale_cols..][..scale_cols];
        let codes = &self.codes[r * self.cols..(r + 1) * self.cols];
        for ((out, codes), &s) in out.chunks_mut(bk).zip(codes.chunks(bk)).zip(scales) {
            for (w, &q) in out.iter_mut().zip(codes) {
                *w = self.table[q as usize] * s;
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    unsafe fn decode_row_avx2(&self, r: usize, out: &mut [f32]) {
        decode_row_avx2(self, r, out)
    }
}

/// [`Fp8Weight::decode_row`] eight codes at a time: widened to indices and
/// gathered from the same 256-entry table, times the same scale.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn decode_row_avx2(w: &Fp8Weight, r: usize, out: &mut [f32]) {
    use std::arch::x86_64::*;
    let [bn, bk] = w.block;
    let scale_cols = w.cols.div_ceil(bk);
    let scales = &w.scales[(r / bn) * scale_cols..][..scale_cols];
    let codes = &w.codes[r * w.cols..(r + 1) * w.cols];
    for ((out, codes), &s) in out.chunks_mut(bk).zip(codes.chunks(bk)).zip(scales) {
        let vs = _mm256_set1_ps(s);
        let mut out8 = out.chunks_exact_mut(8);
        let mut codes8 = codes.chunks_exact(8);
        for (o, c) in (&mut out8).zip(&mut codes8) {
            // SAFETY: `c` holds 8 bytes and `o` 8 floats; indices are < 256.
            unsafe {
                let idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64(c.as_ptr() as *const __m128i));
                let v = _mm256_i32gather_ps::<4>(w.table.as_ptr(), idx);
                _mm256_storeu_ps(o.as_mut_ptr(), _mm256_mul_ps(v, vs));
            }
        }
        for (o, &q) in out8.into_remainder().iter_mut().zip(codes8.remainder()) {
            *o = w.table[q as usize] * s;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::decoded::tests::check_twins;
    use super::*;
    use rand::{Rng, SeedableRng};

    fn random(rows: usize, cols: usize, block: [usize; 2], format: Float8, seed: u64) -> Fp8Weight {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        // Finite codes only (E4M3 0x7f/0xff and E5M2 exponent 31 are NaN/inf).
        let codes = (0..rows * cols)
            .map(|_| rng.random::<u8>() & 0xf7 & if format == Float8::E5M2 { 0xbb } else { 0xff })
            .collect();
        let grid = rows.div_ceil(block[0]) * cols.div_ceil(block[1]);
        let scales = (0..grid).map(|_| rng.random_range(0.001..0.01)).collect();
        Fp8Weight::new(format, rows, cols, codes, scales, block).unwrap()
    }

    #[test]
    fn partial_edge_blocks_take_their_block_scale() {
        // 3x5 of ones (E4M3 0x38), blocks of 2x2: scales [2, 3].
        let scales = (1..=6).map(|s| s as f32).collect();
        let w = Fp8Weight::new(Float8::E4M3, 3, 5, vec![0x38; 15], scales, [2, 2]).unwrap();
        assert_eq!(
            w.dequantize(),
            [1., 1., 2., 2., 3., 1., 1., 2., 2., 3., 4., 4., 5., 5., 6.]
        );
    }

    #[test]
    fn kernel_twins_agree_and_match_f64() {
        for (rows, cols, block, format) in [
            (40, 320, [128, 128], Float8::E4M3),
            (33, 96, [16, 32], Float8::E4M3),
            (19, 75, [19, 75], Float8::E4M3),
            (24, 64, [1, 64], Float8::E5M2),
        ] {
            check_twins(&random(rows, cols, block, format, rows as u64), 5);
        }
    }

    #[test]
    fn sizes_are_checked() {
        assert!(Fp8Weight::new(Float8::E4M3, 3, 5, vec![0; 15], vec![1.0; 5], [2, 2]).is_err());
        assert!(Fp8Weight::new(Float8::E4M3, 3, 5, vec![0; 14], vec![1.0; 6], [2, 2]).is_err());
        assert!(Fp8Weight::new(Float8::E4M3, 3, 5, vec![0; 15], vec![1.0; 6], [0, 2]).is_err());
    }
}
