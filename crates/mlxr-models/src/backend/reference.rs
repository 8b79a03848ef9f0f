//! The reference backend: every op in plain candle ops on any candle device
//! (matmuls through candle's quantized or float matmul, attention as
//! matmul + softmax over keys gathered from a slot-indexed cache). Slower
//! than a device's own backend and allocating freely; it is the independent
//! implementation the tests hold the fast backends to.

use candle_core::{DType, Device, Tensor, D};

use super::{AttentionSpec, Backend, Glu, KvGeometry};
use crate::config::RopeStyle;
use crate::layers::{Embedding, Linear, RmsNorm, Rope};
use crate::step::Step;
use crate::{ModelError, Result};

pub struct ReferenceBackend {
    device: Device,
    kv: KvGeometry,
    /// Per layer, keys and values by slot: `[num_blocks * block_size,
    /// n_kv_heads * head_dim]` f32.
    keys: Vec<Tensor>,
    values: Vec<Tensor>,
    /// Per RoPE of the model, `cos`/`sin` `[tokens, 1, rot / 2]`.
    rope_tables: Vec<(Tensor, Tensor)>,
    /// Each token's slot, `[tokens]` u32.
    slots: Option<Tensor>,
    /// Per chunk, the slots of its positions `0..start_pos + len`.
    gathers: Vec<Tensor>,
    host: Vec<f32>,
}

impl ReferenceBackend {
    pub fn new(kv: KvGeometry, device: &Device) -> Result<Self> {
        let slots = kv
            .num_blocks
            .checked_mul(kv.block_size)
            .filter(|&s| s > 0 && s <= u32::MAX as usize)
            .ok_or_else(|| ModelError::InvalidConfig(format!("KV cache {kv:?}")))?;
        let zeros = || Tensor::zeros((slots, kv.n_kv_heads * kv.head_dim), DType::F32, device);
        let keys = (0..kv.n_layers)
            .map(|_| zeros())
            .collect::<Result<_, _>>()?;
        let values = (0..kv.n_layers)
            .map(|_| zeros())
            .collect::<Result<_, _>>()?;
        Ok(Self {
            device: device.clone(),
            kv,
            keys,
            values,
            rope_tables: Vec::new(),
            slots: None,
            gathers: Vec::new(),
            host: Vec::new(),
        })
    }
}

fn get(x: &Option<Tensor>) -> Result<&Tensor> {
    x.as_ref()
        .ok_or_else(|| ModelError::InvalidBatch("reading an activation never written".into()))
}

fn tables(rope: &Rope, positions: &[usize], device: &Device) -> Result<(Tensor, Tensor)> {
    let (cos, sin) = rope.raw_tables(positions);
    let shape = (positions.len(), 1, rope.dim() / 2);
    Ok((
        Tensor::from_vec(cos, shape, device)?,
        Tensor::from_vec(sin, shape, device)?,
    ))
}

impl Backend for ReferenceBackend {
    type Act = Option<Tensor>;

    fn num_blocks(&self) -> usize {
        self.kv.num_blocks
    }

