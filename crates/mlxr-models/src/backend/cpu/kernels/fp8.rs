//! FP8 weights with block scales, multiplied without being widened in
//! memory (see [`super::decoded`]).
//!
//! Layout: one E4M3 or E5M2 byte per weight, row-major `[rows, cols]`, and
//! f32 scales `[⌈rows/bn⌉, ⌈cols/bk⌉]` for blocks `[bn, bk]` (edge blocks
//! partial): `w[i, j] = f32(q[i, j]) · s[i / bn, j / bk]` — DeepSeek's and
//! Qwen3-FP8's `weight_scale_inv`; a tensor scale is one `[rows, cols]`
//! block, a channel scale `[1, cols]` blocks. Each decoded value is exactly
//! the f32 product transformers' `_dequantize_fp8_weight` computes. MLX's
//! mxfp8 loads as E4M3 codes in blocks `[1, 32]` with its E8M0 scales as f32
//! (`weights::mlx_quant`).
//!
//! The SIMD decodes compute the table's value without a table: a code's
//! bits moved into an f32's sign, exponent and mantissa (the byte sign
//! extended, shifted left by 20 for E4M3 or 21 for E5M2 and masked) are the
//! f32 `table[q] · 2^-120` (E4M3) or `table[q] · 2^-112` (E5M2) exactly, an
//! f32 subnormal where the code is one; multiplied by `s · 2^120` (or
//! `2^112`) they give the same real product as `table[q] · s`, hence the
//! same rounded f32 (no denormals flushed: MXCSR is left as it is). That
//! holds while the codes hold no NaN or infinity and every scaled scale is
//! exact (a normal f32 or zero), which [`Fp8Weight::new`] checks once;
//! other weights keep the table (a gather).

use mlxr_formats::float8::Float8;

use super::decoded::RowDecode;
#[cfg(target_arch = "x86_64")]
use super::decoded_simd::{prefetch_bytes, AHEAD_ROWS};

pub struct Fp8Weight {
    rows: usize,
    cols: usize,
    block: [usize; 2],
    codes: Vec<u8>,
    scales: Vec<f32>,
    table: [f32; 256],
    format: Float8,
    /// `scales` times 2^120 (E4M3) or 2^112 (E5M2) when the arithmetic
    /// decode gives the table's values (see the module docs), else empty.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    shifted: Vec<f32>,
    /// The arithmetic decode's left shift and mask (see [`bits8`]).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    bits: (i32, i32),
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
        let (factor, special): (f32, fn(&u8) -> bool) = match format {
            Float8::E4M3 => (2f32.powi(120), |&q| q & 0x7f == 0x7f),
            Float8::E5M2 => (2f32.powi(112), |&q| q & 0x7c == 0x7c),
        };
        let shifted: Vec<f32> = scales.iter().map(|&s| s * factor).collect();
        let exact = shifted.iter().all(|s| s.is_normal() || *s == 0.0);
        let shifted = if exact && !codes.iter().any(special) {
            shifted
        } else {
            Vec::new()
        };
        Ok(Self {
            rows,
            cols,
            block,
            codes,
            scales,
            table: format.table(),
            format,
            shifted,
            bits: match format {
                Float8::E4M3 => (20, 0x87f0_0000_u32 as i32),
                Float8::E5M2 => (21, 0x8fe0_0000_u32 as i32),
            },
        })
    }
}

impl Fp8Weight {
    /// The scale blocks `[bn, bk]`.
    pub fn block(&self) -> [usize; 2] {
        self.block
    }

    pub fn format(&self) -> Float8 {
        self.format
    }

    /// One code a weight, row-major.
    pub fn codes(&self) -> &[u8] {
        &self.codes
    }

    /// One scale a block, `[⌈rows/bn⌉, ⌈cols/bk⌉]` row-major.
    pub fn scales(&self) -> &[f32] {
        &self.scales
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
        // SAFETY: the caller's AVX2.
        unsafe { decode_row_avx2(self, r, out) }
    }

