//! The launches of kernels/quant_matmul.cu and kernels/mmq.cu: activations
//! to 8 bits ([`quantize`], or with the RMSNorm or SwiGLU that makes them:
//! [`rms_norm_q8`], [`swiglu_q8`]), then Q4_K/Q6_K and Q4_0/Q4_1/Q5_0/Q8_0
//! weights against them ([`matmuls`]), the CPU backend's integer arithmetic
//! on the GPU (for the K-quants to the bit): on the decode kernels
//! ([`Kernel::MatVec`]) or, for Q4_K and Q6_K, the int8 tensor cores
//! ([`Kernel::TensorCores`], the same bits).

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{
    CudaSlice, CudaView, DevicePtr, DevicePtrMut, LaunchConfig,
};
use candle_core::cuda_backend::{CudaDType, CudaDevice, CudaStorage};
use candle_core::op::BackpropOp;
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{CpuStorage, CustomOp1, DType, Layout, Shape, Storage, Tensor};

use super::launch::{Args, Launch};
use crate::Result;

const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/quant_matmul.ptx"));
const MODULE: &str = "mlxr_quant_matmul";
const MMQ_PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/mmq.ptx"));
const MMQ_MODULE: &str = "mlxr_mmq";
/// The most classes of a row (Q4_K's 4 lane groups times 4 warps), the most
/// warps per block of the tensor-core kernels (`MMQ_WARPS` there).
const MMQ_WARPS: usize = 16;
/// Weight rows per warp of the tensor-core kernels (`TILE` there).
const MMQ_TILE: usize = 16;
pub const QK_K: usize = 256;
/// The elements of a Q4_0/Q4_1/Q5_0/Q8_0 block, and of the activations'
/// scale blocks on widths that are not whole super-blocks.
pub const QK: usize = 32;
/// The most tokens the kernels take per weight row read: a launch of more
/// runs them in tiles of this many, each tile its own thread blocks.
pub const MAX_TOKENS: usize = 8;
/// The most rows [`matmuls`] is for (8 tiles): steps of up to 64 sequences
/// decoding.
pub const MAX_ROWS: usize = 64;
/// Warps per thread block: the quantizer's super-blocks, the matmuls'
/// warps per row (`WARPS_PER_ROW` in the kernels).
const WARPS: usize = 4;
/// Warps (super-blocks) to a block of the norm and GLU kernels: 8, so that
/// a 4,096-wide row's sum of squares is one load per thread (with 4 the
/// add + RMSNorm took 6.7 µs: bench/results/gpu-2026-12-03-s33.md) and a
/// 14,336-wide SwiGLU still spreads over 7 SMs.
const ROW_WARPS: usize = 8;

/// How the decode matmul kernels spread a weight's rows over the GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatVec {
    /// A block of 4 warps per row (llama.cpp's MMVQ shape for one token).
    BlockPerRow,
    /// A warp per row, 4 rows to a block: no block-wide sum; 10-20% faster
    /// on the H200 (bench/results/gpu-2026-12-03-s31-call2.md). Loads that
    /// ask L2 for 256 bytes at a time made it slower (8B Q4_K_M tg128 290
    /// against 317 t/s: bench/results/gpu-2026-12-03-s33.md).
    WarpPerRow,
    /// From 2 tokens on, a warp per 2 or 4 rows (`WarpPerRows(2)`,
    /// `WarpPerRows(4)`), each token's activations loaded once for them all;
    /// one token as `WarpPerRow`. With 4 or 8 tokens the activation loads
    /// otherwise outnumber the weight loads and bound the kernel: 8B Q4_K_M
    /// aggregate decode of 4 sequences 514 → 702 t/s, of 8 645 → 846 with 2
    /// rows (4 rows: 609, 789) (bench/results/gpu-2026-12-04-s36.md).
    WarpPerRows(u8),
    /// By the launch's rows (never by its tokens, so that a token's result
    /// does not depend on the batch): `BlockPerRow` for launches of at most
    /// [`BLOCK_PER_ROW_MOST`] rows, whose warp-per-row grids leave most of
    /// the GPU idle (the Qwen2.5-1.5B shape's 1,536- and 2,048-row
    /// projections: 9.66 → 7.94 and 5.57 → 5.43 µs,
    /// bench/results/gpu-2026-12-04-s38.md), `WarpPerRows(2)` above. The
    /// default: tg128 on an H100 against `WarpPerRows(2)`, SmolLM2-shaped
    /// Q4_1 934 → 984 t/s, Q8_0 924 → 967, Qwen2.5-1.5B-shaped Q4_K_M 441 →
    /// 473 (bench/results/gpu-2026-12-05-s45.md); the 8B shape's launches
    /// all have more rows (a block a row for its 4,096-row o and down
    /// too, `MLXR_CUDA_MATVEC=rows:4096`: tg128 329.7 → 318.9 t/s, H100,
    /// bench/results/gpu-2026-12-07-s62.md). `block_most` is
    /// [`BLOCK_PER_ROW_MOST`] but for that debug knob.
    ByRows { block_most: usize },
}

