//! The memory of the paged KV cache: per layer one key and one value buffer
//! of fixed-size blocks, allocated once.

use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use candle_core::{CpuStorage, DType, Device, InplaceOp1, Layout, Tensor};
use half::{bf16, f16};

use super::write_op::KvRowsWrite;
use crate::{ModelError, Result};

/// Keys and values of every layer in blocks of `block_size` positions.
///
/// Layer `l`'s keys are one buffer `[num_blocks, n_kv_heads, block_size,
/// head_dim]` (values alike), so a block id (`u32`, an index into dim 0)
/// names the same positions in every layer. Which block holds which positions
/// of which sequence is the block table's business, not the store's.
///
/// The buffers are host memory the store owns (not candle tensors), so
/// writing rows takes a lock rather than a candle op, which allocates; the
/// attention kernels read them in place. CPU only: there are no CUDA or
/// Metal attention kernels yet.
pub struct PagedKvStore {
    keys: Vec<RwLock<CpuStorage>>,
    values: Vec<RwLock<CpuStorage>>,
    /// `[num_blocks, n_kv_heads, block_size, head_dim]`, contiguous.
    layout: Layout,
    num_blocks: usize,
    block_size: usize,
    n_kv_heads: usize,
    head_dim: usize,
    dtype: DType,
}

/// `v` with every page written once. A zeroed `Vec` comes from `calloc`,
/// whose pages the kernel maps on first touch: the cache would grow the
/// process's memory under load instead of at start-up (llama.cpp clears its
/// KV buffer at load for the same reason).
fn touched<T: Copy + Default>(mut v: Vec<T>) -> Vec<T> {
    let step = (4096 / std::mem::size_of::<T>()).max(1);
    for x in v.iter_mut().step_by(step) {
        // SAFETY: `x` is a valid, aligned, exclusive reference. Volatile so
        // that the store of a zero over calloc'd memory is not elided.
        unsafe { std::ptr::write_volatile(x, T::default()) };
    }
    v
}

