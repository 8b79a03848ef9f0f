//! F16 and BF16 weights (Hugging Face safetensors), multiplied without
//! being widened in memory (see [`super::decoded`]): 2 bytes a weight
//! instead of f32's 4, in memory and in every decode step's reads.
//!
//! Layout: the stored `[rows, cols]` row-major 16-bit values. Both widen to
//! f32 exactly (BF16: the bits shifted into an f32's high half; F16: F16C's
//! `vcvtph2ps`, or the `half` crate's software conversion, which give the
//! same f32 for every code), so the product is the one the f32 weights
//! would give under [`super::decoded`]'s fixed order.

use super::decoded::RowDecode;
#[cfg(target_arch = "x86_64")]
use super::decoded_simd::{prefetch_bytes, AHEAD_ROWS};

/// Which 16-bit float a [`HalfWeight`] holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HalfFormat {
    F16,
    Bf16,
}

impl HalfFormat {
    #[inline(always)]
    fn widen(self, bits: u16) -> f32 {
        match self {
            HalfFormat::F16 => half::f16::from_bits(bits).to_f32(),
            HalfFormat::Bf16 => f32::from_bits((bits as u32) << 16),
        }
    }
}

pub struct HalfWeight {
    rows: usize,
    cols: usize,
    format: HalfFormat,
    bits: Vec<u16>,
}

impl std::fmt::Debug for HalfWeight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "HalfWeight [{}, {}] {:?}",
            self.rows, self.cols, self.format
        )
    }
}

impl HalfWeight {
    /// From the little-endian bytes of a `[rows, cols]` tensor (safetensors).
    pub fn from_le_bytes(
        format: HalfFormat,
        rows: usize,
        cols: usize,
        bytes: &[u8],
    ) -> Result<Self, String> {
        if bytes.len() != 2 * rows * cols {
            return Err(format!(
                "[{rows}, {cols}] {format:?}: expected {} bytes, found {}",
                2 * rows * cols,
                bytes.len()
            ));
        }
        let bits = bytes
            .chunks_exact(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .collect();
        Ok(Self {
            rows,
            cols,
            format,
            bits,
        })
    }

    pub fn format(&self) -> HalfFormat {
        self.format
    }

    fn row_bits(&self, r: usize) -> &[u16] {
        &self.bits[r * self.cols..(r + 1) * self.cols]
    }
}

impl RowDecode for HalfWeight {
    fn rows(&self) -> usize {
        self.rows
    }

    fn cols(&self) -> usize {
        self.cols
    }

    #[inline(always)]
    fn decode_row(&self, r: usize, out: &mut [f32]) {
        for (o, &b) in out.iter_mut().zip(self.row_bits(r)) {
            *o = self.format.widen(b);
        }
    }

    #[cfg(target_arch = "x86_64")]
    unsafe fn decode_row_avx2(&self, r: usize, out: &mut [f32]) {
        // SAFETY: the caller's AVX2; the decoded twins' callers check F16C
        // with it (`decoded::Twin::detect`).
        unsafe { decode_row_avx2(self, r, out) }
    }

    #[cfg(target_arch = "x86_64")]
    fn fusable(&self) -> bool {
        true
    }