    #[cfg(target_arch = "x86_64")]
    fn fusable(&self) -> bool {
        true
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn run(&self, r: usize, j: usize) -> Option<(f32, usize)> {
        let [bn, bk] = self.block;
        let (block, body) = (j / bk, self.cols - self.cols % 8);
        let lim = ((block + 1) * bk).min(body);
        if j + 8 > lim {
            return None;
        }
        let at = (r / bn) * self.cols.div_ceil(bk) + block;
        let s = if self.shifted.is_empty() {
            self.scales[at]
        } else {
            self.shifted[at]
        };
        Some((s, j + (lim - j) / 8 * 8))
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8<const AVX512: bool>(
        &self,
        base: *const u8,
        j: usize,
        scale: std::arch::x86_64::__m256,
    ) -> std::arch::x86_64::__m256 {
        use std::arch::x86_64::*;
        debug_assert!(j + 8 <= self.cols);
        // SAFETY: the caller's AVX2; 8 codes of the row at `base` read (`j
        // + 8 <= cols`); gathered indices are < 256.
        unsafe {
            let c = _mm_loadl_epi64(base.add(j).cast());
            if self.shifted.is_empty() {
                let idx = _mm256_cvtepu8_epi32(c);
                let v = _mm256_i32gather_ps::<4>(self.table.as_ptr(), idx);
                return _mm256_mul_ps(v, scale);
            }
            let q = _mm256_cvtepi8_epi32(c);
            let bits = _mm256_and_si256(
                _mm256_sllv_epi32(q, _mm256_set1_epi32(self.bits.0)),
                _mm256_set1_epi32(self.bits.1),
            );
            _mm256_mul_ps(_mm256_castsi256_ps(bits), scale)
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn base(&self, r: usize) -> *const u8 {
        self.codes.as_ptr().wrapping_add(r * self.cols)
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn value(&self, r: usize, j: usize) -> f32 {
        let [bn, bk] = self.block;
        let s = self.scales[(r / bn) * self.cols.div_ceil(bk) + j / bk];
        self.table[self.codes[r * self.cols + j] as usize] * s
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn prefetch_line(&self, r: usize, j: usize) {
        super::prefetch::line(self.codes.as_ptr().wrapping_add(r * self.cols + j));
    }

    #[cfg(target_arch = "x86_64")]
    unsafe fn decode_row_avx512(&self, r: usize, out: &mut [f32]) {
        // SAFETY: the caller's AVX2 and AVX-512 F/BW/VL.
        unsafe { decode_row_avx512(self, r, out) }
    }
}

impl Fp8Weight {
    /// The last codes of a block (fewer than a vector), by the table.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn decode_tail(&self, out: &mut [f32], codes: &[u8], s: f32) {
        for (o, &q) in out.iter_mut().zip(codes) {
            *o = self.table[q as usize] * s;
        }
    }
}

/// [`Fp8Weight::decode_row`] with AVX2: the arithmetic decode eight codes
/// at a time where [`Fp8Weight::new`] allowed it, else the table gathered.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn decode_row_avx2(w: &Fp8Weight, r: usize, out: &mut [f32]) {
    use std::arch::x86_64::*;
    let [bn, bk] = w.block;
    let scale_cols = w.cols.div_ceil(bk);
    let at = (r / bn) * scale_cols..(r / bn + 1) * scale_cols;
    let codes = &w.codes[r * w.cols..(r + 1) * w.cols];
    prefetch_ahead(w, r);
    let blocks = out.chunks_mut(bk).zip(codes.chunks(bk));
    if w.shifted.is_empty() {
        for ((out, codes), &s) in blocks.zip(&w.scales[at]) {
            let vs = _mm256_set1_ps(s);
            let mut out8 = out.chunks_exact_mut(8);
            let mut codes8 = codes.chunks_exact(8);
            for (o, c) in (&mut out8).zip(&mut codes8) {
                // SAFETY: `c` holds 8 bytes and `o` 8 floats; indices are < 256.
                unsafe {
                    let idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64(c.as_ptr().cast()));
                    let v = _mm256_i32gather_ps::<4>(w.table.as_ptr(), idx);
                    _mm256_storeu_ps(o.as_mut_ptr(), _mm256_mul_ps(v, vs));
                }
            }
            w.decode_tail(out8.into_remainder(), codes8.remainder(), s);
        }
        return;
    }
    let scales = w.scales[at.clone()].iter().zip(&w.shifted[at]);
    for ((out, codes), (&s, &shifted)) in blocks.zip(scales) {
        let done = codes.len() / 8 * 8;
        for (o, c) in out.chunks_exact_mut(8).zip(codes.chunks_exact(8)) {
            // SAFETY: AVX2 (this function's); `c` holds 8 bytes, `o` 8 floats.
            unsafe {
                let q = _mm256_cvtepi8_epi32(_mm_loadl_epi64(c.as_ptr().cast()));
                let v = match w.format {
                    Float8::E4M3 => bits8::<20, 0x87f0_0000>(q),
                    Float8::E5M2 => bits8::<21, 0x8fe0_0000>(q),
                };
                _mm256_storeu_ps(o.as_mut_ptr(), _mm256_mul_ps(v, _mm256_set1_ps(shifted)));
            }
        }
        w.decode_tail(&mut out[done..], &codes[done..], s);
    }
}

/// Asks for the codes of the row [`AHEAD_ROWS`] rows after `r`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetch_ahead(w: &Fp8Weight, r: usize) {
    let at = w.codes.as_ptr().wrapping_add((r + AHEAD_ROWS) * w.cols);
    prefetch_bytes(at, w.cols);
}

/// Sign-extended codes as the f32 `table[q] · 2^-120` (E4M3: `SHIFT` 20)
/// or `· 2^-112` (E5M2: 21).
///
/// # Safety
/// AVX2.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn bits8<const SHIFT: i32, const MASK: u32>(
    q: std::arch::x86_64::__m256i,
) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::*;
    // SAFETY: the caller's AVX2.
    unsafe {
        _mm256_castsi256_ps(_mm256_and_si256(
            _mm256_slli_epi32::<SHIFT>(q),
            _mm256_set1_epi32(MASK as i32),
        ))
    }
}

