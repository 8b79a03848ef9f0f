//! CPU quantized matmul kernels that compute what ggml's x86 CPU backend
//! computes, bit for bit.
//!
//! `y[m, n] = x[m, k] · W[n, k]ᵀ` for `W` in Q4_1 (activations quantized to
//! Q8_1), Q5_0 or Q8_0 (activations quantized to Q8_0). ggml (AVX2/AVX-512 build)
//! runs `quantize_row_q8_1`/`quantize_row_q8_0` (round half to even, f32
//! scale and sum products) and `ggml_vec_dot_q4_1_q8_1`/`ggml_vec_dot_q5_0_q8_0`
//! per output element; for Q5_0 with several tokens llamafile's tinyBLAS
//! kernel runs instead, which performs the same per-element float operations.
//! See [`q8`] and [`dot`] for the exact rounding and order.
//!
//! Q4_K and Q6_K weights pair with Q8_K activations ([`q8k`]); the float order
//! depends on the token count as in ggml (see [`kquants`]).

pub mod affine;
pub mod attention;
pub mod bnb4;
pub mod decoded;
mod decoded_simd;
pub mod dot;
pub mod float16;
pub mod fp8;
pub mod ggml_f32;
pub mod isa;
mod kquant_tiles_avx2;
pub mod kquants;
mod matmul;
#[cfg(target_arch = "aarch64")]
mod neon;
pub mod ops;
mod pool;
#[cfg(target_arch = "x86_64")]
mod prefetch;
pub mod q32_tiles;
mod q32_tiles_avx2;
pub mod q4k_tiles;
pub mod q5k_tiles;
pub mod q6k_tiles;
pub mod q8;
pub mod q8k;
mod quant_matmul;
mod rows;
#[cfg(test)]
mod tests;

use candle_core::quantized::GgmlDType;
use candle_core::{CpuStorage, Layout};

pub use matmul::{matmul, MatmulScratch};
pub(crate) use matmul::{par_rows, SendPtr};
pub use pool::SpinPool;
pub(crate) use pool::{current_threads, for_each_thread};
use q8::QK;
pub use quant_matmul::QuantMatMul;

/// Weight types with a kernel here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightKind {
    Q4_1,
    Q5_0,
    Q8_0,
    /// `ggml_vec_dot_q4_0_q8_0`'s order (llama.cpp repacks Q4_0 on AVX2
    /// machines, which changes its order there).
    Q4_0,
    Q5_1,
    /// Q4_K with Q8_K activations, as ggml's repacked `block_q4_Kx8` kernels
    /// compute it (the weight's row count must be a multiple of 8).
    Q4K,
    /// Q6_K with Q8_K activations (`ggml_vec_dot_q6_K_q8_K`).
    Q6K,
    /// Q5_K with Q8_K activations (`ggml_vec_dot_q5_K_q8_K`).
    Q5K,
}

impl WeightKind {
    pub fn from_dtype(dtype: GgmlDType) -> Option<Self> {
        match dtype {
            GgmlDType::Q4_1 => Some(Self::Q4_1),
            GgmlDType::Q5_0 => Some(Self::Q5_0),
            GgmlDType::Q8_0 => Some(Self::Q8_0),
            GgmlDType::Q4_0 => Some(Self::Q4_0),
            GgmlDType::Q5_1 => Some(Self::Q5_1),
            GgmlDType::Q4K => Some(Self::Q4K),
            GgmlDType::Q6K => Some(Self::Q6K),
            GgmlDType::Q5K => Some(Self::Q5K),
            _ => None,
        }
    }

    fn block_bytes(self) -> usize {
        match self {
            Self::Q4_1 => dot::Q4_1_BYTES,
            Self::Q5_0 => dot::Q5_0_BYTES,
            Self::Q8_0 => dot::Q8_0_BYTES,
            Self::Q4_0 => dot::Q4_0_BYTES,
            Self::Q5_1 => dot::Q5_1_BYTES,
            Self::Q4K => kquants::Q4_K_BYTES,
            Self::Q6K => kquants::Q6_K_BYTES,
            Self::Q5K => q5k_tiles::Q5_K_BYTES,
        }
    }

