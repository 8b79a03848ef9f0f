//! FP8 and bitsandbytes 4-bit weights on the GPU, kept in their codes (1 or
//! ½ byte a weight) and decoded inside the kernels of
//! kernels/decoded_matvec.cu: steps of up to [`MAX_TOKENS`] rows multiply
//! the codes directly; longer ones decode the weight to F16 for the call
//! and multiply through cuBLAS (activations rounded to F16, as for the
//! F16 copies of GGML weights).

use candle_core::cuda_backend::cudarc::driver::{CudaView, LaunchConfig, PushKernelArg};
use candle_core::cuda_backend::WrapErr;
use candle_core::{DType, Device, Storage, Tensor};
use mlxr_formats::float8::Float8;

use super::half_matvec::{aligned, tokens_variant};
use super::quant_matmul::{f32_view, tensor};
use crate::backend::cpu::kernels::bnb4::Bnb4Weight;
use crate::backend::cpu::kernels::decoded::RowDecode;
use crate::backend::cpu::kernels::fp8::Fp8Weight;
use crate::{ModelError, Result};

const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/decoded_matvec.ptx"));
const MODULE: &str = "mlxr_decoded_matvec";
/// Rows of activations the decode kernels take.
pub const MAX_TOKENS: usize = 8;
/// Warps per thread block (`ROWS` in the kernels).
const ROWS: usize = 4;

/// Weight rows a warp takes in the kernels for up to `per` tokens
/// (`RW_FOR` there): activations are loaded once for all of them.
fn rows_per_warp(per: usize) -> usize {
    if per <= 2 {
        4
    } else {
        2
    }
}
/// Threads per block of the F16 decodes.
const DECODE_THREADS: usize = 256;

#[derive(Debug)]
enum Codes {
    /// One byte a weight, scales `[⌈rows/bn⌉, ⌈cols/bk⌉]`.
    Fp8 { format: Float8, block: [usize; 2] },
    /// Two codes a byte over the flattened matrix, an absmax per
    /// `blocksize` elements, the 16 code values in `table`.
    Bnb4 { blocksize: usize, table: Tensor },
}

/// A `[rows, cols]` weight in its checkpoint's codes on a CUDA device.
#[derive(Debug)]
pub struct CodedWeight {
    rows: usize,
    cols: usize,
    codes: Codes,
    /// U8 on the device.
    bytes: Tensor,
    /// F32 on the device: FP8 block scales or 4-bit absmax.
    scales: Tensor,
}

impl CodedWeight {
    /// `w` on `device`; `None` where the kernels do not take its widths
    /// (columns not a multiple of 16).
    pub fn fp8(w: &Fp8Weight, device: &Device) -> Result<Option<Self>> {
        let (rows, cols) = (w.rows(), w.cols());
        if !cols.is_multiple_of(16) {
            return Ok(None);
        }
        let block = w.block();
        let grid = (rows.div_ceil(block[0]), cols.div_ceil(block[1]));
        Ok(Some(Self {
            rows,
            cols,
            codes: Codes::Fp8 {
                format: w.format(),
                block,
            },
            bytes: Tensor::from_slice(w.codes(), (rows, cols), device)?,
            scales: Tensor::from_slice(w.scales(), grid, device)?,
        }))
    }

    /// `w` on `device`; `None` where the kernels do not take its widths
    /// (columns or block size not a multiple of 32).
    pub fn bnb4(w: &Bnb4Weight, device: &Device) -> Result<Option<Self>> {
        let (rows, cols) = (w.rows(), w.cols());
        let blocksize = w.blocksize();
        if !cols.is_multiple_of(32) || !blocksize.is_multiple_of(32) {
            return Ok(None);
        }
        Ok(Some(Self {
            rows,
            cols,
            codes: Codes::Bnb4 {
                blocksize,
                table: Tensor::from_slice(w.code(), 16, device)?,
            },
            bytes: Tensor::from_slice(w.packed(), rows * cols / 2, device)?,
            scales: Tensor::from_slice(w.absmax(), w.absmax().len(), device)?,
        }))
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    /// `x · Wᵀ`, `x` f32 `[tokens, cols]` → f32 `[tokens, rows]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (tokens, k) = x.dims2()?;
        if k != self.cols || x.dtype() != DType::F32 {
            return Err(ModelError::InvalidBatch(format!(
                "{:?} activations against a [{}, {}] coded weight",
                x.shape(),
                self.rows,
                self.cols
            )));
        }
        if tokens <= MAX_TOKENS {
            return self.matvec(x);
        }
        let w = self.to_f16()?;
        Ok(x.to_dtype(DType::F16)?
            .matmul(&w.t()?)?
            .to_dtype(DType::F32)?)
    }

