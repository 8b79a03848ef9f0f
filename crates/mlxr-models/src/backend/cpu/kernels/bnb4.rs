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
            let nibble = if k.is_multiple_of(2) { byte >> 4 } else { byte & 0xf };
            *w = self.code[nibble as usize] * self.absmax[k / self.blocksize];
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
