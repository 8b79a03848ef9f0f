//! The row kernels this CPU runs: one weight row against `R` activation
//! rows at once (the weight block is unpacked once). Every variant performs
//! the portable twin's float operations in its order, so which one runs
//! never changes a result.

use super::q8::BlockQ8;
use super::q8k::BlockQ8K;
use super::{dot, kquants, q5k_tiles, WeightKind};

/// Which row kernels run, chosen once from the CPU's features.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum RowKernels {
    Portable,
    /// AVX2 + FMA + F16C.
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// NEON (baseline on aarch64), with `SDOT` where the CPU has it.
    #[cfg(target_arch = "aarch64")]
    Neon,
}

impl RowKernels {
    /// The fastest kernels this CPU has; `simd = false` forces the portable ones.
    pub fn new(simd: bool) -> Self {
        if !simd {
            return Self::Portable;
        }
        #[cfg(target_arch = "x86_64")]
        if dot::x86::available() {
            return Self::Avx2;
        }
        #[cfg(target_arch = "aarch64")]
        return Self::Neon;
        #[allow(unreachable_code)]
        Self::Portable
    }

    /// A 32-element type (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) against Q8 rows.
    #[inline]
    pub fn dot32<const R: usize>(
        self,
        kind: WeightKind,
        w: &[u8],
        ys: [&[BlockQ8]; R],
    ) -> [f32; R] {
        match self {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Avx2` is chosen only where the CPU has the features;
            // callers pass `w` with as many blocks as every row of `ys`.
            Self::Avx2 => unsafe { dot::x86::dot_rows::<R>(kind.x86_code(), w, ys) },
            #[cfg(target_arch = "aarch64")]
            Self::Neon => super::neon::dot_rows(kind, w, ys),
            Self::Portable => {
                let dot = match kind {
                    WeightKind::Q4_1 => dot::dot_q4_1_q8_1_scalar,
                    WeightKind::Q5_0 => dot::dot_q5_0_q8_0_scalar,
                    WeightKind::Q8_0 => dot::dot_q8_0_q8_0_scalar,
                    WeightKind::Q4_0 => dot::dot_q4_0_q8_0_scalar,
                    WeightKind::Q5_1 => dot::dot_q5_1_q8_1_scalar,
                    WeightKind::Q4K | WeightKind::Q6K | WeightKind::Q5K => {
                        unreachable!("K-quants use RowKernels::kquant")
                    }
                };
                ys.map(|y| dot(w, y))
            }
        }
    }

    /// A K-quant (Q4_K, Q5_K, Q6_K) against Q8_K rows. `pairs[r]`: Q4_K's
    /// gemm order for row `r`; `tiled`: Q5_K/Q6_K's tiled-kernel order.
    #[inline]
    pub fn kquant<const R: usize>(
        self,
        kind: WeightKind,
        w: &[u8],
        ys: [&[BlockQ8K]; R],
        pairs: [bool; R],
        tiled: bool,
    ) -> [f32; R] {
        match (self, kind) {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Avx2` is chosen only where the CPU has the features;
            // callers pass `w` with as many blocks as every row of `ys`.
            (Self::Avx2, WeightKind::Q4K) => unsafe { kquants::x86::dot_q4_k_rows(w, ys, pairs) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            (Self::Avx2, WeightKind::Q6K) => unsafe { kquants::x86::dot_q6_k_rows(w, ys, tiled) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            (Self::Avx2, WeightKind::Q5K) => unsafe { q5k_tiles::x86::dot_q5_k_rows(w, ys, tiled) },
            #[cfg(target_arch = "aarch64")]
            (Self::Neon, WeightKind::Q4K) => super::neon::dot_q4_k_rows(w, ys, pairs),
            #[cfg(target_arch = "aarch64")]
            (Self::Neon, WeightKind::Q6K) => super::neon::dot_q6_k_rows(w, ys, tiled),
            #[cfg(target_arch = "aarch64")]
            (Self::Neon, WeightKind::Q5K) => super::neon::dot_q5_k_rows(w, ys, tiled),
            (_, WeightKind::Q4K) => {
                std::array::from_fn(|r| kquants::dot_q4_k_scalar(w, ys[r], pairs[r]))
            }
            (_, WeightKind::Q6K) => ys.map(|y| kquants::dot_q6_k_scalar(w, y, tiled)),
            (_, WeightKind::Q5K) => ys.map(|y| q5k_tiles::dot_q5_k_scalar(w, y, tiled)),
            _ => unreachable!("{kind:?} is not a K-quant"),
        }
    }
}
