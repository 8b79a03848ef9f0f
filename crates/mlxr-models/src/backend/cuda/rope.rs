//! The launch of kernels/rope.cu: a step's queries and keys rotated in one
//! launch.

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::LaunchConfig;
use candle_core::{DType, Storage, Tensor};

use super::launch::{Args, Launch};
use super::quant_matmul::{f32_view, tensor};
use crate::config::RopeStyle;
use crate::layers::Rope;
use crate::{ModelError, Result};

const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/rope.ptx"));
const MODULE: &str = "mlxr_rope";

/// Whether [`rope_qk`] takes f32 `q`, `k` `[tokens, heads * head_dim]`.
pub fn takes(q: &Tensor, k: &Tensor, head_dim: usize) -> bool {
    let fits = |x: &Tensor| {
        x.dtype() == DType::F32
            && x.dims2()
                .is_ok_and(|(t, w)| t > 0 && w > 0 && w % head_dim == 0)
    };
    fits(q) && fits(k) && q.dim(0).ok() == k.dim(0).ok()
}

/// `q` and `k` rotated by the step's tables `cos`, `sin` (`[tokens, 1,
/// rot / 2]`); returns new tensors.
pub fn rope_qk(
    q: &Tensor,
    k: &Tensor,
    cos: &Tensor,
    sin: &Tensor,
    rope: &Rope,
    head_dim: usize,
    launch: Launch,
) -> Result<(Tensor, Tensor)> {
    let (tokens, q_width) = q.dims2()?;
    let k_width = k.dim(1)?;
    let rot = rope.dim();
    if rot > head_dim || !rot.is_multiple_of(2) || cos.elem_count() != tokens * rot / 2 {
        return Err(ModelError::InvalidBatch(format!(
            "RoPE of {rot} over heads of {head_dim}, tables of {} for {tokens} tokens",
            cos.elem_count()
        )));
    }
    let inputs: Vec<Tensor> = [q, k, cos, sin]
        .iter()
        .map(|t| t.contiguous())
        .collect::<candle_core::Result<_>>()?;
    let guards: Vec<_> = inputs.iter().map(|t| t.storage_and_layout().0).collect();
    let Storage::Cuda(first) = &*guards[0] else {
        return Err(ModelError::InvalidBatch("RoPE kernel off the GPU".into()));
    };
    let dev = first.device().clone();
    let views = guards
        .iter()
        .zip(&inputs)
        .map(|(s, t)| f32_view(s, t))
        .collect::<Result<Vec<_>>>()?;
    let func = dev.get_or_load_custom_func("rope_qk", MODULE, PTX)?;
    let (q_heads, k_heads) = (q_width / head_dim, k_width / head_dim);
    // SAFETY: every element of both outputs is written by the kernel.
    let q_out = unsafe { dev.alloc::<f32>(tokens * q_width) }?;
    let k_out = unsafe { dev.alloc::<f32>(tokens * k_width) }?;
    let args = [q_heads, k_heads, head_dim, rot].map(|n| i32::try_from(n).unwrap_or(i32::MAX));
    let neox = i32::from(rope.style() == RopeStyle::Halves);
    let cfg = LaunchConfig {
        grid_dim: (tokens as u32, (q_heads + k_heads) as u32, 1),
        block_dim: ((rot / 2).clamp(32, 128) as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    let stream = dev.cuda_stream();
    let mut b = Args::new(&func, &stream);
    b.arg(&views[0])
        .arg(&views[1])
        .arg(&q_out)
        .arg(&k_out)
        .arg(&views[2])
        .arg(&views[3]);
    for a in &args {
        b.arg(a);
    }
    b.arg(&neox);
    // SAFETY: block (t, h) reads row t, head h of q or k (h < q_heads + k_heads,
    // widths checked above) and row t of the tables, and writes the same
    // head of its output.
    unsafe { b.launch(cfg, launch) }?;
    drop(guards);
    Ok((
        tensor(q_out, &dev, (tokens, q_width)),
        tensor(k_out, &dev, (tokens, k_width)),
    ))
}
