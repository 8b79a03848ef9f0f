//! Storing new key or value rows into cache slots, in place.

use candle_core::backend::BackendStorage;
use candle_core::{bail, CpuStorage, InplaceOp1, InplaceOp3, Layout, Result};
use half::{bf16, f16};

use super::element::CacheElement;

/// `cache.inplace_op3(&rows, &slots, &KvWriteOp)` stores row `t` of `rows`
/// (`[tokens, n_kv_heads, head_dim]`, f32) at slot `slots[t]` (`[tokens]`,
/// u32) of `cache` (`[num_blocks, n_kv_heads, block_size, head_dim]`), where
/// slot `s` is offset `s % block_size` of block `s / block_size`. The rows are
/// rounded to the cache's dtype.
#[derive(Clone, Copy, Debug, Default)]
pub struct KvWriteOp;

impl InplaceOp3 for KvWriteOp {
    fn name(&self) -> &'static str {
        "paged-kv-write"
    }

    fn cpu_fwd(
        &self,
        cache: &mut CpuStorage,
        cache_layout: &Layout,
        rows: &CpuStorage,
        rows_layout: &Layout,
        slots: &CpuStorage,
        slots_layout: &Layout,
    ) -> Result<()> {
        let geometry = Geometry::new(cache_layout, rows_layout, slots_layout)?;
        let rows = contiguous::<f32>(rows, rows_layout, "rows")?;
        let slots = contiguous::<u32>(slots, slots_layout, "slots")?;
        geometry.write_storage(cache, cache_layout, rows, slots)
    }
}

/// [`KvWriteOp`] with the rows (`[slots.len(), n_kv_heads, head_dim]`) and
/// slots in plain slices: `cache.inplace_op1(&KvRowsWrite { .. })`.
pub struct KvRowsWrite<'a> {
    pub rows: &'a [f32],
    pub slots: &'a [u32],
}

impl InplaceOp1 for KvRowsWrite<'_> {
    fn name(&self) -> &'static str {
        "paged-kv-write"
    }

    fn cpu_fwd(&self, cache: &mut CpuStorage, cache_layout: &Layout) -> Result<()> {
        let geometry = Geometry::of_cache(cache_layout)?;
        if self.rows.len() != self.slots.len() * geometry.n_kv_heads * geometry.head_dim {
            bail!(
                "paged-kv-write: {} values are not {} rows of the cache {:?}",
                self.rows.len(),
                self.slots.len(),
                cache_layout.dims()
            )
        }
        geometry.write_storage(cache, cache_layout, self.rows, self.slots)
    }
}

impl Geometry {
    fn of_cache(cache: &Layout) -> Result<Self> {
        let &[num_blocks, n_kv_heads, block_size, head_dim] = cache.dims() else {
            bail!("paged-kv-write: cache shape {:?} is not 4-d", cache.dims())
        };
        Ok(Self {
            num_blocks,
            n_kv_heads,
            block_size,
            head_dim,
        })
    }

    fn write_storage(
        &self,
        cache: &mut CpuStorage,
        cache_layout: &Layout,
        rows: &[f32],
        slots: &[u32],
    ) -> Result<()> {
        let geometry = self;
        let Some((start, end)) = cache_layout.contiguous_offsets() else {
            bail!("paged-kv-write: the cache must be contiguous")
        };
        match cache {
            CpuStorage::F32(data) => geometry.write(&mut data[start..end], rows, slots),
            CpuStorage::F16(data) => geometry.write::<f16>(&mut data[start..end], rows, slots),
            CpuStorage::BF16(data) => geometry.write::<bf16>(&mut data[start..end], rows, slots),
            other => bail!(
                "paged-kv-write: unsupported cache dtype {:?}",
                other.dtype()
            ),
        }
    }
}

struct Geometry {
    num_blocks: usize,
    n_kv_heads: usize,
    block_size: usize,
    head_dim: usize,
}

impl Geometry {
    fn new(cache: &Layout, rows: &Layout, slots: &Layout) -> Result<Self> {
        let &[num_blocks, n_kv_heads, block_size, head_dim] = cache.dims() else {
            bail!("paged-kv-write: cache shape {:?} is not 4-d", cache.dims())
        };
        let &[tokens, row_heads, row_dim] = rows.dims() else {
            bail!("paged-kv-write: rows shape {:?} is not 3-d", rows.dims())
        };
        if (row_heads, row_dim) != (n_kv_heads, head_dim) {
            bail!(
                "paged-kv-write: rows {:?} do not match cache {:?}",
                rows.dims(),
                cache.dims()
            )
        }
        if slots.dims() != [tokens] {
            bail!(
                "paged-kv-write: {} rows but slots of shape {:?}",
                tokens,
                slots.dims()
            )
        }
        Ok(Self {
            num_blocks,
            n_kv_heads,
            block_size,
            head_dim,
        })
    }

    fn write<T: CacheElement>(&self, cache: &mut [T], rows: &[f32], slots: &[u32]) -> Result<()> {
        let capacity = self.num_blocks * self.block_size;
        if let Some(&bad) = slots.iter().find(|&&s| s as usize >= capacity) {
            bail!("paged-kv-write: slot {bad} out of range ({capacity} slots)")
        }
        let row_len = self.n_kv_heads * self.head_dim;
        for (row, &slot) in rows.chunks_exact(row_len).zip(slots) {
            let (block, offset) = (
                slot as usize / self.block_size,
                slot as usize % self.block_size,
            );
            for (head, src) in row.chunks_exact(self.head_dim).enumerate() {
                let at =
                    ((block * self.n_kv_heads + head) * self.block_size + offset) * self.head_dim;
                T::store_f32(src, &mut cache[at..at + self.head_dim]);
            }
        }
        Ok(())
    }
}

/// The elements of a contiguous CPU tensor of type `T`.
pub(crate) fn contiguous<'s, T: candle_core::WithDType>(
    storage: &'s CpuStorage,
    layout: &Layout,
    what: &str,
) -> Result<&'s [T]> {
    let Some((start, end)) = layout.contiguous_offsets() else {
        bail!("{what} must be contiguous")
    };
    Ok(&storage.as_slice::<T>()?[start..end])
}
