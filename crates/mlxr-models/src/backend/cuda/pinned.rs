//! Reading a step's logits into page-locked host memory: a copy from
//! pageable memory stages through the driver's own buffers, and took 4.2 ms
//! a step for 64 sequences' logits of a 49k vocabulary on an H100
//! (bench/results/gpu-2026-12-06-s49.md).

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::PinnedHostSlice;
use candle_core::cuda_backend::WrapErr;
use candle_core::{DType, Storage, Tensor};

use crate::{ModelError, Result};

/// A page-locked host buffer, grown to the largest read so far.
#[derive(Default)]
pub struct PinnedHost {
    buf: Option<PinnedHostSlice<f32>>,
}

impl PinnedHost {
    /// `x`'s values as f32, row-major, once the device has copied them.
    pub fn read(&mut self, x: &Tensor) -> Result<&[f32]> {
        let x = x.to_dtype(DType::F32)?.contiguous()?;
        let n = x.elem_count();
        let (storage, layout) = x.storage_and_layout();
        let Storage::Cuda(cuda) = &*storage else {
            return Err(ModelError::InvalidBatch(
                "reading a CUDA activation off the GPU".into(),
            ));
        };
        let stream = cuda.device().cuda_stream();
        if self.buf.as_ref().is_none_or(|b| b.len() < n) {
            self.buf = None;
            // Cacheable (no write-combining): the host reads it.
            // SAFETY: only the first `n` values are read, after the copy
            // below has written them.
            let buf = unsafe {
                stream
                    .context()
                    .alloc_pinned_with_flags::<f32>(n.next_power_of_two(), 0)
            }
            .w()?;
            self.buf = Some(buf);
        }
        let buf = self.buf.as_mut().expect("allocated above");
        let start = layout.start_offset();
        let src = cuda.as_cuda_slice::<f32>()?.slice(start..start + n);
        // Exactly `n` values: a copy into the whole buffer would read past
        // `src` (cudarc copies the destination's length).
        let dst = &mut buf.as_mut_slice().w()?[..n];
        stream.memcpy_dtoh(&src, dst).w()?;
        stream.synchronize().w()?;
        Ok(dst)
    }
}