    /// The whole body of the row (the columns a multiple of 8 covers) is
    /// one run; the scale is 1 and [`Self::load8`] does not apply it.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn run(&self, _r: usize, j: usize) -> Option<(f32, usize)> {
        let body = self.cols - self.cols % 8;
        (j + 8 <= body).then_some((1.0, body))
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn base(&self, r: usize) -> *const u8 {
        self.bits.as_ptr().wrapping_add(r * self.cols).cast()
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8<const AVX512: bool>(
        &self,
        base: *const u8,
        j: usize,
        _scale: std::arch::x86_64::__m256,
    ) -> std::arch::x86_64::__m256 {
        use std::arch::x86_64::*;
        debug_assert!(j + 8 <= self.cols);
        // SAFETY: 8 values of the row at `base` (`j + 8 <= cols`); the
        // caller's AVX2 and F16C.
        unsafe {
            let v = _mm_loadu_si128(base.add(2 * j).cast());
            match self.format {
                HalfFormat::F16 => _mm256_cvtph_ps(v),
                HalfFormat::Bf16 => {
                    _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(v)))
                }
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn value(&self, r: usize, j: usize) -> f32 {
        self.format.widen(self.bits[r * self.cols + j])
    }

    /// The two lines from column `j`: a tile of 8 rows asks for each row
    /// every 64 columns, 128 bytes here.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn prefetch_line(&self, r: usize, j: usize) {
        let at: *const u8 = self.bits.as_ptr().wrapping_add(r * self.cols + j).cast();
        super::prefetch::line(at);
        super::prefetch::line(at.wrapping_add(64));
    }
}

/// [`HalfWeight::decode_row`] eight values at a time with AVX2 and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
unsafe fn decode_row_avx2(w: &HalfWeight, r: usize, out: &mut [f32]) {
    use std::arch::x86_64::*;
    let bits = w.row_bits(r);
    prefetch_bytes(
        w.bits
            .as_ptr()
            .wrapping_add((r + AHEAD_ROWS) * w.cols)
            .cast(),
        2 * w.cols,
    );
    let mut out8 = out.chunks_exact_mut(8);
    let mut bits8 = bits.chunks_exact(8);
    for (o, b) in (&mut out8).zip(&mut bits8) {
        // SAFETY: `b` holds 8 values and `o` 8 floats; AVX2 and F16C.
        unsafe {
            let v = _mm_loadu_si128(b.as_ptr().cast());
            let f = match w.format {
                HalfFormat::F16 => _mm256_cvtph_ps(v),
                HalfFormat::Bf16 => {
                    _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(v)))
                }
            };
            _mm256_storeu_ps(o.as_mut_ptr(), f);
        }
    }
    for (o, &b) in out8.into_remainder().iter_mut().zip(bits8.remainder()) {
        *o = w.format.widen(b);
    }
}

#[cfg(test)]
mod tests {
    use super::super::decoded::tests::check_twins;
    use super::*;

    fn weight(format: HalfFormat, rows: usize, cols: usize, seed: u64) -> HalfWeight {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let bytes: Vec<u8> = (0..rows * cols)
            .flat_map(|_| {
                let v: f32 = rng.random_range(-2.0..2.0);
                match format {
                    HalfFormat::F16 => half::f16::from_f32(v).to_bits(),
                    HalfFormat::Bf16 => half::bf16::from_f32(v).to_bits(),
                }
                .to_le_bytes()
            })
            .collect();
        HalfWeight::from_le_bytes(format, rows, cols, &bytes).unwrap()
    }

    #[test]
    fn twins_match_portable_and_f64() {
        for format in [HalfFormat::F16, HalfFormat::Bf16] {
            // Column counts with and without a tail, rows not a tile multiple.
            for (rows, cols) in [(37, 72), (16, 64), (9, 131), (3, 7)] {
                check_twins(&weight(format, rows, cols, 11), 12);
            }
        }
    }

    #[test]
    fn values_are_the_formats_own() {
        // F16: subnormals, the largest finite, infinities and a NaN; BF16
        // the same kinds of codes.
        let codes = [
            0x0001u16, 0x03ff, 0x7bff, 0xfc00, 0x7c00, 0x7e01, 0x8000, 0x3c00,
        ];
        let bytes: Vec<u8> = codes.iter().flat_map(|c| c.to_le_bytes()).collect();
        for format in [HalfFormat::F16, HalfFormat::Bf16] {
            let w = HalfWeight::from_le_bytes(format, 1, 8, &bytes).unwrap();
            let mut row = [0.0f32; 8];
            w.decode_row(0, &mut row);
            for (&c, &v) in codes.iter().zip(&row) {
                let want = match format {
                    HalfFormat::F16 => half::f16::from_bits(c).to_f32(),
                    HalfFormat::Bf16 => half::bf16::from_bits(c).to_f32(),
                };
                assert_eq!(v.to_bits(), want.to_bits(), "{format:?} {c:#06x}");
            }
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("f16c")
            {
                let mut simd = [0.0f32; 8];
                // SAFETY: AVX2 and F16C checked above.
                unsafe { w.decode_row_avx2(0, &mut simd) };
                assert_eq!(simd.map(f32::to_bits), row.map(f32::to_bits), "{format:?}");
            }
        }
        assert!(HalfWeight::from_le_bytes(HalfFormat::F16, 2, 8, &bytes).is_err());
    }
}
