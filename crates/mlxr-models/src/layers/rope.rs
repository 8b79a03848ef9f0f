use crate::backend::cpu::kernels::ops::RopeOp;
use crate::config::RopeStyle;

/// Rotary position embedding for one frequency base.
pub struct Rope {
    style: RopeStyle,
    /// Dimensions rotated (a prefix of the head).
    dim: usize,
    base: f32,
}

impl Rope {
    pub fn new(style: RopeStyle, dim: usize, base: f32) -> Self {
        Self { style, dim, base }
    }

    pub fn base(&self) -> f32 {
        self.base
    }

    pub fn style(&self) -> RopeStyle {
        self.style
    }

    /// Dimensions rotated (a prefix of the head).
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// `cos`/`sin` of every token's angles, `[tokens, dim / 2]`, for
    /// per-token positions (tokens of several sequences). The angle of pair
    /// `i` is `pos · base^(-2i/dim)`, accumulated in f32 as a running product
    /// the way ggml does, so long positions round like llama.cpp's.
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

    /// The CPU kernel over a buffer, in place (ggml's `rope_ext`, bit for
    /// bit): `x` `[tokens, heads, head_dim]` with `cos`/`sin` from
    /// [`Self::fill_tables`].
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
}
