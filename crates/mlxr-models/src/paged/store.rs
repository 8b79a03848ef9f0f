//! The memory of the paged KV cache: per layer one key and one value tensor
//! of fixed-size blocks, allocated once.

use candle_core::{DType, Device, Tensor};

use crate::{ModelError, Result};

/// Keys and values of every layer in blocks of `block_size` positions.
///
/// Layer `l`'s keys are one tensor `[num_blocks, n_kv_heads, block_size,
/// head_dim]` (values alike), so a block id (`u32`, an index into dim 0)
/// names the same positions in every layer. Which block holds which positions
/// of which sequence is the block table's business, not the store's.
pub struct PagedKvStore {
    keys: Vec<Tensor>,
    values: Vec<Tensor>,
    num_blocks: usize,
    block_size: usize,
    n_kv_heads: usize,
    head_dim: usize,
    dtype: DType,
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
        let shape = (num_blocks, n_kv_heads, block_size, head_dim);
        let alloc = |what: &str| {
            Tensor::zeros(shape, dtype, device)
                .map_err(|e| ModelError::candle(format!("allocating the paged {what} cache"), e))
        };
        let mut keys = Vec::with_capacity(n_layers);
        let mut values = Vec::with_capacity(n_layers);
        for _ in 0..n_layers {
            keys.push(alloc("key")?);
            values.push(alloc("value")?);
        }
        Ok(Self {
            keys,
            values,
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
        self.keys[0].device()
    }

    /// Layer `layer`'s key blocks `[num_blocks, n_kv_heads, block_size, head_dim]`.
    pub fn keys(&self, layer: usize) -> Result<&Tensor> {
        self.keys.get(layer).ok_or_else(|| self.no_layer(layer))
    }

    /// Layer `layer`'s value blocks `[num_blocks, n_kv_heads, block_size, head_dim]`.
    pub fn values(&self, layer: usize) -> Result<&Tensor> {
        self.values.get(layer).ok_or_else(|| self.no_layer(layer))
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
