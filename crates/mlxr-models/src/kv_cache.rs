//! Per-sequence key/value storage behind a small trait, so the paged block
//! cache can replace the contiguous one without touching the model.

use candle_core::{DType, Device, Tensor};

use crate::Result;

pub trait KvCache {
    /// Stores keys and values of positions `start_pos..start_pos + k.dim(1)`
    /// for `layer` (`k`, `v`: `[n_kv_heads, len, head_dim]`) and returns the
    /// keys and values of positions `0..start_pos + len`.
    fn append(
        &mut self,
        layer: usize,
        start_pos: usize,
        k: &Tensor,
        v: &Tensor,
    ) -> Result<(Tensor, Tensor)>;

    /// Forgets every position from `len` on (a new prompt that shares only a prefix).
    fn truncate(&mut self, len: usize);
}

/// Keys and values of one sequence in growable contiguous buffers, one pair per layer.
pub struct ContiguousKvCache {
    layers: Vec<Option<LayerBuffers>>,
}

struct LayerBuffers {
    k: Tensor,
    v: Tensor,
    capacity: usize,
    len: usize,
}

impl ContiguousKvCache {
    pub fn new(n_layers: usize) -> Self {
        Self {
            layers: (0..n_layers).map(|_| None).collect(),
        }
    }

    fn grow(buf: &Tensor, capacity: usize, len: usize) -> Result<Tensor> {
        let (heads, _, dim) = buf.dims3()?;
        let new = Tensor::zeros((heads, capacity, dim), buf.dtype(), buf.device())?;
        if len > 0 {
            new.slice_set(&buf.narrow(1, 0, len)?.contiguous()?, 1, 0)?;
        }
        Ok(new)
    }
}

impl KvCache for ContiguousKvCache {
    fn append(
        &mut self,
        layer: usize,
        start_pos: usize,
        k: &Tensor,
        v: &Tensor,
    ) -> Result<(Tensor, Tensor)> {
        let (heads, len, dim) = k.dims3()?;
        let end = start_pos + len;
        let slot = &mut self.layers[layer];
        if slot.is_none() {
            let capacity = end.next_power_of_two().max(64);
            let zeros = |d: &Device| Tensor::zeros((heads, capacity, dim), DType::F32, d);
            *slot = Some(LayerBuffers {
                k: zeros(k.device())?,
                v: zeros(k.device())?,
                capacity,
                len: 0,
            });
        }
        let buf = slot.as_mut().expect("initialised above");
        if start_pos > buf.len {
            return Err(crate::ModelError::InvalidBatch(format!(
                "layer {layer}: chunk starts at position {start_pos} but the cache holds {}",
                buf.len
            )));
        }
        if end > buf.capacity {
            let capacity = end.next_power_of_two();
            buf.k = Self::grow(&buf.k, capacity, start_pos)?;
            buf.v = Self::grow(&buf.v, capacity, start_pos)?;
            buf.capacity = capacity;
        }
        buf.k.slice_set(&k.contiguous()?, 1, start_pos)?;
        buf.v.slice_set(&v.contiguous()?, 1, start_pos)?;
        buf.len = end;
        Ok((buf.k.narrow(1, 0, end)?, buf.v.narrow(1, 0, end)?))
    }

    fn truncate(&mut self, len: usize) {
        for buf in self.layers.iter_mut().flatten() {
            buf.len = buf.len.min(len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(heads: usize, start: usize, len: usize, dim: usize) -> Tensor {
        let data: Vec<f32> = (0..heads)
            .flat_map(|h| {
                (start..start + len)
                    .flat_map(move |p| (0..dim).map(move |d| (h * 100_000 + p * 100 + d) as f32))
            })
            .collect();
        Tensor::from_vec(data, (heads, len, dim), &Device::Cpu).unwrap()
    }

    #[test]
    fn appended_chunks_read_back_in_order_across_growth() {
        for sizes in [
            vec![30, 40],
            vec![10, 60],
            vec![32, 38],
            vec![1; 70],
            vec![64, 1, 200],
        ] {
            let mut cache = ContiguousKvCache::new(1);
            let mut pos = 0;
            for len in sizes.iter().copied() {
                let k = chunk(3, pos, len, 8);
                let (k_all, v_all) = cache.append(0, pos, &k, &k).unwrap();
                pos += len;
                let want = chunk(3, 0, pos, 8).to_vec3::<f32>().unwrap();
                assert_eq!(
                    k_all.to_vec3::<f32>().unwrap(),
                    want,
                    "sizes {sizes:?} at {pos}"
                );
                assert_eq!(v_all.to_vec3::<f32>().unwrap(), want);
            }
        }
    }
}
