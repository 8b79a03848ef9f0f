//! Attention of one chunk over contiguous keys and values: the reference
//! every other attention kernel is held to. On the CPU (f32) it is
//! llama.cpp's arithmetic bit for bit (`kernels::attention`); elsewhere
//! candle's matmul and softmax.

use candle_core::{DType, Device, Tensor};

use crate::kernels::attention::AttnShape;
use crate::kernels::ops::AttentionOp;

use crate::kv_cache::AttentionSpec;
use crate::Result;

/// `q`: `[len, n_heads, d]`, `k_all`/`v_all`: `[n_kv_heads, start_pos + len,
/// d]`; returns `[len, n_heads * d]`.
pub fn dense_attention(
    spec: &AttentionSpec,
    q: &Tensor,
    k_all: &Tensor,
    v_all: &Tensor,
    start_pos: usize,
) -> Result<Tensor> {
    let len = q.dim(0)?;
    let kv_len = k_all.dim(1)?;
    let (n_heads, n_kv_heads, d) = (spec.n_heads, spec.n_kv_heads, spec.head_dim);
    let group = n_heads / n_kv_heads;
    if q.device().is_cpu() && [q, k_all, v_all].iter().all(|t| t.dtype() == DType::F32) {
        let op = AttentionOp {
            shape: AttnShape {
                len,
                n_heads,
                n_kv_heads,
                head_dim: d,
                kv_len,
                start_pos,
                window: spec.sliding_window,
            },
            scale: spec.scale,
        };
        return Ok(q.contiguous()?.apply_op3_no_bwd(
            &k_all.contiguous()?,
            &v_all.contiguous()?,
            &op,
        )?);
    }
    // Query head h reads KV head h / group: fold the group into the row axis.
    let q = q
        .reshape((len, n_kv_heads, group, d))?
        .permute((1, 2, 0, 3))?
        .reshape((n_kv_heads, group * len, d))?
        .contiguous()?;
    let k_t = k_all.contiguous()?.transpose(1, 2)?;
    let scores = (q.matmul(&k_t)? * spec.scale as f64)?;
    let scores = scores.reshape((n_kv_heads, group, len, kv_len))?;
    let scores = match causal_mask(len, start_pos, spec.sliding_window, q.device())? {
        Some(mask) => scores.broadcast_add(&mask)?,
        None => scores,
    };
    let probs = candle_nn::ops::softmax_last_dim(&scores.contiguous()?)?;
    let probs = probs.reshape((n_kv_heads, group * len, kv_len))?;
    let out = probs.matmul(&v_all.contiguous()?)?;
    Ok(out
        .reshape((n_kv_heads, group, len, d))?
        .permute((2, 0, 1, 3))?
        .reshape((len, n_heads * d))?)
}

/// Additive mask `[len, start_pos + len]`: causal, and within the sliding
/// window when there is one. `None` when nothing is masked.
fn causal_mask(
    len: usize,
    start_pos: usize,
    window: Option<usize>,
    device: &Device,
) -> Result<Option<Tensor>> {
    let kv_len = start_pos + len;
    let window = window.unwrap_or(usize::MAX);
    if len == 1 && kv_len <= window {
        return Ok(None);
    }
    let mut mask = vec![0f32; len * kv_len];
    for i in 0..len {
        let pos = start_pos + i;
        for (j, m) in mask[i * kv_len..(i + 1) * kv_len].iter_mut().enumerate() {
            if j > pos || pos - j >= window {
                *m = f32::NEG_INFINITY;
            }
        }
    }
    Ok(Some(Tensor::from_vec(mask, (len, kv_len), device)?))
}
