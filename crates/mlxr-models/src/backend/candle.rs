//! Candle's ops as a backend, on any candle device: embedding, norms,
//! RoPE, matmuls (candle's quantized or float matmul), activations. What
//! each user of it brings is a [`CandleDevice`]: the KV cache with its
//! attention, and any matmuls of its own. The reference backend gathers keys
//! into dense matmuls ([`super::reference`]); the CUDA backend runs its own
//! paged attention and quantized matmul kernels ([`super::cuda`]).

use candle_core::{DType, Device, Tensor};

use super::step_buffer::StepBuffer;
use super::{AttentionSpec, Backend, Glu, KvGeometry};
use crate::config::RopeStyle;
use crate::layers::{Embedding, Linear, RmsNorm, Rope};
use crate::pass::Activations;
use crate::step::Step;
use crate::{ModelError, Result};

/// What [`CandleDevice::replay`] did with a step.
pub enum Replay {
    /// Replayed a record of the pass: the step's logits.
    Done(Tensor),
    /// Record the pass, then replay the record.
    Record,
    /// Run the pass, keeping what candle's ops upload (shapes and strides)
    /// for a recording of the next step like it.
    Warm,
    /// Run the pass.
    Run,
}

/// While alive, candle's ops keep the small host data they upload (their
/// shapes and strides) on the device, keyed by its contents: a recorded
/// pass must not copy from host memory, which is gone by its replay.
pub struct KeptUploads(#[allow(dead_code)] Box<dyn std::any::Any>);

impl KeptUploads {
    pub fn new(guard: impl std::any::Any) -> Self {
        Self(Box::new(guard))
    }
}

/// What a device brings to [`CandleBackend`]: a KV cache with its
/// attention, and optionally its own matmuls.
pub trait CandleDevice {
    fn geometry(&self) -> &KvGeometry;

    /// Uploads what every layer's attention reads for `step`. `moves`
    /// counts the moves of the backend's own step buffers so far (see
    /// [`StepBuffer`]).
    fn begin_step(&mut self, step: &Step, moves: u64) -> Result<()>;

    /// Replays a recorded pass for `step`, or says to record or run it (see
    /// [`Backend::execute`]); devices without records run every step.
    fn replay(&mut self, _step: &Step) -> Result<Replay> {
        Ok(Replay::Run)
    }

    /// Keeps candle's uploads for [`Replay::Warm`] and [`Replay::Record`].
    fn keep_uploads(&self) -> Result<Option<KeptUploads>> {
        Ok(None)
    }

    /// Starts recording the ops that follow (after [`Replay::Record`]).
    fn begin_record(&mut self, _step: &Step) -> Result<()> {
        Err(ModelError::InvalidBatch(
            "this device records no steps".into(),
        ))
    }

    /// Ends the recording, whatever `ran` (the pass's logits or error), and
    /// replays it once: the step's logits. On an error the tensors made while
    /// recording are invalid: the device forgets those it holds.
    fn end_record(&mut self, ran: Result<Tensor>) -> Result<Tensor> {
        ran
    }

    /// Stores `k`, `v` in the step's slots of `layer`, then attends `q`
    /// (see [`Backend::attend`]); returns `[tokens, n_heads * head_dim]`.
    fn attend(
        &mut self,
        layer: usize,
        spec: &AttentionSpec,
        step: &Step,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
    ) -> Result<Tensor>;

    /// `x Wᵀ (+ b)`; candle's matmul unless the device has a kernel for `w`.
    fn matmul(&mut self, x: &Tensor, w: &Linear) -> Result<Tensor> {
        w.forward(x)
    }

    /// `x W_jᵀ (+ b_j)` for each of `ws` (projections of one input).
    fn matmuls(&mut self, x: &Tensor, ws: &[Linear]) -> Result<Vec<Tensor>> {
        ws.iter().map(|w| self.matmul(x, w)).collect()
    }

    /// RMSNorm over rows of `norm.dim()`; candle's unless the device has its
    /// own.
    fn rms_norm(&mut self, x: &Tensor, norm: &RmsNorm) -> Result<Tensor> {
        candle_rms_norm(x, norm)
    }

    /// `x + y` and its RMSNorm; candle's ops unless the device fuses them.
    fn add_rms_norm(&mut self, x: &Tensor, y: &Tensor, norm: &RmsNorm) -> Result<(Tensor, Tensor)> {
        let sum = (x + y)?;
        let normed = self.rms_norm(&sum, norm)?;
        Ok((sum, normed))
    }

    /// `q` and `k` rotated by the step's `tables` (`cos`, `sin`); candle's
    /// RoPE unless the device has its own.
    fn rope(
        &mut self,
        q: &Tensor,
        k: &Tensor,
        tables: (&Tensor, &Tensor),
        rope: &Rope,
        head_dim: usize,
    ) -> Result<(Tensor, Tensor)> {
        candle_rope(q, k, tables, rope, head_dim)
    }

    /// `act(gate) · up`; candle's ops unless the device has its own.
    fn glu(&mut self, gate: &Tensor, up: &Tensor, glu: Glu) -> Result<Tensor> {
        candle_glu(gate, up, glu)
    }

    /// `x`'s values on the host, row-major, copied into `host` unless the
    /// device has a buffer of its own.
    fn read<'a>(&'a mut self, x: &Tensor, host: &'a mut Vec<f32>) -> Result<&'a [f32]> {
        *host = x.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
        Ok(host)
    }
}

pub(super) fn candle_rms_norm(x: &Tensor, norm: &RmsNorm) -> Result<Tensor> {
    let rows = x.contiguous()?.reshape(((), norm.dim()))?;
    let y = candle_nn::ops::rms_norm(&rows, norm.weight(), norm.eps())?;
    Ok(y.reshape(x.shape())?)
}

/// `q` and `k` (`[tokens, heads * head_dim]`) rotated by `cos`, `sin`
/// `[tokens, 1, rot / 2]` with candle's RoPE.
pub(super) fn candle_rope(
    q: &Tensor,
    k: &Tensor,
    tables: (&Tensor, &Tensor),
    rope: &Rope,
    head_dim: usize,
) -> Result<(Tensor, Tensor)> {
    Ok((
        rotated(q, tables, rope, head_dim)?,
        rotated(k, tables, rope, head_dim)?,
    ))
}

fn rotated(
    x: &Tensor,
    (cos, sin): (&Tensor, &Tensor),
    rope: &Rope,
    head_dim: usize,
) -> Result<Tensor> {
    let (tokens, width) = x.dims2()?;
    let heads = width / head_dim;
    let t = x.reshape((tokens, heads, head_dim))?;
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
    Ok(y.reshape((tokens, width))?)
}

pub(super) fn candle_glu(gate: &Tensor, up: &Tensor, glu: Glu) -> Result<Tensor> {
    let act = match glu {
        Glu::Silu => candle_nn::ops::silu(gate)?,
        Glu::GeluGgml | Glu::GeluTanh => gate.gelu()?,
    };
    Ok((act * up)?)
}

pub struct CandleBackend<A> {
    device: Device,
    kernels: A,
    /// Per RoPE of the model, `cos`/`sin` `[tokens, 1, rot / 2]`: views of
    /// `tables`.
    rope_tables: Vec<(Tensor, Tensor)>,
    tables: StepBuffer<f32>,
    /// The step's token ids on the device.
    ids: Option<Tensor>,
    ids_buf: StepBuffer<u32>,
    host: Vec<f32>,
}

impl<A: CandleDevice> CandleBackend<A> {
    pub fn with_kernels(kernels: A, device: &Device) -> Self {
        Self {
            device: device.clone(),
            kernels,
            rope_tables: Vec::new(),
            tables: StepBuffer::default(),
            ids: None,
            ids_buf: StepBuffer::default(),
            host: Vec::new(),
        }
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    pub fn kernels_mut(&mut self) -> &mut A {
        &mut self.kernels
    }
}

fn get(x: &Option<Tensor>) -> Result<&Tensor> {
    x.as_ref()
        .ok_or_else(|| ModelError::InvalidBatch("reading an activation never written".into()))
}

impl<A: CandleDevice> Backend for CandleBackend<A> {
    type Act = Option<Tensor>;

    fn execute(
        &mut self,
        step: &Step,
        acts: &mut Activations<Self>,
        mut pass: impl FnMut(&mut Self, &mut Activations<Self>) -> Result<()>,
    ) -> Result<()> {
        match self.kernels.replay(step)? {
            Replay::Run => pass(self, acts),
            Replay::Warm => {
                let _kept = self.kernels.keep_uploads()?;
                pass(self, acts)
            }
            Replay::Done(logits) => {
                acts.logits = Some(logits);
                Ok(())
            }
            Replay::Record => {
                // No tensor made before the recording may be freed inside
                // it: the last step's activations go after it.
                let earlier = std::mem::take(acts);
                let kept = self.kernels.keep_uploads()?;
                self.kernels.begin_record(step)?;
                let ran = pass(self, acts).and_then(|()| Ok(get(&acts.logits)?.clone()));
                let recorded = self.kernels.end_record(ran);
                drop(kept);
                drop(earlier);
                match recorded {
                    Ok(logits) => {
                        acts.logits = Some(logits);
                        Ok(())
                    }
                    Err(_) => {
                        // The recording's tensors point at memory of a graph
                        // that never was: never free them. The pass runs
                        // plainly (an error in it comes back again).
                        std::mem::forget(std::mem::take(acts));
                        pass(self, acts)
                    }
                }
            }
        }
    }

    fn num_blocks(&self) -> usize {
        self.kernels.geometry().num_blocks
    }

    fn synchronize(&mut self) -> Result<()> {
        Ok(self.device.synchronize()?)
    }

    fn begin_step(&mut self, step: &Step, ropes: &[Rope]) -> Result<()> {
        // Every RoPE's cos and sin tables in one upload.
        let positions = step.positions();
        let (mut cos, mut sin) = (Vec::new(), Vec::new());
        self.host.clear();
        for rope in ropes {
            rope.fill_tables(positions, &mut cos, &mut sin);
            self.host.extend_from_slice(&cos);
            self.host.extend_from_slice(&sin);
        }
        let all = self.tables.put(&self.host, &self.device)?;
        let mut at = 0;
        self.rope_tables.clear();
        for rope in ropes {
            let shape = (positions.len(), 1, rope.dim() / 2);
            let n = shape.0 * shape.2;
            self.rope_tables.push((
                all.narrow(0, at, n)?.reshape(shape)?,
                all.narrow(0, at + n, n)?.reshape(shape)?,
            ));
            at += 2 * n;
        }
        self.ids = Some(self.ids_buf.put(step.tokens(), &self.device)?);
        self.kernels
            .begin_step(step, self.tables.moves() + self.ids_buf.moves())
    }

    fn embed(&mut self, table: &Embedding, tokens: &[u32], out: &mut Self::Act) -> Result<()> {
        let x = match &self.ids {
            Some(ids) if table.gathers_on_device() && ids.dim(0)? == tokens.len() => {
                table.forward_ids(ids)?
            }
            _ => table.forward(tokens, &self.device)?,
        };
        *out = Some(x);
        Ok(())
    }

    fn scale(&mut self, x: &mut Self::Act, factor: f32) -> Result<()> {
        *x = Some((get(x)? * factor as f64)?);
        Ok(())
    }

    fn rms_norm(&mut self, x: &Self::Act, norm: &RmsNorm, out: &mut Self::Act) -> Result<()> {
        *out = Some(self.kernels.rms_norm(get(x)?, norm)?);
        Ok(())
    }

    fn matmul(&mut self, x: &Self::Act, w: &Linear, out: &mut Self::Act) -> Result<()> {
        *out = Some(self.kernels.matmul(get(x)?, w)?);
        Ok(())
    }

    fn matmuls(&mut self, x: &Self::Act, ws: &[Linear], outs: &mut [&mut Self::Act]) -> Result<()> {
        let ys = self.kernels.matmuls(get(x)?, ws)?;
        for (y, out) in ys.into_iter().zip(outs.iter_mut()) {
            **out = Some(y);
        }
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
        q: &mut Self::Act,
        k: &mut Self::Act,
        rope: &Rope,
        index: usize,
        head_dim: usize,
    ) -> Result<()> {
        let (cos, sin) = self
            .rope_tables
            .get(index)
            .ok_or_else(|| ModelError::InvalidBatch(format!("no RoPE table {index}")))?;
        let (qr, kr) = self
            .kernels
            .rope(get(q)?, get(k)?, (cos, sin), rope, head_dim)?;
        *q = Some(qr);
        *k = Some(kr);
        Ok(())
    }

    fn glu(
        &mut self,
        gate: &Self::Act,
        up: &Self::Act,
        glu: Glu,
        out: &mut Self::Act,
    ) -> Result<()> {
        *out = Some(self.kernels.glu(get(gate)?, get(up)?, glu)?);
        Ok(())
    }

    fn add(&mut self, x: &mut Self::Act, y: &Self::Act) -> Result<()> {
        *x = Some((get(x)? + get(y)?)?);
        Ok(())
    }

    fn add_rms_norm(
        &mut self,
        x: &mut Self::Act,
        y: &Self::Act,
        norm: &RmsNorm,
        out: &mut Self::Act,
    ) -> Result<()> {
        let (sum, normed) = self.kernels.add_rms_norm(get(x)?, get(y)?, norm)?;
        *x = Some(sum);
        *out = Some(normed);
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
        *out = Some(
            self.kernels
                .attend(layer, spec, step, get(q)?, get(k)?, get(v)?)?,
        );
        Ok(())
    }

    fn select_rows(&mut self, x: &mut Self::Act, rows: &[usize], _width: usize) -> Result<()> {
        let all = get(x)?.dim(0)?;
        if rows.len() == all && rows.iter().enumerate().all(|(i, &r)| i == r) {
            return Ok(());
        }
        let rows: Vec<u32> = rows.iter().map(|&r| r as u32).collect();
        let rows = Tensor::new(rows.as_slice(), &self.device)?;
        *x = Some(get(x)?.index_select(&rows, 0)?);
        Ok(())
    }

    fn read<'a>(&'a mut self, x: &'a Self::Act) -> Result<&'a [f32]> {
        self.kernels.read(get(x)?, &mut self.host)
    }
}

/// `cap * tanh(x / cap)`, as transformers computes it.
pub(super) fn soft_capped(x: &Tensor, cap: f32) -> Result<Tensor> {
    Ok(((x / cap as f64)?.tanh()? * cap as f64)?)
}

/// Per layer, zeroed keys and values by slot: `[num_blocks * block_size,
/// n_kv_heads * head_dim]` of `dtype`.
pub(super) fn slot_caches(
    kv: &KvGeometry,
    dtype: DType,
    device: &Device,
) -> Result<(Vec<Tensor>, Vec<Tensor>)> {
    let slots = kv
        .num_blocks
        .checked_mul(kv.block_size)
        .filter(|&s| s > 0 && s <= u32::MAX as usize)
        .ok_or_else(|| ModelError::InvalidConfig(format!("KV cache {kv:?}")))?;
    let layer = || Tensor::zeros((slots, kv.n_kv_heads * kv.head_dim), dtype, device);
    let keys = (0..kv.n_layers)
        .map(|_| layer())
        .collect::<Result<_, _>>()?;
    let values = (0..kv.n_layers)
        .map(|_| layer())
        .collect::<Result<_, _>>()?;
    Ok((keys, values))
}
