//! Key/value memory of a forward batch behind one trait: the model hands each
//! layer's queries, keys and values to the cache, which stores the keys and
//! values and computes attention over everything the sequences hold. A
//! contiguous per-sequence cache and the paged block cache
//! ([`crate::paged`]) both implement it, each with its own attention kernel.

use candle_core::{DType, Device, Tensor};

use crate::batch::SeqChunk;
use crate::layers::dense_attention;
use crate::{ModelError, Result};

/// The attention geometry of one layer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionSpec {
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub scale: f32,
    /// A query at position `p` sees keys `j` with `p - j < window` only.
    pub sliding_window: Option<usize>,
}

pub trait KvCache {
    /// `q`: `[tokens, n_heads, head_dim]`, `k`/`v`: `[tokens, n_kv_heads,
    /// head_dim]` (after RoPE) for the chunks `seqs` in order; chunk `i` covers
    /// positions `start_pos..start_pos + len` of sequence `i`. Stores `k` and
    /// `v` for `layer` and returns the attention output `[tokens, n_heads *
    /// head_dim]`: a query at position `p` attends causally to keys `0..=p` of
    /// its own sequence, within the sliding window when there is one.
    fn attend(
        &mut self,
        layer: usize,
        spec: &AttentionSpec,
        seqs: &[SeqChunk],
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
    ) -> Result<Tensor>;
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

impl ContiguousKvCache {
    /// Stores keys and values of positions `start_pos..start_pos + k.dim(1)`
    /// for `layer` (`k`, `v`: `[n_kv_heads, len, head_dim]`) and returns the
    /// keys and values of positions `0..start_pos + len`.
    pub fn append(
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
            return Err(ModelError::InvalidBatch(format!(
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

    /// Forgets every position from `len` on (a new prompt that shares only a prefix).
    pub fn truncate(&mut self, len: usize) {
        for buf in self.layers.iter_mut().flatten() {
            buf.len = buf.len.min(len);
        }
    }
}

/// One sequence: the batch must hold exactly one chunk.
impl KvCache for ContiguousKvCache {
    fn attend(
        &mut self,
        layer: usize,
        spec: &AttentionSpec,
        seqs: &[SeqChunk],
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
    ) -> Result<Tensor> {
        vec![self].attend(layer, spec, seqs, q, k, v)
    }
}

/// Sequence `i` of the batch lives in cache `i`.
impl KvCache for Vec<&mut ContiguousKvCache> {
    fn attend(
        &mut self,
        layer: usize,
        spec: &AttentionSpec,
        seqs: &[SeqChunk],
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
    ) -> Result<Tensor> {
        if seqs.len() != self.len() {
            return Err(ModelError::InvalidBatch(format!(
                "{} chunks for {} caches",
                seqs.len(),
                self.len()
            )));
        }
        let mut outputs = Vec::with_capacity(seqs.len());
        let mut offset = 0;
        for (seq, cache) in seqs.iter().zip(self.iter_mut()) {
            let q = q.narrow(0, offset, seq.len)?;
            let k = k.narrow(0, offset, seq.len)?.transpose(0, 1)?;
            let v = v.narrow(0, offset, seq.len)?.transpose(0, 1)?;
            let (k_all, v_all) = cache.append(layer, seq.start_pos, &k, &v)?;
            outputs.push(dense_attention(spec, &q, &k_all, &v_all, seq.start_pos)?);
            offset += seq.len;
        }
        Ok(Tensor::cat(&outputs, 0)?)
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
