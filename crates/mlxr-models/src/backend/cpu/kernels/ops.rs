//! The CPU backend's row ops over the ggml-exact f32 kernels of
//! [`super::ggml_f32`], and [`super::attention`] as a candle op (for tests).

use candle_core::{CpuStorage, CustomOp3, Layout, Shape};

use super::attention::{attention, AttnShape};
use super::ggml_f32;

fn f32_data<'a>(op: &str, s: &'a CpuStorage, l: &Layout) -> candle_core::Result<&'a [f32]> {
    let CpuStorage::F32(data) = s else {
        candle_core::bail!("{op}: only f32 is supported");
    };
    let Some((start, end)) = l.contiguous_offsets() else {
        candle_core::bail!("{op}: the input must be contiguous");
    };
    Ok(&data[start..end])
}

/// `out = rms_norm(x) · w` for rows of `w.len()` (`x` and `out` alike long).
pub(crate) fn rms_norm_rows(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let dim = w.len();
    super::par_rows(out, dim, |first, rows| {
        ggml_f32::rms_norm(&x[first * dim..][..rows.len()], w, eps, rows)
    });
}

/// RoPE over `[tokens, heads, head_dim]` with per-token `cos`/`sin`
/// (`[tokens, rot / 2]`).
pub struct RopeOp<'a> {
    pub cos: &'a [f32],
    pub sin: &'a [f32],
    pub rot: usize,
    pub neox: bool,
}

impl RopeOp<'_> {
    /// Rotates `x` (`[tokens, heads, head_dim]`, tables checked by the caller).
    pub(crate) fn apply_in_place(&self, x: &mut [f32], tokens: usize, head_dim: usize) {
        let (row, half) = (x.len() / tokens.max(1), self.rot / 2);
        super::par_rows(x, row, |first, rows| {
            let t = first..first + rows.len() / row;
            let (cos, sin) = (
                &self.cos[t.start * half..t.end * half],
                &self.sin[t.start * half..t.end * half],
            );
            ggml_f32::rope(rows, head_dim, self.rot, self.neox, cos, sin)
        });
    }
}

/// Gated activation `act(gate) · up` (SwiGLU or GeGLU), rows of the last dim.
pub struct GluOp {
    pub gelu: bool,
}

impl GluOp {
    /// `out = act(gate) · up` for rows of `n` (all three the same length).
    pub(crate) fn rows(&self, g: &[f32], u: &[f32], n: usize, out: &mut [f32]) {
        super::par_rows(out, n, |first, rows| {
            let (g, u) = (&g[first * n..], &u[first * n..]);
            for ((gr, ur), yr) in g
                .chunks_exact(n)
                .zip(u.chunks_exact(n))
                .zip(rows.chunks_exact_mut(n))
            {
                if self.gelu {
                    ggml_f32::geglu_row(gr, ur, yr);
                } else {
                    ggml_f32::swiglu_row(gr, ur, yr);
                }
            }
        });
    }
}

/// [`attention`] over `q` `[len, n_heads, d]`, `k`/`v` `[n_kv_heads, kv_len, d]`.
pub struct AttentionOp {
    pub shape: AttnShape,
    pub scale: f32,
    /// Scores become `cap * tanh(score / cap)` before the softmax.
    pub softcap: Option<f32>,
}

impl CustomOp3 for AttentionOp {
    fn name(&self) -> &'static str {
        "mlxr-attention"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let s = self.shape;
        let q = f32_data(self.name(), s1, l1)?;
        let k = f32_data(self.name(), s2, l2)?;
        let v = f32_data(self.name(), s3, l3)?;
        let kv = s.n_kv_heads * s.kv_len * s.head_dim;
        if q.len() != s.len * s.n_heads * s.head_dim || k.len() != kv || v.len() != kv {
            candle_core::bail!("{}: shapes do not match {s:?}", self.name());
        }
        let mut out = vec![0f32; q.len()];
        attention(s, (self.scale, self.softcap), q, k, v, &mut out);
        Ok((
            CpuStorage::F32(out),
            Shape::from((s.len, s.n_heads * s.head_dim)),
        ))
    }
}