impl Default for MatVec {
    fn default() -> Self {
        MatVec::ByRows {
            block_most: BLOCK_PER_ROW_MOST,
        }
    }
}

/// The most rows [`MatVec::ByRows`] gives a block each.
pub const BLOCK_PER_ROW_MOST: usize = 2048;

impl std::str::FromStr for MatVec {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "block" => Ok(MatVec::BlockPerRow),
            "warp" => Ok(MatVec::WarpPerRow),
            "rows2" => Ok(MatVec::WarpPerRows(2)),
            "rows4" => Ok(MatVec::WarpPerRows(4)),
            "rows" => Ok(MatVec::default()),
            other => match other.strip_prefix("rows:").map(str::parse) {
                Some(Ok(block_most)) => Ok(MatVec::ByRows { block_most }),
                _ => Err(format!(
                    "MLXR_CUDA_MATVEC={other}: give block, warp, rows2, rows4, rows or rows:N"
                )),
            },
        }
    }
}

impl MatVec {
    /// For `tokens` per launch against `rows` weight rows: the kernel's name
    /// suffix, the row groups per block and the rows per group.
    fn layout(self, tokens: usize, rows: usize) -> (&'static str, usize, usize) {
        match self {
            MatVec::ByRows { block_most } if rows <= block_most => {
                MatVec::BlockPerRow.layout(tokens, rows)
            }
            MatVec::ByRows { .. } => MatVec::WarpPerRows(2).layout(tokens, rows),
            MatVec::BlockPerRow => ("", 1, 1),
            MatVec::WarpPerRow => ("_w", 4, 1),
            MatVec::WarpPerRows(_) if tokens == 1 => ("_w", 4, 1),
            MatVec::WarpPerRows(2) => ("_w2", 4, 2),
            MatVec::WarpPerRows(_) => ("_w4", 4, 4),
        }
    }
}

/// Which kernels multiply a step's weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// The decode kernels, spread as the [`MatVec`] says.
    MatVec(MatVec),
    /// The int8 tensor-core tiles (Q4_K and Q6_K only: [`tensor_cores_take`]),
    /// giving the bits the decode kernels of that [`MatVec`] give.
    TensorCores(MatVec),
}

/// Whether [`Kernel::TensorCores`] takes `w`.
pub fn tensor_cores_take(w: &QTensor) -> bool {
    matches!(w.dtype(), GgmlDType::Q4K | GgmlDType::Q6K) && supports(w)
}

/// The kernels' code for a weight type, and the widths it takes.
fn kind(dtype: GgmlDType) -> Option<(i32, usize)> {
    Some(match dtype {
        GgmlDType::Q4K => (0, QK_K),
        GgmlDType::Q6K => (1, QK_K),
        GgmlDType::Q4_0 => (2, QK),
        GgmlDType::Q4_1 => (3, QK),
        GgmlDType::Q5_0 => (4, QK),
        GgmlDType::Q8_0 => (5, QK),
        _ => return None,
    })
}

/// Whether [`matmuls`] takes `w` (`[n, k]`) against f32 activations of width
/// `k`.
pub fn supports(w: &QTensor) -> bool {
    kind(w.dtype()).is_some_and(|(_, block)| {
        w.device().is_cuda()
            && w.shape()
                .dims2()
                .is_ok_and(|(_, k)| k % block == 0 && k > 0)
    })
}

/// Whether activations of width `k` can be quantized for [`matmuls`].
pub fn quantizable(k: usize) -> bool {
    k > 0 && k.is_multiple_of(QK)
}

/// Elements per scale of activations of width `k`: a super-block (Q8_K,
/// what the K-quants need) where `k` is a multiple of 256, else 32.
pub(super) fn scale_block(k: usize) -> usize {
    if k.is_multiple_of(QK_K) {
        QK_K
    } else {
        QK
    }
}

