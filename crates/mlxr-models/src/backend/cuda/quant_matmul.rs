//! The launches of kernels/quant_matmul.cu as candle ops: activations to
//! Q8_K ([`quantize`]), then Q4_K/Q6_K weights against them ([`matmul`]),
//! the CPU backend's integer arithmetic on the GPU.

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{LaunchConfig, PushKernelArg};
use candle_core::cuda_backend::{CudaStorage, WrapErr};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{CpuStorage, CustomOp1, DType, Layout, Shape, Tensor};

use crate::Result;

const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/quant_matmul.ptx"));
const MODULE: &str = "mlxr_quant_matmul";
const QK_K: usize = 256;
/// The most rows [`matmul`] is for: its kernels take up to 8 tokens per
/// weight row read.
pub const MAX_TOKENS: usize = 8;
/// Warps (rows, super-blocks) per thread block, as in the kernels.
const WARPS: usize = 4;

/// Whether [`matmul`] takes `w` (`[n, k]`) against f32 activations of width
/// `k`.
pub fn supports(w: &QTensor) -> bool {
    matches!(w.dtype(), GgmlDType::Q4K | GgmlDType::Q6K)
        && w.device().is_cuda()
        && w.shape().dims2().is_ok_and(|(_, k)| k % QK_K == 0 && k > 0)
}

/// Bytes of `tokens` rows of `k` activations in Q8_K: quants, then a scale
/// per super-block, then an int32 sum per 16 quants.
fn q8_bytes(tokens: usize, k: usize) -> usize {
    tokens * k + tokens * (k / QK_K) * 4 + tokens * (k / 16) * 4
}

/// `x` (`[tokens, k]` f32, `k` a multiple of 256) in Q8_K, one U8 buffer.
pub fn quantize(x: &Tensor) -> Result<Tensor> {
    Ok(x.contiguous()?.apply_op1_no_bwd(&QuantizeQ8K)?)
}

/// `x · wᵀ` for `x` from [`quantize`] (`tokens` rows of `w`'s width):
/// `[tokens, n]` f32.
pub fn matmul(xq: &Tensor, tokens: usize, w: &QTensor) -> Result<Tensor> {
    let (n, k) = w.shape().dims2()?;
    Ok(xq.apply_op1_no_bwd(&Mmvq { w, tokens, n, k })?)
}

fn cpu_only(name: &str) -> candle_core::Error {
    candle_core::Error::Msg(format!("{name} runs on CUDA devices only"))
}

fn i32_of(n: usize) -> candle_core::Result<i32> {
    i32::try_from(n)
        .map_err(|_| candle_core::Error::Msg(format!("{n} does not fit a kernel argument")))
}

struct QuantizeQ8K;

impl CustomOp1 for QuantizeQ8K {
    fn name(&self) -> &'static str {
        "mlxr-quantize-q8k"
    }

    fn cpu_fwd(&self, _: &CpuStorage, _: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        Err(cpu_only(self.name()))
    }

    fn cuda_fwd(&self, x: &CudaStorage, x_l: &Layout) -> candle_core::Result<(CudaStorage, Shape)> {
        let (tokens, k) = x_l.shape().dims2()?;
        if k % QK_K != 0 || !x_l.is_contiguous() || x.dtype() != DType::F32 {
            candle_core::bail!("Q8_K of {:?} {:?}", x.dtype(), x_l.shape());
        }
        let dev = x.device().clone();
        let bytes = q8_bytes(tokens, k);
        // SAFETY: the kernel writes every quant, scale and sum.
        let out = unsafe { dev.alloc::<u8>(bytes.max(1)) }?;
        let blocks = tokens * (k / QK_K);
        if blocks > 0 {
            let func = dev.get_or_load_custom_func("quantize_q8_K", MODULE, PTX)?;
            let x = x.as_cuda_slice::<f32>()?.slice(x_l.start_offset()..);
            let qs = out.slice(..tokens * k);
            let d = out.slice(tokens * k..tokens * k + blocks * 4);
            let sums = out.slice(tokens * k + blocks * 4..);
            let (k32, tokens32) = (i32_of(k)?, i32_of(tokens)?);
            let cfg = LaunchConfig {
                grid_dim: (blocks.div_ceil(WARPS) as u32, 1, 1),
                block_dim: (32 * WARPS as u32, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut b = func.builder();
            b.arg(&x)
                .arg(&qs)
                .arg(&d)
                .arg(&sums)
                .arg(&k32)
                .arg(&tokens32);
            // SAFETY: one warp per super-block of `x`; each writes its own
            // 256 quants, scale and 16 sums, all inside `out`.
            unsafe { b.launch(cfg) }.w()?;
        }
        Ok((
            CudaStorage::wrap_cuda_slice(out, dev),
            Shape::from(bytes.max(1)),
        ))
    }
}

struct Mmvq<'a> {
    w: &'a QTensor,
    tokens: usize,
    n: usize,
    k: usize,
}