    fn begin_step(&mut self, step: &Step, ropes: &[Rope]) -> Result<()> {
        self.rope_tables = ropes
            .iter()
            .map(|rope| tables(rope, step.positions(), &self.device))
            .collect::<Result<_>>()?;
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

    fn embed(&mut self, table: &Embedding, tokens: &[u32], out: &mut Self::Act) -> Result<()> {
        *out = Some(table.forward(tokens, &self.device)?);
        Ok(())
    }

    fn scale(&mut self, x: &mut Self::Act, factor: f32) -> Result<()> {
        *x = Some((get(x)? * factor as f64)?);
        Ok(())
    }

    fn rms_norm(&mut self, x: &Self::Act, norm: &RmsNorm, out: &mut Self::Act) -> Result<()> {
        let x = get(x)?;
        let rows = x.contiguous()?.reshape(((), norm.dim()))?;
        let y = candle_nn::ops::rms_norm(&rows, norm.weight(), norm.eps())?;
        *out = Some(y.reshape(x.shape())?);
        Ok(())
    }

    fn matmul(&mut self, x: &Self::Act, w: &Linear, out: &mut Self::Act) -> Result<()> {
        *out = Some(w.forward(get(x)?)?);
        Ok(())
    }

    fn split(
        &mut self,
        x: &Self::Act,
        widths: &[usize],
        outs: &mut [&mut Self::Act],
    ) -> Result<()> {
        let x = get(x)?;
        let mut start = 0;
        for (&width, out) in widths.iter().zip(outs.iter_mut()) {
            **out = Some(x.narrow(1, start, width)?.contiguous()?);
            start += width;
        }
        Ok(())
    }

    fn rope(
        &mut self,
        x: &mut Self::Act,
        rope: &Rope,
        index: usize,
        head_dim: usize,
    ) -> Result<()> {
        let (cos, sin) = self
            .rope_tables
            .get(index)
            .ok_or_else(|| ModelError::InvalidBatch(format!("no RoPE table {index}")))?;
        let t = get(x)?;
        let (tokens, width) = t.dims2()?;
        let heads = width / head_dim;
        let t = t.reshape((tokens, heads, head_dim))?;
        let rot = rope.dim();
        // Each token is its own "batch" of one position so positions may
        // differ freely.
        let rotate = |x: &Tensor| -> Result<Tensor> {
            let x = x.reshape((tokens, heads, 1, rot))?.contiguous()?;
            let y = match rope.style() {
                RopeStyle::Interleaved => candle_nn::rotary_emb::rope_i(&x, cos, sin)?,
                RopeStyle::Halves => candle_nn::rotary_emb::rope(&x, cos, sin)?,
            };
            Ok(y.reshape((tokens, heads, rot))?)
        };
        let y = if rot == head_dim {
            rotate(&t)?
        } else {
            let rotated = rotate(&t.narrow(2, 0, rot)?)?;
            Tensor::cat(&[&rotated, &t.narrow(2, rot, head_dim - rot)?], 2)?
        };
        *x = Some(y.reshape((tokens, width))?);
        Ok(())
    }

    fn glu(
        &mut self,
        gate: &Self::Act,
        up: &Self::Act,
        glu: Glu,
        out: &mut Self::Act,
    ) -> Result<()> {
        let gate = get(gate)?;
        let act = match glu {
            Glu::Silu => candle_nn::ops::silu(gate)?,
            Glu::GeluGgml | Glu::GeluTanh => gate.gelu()?,
        };
        *out = Some((act * get(up)?)?);
        Ok(())
    }

    fn add(&mut self, x: &mut Self::Act, y: &Self::Act) -> Result<()> {
        *x = Some((get(x)? + get(y)?)?);
        Ok(())
    }

    fn softcap(&mut self, x: &mut Self::Act, cap: f32) -> Result<()> {
        *x = Some(soft_capped(get(x)?, cap)?);
        Ok(())
    }

    fn attend(
        &mut self,
        layer: usize,
        spec: &AttentionSpec,
        step: &Step,
        q: &Self::Act,
        k: &Self::Act,
        v: &Self::Act,
        out: &mut Self::Act,
    ) -> Result<()> {
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
        keys.scatter_set(&index, &get(k)?.contiguous()?, 0)?;
        values.scatter_set(&index, &get(v)?.contiguous()?, 0)?;
        let q = get(q)?;
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
        *out = Some(Tensor::cat(&outputs, 0)?);
        Ok(())
    }

    fn select_rows(&mut self, x: &mut Self::Act, rows: &[usize], _width: usize) -> Result<()> {
        let rows: Vec<u32> = rows.iter().map(|&r| r as u32).collect();
        let rows = Tensor::new(rows.as_slice(), &self.device)?;
        *x = Some(get(x)?.index_select(&rows, 0)?);
        Ok(())
    }

    fn read<'a>(&'a mut self, x: &'a Self::Act) -> Result<&'a [f32]> {
        self.host = get(x)?
            .to_dtype(DType::F32)?
            .flatten_all()?
            .to_vec1::<f32>()?;
        Ok(&self.host)
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

/// `cap * tanh(x / cap)`, as transformers computes it.
fn soft_capped(x: &Tensor, cap: f32) -> Result<Tensor> {
    Ok(((x / cap as f64)?.tanh()? * cap as f64)?)
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