/// Bytes of `tokens` rows of `k` activations quantized: quants, then a
/// scale per [`scale_block`] (padded to 16 bytes, so that the tensor-core
/// kernels read the sums 16 bytes at a time), then an int32 sum per 16
/// quants.
pub(super) fn q8_bytes(tokens: usize, k: usize) -> usize {
    tokens * k + scale_bytes(tokens, k) + tokens * (k / 16) * 4
}

fn scale_bytes(tokens: usize, k: usize) -> usize {
    (tokens * (k / scale_block(k)) * 4).next_multiple_of(16)
}

/// `x` (`[tokens, k]` f32, `k` a multiple of 32) quantized for [`matmuls`]
/// (in Q8_K where `k` is a multiple of 256), one U8 buffer.
pub fn quantize(x: &Tensor, launch: Launch) -> Result<Tensor> {
    Ok(x.contiguous()?.apply_op1_no_bwd(&QuantizeQ8K(launch))?)
}

/// `x · w_jᵀ` (`[tokens, n_j]` f32) for each of `ws` (all of width `k`),
/// for `xq`, `tokens` rows of `k` quantized ([`quantize`]): up to three
/// weights per launch.
pub fn matmuls(
    xq: &Tensor,
    tokens: usize,
    k: usize,
    ws: &[(&QTensor, Option<&Tensor>)],
    kernel: Kernel,
    launch: Launch,
) -> Result<Vec<Tensor>> {
    let mut out = Vec::with_capacity(ws.len());
    for group in ws.chunks(3) {
        out.extend(launch_group(xq, tokens, k, group, kernel, launch)?);
    }
    Ok(out)
}

/// Whether the kernels add `bias` (f32 `[n]`, contiguous) to a weight of
/// `n` rows.
pub fn takes_bias(bias: &Tensor, n: usize) -> bool {
    bias.dtype() == DType::F32
        && bias.dims() == [n]
        && bias.is_contiguous()
        && bias.layout().start_offset() == 0
}

