//! The element types a paged KV cache can store, and their f32 conversions.

use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};

/// A cache element type; keys and values are written from f32 and read back
/// as f32 one block at a time.
pub(crate) trait CacheElement: Copy + Send + Sync + 'static {
    /// `src` as f32: `src` itself for f32, else converted into `scratch`
    /// (which must hold at least `src.len()` values).
    fn as_f32<'s>(src: &'s [Self], scratch: &'s mut [f32]) -> &'s [f32];

    /// Rounds `src` into `dst` (same length).
    fn store_f32(src: &[f32], dst: &mut [Self]);

    /// `src` as f32 into `dst` (same length).
    fn write_f32(src: &[Self], dst: &mut [f32]);
}

impl CacheElement for f32 {
    fn as_f32<'s>(src: &'s [Self], _scratch: &'s mut [f32]) -> &'s [f32] {
        src
    }

    fn store_f32(src: &[f32], dst: &mut [Self]) {
        dst.copy_from_slice(src);
    }

    fn write_f32(src: &[Self], dst: &mut [f32]) {
        dst.copy_from_slice(src);
    }
}

impl CacheElement for f16 {
    fn as_f32<'s>(src: &'s [Self], scratch: &'s mut [f32]) -> &'s [f32] {
        let out = &mut scratch[..src.len()];
        f16_to_f32(src, out);
        out
    }

    fn store_f32(src: &[f32], dst: &mut [Self]) {
        dst.convert_from_f32_slice(src);
    }

    fn write_f32(src: &[Self], dst: &mut [f32]) {
        f16_to_f32(src, dst);
    }
}

/// `src` widened into `dst` (same length), exactly. With F16C, in one
/// inlined loop: `half`'s slice conversion calls a function per 8 values,
/// 11% of a 16-sequence SmolLM2 decode under AVX2
/// (bench/results/isa-avx2-f16-keys-2026-12-04.md). Off under
/// `MLXR_CPU_ISA=scalar`, like every vector path.
fn f16_to_f32(src: &[f16], dst: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    use crate::backend::cpu::kernels::isa;
    assert_eq!(src.len(), dst.len());
    #[cfg(target_arch = "x86_64")]
    if isa::allows(isa::Isa::Avx2)
        && std::arch::is_x86_feature_detected!("f16c")
        && std::arch::is_x86_feature_detected!("avx")
    {
        // SAFETY: the features were just detected; the lengths are equal.
        return unsafe { f16c::f16_to_f32(src, dst) };
    }
    src.convert_to_f32_slice(dst);
}

#[cfg(target_arch = "x86_64")]
mod f16c {
    use std::arch::x86_64::*;

    use half::f16;

    /// # Safety
    /// The CPU must support AVX and F16C; `dst.len() == src.len()`.
    #[target_feature(enable = "avx,f16c")]
    pub unsafe fn f16_to_f32(src: &[f16], dst: &mut [f32]) {
        let n = src.len();
        let mut i = 0;
        while i + 8 <= n {
            // SAFETY: 8 values at i in both (i + 8 <= n).
            unsafe {
                let h = _mm_loadu_si128(src.as_ptr().add(i).cast());
                _mm256_storeu_ps(dst.as_mut_ptr().add(i), _mm256_cvtph_ps(h));
            }
            i += 8;
        }
        for (d, s) in dst[i..].iter_mut().zip(&src[i..]) {
            *d = s.to_f32();
        }
    }
}

impl CacheElement for bf16 {
    fn as_f32<'s>(src: &'s [Self], scratch: &'s mut [f32]) -> &'s [f32] {
        let out = &mut scratch[..src.len()];
        src.convert_to_f32_slice(out);
        out
    }

    fn store_f32(src: &[f32], dst: &mut [Self]) {
        dst.convert_from_f32_slice(src);
    }

    fn write_f32(src: &[Self], dst: &mut [f32]) {
        src.convert_to_f32_slice(dst);
    }
}

#[cfg(test)]
mod tests {
    use half::f16;

    /// Every f16 bit pattern (NaNs compared as bits) widens as `half` does.
    #[test]
    fn f16_widening_is_exact() {
        let all: Vec<f16> = (0..=u16::MAX).map(f16::from_bits).collect();
        for len in [all.len(), 13, 7] {
            let src = &all[all.len() - len..];
            let mut got = vec![0.0f32; len];
            super::f16_to_f32(src, &mut got);
            for (g, s) in got.iter().zip(src) {
                assert_eq!(g.to_bits(), s.to_f32().to_bits(), "{:#06x}", s.to_bits());
            }
        }
    }
}
