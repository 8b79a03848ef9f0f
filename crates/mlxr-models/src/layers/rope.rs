use candle_core::{DType, Device, Tensor};

use crate::config::RopeStyle;
use crate::kernels::ops::RopeOp;
use crate::Result;

/// Rotary position embedding for one frequency base.
pub struct Rope {
    style: RopeStyle,
    /// Dimensions rotated (a prefix of the head).
    dim: usize,
    base: f32,
}

/// `cos`/`sin` of every token's angles, `[tokens, 1, dim / 2]`, as tensors
/// and as plain vectors (for the CPU kernel).
pub struct RopeTables {
    cos: Tensor,
    sin: Tensor,
    cos_raw: Vec<f32>,
    sin_raw: Vec<f32>,
}

impl Rope {
    pub fn new(style: RopeStyle, dim: usize, base: f32) -> Self {
        Self { style, dim, base }
    }

    pub fn base(&self) -> f32 {
        self.base
    }

    /// Angles for arbitrary per-token positions (tokens of several sequences).
    ///
    /// The angle of pair `i` is `pos · base^(-2i/dim)`, accumulated in f32 as a
    /// running product the way ggml does, so long positions round like llama.cpp's.
    pub fn tables(&self, positions: &[usize], device: &Device) -> Result<RopeTables> {
        let (cos_raw, sin_raw) = self.raw_tables(positions);
        let shape = (positions.len(), 1, self.dim / 2);
        Ok(RopeTables {
            cos: Tensor::from_slice(&cos_raw, shape, device)?,
            sin: Tensor::from_slice(&sin_raw, shape, device)?,
            cos_raw,
            sin_raw,
        })
    }

    /// The same angles as plain `cos`/`sin` vectors, `[tokens, dim / 2]`.
    pub fn raw_tables(&self, positions: &[usize]) -> (Vec<f32>, Vec<f32>) {
        let (mut cos, mut sin) = (Vec::new(), Vec::new());
        self.fill_tables(positions, &mut cos, &mut sin);
        (cos, sin)
    }

    /// [`Self::raw_tables`] into `cos` and `sin` (replacing what they held).
    pub fn fill_tables(&self, positions: &[usize], cos: &mut Vec<f32>, sin: &mut Vec<f32>) {
        let theta_scale = self.base.powf(-2.0 / self.dim as f32);
        cos.clear();
        sin.clear();
        for &pos in positions {
            let mut theta = pos as f32;
            for _ in 0..self.dim / 2 {
                cos.push(theta.cos());
                sin.push(theta.sin());
                theta *= theta_scale;
            }
        }
    }

    /// [`Self::apply`] on the CPU over a buffer, in place: `x` `[tokens,
    /// heads, head_dim]` with `cos`/`sin` from [`Self::fill_tables`].
    pub fn apply_in_place(
        &self,
        x: &mut [f32],
        tokens: usize,
        head_dim: usize,
        (cos, sin): (&[f32], &[f32]),
    ) {
        let op = RopeOp {
            cos,
            sin,
            rot: self.dim,
            neox: self.style == RopeStyle::Halves,
        };
        assert_eq!(cos.len(), tokens * self.dim / 2, "one table row per token");
        op.apply_in_place(x, tokens, head_dim);
    }

    /// `x`: `[tokens, heads, head_dim]`, one position per token. On the CPU
    /// (f32) it computes what ggml's `rope_ext` computes, bit for bit.
    pub fn apply(&self, x: &Tensor, tables: &RopeTables) -> Result<Tensor> {
        let (tokens, heads, head_dim) = x.dims3()?;
        if x.device().is_cpu() && x.dtype() == DType::F32 {
            let op = RopeOp {
                cos: &tables.cos_raw,
                sin: &tables.sin_raw,
                rot: self.dim,
                neox: self.style == RopeStyle::Halves,
            };
            return Ok(x.contiguous()?.apply_op1_no_bwd(&op)?);
        }
        // Each token is its own "batch" of one position so positions may differ freely.
        let rotate = |x: &Tensor| -> Result<Tensor> {
            let x = x.reshape((tokens, heads, 1, self.dim))?.contiguous()?;
            let y = match self.style {
                RopeStyle::Interleaved => {
                    candle_nn::rotary_emb::rope_i(&x, &tables.cos, &tables.sin)?
                }
                RopeStyle::Halves => candle_nn::rotary_emb::rope(&x, &tables.cos, &tables.sin)?,
            };
            Ok(y.reshape((tokens, heads, self.dim))?)
        };
        if self.dim == head_dim {
            return rotate(x);
        }
        let rotated = rotate(&x.narrow(2, 0, self.dim)?)?;
        let pass = x.narrow(2, self.dim, head_dim - self.dim)?;
        Ok(Tensor::cat(&[&rotated, &pass], 2)?)
    }
}
