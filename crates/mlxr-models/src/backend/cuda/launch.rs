//! Launching our kernels, optionally each allowed to start while the kernel
//! before it in the stream ends (programmatic dependent launch, sm_90): the
//! kernels wait for it before they read anything (kernels/pdl.cuh), so what
//! overlaps is a launch's own latency and its blocks' scheduling, not the
//! work. Also inside recorded CUDA graphs (the edges keep the attribute).
//!
//! Off by default: one-token steps of the norms and matmuls alone, replayed
//! as a graph, gained from it on an H100 (bench/cuda/step_chain.cu: 8B
//! shape 2.754 → 2.698 ms, Qwen2.5-1.5B shape 1.168 → 1.086 ms), but whole
//! decode steps did not (tg128 in one call, on / off: 8B-shaped Q4_K_M
//! 305.7 / 308.4 tok/s, Qwen2.5-1.5B-shaped 509.5 / 513.1, SmolLM2-shaped
//! Q4_1 1,022.7 / 1,076.3; bench/results/gpu-2026-12-06-s51.md).

use candle_core::cuda_backend::cudarc::driver::{
    sys, CudaFunction, CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, LaunchConfig,
};
use candle_core::cuda_backend::WrapErr;

/// How our kernels follow one another in the stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Launch {
    /// Each may start as the one before it ends, and waits for it inside
    /// (`MLXR_CUDA_PDL=on`, a debug knob, to measure the difference).
    Dependent,
    /// Each starts when the one before it is done.
    #[default]
    Serial,
}

impl std::str::FromStr for Launch {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "on" => Ok(Launch::Dependent),
            "off" => Ok(Launch::Serial),
            other => Err(format!("MLXR_CUDA_PDL={other}: give on or off")),
        }
    }
}

/// A kernel parameter as the launch passes it: a device pointer, or a
/// 4-byte scalar in the low bytes of the slot (the driver reads each
/// parameter's own size from the start of its slot; x86-64 and aarch64 are
/// little-endian).
pub trait KernelArg {
    fn slot(&self, stream: &CudaStream) -> u64;
}

macro_rules! scalar_arg {
    ($($t:ty => $bits:expr),*) => {$(
        impl KernelArg for $t {
            fn slot(&self, _: &CudaStream) -> u64 {
                let f: fn($t) -> u64 = $bits;
                f(*self)
            }
        }
    )*};
}

scalar_arg!(i32 => |v| u64::from(v as u32), u32 => u64::from, f32 => |v| u64::from(v.to_bits()), u64 => |v| v);

// The device's streams have event tracking off (`super::device`): the
// pointers' guards order nothing, so they are dropped at once.
impl<T> KernelArg for CudaSlice<T> {
    fn slot(&self, stream: &CudaStream) -> u64 {
        self.device_ptr(stream).0
    }
}

impl<T> KernelArg for CudaView<'_, T> {
    fn slot(&self, stream: &CudaStream) -> u64 {
        self.device_ptr(stream).0
    }
}

impl<T> KernelArg for CudaViewMut<'_, T> {
    fn slot(&self, stream: &CudaStream) -> u64 {
        self.device_ptr(stream).0
    }
}

/// A launch's parameters, gathered as cudarc's builder does.
pub struct Args<'a> {
    func: &'a CudaFunction,
    stream: &'a CudaStream,
    slots: Vec<u64>,
}

impl<'a> Args<'a> {
    pub fn new(func: &'a CudaFunction, stream: &'a CudaStream) -> Self {
        Self {
            func,
            stream,
            slots: Vec::with_capacity(32),
        }
    }

    pub fn arg<T: KernelArg + ?Sized>(&mut self, arg: &T) -> &mut Self {
        self.slots.push(arg.slot(self.stream));
        self
    }

    /// Launches the kernel on the stream as `launch` says.
    ///
    /// # Safety
    /// The parameters must be the kernel's, in order, and the kernel must
    /// stay within the memory they give it; with [`Launch::Dependent`] it
    /// must wait (kernels/pdl.cuh) before it touches what earlier kernels
    /// write or read.
    pub unsafe fn launch(&mut self, cfg: LaunchConfig, launch: Launch) -> candle_core::Result<()> {
        let mut params: Vec<*mut std::ffi::c_void> = self
            .slots
            .iter_mut()
            .map(|slot| (slot as *mut u64).cast())
            .collect();
        // SAFETY: plain data; the attribute's value is set below.
        let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
        attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        let config = sys::CUlaunchConfig {
            gridDimX: cfg.grid_dim.0,
            gridDimY: cfg.grid_dim.1,
            gridDimZ: cfg.grid_dim.2,
            blockDimX: cfg.block_dim.0,
            blockDimY: cfg.block_dim.1,
            blockDimZ: cfg.block_dim.2,
            sharedMemBytes: cfg.shared_mem_bytes,
            hStream: self.stream.cu_stream(),
            attrs: &mut attr,
            numAttrs: u32::from(launch == Launch::Dependent),
        };
        self.stream.context().bind_to_thread().w()?;
        // SAFETY: `params` points at one slot per kernel parameter (the
        // caller's contract), alive until the call returns; the driver
        // copies them at launch.
        unsafe {
            sys::cuLaunchKernelEx(
                &config,
                self.func.cu_function(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
        .result()
        .w()
    }
}