fn launch_group(
    xq: &Tensor,
    tokens: usize,
    k: usize,
    ws: &[(&QTensor, Option<&Tensor>)],
    kernel: Kernel,
    launch: Launch,
) -> candle_core::Result<Vec<Tensor>> {
    let (Kernel::MatVec(shape) | Kernel::TensorCores(shape)) = kernel;
    let bytes = q8_bytes(tokens, k);
    if xq.dims() != [bytes] || !(1..=MAX_ROWS).contains(&tokens) {
        candle_core::bail!("quantized activations {:?} for {tokens} x {k}", xq.shape());
    }
    let (storage, layout) = xq.storage_and_layout();
    let Storage::Cuda(storage) = &*storage else {
        return Err(cpu_only("mmvq"));
    };
    let dev = storage.device().clone();
    let xq = storage.as_cuda_slice::<u8>()?;
    if layout.start_offset() != 0 {
        candle_core::bail!("quantized activations at an offset");
    }
    let (qs, d, sums) = q8_parts(xq, tokens, k);
    let stream = dev.cuda_stream();
    let mut weights = Vec::with_capacity(3);
    let mut guards = Vec::with_capacity(3);
    let mut ys = Vec::with_capacity(3);
    let rows: usize = ws
        .iter()
        .map(|(w, _)| w.shape().dims().first().copied().unwrap_or(0))
        .sum();
    let (suffix, groups_per_block, rows_per_group) = shape.layout(tokens, rows);
    let tensor_cores = matches!(kernel, Kernel::TensorCores(_));
    // The decode kernels' warps per row, whose order of sums the
    // tensor-core kernels follow.
    let w4: i32 = if suffix.is_empty() { 4 } else { 1 };
    let mut groups = 0;
    // (rows, classes) of each weight: a tensor-core block holds whole
    // classes (Q4_K: 4 per decode warp, Q6_K: 2) of warps / classes row
    // tiles, warps the launch's most classes.
    let mut mmq_rows = Vec::with_capacity(3);
    let bias_storage: Vec<_> = ws
        .iter()
        .map(|(_, b)| b.map(|b| b.storage_and_layout().0))
        .collect();
    let mut bias_ptrs = [0u64; 3];
    for (j, (&(w, bias), storage)) in ws.iter().zip(&bias_storage).enumerate() {
        let (n, wk) = w.shape().dims2()?;
        if let (Some(bias), Some(storage)) = (bias, storage) {
            let Storage::Cuda(storage) = &**storage else {
                return Err(cpu_only("mmvq"));
            };
            if !takes_bias(bias, n) {
                candle_core::bail!("a bias {:?} for {n} rows", bias.shape());
            }
            let (ptr, _sync) = storage.as_cuda_slice::<f32>()?.device_ptr(&stream);
            bias_ptrs[j] = ptr;
        }
        let kind = match kind(w.dtype()) {
            Some((kind, block)) if k.is_multiple_of(block) => kind,
            _ => candle_core::bail!("no CUDA kernel of ours for {:?} of width {k}", w.dtype()),
        };
        if tensor_cores && !tensor_cores_take(w) {
            candle_core::bail!("no tensor-core kernel of ours for {:?}", w.dtype());
        }
        if wk != k {
            candle_core::bail!("a weight of width {wk} against activations of width {k}");
        }
        let (ptr, guard) = w.device_ptr_with_guard(&stream)?;
        guards.push(guard);
        weights.push((ptr as u64, i32_of(n)?, kind));
        // SAFETY: the kernel writes every output.
        ys.push(unsafe { dev.alloc::<f32>(tokens * n) }?);
        groups += n.div_ceil(rows_per_group);
        mmq_rows.push((n, if kind == 0 { 4 } else { 2 } * w4 as usize));
    }
    if groups == 0 {
        return Ok(Vec::new());
    }
    let (func, blocks, threads) = if tensor_cores {
        // 8 · nt tokens a block (more would spill registers).
        let nt = match tokens {
            ..=8 => 1,
            9..=16 => 2,
            _ => 4,
        };
        let func = dev.get_or_load_custom_func(&format!("mmq{nt}"), MMQ_MODULE, MMQ_PTX)?;
        let warps = mmq_rows.iter().map(|&(_, c)| c).max().unwrap_or(1);
        debug_assert!(warps <= MMQ_WARPS);
        let blocks: usize = mmq_rows
            .iter()
            .map(|&(n, classes)| n.div_ceil(MMQ_TILE).div_ceil(warps / classes))
            .sum();
        (func, blocks * tokens.div_ceil(8 * nt), 32 * warps)
    } else {
        let per = match tokens {
            1 => 1,
            2 => 2,
            3 | 4 => 4,
            _ => MAX_TOKENS,
        };
        let func = dev.get_or_load_custom_func(&format!("mmvq{per}{suffix}"), MODULE, PTX)?;
        // 4 warps either way: 4 to a row, or a row (group) each.
        let blocks = groups.div_ceil(groups_per_block) * tokens.div_ceil(per);
        (func, blocks, 32 * WARPS)
    };
    let (k32, tokens32) = (i32_of(k)?, i32_of(tokens)?);
    let cfg = LaunchConfig {
        grid_dim: (
            u32::try_from(blocks).map_err(|_| {
                candle_core::Error::Msg(format!("{groups} row groups in one launch"))
            })?,
            1,
            1,
        ),
        block_dim: (threads as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut y_guards = Vec::with_capacity(3);
    let mut y_ptrs = [0u64; 3];
    for (ptr, y) in y_ptrs.iter_mut().zip(ys.iter_mut()) {
        let (p, guard) = y.device_ptr_mut(&stream);
        *ptr = p;
        y_guards.push(guard);
    }
    // Unused slots have no rows: the kernel never touches them.
    let unused = (0u64, 0i32, 0i32);
    let mut b = Args::new(&func, &stream);
    b.arg(&qs).arg(&d).arg(&sums).arg(&k32).arg(&tokens32);
    if tensor_cores {
        b.arg(&w4);
    }
    // Q6_K weights first: the grid's blocks go to weights in order, and
    // their rows, the slowest, then start in the first wave rather than
    // make the last. The 8B shape's one-token q+k+v (Q4_K, Q4_K, Q6_K)
    // 12.3 → 11.3 µs, the step's norms and matmuls 2.606 → 2.570 ms (H100,
    // bench/results/gpu-2026-12-07-s60.md); each row's sums are unchanged.
    let mut order = [0, 1, 2];
    order.sort_by_key(|&j| weights.get(j).is_none_or(|&(_, _, kind)| kind != 1));
    for j in order {
        let (w, n, kind) = weights.get(j).unwrap_or(&unused);
        b.arg(w).arg(&y_ptrs[j]).arg(&bias_ptrs[j]).arg(n).arg(kind);
    }
    // SAFETY: weight j holds n_j rows of k / 256 (K-quants) or k / 32 blocks of its type
    // (candle's storage of a `[n_j, k]` tensor, kept alive by `guards`),
    // its bias (when not null) n_j f32 (checked above, kept alive by
    // `bias_storage`); `xq` holds `tokens` rows of `k` (checked above); the
    // warps of one output row and token tile write that row's outputs of
    // the tile's tokens (at most `tokens` in all) in its own y_j.
    unsafe { b.launch(cfg, launch) }?;
    drop(y_guards);
    drop(guards);
    drop(bias_storage);
    Ok(ys
        .into_iter()
        .zip(&weights)
        .map(|(y, &(_, n, _))| tensor(y, &dev, (tokens, n as usize)))
        .collect())
}

/// The quants, scales and sums of a quantized buffer of `tokens` rows of `k`.
pub(super) fn q8_parts(
    buf: &CudaSlice<u8>,
    tokens: usize,
    k: usize,
) -> (CudaView<'_, u8>, CudaView<'_, u8>, CudaView<'_, u8>) {
    let sums = tokens * k + scale_bytes(tokens, k);
    (
        buf.slice(..tokens * k),
        buf.slice(tokens * k..sums),
        buf.slice(sums..q8_bytes(tokens, k)),
    )
}

/// The f32 data of `t` (contiguous, on CUDA) from its first element.
pub(super) fn f32_view<'a>(s: &'a Storage, t: &Tensor) -> Result<CudaView<'a, f32>> {
    let Storage::Cuda(s) = s else {
        return Err(cpu_only("a Q8_K kernel").into());
    };
    let start = t.layout().start_offset();
    Ok(s.as_cuda_slice::<f32>()?.slice(start..))
}

