//! Q8_K activation quantization (super-blocks of 256), as ggml computes it.
//!
//! `quantize_row_q8_K_ref` (which ggml's x86 backend calls for single rows):
//! `max` is the signed value of the first element of largest magnitude,
//! `iscale = -127 / max`, `q = min(127, nearest_int(iscale * x))` (the f32
//! product rounded half to even by the 1.5·2²³ trick), `d = 1 / iscale`, and
//! `bsums[j]` = the sum of the 16 quants `16j..16j+16`.
//!
//! The 4-row interleaving quantizer of the repacked Q4_K path
//! (`ggml_quantize_mat_q8_K_4x8`, AVX2) computes the same numbers except for
//! the sign of `max`: it takes `+amax` whenever any element equals `+amax`
//! (the reference takes the first one). [`quantize_row`] does either.

/// Elements per Q8_K / Q4_K / Q6_K super-block.
pub const QK_K: usize = 256;

/// One quantized activation super-block: `x ≈ d * qs`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C, align(32))]
pub struct BlockQ8K {
    pub qs: [i8; QK_K],
    pub d: f32,
    pub bsums: [i16; QK_K / 16],
}

impl Default for BlockQ8K {
    fn default() -> Self {
        Self {
            qs: [0; QK_K],
            d: 0.0,
            bsums: [0; QK_K / 16],
        }
    }
}

/// Which of ggml's two Q8_K quantizers to mirror (they differ only when both
/// `+amax` and `-amax` occur in a super-block).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Q8KFlavor {
    /// `quantize_row_q8_K_ref`: the first element of largest magnitude.
    Reference,
    /// `ggml_quantize_mat_q8_K_4x8`: positive if any element is `+amax`.
    Interleaved4x8,
}

#[inline(always)]
fn quantize_block(x: &[f32], flavor: Q8KFlavor) -> BlockQ8K {
    debug_assert_eq!(x.len(), QK_K);
    let mut amax = 0.0f32;
    let mut max = 0.0f32;
    for &v in x {
        let a = v.abs();
        if a > amax {
            amax = a;
            max = v;
        }
    }
    let mut b = BlockQ8K::default();
    if amax == 0.0 {
        return b;
    }
    if flavor == Q8KFlavor::Interleaved4x8 && x.contains(&amax) {
        max = amax;
    }
    let iscale = -127.0f32 / max;
    for (q, &v) in b.qs.iter_mut().zip(x) {
        *q = (iscale * v).round_ties_even().min(127.0) as i8;
    }
    for (s, chunk) in b.bsums.iter_mut().zip(b.qs.chunks_exact(16)) {
        *s = chunk.iter().map(|&q| q as i16).sum();
    }
    b.d = 1.0 / iscale;
    b
}

#[inline(always)]
fn quantize_row_portable(x: &[f32], out: &mut [BlockQ8K], flavor: Q8KFlavor) {
    for (b, chunk) in out.iter_mut().zip(x.chunks_exact(QK_K)) {
        *b = quantize_block(chunk, flavor);
    }
}

/// The same code with SSE4.1 enabled (`roundps` instead of a libm call).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.1")]
fn quantize_row_sse41(x: &[f32], out: &mut [BlockQ8K], flavor: Q8KFlavor) {
    quantize_row_portable(x, out, flavor);
}

/// Quantizes a row (length a multiple of [`QK_K`]) into `out`.
pub fn quantize_row(x: &[f32], out: &mut [BlockQ8K], flavor: Q8KFlavor) {
    assert_eq!(x.len(), out.len() * QK_K);
    #[cfg(target_arch = "x86_64")]
    if super::isa::allows(super::isa::Isa::Avx2) && is_x86_feature_detected!("sse4.1") {
        // SAFETY: the feature was just detected.
        return unsafe { quantize_row_sse41(x, out, flavor) };
    }
    quantize_row_portable(x, out, flavor);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_ties_to_even_and_follows_the_sign_of_max() {
        let mut x = vec![0.0f32; QK_K];
        x[0] = -127.0;
        x[1] = 0.5;
        x[2] = 1.5;
        x[3] = -2.5;
        x[4] = 127.0;
        let mut b = [BlockQ8K::default()];
        quantize_row(&x, &mut b, Q8KFlavor::Reference);
        // max = -127 → iscale = 1.
        assert_eq!(&b[0].qs[..5], &[-127, 0, 2, -2, 127]);
        assert_eq!(b[0].d, 1.0);
        assert_eq!(b[0].bsums[0], 0);
        quantize_row(&x, &mut b, Q8KFlavor::Interleaved4x8);
        // max = +127 → iscale = -1: the quants flip sign.
        assert_eq!(&b[0].qs[..5], &[127, 0, -2, 2, -127]);
        assert_eq!(b[0].d, -1.0);
    }
}