impl CustomOp1 for Mmvq<'_> {
    fn name(&self) -> &'static str {
        "mlxr-mmvq"
    }

    fn cpu_fwd(&self, _: &CpuStorage, _: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        Err(cpu_only(self.name()))
    }

    fn cuda_fwd(
        &self,
        xq: &CudaStorage,
        xq_l: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let (tokens, n, k) = (self.tokens, self.n, self.k);
        let bytes = q8_bytes(tokens, k);
        if xq_l.shape().elem_count() != bytes.max(1) || xq_l.start_offset() != 0 {
            candle_core::bail!("Q8_K activations {:?} for {tokens} x {k}", xq_l.shape());
        }
        let kind = match self.w.dtype() {
            GgmlDType::Q4K => "q4_K",
            GgmlDType::Q6K => "q6_K",
            other => candle_core::bail!("no CUDA kernel of ours for {other:?}"),
        };
        let per = match tokens {
            0 | 1 => 1,
            2 => 2,
            3 | 4 => 4,
            _ => 8,
        };
        if n.div_ceil(WARPS) > 65_535 {
            candle_core::bail!(
                "{n} output rows (the kernel takes up to {})",
                65_535 * WARPS
            );
        }
        let dev = xq.device().clone();
        // SAFETY: the kernel writes every output.
        let mut out = unsafe { dev.alloc::<f32>((tokens * n).max(1)) }?;
        if tokens > 0 && n > 0 {
            let func = dev.get_or_load_custom_func(&format!("mmvq{per}_{kind}"), MODULE, PTX)?;
            let xq = xq.as_cuda_slice::<u8>()?;
            let blocks = tokens * (k / QK_K);
            let qs = xq.slice(..tokens * k);
            let d = xq.slice(tokens * k..tokens * k + blocks * 4);
            let sums = xq.slice(tokens * k + blocks * 4..bytes);
            let stream = dev.cuda_stream();
            let (w, _guard) = self.w.device_ptr_with_guard(&stream)?;
            let w = w as u64;
            let (n32, k32, tokens32) = (i32_of(n)?, i32_of(k)?, i32_of(tokens)?);
            let cfg = LaunchConfig {
                grid_dim: (tokens.div_ceil(per) as u32, n.div_ceil(WARPS) as u32, 1),
                block_dim: (32 * WARPS as u32, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut b = func.builder();
            b.arg(&w)
                .arg(&qs)
                .arg(&d)
                .arg(&sums)
                .arg(&mut out)
                .arg(&n32)
                .arg(&k32)
                .arg(&tokens32);
            // SAFETY: `w` holds `n` rows of `k / 256` blocks of its type
            // (candle's storage of a `[n, k]` tensor); `xq` holds `tokens`
            // rows of `k` (checked above); one warp per output row writes
            // that row's `tokens` outputs.
            unsafe { b.launch(cfg) }.w()?;
        }
        Ok((
            CudaStorage::wrap_cuda_slice(out, dev),
            Shape::from((tokens, n)),
        ))
    }
}