pub(super) fn tensor<T: CudaDType>(
    buf: CudaSlice<T>,
    dev: &CudaDevice,
    shape: impl Into<Shape>,
) -> Tensor {
    let storage = Storage::Cuda(CudaStorage::wrap_cuda_slice(buf, dev.clone()));
    Tensor::from_storage(storage, shape, BackpropOp::none(), false)
}

/// Warps of 256-wide super-blocks (`ROW_WARPS` to a block) over every token
/// row: `kernel` writes `outputs` f32 `[tokens, k]` rows (the last is the one
/// quantized) and that row quantized, from `inputs` (contiguous f32 `[tokens,
/// k]` or `[k]`).
fn row_kernel_q8(
    kernel: &str,
    inputs: &[&Tensor],
    outputs: usize,
    tokens: usize,
    k: usize,
    eps: Option<f32>,
    launch: Launch,
) -> Result<(Vec<Tensor>, Tensor)> {
    let inputs: Vec<Tensor> = inputs
        .iter()
        .map(|t| t.contiguous())
        .collect::<Result<_, _>>()?;
    let guards: Vec<_> = inputs.iter().map(|t| t.storage_and_layout().0).collect();
    let views: Vec<CudaView<f32>> = guards
        .iter()
        .zip(&inputs)
        .map(|(s, t)| f32_view(s, t))
        .collect::<Result<_>>()?;
    let Storage::Cuda(first) = &*guards[0] else {
        return Err(cpu_only(kernel).into());
    };
    let dev = first.device().clone();
    // SAFETY: the kernel writes every element of each.
    let mut ys = (0..outputs)
        .map(|_| unsafe { dev.alloc::<f32>(tokens * k) })
        .collect::<Result<Vec<_>, _>>()?;
    let q = unsafe { dev.alloc::<u8>(q8_bytes(tokens, k)) }?;
    {
        let (qs, d, sums) = q8_parts(&q, tokens, k);
        let func = dev.get_or_load_custom_func(kernel, MODULE, PTX)?;
        let k32 = i32_of(k)?;
        let cfg = LaunchConfig {
            grid_dim: (
                k.div_ceil(QK_K).div_ceil(ROW_WARPS) as u32,
                tokens as u32,
                1,
            ),
            block_dim: (32 * ROW_WARPS as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        let stream = dev.cuda_stream();
        let mut b = Args::new(&func, &stream);
        for v in &views {
            b.arg(v);
        }
        for y in ys.iter_mut() {
            b.arg(y);
        }
        b.arg(&qs).arg(&d).arg(&sums).arg(&k32);
        if let Some(eps) = &eps {
            b.arg(eps);
        }
        // SAFETY: block (b, t) reads row t of each input (or all of a `[k]`
        // weight) and writes its super-blocks of row t of each output and of
        // the Q8_K buffer.
        unsafe { b.launch(cfg, launch) }?;
    }
    let ys = ys
        .into_iter()
        .map(|y| tensor(y, &dev, (tokens, k)))
        .collect();
    Ok((ys, tensor(q, &dev, q8_bytes(tokens, k))))
}

/// The one output of a row kernel, quantized too.
fn single((mut ys, q): (Vec<Tensor>, Tensor)) -> (Tensor, Tensor) {
    (ys.remove(0), q)
}

/// `rms_norm(x) · w` for `x` f32 `[tokens, k]` (`k` a multiple of 32, `w`
/// f32 `[k]`), and the same quantized for [`matmuls`].
pub fn rms_norm_q8(x: &Tensor, w: &Tensor, eps: f32, launch: Launch) -> Result<(Tensor, Tensor)> {
    let (tokens, k) = x.dims2()?;
    row_kernel_q8("rms_norm_q8", &[x, w], 1, tokens, k, Some(eps), launch).map(single)
}

/// `s = x + r` and `rms_norm(s) · w` (as [`rms_norm_q8`]), and the latter
/// quantized: the residual add and the next norm in one launch.
pub fn add_rms_norm_q8(
    x: &Tensor,
    r: &Tensor,
    w: &Tensor,
    eps: f32,
    launch: Launch,
) -> Result<(Tensor, Tensor, Tensor)> {
    let (tokens, k) = x.dims2()?;
    let (mut ys, q) = row_kernel_q8(
        "add_rms_norm_q8",
        &[x, r, w],
        2,
        tokens,
        k,
        Some(eps),
        launch,
    )?;
    let normed = ys.pop().expect("two outputs");
    let sum = ys.pop().expect("two outputs");
    Ok((sum, normed, q))
}

/// `silu(gate) · up` for f32 `[tokens, k]` (`k` a multiple of 32), and the
/// same quantized for [`matmuls`].
pub fn swiglu_q8(gate: &Tensor, up: &Tensor, launch: Launch) -> Result<(Tensor, Tensor)> {
    let (tokens, k) = gate.dims2()?;
    row_kernel_q8("swiglu_q8", &[gate, up], 1, tokens, k, None, launch).map(single)
}

fn cpu_only(name: &str) -> candle_core::Error {
    candle_core::Error::Msg(format!("{name} runs on CUDA devices only"))
}

fn i32_of(n: usize) -> candle_core::Result<i32> {
    i32::try_from(n)
        .map_err(|_| candle_core::Error::Msg(format!("{n} does not fit a kernel argument")))
}

struct QuantizeQ8K(Launch);

impl CustomOp1 for QuantizeQ8K {
    fn name(&self) -> &'static str {
        "mlxr-quantize-q8"
    }

    fn cpu_fwd(&self, _: &CpuStorage, _: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        Err(cpu_only(self.name()))
    }

    fn cuda_fwd(&self, x: &CudaStorage, x_l: &Layout) -> candle_core::Result<(CudaStorage, Shape)> {
        let (tokens, k) = x_l.shape().dims2()?;
        if !quantizable(k) || !x_l.is_contiguous() || x.dtype() != DType::F32 {
            candle_core::bail!("8-bit activations of {:?} {:?}", x.dtype(), x_l.shape());
        }
        let dev = x.device().clone();
        let bytes = q8_bytes(tokens, k);
        // SAFETY: the kernel writes every quant, scale and sum.
        let out = unsafe { dev.alloc::<u8>(bytes.max(1)) }?;
        if tokens > 0 {
            let func = dev.get_or_load_custom_func("quantize_q8", MODULE, PTX)?;
            let x = x.as_cuda_slice::<f32>()?.slice(x_l.start_offset()..);
            let (qs, d, sums) = q8_parts(&out, tokens, k);
            let k32 = i32_of(k)?;
            let cfg = LaunchConfig {
                grid_dim: (
                    k.div_ceil(QK_K).div_ceil(WARPS) as u32,
                    i32_of(tokens)? as u32,
                    1,
                ),
                block_dim: (32 * WARPS as u32, 1, 1),
                shared_mem_bytes: 0,
            };
            let stream = dev.cuda_stream();
            let mut b = Args::new(&func, &stream);
            b.arg(&x).arg(&qs).arg(&d).arg(&sums).arg(&k32);
            // SAFETY: one warp per super-block of each row of `x`; each
            // writes its own quants, scales and sums, all inside `out`.
            unsafe { b.launch(cfg, self.0) }?;
        }
        Ok((
            CudaStorage::wrap_cuda_slice(out, dev),
            Shape::from(bytes.max(1)),
        ))
    }
}