/// [`decode_row_avx2`] sixteen codes at a time with AVX-512 (the same
/// arithmetic decode; weights without it take the AVX2 table path).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl")]
unsafe fn decode_row_avx512(w: &Fp8Weight, r: usize, out: &mut [f32]) {
    use std::arch::x86_64::*;
    if w.shifted.is_empty() {
        // SAFETY: AVX2 (this function's).
        return unsafe { decode_row_avx2(w, r, out) };
    }
    let [bn, bk] = w.block;
    let scale_cols = w.cols.div_ceil(bk);
    let at = (r / bn) * scale_cols..(r / bn + 1) * scale_cols;
    let codes = &w.codes[r * w.cols..(r + 1) * w.cols];
    prefetch_ahead(w, r);
    let scales = w.scales[at.clone()].iter().zip(&w.shifted[at]);
    let blocks = out.chunks_mut(bk).zip(codes.chunks(bk));
    for ((out, codes), (&s, &shifted)) in blocks.zip(scales) {
        let done = codes.len() / 16 * 16;
        for (o, c) in out.chunks_exact_mut(16).zip(codes.chunks_exact(16)) {
            // SAFETY: AVX-512 F (this function's); `c` holds 16 bytes, `o`
            // 16 floats.
            unsafe {
                let q = _mm512_cvtepi8_epi32(_mm_loadu_si128(c.as_ptr().cast()));
                let bits = match w.format {
                    Float8::E4M3 => _mm512_and_si512(
                        _mm512_slli_epi32::<20>(q),
                        _mm512_set1_epi32(0x87f0_0000_u32 as i32),
                    ),
                    Float8::E5M2 => _mm512_and_si512(
                        _mm512_slli_epi32::<21>(q),
                        _mm512_set1_epi32(0x8fe0_0000_u32 as i32),
                    ),
                };
                let v = _mm512_mul_ps(_mm512_castsi512_ps(bits), _mm512_set1_ps(shifted));
                _mm512_storeu_ps(o.as_mut_ptr(), v);
            }
        }
        w.decode_tail(&mut out[done..], &codes[done..], s);
    }
}

