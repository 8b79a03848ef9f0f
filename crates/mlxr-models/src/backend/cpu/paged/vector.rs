//! The two inner loops of attention, portable and AVX2+FMA.

/// Vector kernels; the attention kernel is generic over them so the AVX2
/// version inlines into a kernel compiled for AVX2.
pub(crate) trait VectorOps {
    /// `a · b` (same length).
    fn dot(a: &[f32], b: &[f32]) -> f32;
    /// `acc += weight * x` (same length).
    fn axpy(acc: &mut [f32], weight: f32, x: &[f32]);
}

pub(crate) struct Portable;

impl VectorOps for Portable {
    #[inline(always)]
    fn dot(a: &[f32], b: &[f32]) -> f32 {
        // Eight partial sums so the loop vectorizes.
        let mut acc = [0f32; 8];
        let (a_chunks, b_chunks) = (a.chunks_exact(8), b.chunks_exact(8));
        let tail: f32 = a_chunks
            .remainder()
            .iter()
            .zip(b_chunks.remainder())
            .map(|(x, y)| x * y)
            .sum();
        for (x, y) in a_chunks.zip(b_chunks) {
            for i in 0..8 {
                acc[i] += x[i] * y[i];
            }
        }
        acc.iter().sum::<f32>() + tail
    }

    #[inline(always)]
    fn axpy(acc: &mut [f32], weight: f32, x: &[f32]) {
        for (a, &x) in acc.iter_mut().zip(x) {
            *a += weight * x;
        }
    }
}

/// Only used from code that checked [`avx2_fma_available`] first.
#[cfg(target_arch = "x86_64")]
pub(crate) struct Avx2Fma;

#[cfg(target_arch = "x86_64")]
pub(crate) fn avx512f_available() -> bool {
    avx2_fma_available()
        && crate::backend::cpu::kernels::isa::allows(crate::backend::cpu::kernels::isa::Isa::Avx512)
        && is_x86_feature_detected!("avx512f")
}

#[cfg(target_arch = "x86_64")]
pub(crate) fn avx2_fma_available() -> bool {
    crate::backend::cpu::kernels::isa::allows(crate::backend::cpu::kernels::isa::Isa::Avx2)
        && is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("fma")
}

#[cfg(target_arch = "x86_64")]
impl VectorOps for Avx2Fma {
    #[inline(always)]
    fn dot(a: &[f32], b: &[f32]) -> f32 {
        // SAFETY: `Avx2Fma` is only used after `avx2_fma_available()`.
        unsafe { x86::dot(a, b) }
    }

    #[inline(always)]
    fn axpy(acc: &mut [f32], weight: f32, x: &[f32]) {
        // SAFETY: as above.
        unsafe { x86::axpy(acc, weight, x) }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn dot(a: &[f32], b: &[f32]) -> f32 {
        let n = a.len().min(b.len());
        let (pa, pb) = (a.as_ptr(), b.as_ptr());
        let mut acc0 = _mm256_setzero_ps();
        let mut acc1 = _mm256_setzero_ps();
        let mut i = 0;
        // SAFETY (all loads): `i + 8 <= n` (or `i + 16`) keeps them in bounds.
        while i + 16 <= n {
            unsafe {
                acc0 =
                    _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), _mm256_loadu_ps(pb.add(i)), acc0);
                acc1 = _mm256_fmadd_ps(
                    _mm256_loadu_ps(pa.add(i + 8)),
                    _mm256_loadu_ps(pb.add(i + 8)),
                    acc1,
                );
            }
            i += 16;
        }
        if i + 8 <= n {
            unsafe {
                acc0 =
                    _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), _mm256_loadu_ps(pb.add(i)), acc0);
            }
            i += 8;
        }
        let acc = _mm256_add_ps(acc0, acc1);
        let mut r = _mm_add_ps(_mm256_extractf128_ps(acc, 1), _mm256_castps256_ps128(acc));
        r = _mm_add_ps(r, _mm_movehl_ps(r, r));
        r = _mm_add_ss(r, _mm_movehdup_ps(r));
        let mut sum = _mm_cvtss_f32(r);
        for j in i..n {
            sum += a[j] * b[j];
        }
        sum
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn axpy(acc: &mut [f32], weight: f32, x: &[f32]) {
        let n = acc.len().min(x.len());
        let (pa, px) = (acc.as_mut_ptr(), x.as_ptr());
        let w = _mm256_set1_ps(weight);
        let mut i = 0;
        while i + 8 <= n {
            // SAFETY: `i + 8 <= n` keeps the loads and the store in bounds.
            unsafe {
                let sum =
                    _mm256_fmadd_ps(w, _mm256_loadu_ps(px.add(i)), _mm256_loadu_ps(pa.add(i)));
                _mm256_storeu_ps(pa.add(i), sum);
            }
            i += 8;
        }
        for j in i..n {
            acc[j] += weight * x[j];
        }
    }
}