    /// The weight decoded to F16 `[rows, cols]`.
    pub fn to_f16(&self) -> Result<Tensor> {
        let dev = self.bytes.device().as_cuda_device()?.clone();
        let (n, k) = (self.rows, self.cols);
        let (bs, ss) = (
            self.bytes.storage_and_layout().0,
            self.scales.storage_and_layout().0,
        );
        let bytes = u8_view(&bs, &self.bytes)?;
        let scales = f32_view(&ss, &self.scales)?;
        // SAFETY: every element is written.
        let mut out = unsafe { dev.alloc::<half::f16>(n * k) }?;
        let dims = |d: usize| i32::try_from(d).unwrap_or(i32::MAX);
        match &self.codes {
            Codes::Fp8 { format, block } => {
                let name = match format {
                    Float8::E4M3 => "e4m3_to_f16",
                    Float8::E5M2 => "e5m2_to_f16",
                };
                let func = dev.get_or_load_custom_func(name, MODULE, PTX)?;
                let (nn, kk, bn, bk) = (dims(n), dims(k), dims(block[0]), dims(block[1]));
                let mut b = func.builder();
                b.arg(&bytes).arg(&scales).arg(&mut out);
                b.arg(&nn).arg(&kk).arg(&bn).arg(&bk);
                // SAFETY: codes n·k bytes, scales one per block, out n·k
                // halves (k a multiple of 16: `fp8`).
                unsafe { b.launch(grid(n * k / 16)) }.w()?;
            }
            Codes::Bnb4 { blocksize, table } => {
                let ts = table.storage_and_layout().0;
                let table = f32_view(&ts, table)?;
                let func = dev.get_or_load_custom_func("bnb4_to_f16", MODULE, PTX)?;
                let (nn, kk, bsz) = (dims(n), dims(k), dims(*blocksize));
                let mut b = func.builder();
                b.arg(&bytes).arg(&scales).arg(&table).arg(&mut out);
                b.arg(&nn).arg(&kk).arg(&bsz);
                // SAFETY: n·k/2 bytes, an absmax per block, 16 code values,
                // out n·k halves (k a multiple of 32: `bnb4`).
                unsafe { b.launch(grid(n * k / 32)) }.w()?;
            }
        }
        Ok(tensor(out, &dev, (n, k)))
    }

    fn matvec(&self, x: &Tensor) -> Result<Tensor> {
        let x = aligned(x)?;
        let (tokens, k) = x.dims2()?;
        let n = self.rows;
        let dev = self.bytes.device().as_cuda_device()?.clone();
        let xs = x.storage_and_layout().0;
        let (bs, ss) = (
            self.bytes.storage_and_layout().0,
            self.scales.storage_and_layout().0,
        );
        let x_view = f32_view(&xs, &x)?;
        let bytes = u8_view(&bs, &self.bytes)?;
        let scales = f32_view(&ss, &self.scales)?;
        let per = tokens_variant(tokens);
        // SAFETY: the kernels write every output.
        let mut y = unsafe { dev.alloc::<f32>(tokens * n) }?;
        let cfg = LaunchConfig {
            grid_dim: (n.div_ceil(ROWS * rows_per_warp(per)) as u32, 1, 1),
            block_dim: (32 * ROWS as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        let dims = [n, k, tokens].map(|d| i32::try_from(d).unwrap_or(i32::MAX));
        let no_bias = 0u64;
        match &self.codes {
            Codes::Fp8 { format, block } => {
                let name = match format {
                    Float8::E4M3 => format!("e4m3_mv{per}"),
                    Float8::E5M2 => format!("e5m2_mv{per}"),
                };
                let func = dev.get_or_load_custom_func(&name, MODULE, PTX)?;
                let blocks = block.map(|d| i32::try_from(d).unwrap_or(i32::MAX));
                let mut b = func.builder();
                b.arg(&bytes)
                    .arg(&scales)
                    .arg(&x_view)
                    .arg(&no_bias)
                    .arg(&mut y);
                for d in dims.iter().chain(&blocks) {
                    b.arg(d);
                }
                // SAFETY: codes n·k bytes, scales one per block, x tokens
                // rows of k f32 from a 16-byte aligned start; warp w of
                // block i writes rows (4i + w)·RW .. +RW below n of y's
                // tokens rows.
                unsafe { b.launch(cfg) }.w()?;
            }
            Codes::Bnb4 { blocksize, table } => {
                let ts = table.storage_and_layout().0;
                let table = f32_view(&ts, table)?;
                let func = dev.get_or_load_custom_func(&format!("bnb4_mv{per}"), MODULE, PTX)?;
                let bsz = i32::try_from(*blocksize).unwrap_or(i32::MAX);
                let mut b = func.builder();
                b.arg(&bytes)
                    .arg(&scales)
                    .arg(&table)
                    .arg(&x_view)
                    .arg(&no_bias);
                b.arg(&mut y);
                for d in &dims {
                    b.arg(d);
                }
                b.arg(&bsz);
                // SAFETY: as above, with n·k/2 bytes, an absmax per block
                // and 16 code values.
                unsafe { b.launch(cfg) }.w()?;
            }
        }
        Ok(tensor(y, &dev, (tokens, n)))
    }
}

fn grid(threads: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (threads.div_ceil(DECODE_THREADS) as u32, 1, 1),
        block_dim: (DECODE_THREADS as u32, 1, 1),
        shared_mem_bytes: 0,
    }
}

fn u8_view<'a>(s: &'a Storage, t: &Tensor) -> Result<CudaView<'a, u8>> {
    let Storage::Cuda(s) = s else {
        return Err(ModelError::InvalidBatch("coded weight off the GPU".into()));
    };
    Ok(s.as_cuda_slice::<u8>()?.slice(t.layout().start_offset()..))
}
