//! bitsandbytes 4-bit weights (NF4, FP4), multiplied without being widened
//! in memory (see [`super::decoded`]).
//!
//! Layout (bitsandbytes `quantize_4bit`): the row-major matrix flattened,
//! two codes a byte with the even element in the high nibble, and one f32
//! `absmax` per `blocksize` elements of the flattened matrix (a block may
//! cross rows): `w = code[nibble] · absmax[k / blocksize]` for flat index
//! `k`. A double-quantized `absmax` is resolved to f32 at load (it is 1/64
//! of the weight's size); each decoded value is exactly the f32 product of
//! bitsandbytes' `dequantize_4bit`.

use super::decoded::RowDecode;

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
            let k = first + j;
            let byte = self.packed[k / 2];
            let nibble = if k.is_multiple_of(2) {
                byte >> 4
            } else {
                byte & 0xf
            };
            *w = self.code[nibble as usize] * self.absmax[k / self.blocksize];
        }
    }

    #[cfg(target_arch = "x86_64")]
    unsafe fn decode_row_avx2(&self, r: usize, out: &mut [f32]) {
        decode_row_avx2(self, r, out)
    }
}

/// [`Bnb4Weight::decode_row`] eight codes (four bytes) at a time where they
/// start on a byte and lie in one block: each nibble shifted out of the
/// broadcast bytes, looked up in the 16-entry code book (two 8-entry
/// permutes and a blend) and multiplied by the same absmax.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn decode_row_avx2(w: &Bnb4Weight, r: usize, out: &mut [f32]) {
    use std::arch::x86_64::*;
    let first = r * w.cols;
    let lo = _mm256_loadu_ps(w.code.as_ptr());
    let hi = _mm256_loadu_ps(w.code.as_ptr().add(8));
    // Lane l is element l: byte l / 2, its high nibble first.
    let shifts = _mm256_setr_epi32(4, 0, 12, 8, 20, 16, 28, 24);
    let (nibble, eight) = (_mm256_set1_epi32(0xf), _mm256_set1_epi32(8));
    let mut j = 0;
    while j < w.cols {
        let k = first + j;
        let whole = k.is_multiple_of(2) && j + 8 <= w.cols && k % w.blocksize + 8 <= w.blocksize;
        if !whole {
            let byte = w.packed[k / 2];
            let n = if k.is_multiple_of(2) {
                byte >> 4
            } else {
                byte & 0xf
            };
            out[j] = w.code[n as usize] * w.absmax[k / w.blocksize];
            j += 1;
            continue;
        }
        let bytes = u32::from_le_bytes(w.packed[k / 2..k / 2 + 4].try_into().expect("4 bytes"));
        let idx = _mm256_and_si256(
            _mm256_srlv_epi32(_mm256_set1_epi32(bytes as i32), shifts),
            nibble,
        );
        let upper = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(idx, eight), eight));
        let v = _mm256_blendv_ps(
            _mm256_permutevar8x32_ps(lo, idx),
            _mm256_permutevar8x32_ps(hi, idx),
            upper,
        );
        let a = _mm256_set1_ps(w.absmax[k / w.blocksize]);
        // SAFETY: j + 8 <= cols = out.len().
        unsafe { _mm256_storeu_ps(out.as_mut_ptr().add(j), _mm256_mul_ps(v, a)) };
        j += 8;
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
        for (rows, cols, blocksize) in [(40, 128, 64), (17, 75, 64), (9, 320, 256), (5, 7, 32)] {
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
