//! A step's inputs (token ids, RoPE tables, slots and block tables) copied
//! into one device buffer that is kept from step to step: a step recorded
//! once and replayed (a CUDA graph) reads each later step's inputs at the
//! addresses it was recorded with.

#[cfg(feature = "cuda")]
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, Device, InplaceOp1, Layout, Tensor, WithDType};

use crate::Result;

pub struct StepBuffer<T> {
    buf: Option<Tensor>,
    /// How many times the buffer moved (grew): a step recorded before a move
    /// reads stale addresses.
    moves: u64,
    marker: std::marker::PhantomData<T>,
}

impl<T> Default for StepBuffer<T> {
    fn default() -> Self {
        Self {
            buf: None,
            moves: 0,
            marker: std::marker::PhantomData,
        }
    }
}

impl<T: Input> StepBuffer<T> {
    /// `host` copied to the start of the buffer (grown to fit, at least
    /// doubling); returns a view of those `host.len()` elements.
    pub fn put(&mut self, host: &[T], device: &Device) -> Result<Tensor> {
        let len = host.len().max(1);
        let fits = self.buf.as_ref().is_some_and(|b| b.elem_count() >= len);
        if !fits {
            let old = self.buf.as_ref().map_or(0, |b| b.elem_count());
            self.buf = Some(Tensor::zeros(len.max(2 * old).max(256), T::DTYPE, device)?);
            self.moves += 1;
        }
        let buf = self.buf.as_ref().expect("allocated above");
        buf.inplace_op1(&Upload(host))?;
        Ok(buf.narrow(0, 0, host.len())?)
    }

    pub fn moves(&self) -> u64 {
        self.moves
    }
}

/// Copies host values to the start of a tensor, in place.
struct Upload<'a, T>(&'a [T]);

impl<T: Input> InplaceOp1 for Upload<'_, T> {
    fn name(&self) -> &'static str {
        "mlxr-step-upload"
    }

    fn cpu_fwd(&self, storage: &mut CpuStorage, layout: &Layout) -> candle_core::Result<()> {
        let dst = T::host_mut(storage)
            .ok_or_else(|| candle_core::Error::Msg("upload of another dtype".into()))?;
        let start = layout.start_offset();
        dst.get_mut(start..start + self.0.len())
            .ok_or_else(|| candle_core::Error::Msg("upload past the buffer".into()))?
            .copy_from_slice(self.0);
        Ok(())
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        storage: &mut candle_core::CudaStorage,
        layout: &Layout,
    ) -> candle_core::Result<()> {
        if self.0.is_empty() {
            return Ok(());
        }
        let dev = storage.device().clone();
        let start = layout.start_offset();
        let dst = storage.as_cuda_slice_mut::<T>()?;
        if dst.len() < start + self.0.len() {
            candle_core::bail!("upload past the buffer");
        }
        let mut dst = dst.slice_mut(start..start + self.0.len());
        dev.memcpy_htod(self.0, &mut dst)
    }
}

/// The element types of step inputs.
#[cfg(feature = "cuda")]
pub trait Input:
    WithDType
    + candle_core::cuda_backend::CudaDType
    + candle_core::cuda_backend::cudarc::driver::DeviceRepr
{
    fn host_mut(s: &mut CpuStorage) -> Option<&mut [Self]>;
}

/// The element types of step inputs.
#[cfg(not(feature = "cuda"))]
pub trait Input: WithDType {
    fn host_mut(s: &mut CpuStorage) -> Option<&mut [Self]>;
}

impl Input for u32 {
    fn host_mut(s: &mut CpuStorage) -> Option<&mut [Self]> {
        match s {
            CpuStorage::U32(v) => Some(v),
            _ => None,
        }
    }
}

impl Input for f32 {
    fn host_mut(s: &mut CpuStorage) -> Option<&mut [Self]> {
        match s {
            CpuStorage::F32(v) => Some(v),
            _ => None,
        }
    }
}