impl PagedKvStore {
    /// Allocates `num_blocks` zeroed blocks per layer. `dtype` is F16, BF16 or F32.
    pub fn new(
        n_layers: usize,
        num_blocks: usize,
        block_size: usize,
        n_kv_heads: usize,
        head_dim: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<Self> {
        check_dtype(dtype)?;
        if n_layers == 0 || num_blocks == 0 || block_size == 0 || n_kv_heads == 0 || head_dim == 0 {
            return Err(ModelError::InvalidConfig(format!(
                "paged KV store needs non-zero sizes, got {n_layers} layers, {num_blocks} blocks \
                 of {block_size} positions, {n_kv_heads} KV heads of dimension {head_dim}"
            )));
        }
        // Slots (`block_id * block_size + offset`) travel as u32.
        if num_blocks
            .checked_mul(block_size)
            .is_none_or(|slots| slots > u32::MAX as usize)
        {
            return Err(ModelError::InvalidConfig(format!(
                "{num_blocks} blocks of {block_size} positions exceed the u32 slot range"
            )));
        }
        if !device.is_cpu() {
            return Err(ModelError::InvalidConfig(format!(
                "the CPU backend's paged KV cache lives in host memory (asked for {device:?})"
            )));
        }
        let shape = (num_blocks, n_kv_heads, block_size, head_dim);
        let len = num_blocks * n_kv_heads * block_size * head_dim;
        let zeros = || {
            RwLock::new(match dtype {
                DType::F32 => CpuStorage::F32(touched(vec![0.0; len])),
                DType::F16 => CpuStorage::F16(touched(vec![f16::ZERO; len])),
                _ => CpuStorage::BF16(touched(vec![bf16::ZERO; len])),
            })
        };
        let keys = (0..n_layers).map(|_| zeros()).collect();
        let values = (0..n_layers).map(|_| zeros()).collect();
        Ok(Self {
            keys,
            values,
            layout: Layout::contiguous(shape),
            num_blocks,
            block_size,
            n_kv_heads,
            head_dim,
            dtype,
        })
    }

    /// Bytes one block id takes across all layers, keys and values together:
    /// divide a memory budget by this to get `num_blocks`.
    pub fn bytes_per_block(
        n_layers: usize,
        block_size: usize,
        n_kv_heads: usize,
        head_dim: usize,
        dtype: DType,
    ) -> usize {
        2 * n_layers * block_size * n_kv_heads * head_dim * dtype.size_in_bytes()
    }

    pub fn n_layers(&self) -> usize {
        self.keys.len()
    }

    pub fn num_blocks(&self) -> usize {
        self.num_blocks
    }

    pub fn block_size(&self) -> usize {
        self.block_size
    }

    pub fn n_kv_heads(&self) -> usize {
        self.n_kv_heads
    }

    pub fn head_dim(&self) -> usize {
        self.head_dim
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn device(&self) -> &Device {
        &Device::Cpu
    }

    /// Stores `k` and `v` (`[slots.len(), n_kv_heads, head_dim]` each) of
    /// `layer` into `slots` (`block * block_size + offset`); an error, with
    /// nothing written, for a slot out of range or rows of the wrong length.
    pub fn write(&self, layer: usize, slots: &[u32], k: &[f32], v: &[f32]) -> Result<()> {
        for (blocks, rows, what) in [(&self.keys, k, "keys"), (&self.values, v, "values")] {
            let mut storage = write(blocks.get(layer).ok_or_else(|| self.no_layer(layer))?);
            KvRowsWrite { rows, slots }
                .cpu_fwd(&mut storage, &self.layout)
                .map_err(|e| ModelError::candle(format!("layer {layer}: storing {what}"), e))?;
        }
        Ok(())
    }

    /// `f(keys, values)` over layer `layer`'s blocks as candle lays out a
    /// `[num_blocks, n_kv_heads, block_size, head_dim]` tensor.
    pub fn read<R>(
        &self,
        layer: usize,
        f: impl FnOnce((&CpuStorage, &Layout), (&CpuStorage, &Layout)) -> R,
    ) -> Result<R> {
        let (keys, values) = match (self.keys.get(layer), self.values.get(layer)) {
            (Some(k), Some(v)) => (read(k), read(v)),
            _ => return Err(self.no_layer(layer)),
        };
        Ok(f((&keys, &self.layout), (&values, &self.layout)))
    }

    /// A copy of layer `layer`'s key blocks `[num_blocks, n_kv_heads,
    /// block_size, head_dim]` (for inspection).
    pub fn keys(&self, layer: usize) -> Result<Tensor> {
        self.copy(self.keys.get(layer), layer)
    }

    /// A copy of layer `layer`'s value blocks (see [`Self::keys`]).
    pub fn values(&self, layer: usize) -> Result<Tensor> {
        self.copy(self.values.get(layer), layer)
    }

    fn copy(&self, blocks: Option<&RwLock<CpuStorage>>, layer: usize) -> Result<Tensor> {
        let storage = read(blocks.ok_or_else(|| self.no_layer(layer))?);
        let shape = self.layout.shape();
        let cpu = &Device::Cpu;
        Ok(match &*storage {
            CpuStorage::F32(v) => Tensor::from_slice(v, shape, cpu)?,
            CpuStorage::F16(v) => Tensor::from_slice(v, shape, cpu)?,
            CpuStorage::BF16(v) => Tensor::from_slice(v, shape, cpu)?,
            _ => unreachable!("the store holds F32, F16 or BF16"),
        })
    }

    fn no_layer(&self, layer: usize) -> ModelError {
        ModelError::InvalidBatch(format!(
            "layer {layer} out of range: the paged KV store has {} layers",
            self.keys.len()
        ))
    }
}

fn check_dtype(dtype: DType) -> Result<()> {
    match dtype {
        DType::F16 | DType::BF16 | DType::F32 => Ok(()),
        other => Err(ModelError::InvalidConfig(format!(
            "paged KV store dtype must be F16, BF16 or F32, got {other:?}"
        ))),
    }
}

/// A lock's data even after a panic while it was held: a half-written row
/// belongs to a sequence that failed and is dropped.
fn read(lock: &RwLock<CpuStorage>) -> RwLockReadGuard<'_, CpuStorage> {
    lock.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn write(lock: &RwLock<CpuStorage>) -> RwLockWriteGuard<'_, CpuStorage> {
    lock.write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
