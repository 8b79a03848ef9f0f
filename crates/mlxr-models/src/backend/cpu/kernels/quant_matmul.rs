//! [`QuantMatMul`]: the kernels as a candle op, holding the weight in
//! the form they read.

use std::sync::Arc;

use candle_core::quantized::QTensor;
use candle_core::{CpuStorage, CustomOp1, Layout, Shape, Tensor};

use super::matmul::{matmul_with, MatmulScratch};
use super::{RowOrder, Tiles, WeightKind};

/// Where a [`QuantMatMul`]'s weights live.
enum WeightData {
    /// The GGUF blocks as candle loaded them.
    Blocks(Arc<QTensor>),
    /// Regrouped for the VNNI kernels; the blocks are not kept (every path
    /// for this weight reads the tiles), so the weight is in memory once.
    Tiles(Box<Tiles>),
}

/// `x · Wᵀ` as a candle op for a GGML-quantized `W` on the CPU.
pub struct QuantMatMul {
    data: WeightData,
    order: RowOrder,
    kind: WeightKind,
    n: usize,
    k: usize,
}

impl QuantMatMul {
    /// `Some` when `w` is a 2-D `[n, k]` Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 tensor on
    /// the CPU with `k` a multiple of 32, or Q4_K/Q6_K with `k` a multiple of
    /// 256 (and, for Q4_K, `n` a multiple of 8: otherwise ggml does not
    /// repack it); Q5_K only where the 16-row tiles are built. With tiles, this
    /// op drops its reference to `w` (see [`Self::replaces_blocks`]).
    pub fn new(w: Arc<QTensor>, order: RowOrder) -> Option<Self> {
        let kind = WeightKind::from_dtype(w.dtype())?;
        if !w.device().is_cpu() {
            return None;
        }
        let &[n, k] = w.shape().dims() else {
            return None;
        };
        if k % kind.block_elems() != 0 || (kind == WeightKind::Q4K && n % 8 != 0) {
            return None;
        }
        let data = match Tiles::new(kind, &w.data().ok()?, n, k) {
            Some(tiles) => WeightData::Tiles(Box::new(tiles)),
            None => WeightData::Blocks(w),
        };
        Some(Self {
            data,
            order,
            kind,
            n,
            k,
        })
    }

    pub fn kind(&self) -> WeightKind {
        self.kind
    }

    /// Whether this op holds the weights in its own form, so the caller can
    /// drop the `QTensor` (it computes every input itself).
    pub fn replaces_blocks(&self) -> bool {
        matches!(self.data, WeightData::Tiles(_))
    }

    /// Whether [`Self::dequantize_row`] works (tiles of the 32-element types
    /// and of Q6_K).
    pub fn has_rows(&self) -> bool {
        matches!(&self.data, WeightData::Tiles(t)
            if matches!(**t, Tiles::Q32(_) | Tiles::Q6K(_)))
    }

    /// Row `r` of `W` (`k` values) as candle would dequantize it, from the
    /// tiles; `false` when this op has no such rows (see [`Self::has_rows`]).
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) -> bool {
        match &self.data {
            WeightData::Tiles(t) => match &**t {
                _ if r >= self.n || out.len() != self.k => false,
                Tiles::Q32(t) => {
                    t.dequantize_row(r, out);
                    true
                }
                Tiles::Q6K(t) => {
                    t.dequantize_row(r, out);
                    true
                }
                _ => false,
            },
            WeightData::Blocks(_) => false,
        }
    }

    /// Rows of `W`.
    pub fn rows(&self) -> usize {
        self.n
    }

    /// Columns of `W` (the input width).
    pub fn cols(&self) -> usize {
        self.k
    }

    /// `out[m, n] = x[m, k] · Wᵀ` over caller-owned buffers.
    pub fn matmul_into(
        &self,
        x: &[f32],
        out: &mut [f32],
        scratch: &mut MatmulScratch,
    ) -> candle_core::Result<()> {
        let m = x.len() / self.k;
        if x.len() != m * self.k || out.len() != m * self.n {
            candle_core::bail!(
                "{}: {} inputs and {} outputs for a [{}, {}] weight",
                self.name(),
                x.len(),
                out.len(),
                self.n,
                self.k
            );
        }
        let (w, tiles) = match &self.data {
            WeightData::Blocks(w) => (w.data()?, None),
            WeightData::Tiles(t) => (std::borrow::Cow::Borrowed(&[][..]), Some(&**t)),
        };
        let shape = (m, self.n, self.k);
        matmul_with(
            self.kind, &w, tiles, x, shape, out, true, self.order, scratch,
        );
        Ok(())
    }

    /// `x`: `[.., k]` f32 on the CPU → `[.., n]`.
    pub fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        x.contiguous()?.apply_op1_no_bwd(self)
    }
}

impl CustomOp1 for QuantMatMul {
    fn name(&self) -> &'static str {
        "mlxr-quant-matmul"
    }

    fn cpu_fwd(
        &self,
        storage: &CpuStorage,
        layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (x, mut dims) = super::matmul_input(self.name(), storage, layout, self.k)?;
        let m = x.len() / self.k;
        let mut out = vec![0.0f32; m * self.n];
        self.matmul_into(x, &mut out, &mut MatmulScratch::default())?;
        *dims.last_mut().expect("checked") = self.n;
        Ok((CpuStorage::F32(out), Shape::from(dims)))
    }
}
