//! bitsandbytes 4-bit weights (NF4, FP4), multiplied without being widened
//! in memory (see [`super::decoded`]).
//!
//! Layout (bitsandbytes `quantize_4bit`): the row-major matrix flattened,
//! two codes a byte with the even element in the high nibble, and one f32
//! `absmax` per `blocksize` elements of the flattened matrix (a block may
//! cross rows): `w = code[nibble] · absmax[k / blocksize]` for flat index
//! `k`. A double-quantized `absmax` is resolved to f32 at load (it is 1/64
//! of the weight's size); each decoded value is exactly the f32 product of
//! bitsandbytes' `dequantize_4bit`. MLX's mxfp4 and nvfp4 load into the
//! same type (the E2M1 book, one scale per group of 32 or 16, nibbles
//! swapped at load: `weights::mlx_quant`).
//!
//! The SIMD decodes take 32 codes (16 bytes) at a time where they start on
//! a byte inside one block: the bytes' high and low nibbles interleaved
//! into 32 byte indices (two shifts, masks and unpacks for all of them),
//! widened and looked up in the code book (AVX-512: one 16-entry
//! `vpermps`; AVX2: two 8-entry permutes and a blend), times the block's
//! absmax: the same f32 products. Odd starts and block ends go element by
//! element.

use super::decoded::RowDecode;
#[cfg(target_arch = "x86_64")]
use super::decoded_simd::{prefetch_bytes, AHEAD_ROWS};

pub struct Bnb4Weight {
    rows: usize,
    cols: usize,
    blocksize: usize,
    packed: Vec<u8>,
    code: [f32; 16],
    absmax: Vec<f32>,
}

impl std::fmt::Debug for Bnb4Weight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Bnb4Weight [{}, {}] in blocks of {}",
            self.rows, self.cols, self.blocksize
        )
    }
}

impl Bnb4Weight {
    /// Checks the sizes: `⌈rows·cols/2⌉` bytes, one absmax per block.
    pub fn new(
        rows: usize,
        cols: usize,
        blocksize: usize,
        packed: Vec<u8>,
        code: [f32; 16],
        absmax: Vec<f32>,
    ) -> Result<Self, String> {
        let n = rows * cols;
        if blocksize == 0 || packed.len() != n.div_ceil(2) || absmax.len() != n.div_ceil(blocksize)
        {
            return Err(format!(
                "[{rows}, {cols}] in blocks of {blocksize}: expected {} bytes and {} absmax \
                 values, found {} and {}",
                n.div_ceil(2),
                n.div_ceil(blocksize.max(1)),
                packed.len(),
                absmax.len()
            ));
        }
        Ok(Self {
            rows,
            cols,
            blocksize,
            packed,
            code,
            absmax,
        })
    }

    /// Elements of the flattened matrix per absmax.
    pub fn blocksize(&self) -> usize {
        self.blocksize
    }

    /// The 16 code values.
    pub fn code(&self) -> &[f32; 16] {
        &self.code
    }

    /// Two codes a byte, the even element in the high nibble.
    pub fn packed(&self) -> &[u8] {
        &self.packed
    }

    /// One absmax per block.
    pub fn absmax(&self) -> &[f32] {
        &self.absmax
    }
}

impl RowDecode for Bnb4Weight {
    fn rows(&self) -> usize {
        self.rows
    }

    fn cols(&self) -> usize {
        self.cols
    }