    /// Elements per weight block.
    pub fn block_elems(self) -> usize {
        if self.is_k_quant() {
            q8k::QK_K
        } else {
            QK
        }
    }

    fn is_k_quant(self) -> bool {
        matches!(self, Self::Q4K | Self::Q6K | Self::Q5K)
    }

    #[cfg(target_arch = "x86_64")]
    fn x86_code(self) -> u8 {
        match self {
            Self::Q4_1 => 0,
            Self::Q5_0 => 1,
            Self::Q8_0 => 2,
            Self::Q4_0 => 3,
            Self::Q5_1 => 4,
            Self::Q4K | Self::Q6K | Self::Q5K => unreachable!("K-quants use kquant_matmul"),
        }
    }

    /// Q4_1/Q5_1 pair with Q8_1 activations (which carry a sum), the others
    /// with Q8_0.
    fn activation_has_sum(self) -> bool {
        matches!(self, Self::Q4_1 | Self::Q5_1)
    }
}

/// How a quantized matmul orders each row's float arithmetic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RowOrder {
    /// As ggml computes it: for K-quants a row's order depends on how many
    /// rows share the call (gemm for groups of 4, tiled kernels from 8), so
    /// results are bit-identical to llama.cpp on the same batch.
    #[default]
    Ggml,
    /// Every row as ggml computes a single token. Results never depend on
    /// the batch, which a batching engine needs (batched equals alone).
    Independent,
}

/// Which kernels read the 16-row tiles on this CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TileKernels {
    /// AVX-512 F/BW/VNNI: one 64-byte line per instruction.
    Avx512Vnni,
    /// AVX2 + FMA + F16C: each line as two halves of 8 rows
    /// (`q32_tiles_avx2.rs`, `kquant_tiles_avx2.rs`).
    Avx2,
}

impl TileKernels {
    /// The tile kernels this CPU runs (under `MLXR_CPU_ISA`), if any.
    pub fn detect() -> Option<Self> {
        if q4k_tiles::available() {
            return Some(Self::Avx512Vnni);
        }
        #[cfg(target_arch = "x86_64")]
        if dot::x86::available() {
            return Some(Self::Avx2);
        }
        None
    }
}

/// Weights regrouped for the tile kernels (built once at load).
pub enum Tiles {
    Q4K(q4k_tiles::Q4KTiles),
    Q6K(q6k_tiles::Q6KTiles),
    Q32(q32_tiles::Q32Tiles),
    Q5K(q5k_tiles::Q5KTiles),
}

impl Tiles {
    /// The tiles of `w` (`[n, k]` raw GGUF blocks), when this CPU has
    /// kernels for them ([`TileKernels`]) and `n` is a multiple of their 16 rows.
    pub fn new(kind: WeightKind, w: &[u8], n: usize, k: usize) -> Option<Self> {
        if !n.is_multiple_of(q4k_tiles::TILE_ROWS) {
            return None;
        }
        TileKernels::detect()?;
        Some(match kind {
            WeightKind::Q4K => Self::Q4K(q4k_tiles::Q4KTiles::new(w, n, k)),
            WeightKind::Q6K => Self::Q6K(q6k_tiles::Q6KTiles::new(w, n, k)),
            WeightKind::Q5K => Self::Q5K(q5k_tiles::Q5KTiles::new(w, n, k)),
            _ => Self::Q32(q32_tiles::Q32Tiles::new(kind, w, n, k)),
        })
    }
}

/// A matmul op's activations: contiguous f32 `[.., k]` (the values and the
/// dims), or an error naming `op`.
fn matmul_input<'a>(
    op: &str,
    storage: &'a CpuStorage,
    layout: &Layout,
    k: usize,
) -> candle_core::Result<(&'a [f32], Vec<usize>)> {
    let CpuStorage::F32(data) = storage else {
        candle_core::bail!("{op}: only f32 activations are supported");
    };
    let Some((start, end)) = layout.contiguous_offsets() else {
        candle_core::bail!("{op}: activations must be contiguous");
    };
    let dims = layout.shape().dims().to_vec();
    if dims.last() != Some(&k) {
        candle_core::bail!("{op}: activations {dims:?} do not end in {k}");
    }
    Ok((&data[start..end], dims))
}
