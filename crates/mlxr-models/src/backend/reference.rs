//! The reference backend: candle's ops ([`CandleBackend`]) on any candle
//! device, attention as matmul + softmax over keys gathered from an f32
//! slot-indexed cache. Slower than a device's own backend and allocating
//! freely; it is the independent implementation the tests hold the fast
//! backends to.

use candle_core::{DType, Device, Tensor, D};

use super::candle::{slot_caches, soft_capped, CandleBackend, CandleDevice};
use super::{AttentionSpec, KvGeometry};
use crate::step::Step;
use crate::{ModelError, Result};

pub type ReferenceBackend = CandleBackend<GatherAttention>;

impl ReferenceBackend {
    pub fn new(kv: KvGeometry, device: &Device) -> Result<Self> {
        Ok(Self::with_kernels(
            GatherAttention::new(kv, device)?,
            device,
        ))
    }
}

pub struct GatherAttention {
    device: Device,
    kv: KvGeometry,
    /// Per layer, keys and values by slot: `[num_blocks * block_size,
    /// n_kv_heads * head_dim]` f32.
    keys: Vec<Tensor>,
    values: Vec<Tensor>,
    /// Each token's slot, `[tokens]` u32.
    slots: Option<Tensor>,
    /// Per chunk, the slots of its positions `0..start_pos + len`.
    gathers: Vec<Tensor>,
}

impl GatherAttention {
    pub fn new(kv: KvGeometry, device: &Device) -> Result<Self> {
        let (keys, values) = slot_caches(&kv, DType::F32, device)?;
        Ok(Self {
            device: device.clone(),
            kv,
            keys,
            values,
            slots: None,
            gathers: Vec::new(),
        })
    }
}

impl CandleDevice for GatherAttention {
    fn geometry(&self) -> &KvGeometry {
        &self.kv
    }

    fn begin_step(&mut self, step: &Step, _moves: u64) -> Result<()> {
        self.slots = Some(Tensor::new(step.slots(), &self.device)?);
        let bs = self.kv.block_size;
        self.gathers = step
            .seqs()
            .iter()
            .map(|seq| {
                let table = seq.table(step.block_ids());
                let slots: Vec<u32> = (0..seq.start_pos + seq.len)
                    .map(|p| (table[p / bs] as usize * bs + p % bs) as u32)
                    .collect();
                Tensor::new(slots.as_slice(), &self.device)
            })
            .collect::<Result<_, _>>()?;
        Ok(())
    }

    fn attend(
        &mut self,
        layer: usize,
        spec: &AttentionSpec,
        step: &Step,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
    ) -> Result<Tensor> {
        let (Some(keys), Some(values)) = (self.keys.get(layer), self.values.get(layer)) else {
            return Err(ModelError::InvalidBatch(format!("no layer {layer}")));
        };
        let slots = self
            .slots
            .as_ref()
            .ok_or_else(|| ModelError::InvalidBatch("attend before begin_step".into()))?;
        let width = spec.n_kv_heads * spec.head_dim;
        let index = slots
            .unsqueeze(1)?
            .broadcast_as((slots.dim(0)?, width))?
            .contiguous()?;
        keys.scatter_set(&index, &k.contiguous()?, 0)?;
        values.scatter_set(&index, &v.contiguous()?, 0)?;
        let mut outputs = Vec::with_capacity(step.chunks().len());
        let mut offset = 0;
        for (chunk, gather) in step.chunks().iter().zip(&self.gathers) {
            let kv_len = chunk.start_pos + chunk.len;
            let heads = |t: &Tensor| -> Result<Tensor> {
                Ok(t.index_select(gather, 0)?
                    .reshape((kv_len, spec.n_kv_heads, spec.head_dim))?
                    .transpose(0, 1)?
                    .contiguous()?)
            };
            let q = q.narrow(0, offset, chunk.len)?.reshape((
                chunk.len,
                spec.n_heads,
                spec.head_dim,
            ))?;
            outputs.push(dense_attention(
                spec,
                &q,
                &heads(keys)?,
                &heads(values)?,
                chunk.start_pos,
            )?);
            offset += chunk.len;
        }
        Ok(Tensor::cat(&outputs, 0)?)
    }
}

/// One chunk's attention: `q` `[len, n_heads, d]`, `k_all`/`v_all`
/// `[n_kv_heads, start_pos + len, d]`; returns `[len, n_heads * d]`.
fn dense_attention(
    spec: &AttentionSpec,
    q: &Tensor,
    k_all: &Tensor,
    v_all: &Tensor,
    start_pos: usize,
) -> Result<Tensor> {
    let len = q.dim(0)?;
    let kv_len = k_all.dim(1)?;
    let (n_heads, n_kv_heads, d) = (spec.n_heads, spec.n_kv_heads, spec.head_dim);
    let group = n_heads / n_kv_heads;
    // Query head h reads KV head h / group: fold the group into the row axis.
    let q = q
        .reshape((len, n_kv_heads, group, d))?
        .permute((1, 2, 0, 3))?
        .reshape((n_kv_heads, group * len, d))?
        .contiguous()?;
    let k_t = k_all.transpose(1, 2)?;
    let scores = (q.matmul(&k_t)? * spec.scale as f64)?;
    let scores = match spec.softcap {
        Some(cap) => soft_capped(&scores, cap)?,
        None => scores,
    };
    let scores = scores.reshape((n_kv_heads, group, len, kv_len))?;
    let scores = match causal_mask(len, start_pos, spec.sliding_window, q.device())? {
        Some(mask) => scores.broadcast_add(&mask)?,
        None => scores,
    };
    let probs = candle_nn::ops::softmax(&scores, D::Minus1)?;
    let probs = probs.reshape((n_kv_heads, group * len, kv_len))?;
    let out = probs.matmul(v_all)?;
    Ok(out
        .reshape((n_kv_heads, group, len, d))?
        .permute((2, 0, 1, 3))?
        .reshape((len, n_heads * d))?)
}

/// Additive mask `[len, start_pos + len]`: causal, and within the sliding
/// window when there is one. `None` when nothing is masked.
fn causal_mask(
    len: usize,
    start_pos: usize,
    window: Option<usize>,
    device: &Device,
) -> Result<Option<Tensor>> {
    let kv_len = start_pos + len;
    let window = window.unwrap_or(usize::MAX);
    if len == 1 && kv_len <= window {
        return Ok(None);
    }
    let mut mask = vec![0f32; len * kv_len];
    for i in 0..len {
        let pos = start_pos + i;
        for (j, m) in mask[i * kv_len..(i + 1) * kv_len].iter_mut().enumerate() {
            if j > pos || pos - j >= window {
                *m = f32::NEG_INFINITY;
            }
        }
    }
    Ok(Some(Tensor::from_vec(mask, (len, kv_len), device)?))
}