    #[inline(always)]
    fn decode_row(&self, r: usize, out: &mut [f32]) {
        let first = r * self.cols;
        for (j, w) in out.iter_mut().enumerate() {
            *w = self.element(first + j);
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
        let first = r * self.cols;
        let k = first + j;
        if k % 2 == 1 {
            return None;
        }
        let block = k / self.blocksize;
        let lim = ((block + 1) * self.blocksize - first).min(self.cols - self.cols % 8);
        if j + 8 > lim {
            return None;
        }
        Some((self.absmax[block], j + (lim - j) / 8 * 8))
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
        debug_assert!(j.is_multiple_of(8));
        // SAFETY: the caller's features; 4 bytes of the codes read (a run
        // starts on a byte, the row's start is even, and the run holds
        // these 8 elements), 16 code-book floats.
        unsafe {
            let b = base.add(j / 2).cast::<u32>().read_unaligned();
            // Element l: byte l / 2, its high nibble first.
            let idx = _mm256_and_si256(
                _mm256_srlv_epi32(
                    _mm256_set1_epi32(b as i32),
                    _mm256_setr_epi32(4, 0, 12, 8, 20, 16, 28, 24),
                ),
                _mm256_set1_epi32(0xf),
            );
            let lo = _mm256_loadu_ps(self.code.as_ptr());
            let hi = _mm256_loadu_ps(self.code.as_ptr().add(8));
            let v = if AVX512 {
                _mm256_permutex2var_ps(lo, idx, hi)
            } else {
                // Codes 8..15 (bit 3, moved to the sign) from `hi`.
                let upper = _mm256_castsi256_ps(_mm256_slli_epi32::<28>(idx));
                _mm256_blendv_ps(
                    _mm256_permutevar8x32_ps(lo, idx),
                    _mm256_permutevar8x32_ps(hi, idx),
                    upper,
                )
            };
            _mm256_mul_ps(v, scale)
        }
    }

    /// The row's first byte; valid for [`RowDecode::load8`] only where the
    /// row starts on a byte (else [`RowDecode::run`] gives no run).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn base(&self, r: usize) -> *const u8 {
        self.packed.as_ptr().wrapping_add(r * self.cols / 2)
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn value(&self, r: usize, j: usize) -> f32 {
        self.element(r * self.cols + j)
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn prefetch_line(&self, r: usize, j: usize) {
        super::prefetch::line(self.packed.as_ptr().wrapping_add((r * self.cols + j) / 2));
    }

    #[cfg(target_arch = "x86_64")]
    unsafe fn decode_row_avx512(&self, r: usize, out: &mut [f32]) {
        // SAFETY: the caller's AVX2 and AVX-512 F/BW/VL.
        unsafe { decode_row_avx512(self, r, out) }
    }
}

impl Bnb4Weight {
    /// Element `k` of the flattened matrix.
    #[inline(always)]
    fn element(&self, k: usize) -> f32 {
        let byte = self.packed[k / 2];
        let nibble = if k.is_multiple_of(2) {
            byte >> 4
        } else {
            byte & 0xf
        };
        self.code[nibble as usize] * self.absmax[k / self.blocksize]
    }

    /// Row `r` into `out`, block by block: runs of 32 elements that start
    /// on a byte by [`x86::wide`], the others by [`Self::element`]; asks
    /// for the codes of the row [`AHEAD_ROWS`] rows on.
    ///
    /// # Safety
    /// AVX2, and AVX-512 F/BW/VL if `AVX512`.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn decode_row_x86<const AVX512: bool>(&self, r: usize, out: &mut [f32]) {
        let first = r * self.cols;
        let ahead = self
            .packed
            .as_ptr()
            .wrapping_add((first + AHEAD_ROWS * self.cols) / 2);
        prefetch_bytes(ahead, self.cols.div_ceil(2) + 1);
        let mut j = 0;
        while j < self.cols {
            let block = (first + j) / self.blocksize;
            let end = ((block + 1) * self.blocksize - first).min(self.cols);
            if (first + j) % 2 == 1 {
                out[j] = self.element(first + j);
                j += 1;
            }
            let absmax = self.absmax[block];
            while j + 32 <= end {
                let k = first + j;
                let bytes: &[u8; 16] = self.packed[k / 2..k / 2 + 16].try_into().expect("16");
                let out: &mut [f32; 32] = (&mut out[j..j + 32]).try_into().expect("32");
                // SAFETY: the caller's features.
                unsafe { x86::wide::<AVX512>(&self.code, bytes, absmax, out) };
                j += 32;
            }
            while j < end {
                out[j] = self.element(first + j);
                j += 1;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn decode_row_avx2(w: &Bnb4Weight, r: usize, out: &mut [f32]) {
    // SAFETY: this function's AVX2.
    unsafe { w.decode_row_x86::<false>(r, out) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl")]
unsafe fn decode_row_avx512(w: &Bnb4Weight, r: usize, out: &mut [f32]) {
    // SAFETY: this function's AVX2 and AVX-512.
    unsafe { w.decode_row_x86::<true>(r, out) }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// 32 elements from 16 bytes (each byte's high nibble first) in the
    /// code book `code`, times `absmax`.
    ///
    /// # Safety
    /// AVX2, and AVX-512 F/BW/VL if `AVX512`.
    #[inline(always)]
    pub unsafe fn wide<const AVX512: bool>(
        code: &[f32; 16],
        bytes: &[u8; 16],
        absmax: f32,
        out: &mut [f32; 32],
    ) {
        // SAFETY: the caller's features; 16 codes and 16 bytes read, 32
        // floats written.
        unsafe {
            let b = _mm_loadu_si128(bytes.as_ptr().cast());
            let low = _mm_set1_epi8(0x0f);
            let (hi, lo) = (
                _mm_and_si128(_mm_srli_epi16::<4>(b), low),
                _mm_and_si128(b, low),
            );
            // Element order: byte i's high nibble, then its low one.
            let halves = [_mm_unpacklo_epi8(hi, lo), _mm_unpackhi_epi8(hi, lo)];
            let o = out.as_mut_ptr();
            if AVX512 {
                let (book, a) = (_mm512_loadu_ps(code.as_ptr()), _mm512_set1_ps(absmax));
                for (h, idx) in halves.into_iter().enumerate() {
                    let v = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(idx), book);
                    _mm512_storeu_ps(o.add(16 * h), _mm512_mul_ps(v, a));
                }
            } else {
                let a = _mm256_set1_ps(absmax);
                let book_lo = _mm256_loadu_ps(code.as_ptr());
                let book_hi = _mm256_loadu_ps(code.as_ptr().add(8));
                for (h, idx) in halves.into_iter().enumerate() {
                    for (q, idx) in [idx, _mm_srli_si128::<8>(idx)].into_iter().enumerate() {
                        let idx = _mm256_cvtepu8_epi32(idx);
                        // Codes 8..15 (bit 3, moved to the sign) from `book_hi`.
                        let upper = _mm256_castsi256_ps(_mm256_slli_epi32::<28>(idx));
                        let v = _mm256_blendv_ps(
                            _mm256_permutevar8x32_ps(book_lo, idx),
                            _mm256_permutevar8x32_ps(book_hi, idx),
                            upper,
                        );
                        _mm256_storeu_ps(o.add(16 * h + 8 * q), _mm256_mul_ps(v, a));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::decoded::tests::check_twins;
    use super::*;
    use rand::{Rng, SeedableRng};

    const CODE: [f32; 16] = [
        -1.0, -0.7, -0.5, -0.4, -0.3, -0.2, -0.1, 0.0, 0.08, 0.16, 0.25, 0.34, 0.44, 0.56, 0.72,
        1.0,
    ];

    #[test]
    fn high_nibble_first_and_blocks_across_rows() {
        // 2x3, blocks of 4: the second block starts inside row 1.
        let w = Bnb4Weight::new(2, 3, 4, vec![0x0f, 0x70, 0xf0], CODE, vec![2.0, 3.0]).unwrap();
        assert_eq!(w.dequantize(), [-2.0, 2.0, 0.0, -2.0, 3.0, -3.0]);
    }

    #[test]
    fn kernel_twins_agree_and_match_f64() {
        for (rows, cols, blocksize) in [
            (40, 128, 64),
            (17, 75, 64),
            (9, 320, 256),
            (5, 7, 32),
            (6, 100, 32),
            (11, 97, 128),
            (3, 576, 64),
        ] {
            let mut rng = rand::rngs::StdRng::seed_from_u64(rows as u64);
            let n = rows * cols;
            let w = Bnb4Weight::new(
                rows,
                cols,
                blocksize,
                (0..n.div_ceil(2)).map(|_| rng.random()).collect(),
                CODE,
                (0..n.div_ceil(blocksize))
                    .map(|_| rng.random_range(0.01..0.1))
                    .collect(),
            )
            .unwrap();
            check_twins(&w, 9);
        }
    }

    #[test]
    fn sizes_are_checked() {
        assert!(Bnb4Weight::new(2, 3, 4, vec![0; 2], CODE, vec![1.0; 2]).is_err());
        assert!(Bnb4Weight::new(2, 3, 4, vec![0; 3], CODE, vec![1.0; 1]).is_err());
        assert!(Bnb4Weight::new(2, 3, 0, vec![0; 3], CODE, vec![]).is_err());
    }
}