#[cfg(test)]
mod tests {
    use super::super::decoded::tests::check_twins;
    use super::*;
    use rand::{Rng, SeedableRng};

    /// Every finite code (NaN and infinity codes moved to their neighbours)
    /// in a random order, zeros, negative zeros and subnormals included.
    fn random(rows: usize, cols: usize, block: [usize; 2], format: Float8, seed: u64) -> Fp8Weight {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let codes = (0..rows * cols)
            .map(|_| match (format, rng.random::<u8>()) {
                (Float8::E4M3, q) if q & 0x7f == 0x7f => q - 1,
                (Float8::E5M2, q) if q & 0x7c == 0x7c => q & 0xbf,
                (_, q) => q,
            })
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
            (7, 61, [3, 20], Float8::E4M3),
            (24, 64, [1, 64], Float8::E5M2),
            (18, 83, [128, 128], Float8::E5M2),
            (5, 45, [2, 9], Float8::E5M2),
        ] {
            let w = random(rows, cols, block, format, rows as u64);
            assert!(!w.shifted.is_empty(), "arithmetic decode");
            check_twins(&w, 5);
        }
    }

    /// The arithmetic decode gives every finite code's table value times
    /// any scale, subnormal codes and negative zero included.
    #[test]
    fn arithmetic_decode_is_the_table() {
        for format in [Float8::E4M3, Float8::E5M2] {
            let table = format.table();
            let codes: Vec<u8> = (0..=255u8)
                .filter(|&q| table[q as usize].is_finite())
                .collect();
            let n = codes.len();
            for scale in [1.0, 0.003, -2.5, 60.0, 1e-36, 1e-40, 0.0, -0.0] {
                let w = Fp8Weight::new(format, 1, n, codes.clone(), vec![scale], [1, n]).unwrap();
                assert!(!w.shifted.is_empty(), "{format:?} × {scale}");
                check_twins(&w, 6);
                #[cfg(target_arch = "x86_64")]
                if std::arch::is_x86_feature_detected!("avx2") {
                    let (mut want, mut got) = (vec![0.0; n], vec![0.0; n]);
                    w.decode_row(0, &mut want);
                    // SAFETY: the CPU has AVX2.
                    unsafe { w.decode_row_avx2(0, &mut got) };
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&got), bits(&want), "{format:?} × {scale}");
                }
            }
        }
    }

    /// Scales whose shifted copies overflow, and NaN codes, keep the table
    /// path, and the twins still agree.
    #[test]
    fn table_path_twins_agree() {
        for format in [Float8::E4M3, Float8::E5M2] {
            let mut w = random(21, 70, [8, 32], format, 3);
            w = Fp8Weight::new(format, 21, 70, w.codes, vec![1e30; 9], [8, 32]).unwrap();
            assert!(w.shifted.is_empty());
            check_twins(&w, 7);
            let mut codes = random(21, 70, [8, 32], format, 4).codes;
            codes[75] = 0x7f;
            codes[300] = 0xff;
            let w = Fp8Weight::new(format, 21, 70, codes, vec![0.01; 9], [8, 32]).unwrap();
            assert!(w.shifted.is_empty());
            check_twins(&w, 8);
        }
    }

    #[test]
    fn sizes_are_checked() {
        assert!(Fp8Weight::new(Float8::E4M3, 3, 5, vec![0; 15], vec![1.0; 5], [2, 2]).is_err());
        assert!(Fp8Weight::new(Float8::E4M3, 3, 5, vec![0; 14], vec![1.0; 6], [2, 2]).is_err());
        assert!(Fp8Weight::new(Float8::E4M3, 3, 5, vec![0; 15], vec![1.0; 6], [0, 2]).is_err());
    }
}
