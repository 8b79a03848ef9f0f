//! The launches of kernels/paged_attention.cu: the cache write (keys and
//! values in one launch) and the attention (a candle [`CustomOp3`]), whose
//! prefill steps take kernels/flash_prefill.cu where it applies.

use std::cell::RefCell;

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};
use candle_core::cuda_backend::{CudaStorage, WrapErr};
use candle_core::{CpuStorage, CustomOp3, DType, Device, Layout, Shape, Storage, Tensor};

use super::super::AttentionSpec;
use super::launch::{Args, Launch};
use super::quant_matmul::{q8_bytes, q8_parts, scale_block};
use crate::backend::step_buffer::StepBuffer;
use crate::step::Step;
use crate::{ModelError, Result};

/// The kernels, compiled to PTX by build.rs.
pub const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/paged_attention.ptx"));
const MODULE: &str = "mlxr_paged_attention";
const FLASH_PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/flash_prefill.ptx"));
const FLASH_MODULE: &str = "mlxr_flash_prefill";
pub const MAX_GROUP: usize = 8;
pub const MAX_HEAD_DIM: usize = 256;
const THREADS: u32 = 128;
/// In steps of up to `SPLIT_TOKENS` tokens (and decode steps of up to
/// `DECODE_TOKENS` sequences), a token of context c splits its keys into
/// min(`MAX_SPLITS`, ceil(c / `MIN_CHUNK`)) blocks (longer steps have
/// blocks enough with one split per token). The launch has
/// `MAX_SPLITS` blocks per token and KV head whatever the contexts (those
/// past a token's own splits return at once), so a recorded step (CUDA
/// graph) serves every context.
pub const MIN_CHUNK: usize = 16;

/// The decode kernel's shape where debug knobs move it.
#[derive(Clone, Copy, Debug)]
pub struct DecodeTuning {
    /// The fewest keys a split ([`MIN_CHUNK`]).
    pub min_chunk: usize,
    /// The smallest query group the kernel's registers are sized for (1,
    /// 2, 4 or 8; the model's own group rounded up to a power of two when
    /// larger).
    pub group_floor: usize,
}

impl Default for DecodeTuning {
    fn default() -> Self {
        Self {
            min_chunk: MIN_CHUNK,
            group_floor: 1,
        }
    }
}
const MAX_SPLITS: usize = 32;
/// The most splits the last block of a (token, KV head) merges (a lane
/// each).
const _: () = assert!(MAX_SPLITS <= 32);
pub const SPLIT_TOKENS: usize = 8;
/// Steps of more tokens take the same split decode kernel where each
/// sequence has one token (many sequences decoding), up to this many: the
/// prefill kernels would stage runs of one token, unsplit.
pub const DECODE_TOKENS: usize = 64;
/// Steps of more tokens (prefill) take `paged_prefill`, which stages each
/// run of a sequence's consecutive tokens' keys in shared memory once: runs
/// of at most `RUN` tokens, each block `PREFILL_PAIRS / group` of them (the
/// kernel's constants), for head dimensions up to `PREFILL_HEAD_DIM`
/// divisible by 8 (keys move in 16-byte pieces).
const RUN: usize = 32;
const PREFILL_PAIRS: usize = 24;
const PREFILL_HEAD_DIM: usize = 128;
/// `flash_prefill`'s rows (token, query head) a block (`FLASH_ROWS` there).
const FLASH_ROWS: usize = 64;

/// The kernel of prefill steps: on tensor cores (`flash_prefill`, f16 and
/// bf16 caches, head dimensions 64 and 128; the default, 5.8x
/// `paged_prefill`'s speed on a Llama-8B-shaped pp512) or with f32
/// arithmetic (`paged_prefill`, every cache type and head dimensions up to
/// 128, where flash does not apply). The debug knob `MLXR_CUDA_PREFILL`
/// (`simt`, `flash`) picks one; tests/gpu holds flash to simt's distance
/// from an f32 cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PrefillAttention {
    #[default]
    Flash,
    Simt,
}

impl std::str::FromStr for PrefillAttention {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "flash" => Ok(Self::Flash),
            "simt" => Ok(Self::Simt),
            other => Err(format!("MLXR_CUDA_PREFILL={other}: give flash or simt")),
        }
    }
}

impl PrefillAttention {
    fn flash(self, dtype: DType, head_dim: usize) -> bool {
        self == Self::Flash
            && matches!(dtype, DType::F16 | DType::BF16)
            && matches!(head_dim, 64 | 128)
    }
}

/// One step's metadata in one device buffer of u32 (kept from step to step:
/// [`StepBuffer`]): slots, positions and sequence indices per token, then
/// each sequence's block-table start, then (prefill steps) the first token
/// of each run of consecutive tokens and the token count, then the block
/// tables.
pub struct StepMeta {
    buf: Tensor,
    /// `DECODE_TOKENS * n_kv_heads` u32 counters, 0 between launches: the
    /// decode kernel's blocks of a (token, KV head) take a ticket each, the
    /// last merges their splits and sets the counter back to 0.
    tickets: Tensor,
    tokens: usize,
    seqs: usize,
    /// Runs for `paged_prefill` (0: the step takes the decode kernel).
    runs: usize,
    /// The decode kernel splits each token's keys over blocks: a step of at
    /// most `SPLIT_TOKENS` tokens, or of at most `DECODE_TOKENS` sequences
    /// of one token each.
    split: bool,
    /// The decode kernel stores the new keys and values itself (a split
    /// step, each sequence's tokens in consecutive rows at consecutive
    /// positions).
    inline_write: bool,
}

impl StepMeta {
    pub fn upload(
        step: &Step,
        host: &mut Vec<u32>,
        buf: &mut StepBuffer<u32>,
        tickets: &Tensor,
        decode_tokens: usize,
        device: &Device,
    ) -> Result<Self> {
        let tokens = step.slots().len();
        host.clear();
        host.extend_from_slice(step.slots());
        host.extend(step.positions().iter().map(|&p| p as u32));
        for (i, seq) in step.seqs().iter().enumerate() {
            host.extend(std::iter::repeat_n(i as u32, seq.len));
        }
        host.extend(step.seqs().iter().map(|s| s.table_start as u32));
        let split = tokens <= SPLIT_TOKENS
            || (tokens <= decode_tokens.min(DECODE_TOKENS) && tokens == step.seqs().len());
        let runs = if !split {
            let at = host.len();
            let positions = step.positions();
            let mut first = 0;
            for t in 0..tokens {
                let seq = host[2 * tokens + t];
                if t == 0
                    || seq != host[2 * tokens + t - 1]
                    || positions[t] != positions[t - 1] + 1
                    || t - first == RUN
                {
                    host.push(t as u32);
                    first = t;
                }
            }
            host.push(tokens as u32);
            host.len() - at - 1
        } else {
            0
        };
        let run_entries = if runs > 0 { runs + 1 } else { 0 };
        let positions = step.positions();
        let inline_write = split
            && (1..tokens).all(|t| {
                host[2 * tokens + t] != host[2 * tokens + t - 1]
                    || positions[t] == positions[t - 1] + 1
            });
        host.extend_from_slice(step.block_ids());
        if host.len() != 3 * tokens + step.seqs().len() + run_entries + step.block_ids().len() {
            return Err(ModelError::InvalidBatch(
                "step metadata of unequal lengths".into(),
            ));
        }
        Ok(Self {
            buf: buf.put(host, device)?,
            tickets: tickets.clone(),
            tokens,
            seqs: step.seqs().len(),
            runs,
            split,
            inline_write,
        })
    }

    /// Whether [`Self::attend`] stores the step's new keys and values (no
    /// [`Self::write`] first).
    pub fn writes_inline(&self) -> bool {
        self.inline_write
    }

    /// Stores the new keys `k` and values `v` (`[tokens, width]` f32) in
    /// `keys` and `values` at the step's slots, in one launch.
    pub fn write(&self, keys: &Tensor, values: &Tensor, k: &Tensor, v: &Tensor) -> Result<()> {
        let (tokens, width) = k.dims2()?;
        let caches = [keys, values];
        if tokens == 0 {
            return Ok(());
        }
        if tokens != self.tokens
            || v.dims2()? != (tokens, width)
            || [k, v].iter().any(|t| t.dtype() != DType::F32)
            || caches.iter().any(|c| {
                c.dims2().map_or(true, |(_, w)| w != width)
                    || c.dtype() != keys.dtype()
                    || c.layout().start_offset() != 0
                    || !c.is_contiguous()
            })
        {
            return Err(ModelError::InvalidBatch(format!(
                "cache write of {:?} and {:?} into {:?}",
                k.shape(),
                v.shape(),
                keys.shape()
            )));
        }
        let (k, v) = (k.contiguous()?, v.contiguous()?);
        let guards: Vec<_> = [&k, &v, keys, values, &self.buf]
            .iter()
            .map(|t| t.storage_and_layout())
            .collect();
        let cuda = |i: usize| match &*guards[i].0 {
            Storage::Cuda(s) => Ok(s),
            _ => Err(cpu_only("the cache write")),
        };
        let dev = cuda(0)?.device().clone();
        let name = format!("cache_write_{}", suffix(keys.dtype())?);
        let func = dev.get_or_load_custom_func(&name, MODULE, PTX)?;
        let src = |i: usize| -> candle_core::Result<_> {
            Ok(cuda(i)?
                .as_cuda_slice::<f32>()?
                .slice(guards[i].1.start_offset()..))
        };
        let (k, v) = (src(0)?, src(1)?);
        let slots = cuda(4)?
            .as_cuda_slice::<u32>()?
            .slice(guards[4].1.start_offset()..);
        let chunks = width.div_ceil(4 * THREADS as usize) as u32;
        let width = i32_of(width)?;
        let cfg = LaunchConfig {
            grid_dim: (tokens as u32, 2, chunks),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        macro_rules! launch {
            ($t:ty) => {{
                let mut b = func.builder();
                let (kc, vc) = (
                    cuda(2)?.as_cuda_slice::<$t>()?,
                    cuda(3)?.as_cuda_slice::<$t>()?,
                );
                b.arg(&k).arg(&v).arg(kc).arg(vc).arg(&slots).arg(&width);
                // SAFETY: the kernel writes `width` values at each of the
                // `tokens` slots of each cache, all below its length (the
                // step's blocks were checked against the cache's block
                // count). The caches are written through shared borrows:
                // device memory no host reference points into, and this
                // stream orders the write before any later read.
                unsafe { b.launch(cfg) }.w()?;
            }};
        }
        match keys.dtype() {
            DType::F32 => launch!(f32),
            DType::F16 => launch!(half::f16),
            DType::BF16 => launch!(half::bf16),
            other => return Err(candle_core::Error::Msg(format!("a KV cache of {other:?}")).into()),
        }
        Ok(())
    }

    /// The step's attention outputs `[tokens, n_heads * head_dim]` f32 for
    /// queries `q`, and with `quantize` (a decode step: see
    /// [`Self::quantizes`]) the same in 8 bits for the output projection.
    /// `new_kv`: the step's keys and values where [`Self::writes_inline`].
    #[allow(clippy::too_many_arguments)]
    pub fn attend(
        &self,
        q: &Tensor,
        keys: &Tensor,
        values: &Tensor,
        new_kv: Option<(&Tensor, &Tensor)>,
        quantize: bool,
        spec: &AttentionSpec,
        block_size: usize,
        prefill: PrefillAttention,
        decode: DecodeTuning,
        launch: Launch,
    ) -> Result<(Tensor, Option<Tensor>)> {
        let op = Attention {
            meta: self,
            spec: *spec,
            block_size,
            prefill,
            decode,
            launch,
            new_kv,
            quantize,
            q8: RefCell::new(None),
        };
        let out = q.apply_op3_no_bwd(keys, values, &op)?;
        let q8 = op.q8.into_inner().map(|(buf, dev)| {
            let bytes = buf.len();
            let storage = Storage::Cuda(CudaStorage::wrap_cuda_slice(buf, dev));
            Tensor::from_storage(storage, bytes, candle_core::op::BackpropOp::none(), false)
        });
        Ok((out, q8))
    }

    /// Whether the decode kernel can write its outputs in 8 bits too: a
    /// split step and query groups of whole super-blocks.
    pub fn quantizes(&self, spec: &AttentionSpec) -> bool {
        self.split && group_quantizes(spec)
    }
}

/// Whether a KV head's group of outputs (`n_heads / n_kv_heads · head_dim`
/// values) is whole blocks of the output projection's activation format
/// (quant_matmul's [`scale_block`] of the row's width): each (token, KV
/// head) block of the kernel quantizes its own group.
fn group_quantizes(spec: &AttentionSpec) -> bool {
    let group = spec.n_heads / spec.n_kv_heads * spec.head_dim;
    group.is_multiple_of(scale_block(spec.n_heads * spec.head_dim))
}

fn suffix(dtype: DType) -> candle_core::Result<&'static str> {
    Ok(match dtype {
        DType::F32 => "f32",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        other => candle_core::bail!("a KV cache of {other:?}"),
    })
}

fn cpu_only(name: &str) -> candle_core::Error {
    candle_core::Error::Msg(format!("{name} runs on CUDA devices only"))
}

fn i32_of(n: usize) -> candle_core::Result<i32> {
    i32::try_from(n)
        .map_err(|_| candle_core::Error::Msg(format!("{n} does not fit a kernel argument")))
}

/// Paged attention of the step's queries over their sequences' cached keys.
struct Attention<'a> {
    meta: &'a StepMeta,
    spec: AttentionSpec,
    block_size: usize,
    prefill: PrefillAttention,
    decode: DecodeTuning,
    /// How the decode kernel follows the kernel before it.
    launch: Launch,
    /// The new keys and values the decode kernel stores and reads itself.
    new_kv: Option<(&'a Tensor, &'a Tensor)>,
    /// Whether the decode kernel also writes its outputs in 8 bits, into `q8`.
    quantize: bool,
    q8: RefCell<Option<(CudaSlice<u8>, candle_core::cuda_backend::CudaDevice)>>,
}

impl CustomOp3 for Attention<'_> {
    fn name(&self) -> &'static str {
        "mlxr-paged-attention"
    }

    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        Err(cpu_only(self.name()))
    }

    fn cuda_fwd(
        &self,
        q: &CudaStorage,
        q_l: &Layout,
        keys: &CudaStorage,
        keys_l: &Layout,
        values: &CudaStorage,
        values_l: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let s = &self.spec;
        let tokens = self.meta.tokens;
        let width = s.n_heads * s.head_dim;
        if q_l.shape().dims2()? != (tokens, width) || !q_l.is_contiguous() {
            candle_core::bail!("queries {:?} for {tokens} tokens of {width}", q_l.shape());
        }
        if !keys_l.is_contiguous() || !values_l.is_contiguous() {
            candle_core::bail!("non-contiguous KV cache");
        }
        let dev = q.device().clone();
        // Each lane holds head_dim / 32 values, rounded up to 2, 4 or 8.
        let per_lane = s.head_dim.div_ceil(32).next_power_of_two().max(2);
        // The kernel for the query group rounded up to 1, 2, 4 or 8.
        let group = (s.n_heads / s.n_kv_heads)
            .next_power_of_two()
            .max(self.decode.group_floor);
        let name = format!(
            "paged_attention_{}_{per_lane}_g{group}",
            suffix(keys.dtype())?
        );
        // 8 warps a block up to 4 values a lane, 4 beyond (`NW` there).
        let attend_threads: u32 = if per_lane <= 4 { 256 } else { 128 };
        let func = dev.get_or_load_custom_func(&name, MODULE, PTX)?;
        let (meta, meta_l) = self.meta.buf.storage_and_layout();
        let Storage::Cuda(meta) = &*meta else {
            candle_core::bail!("step metadata off the GPU");
        };
        let meta = meta.as_cuda_slice::<u32>()?;
        let base = meta_l.start_offset();
        let (t, n) = (tokens, self.meta.seqs);
        let slots = meta.slice(base..base + t);
        let positions = meta.slice(base + t..base + 2 * t);
        let token_seq = meta.slice(base + 2 * t..base + 3 * t);
        let table_start = meta.slice(base + 3 * t..base + 3 * t + n);
        let runs = self.meta.runs;
        let run_entries = if runs > 0 { runs + 1 } else { 0 };
        let run_firsts = meta.slice(base + 3 * t + n..base + 3 * t + n + run_entries);
        let block_tables = meta.slice(base + 3 * t + n + run_entries..);
        let q = q.as_cuda_slice::<f32>()?.slice(q_l.start_offset()..);
        // SAFETY: every element is written by the kernel before it returns.
        let mut out = unsafe { dev.alloc::<f32>(tokens * width) }?;
        let (n_heads, n_kv_heads, head_dim) = (
            i32_of(s.n_heads)?,
            i32_of(s.n_kv_heads)?,
            i32_of(s.head_dim)?,
        );
        let block_size = i32_of(self.block_size)?;
        let window = i32_of(s.sliding_window.unwrap_or(0).min(i32::MAX as usize))?;
        let softcap = s.softcap.unwrap_or(0.0);
        let splits = if self.meta.split { MAX_SPLITS } else { 1 };
        let (tickets, _) = self.meta.tickets.storage_and_layout();
        let Storage::Cuda(tickets) = &*tickets else {
            candle_core::bail!("attention tickets off the GPU");
        };
        let tickets = tickets.as_cuda_slice::<u32>()?;
        if splits > 1 && tickets.len() < tokens * s.n_kv_heads {
            candle_core::bail!("{} attention tickets for {tokens} tokens", tickets.len());
        }
        // The splits' partial results: (max, sum) and the unnormalized
        // output per (token, head, split).
        let parts = if splits > 1 {
            tokens * s.n_heads * splits
        } else {
            1
        };
        // SAFETY: the kernel writes every split's entries before the merge
        // reads them (a split without keys writes max = -inf).
        let part_ml = unsafe { dev.alloc::<f32>(2 * parts) }?;
        let part_acc = unsafe { dev.alloc::<f32>(parts * s.head_dim) }?;
        let cfg = LaunchConfig {
            grid_dim: (tokens as u32, s.n_kv_heads as u32, splits as u32),
            block_dim: (attend_threads, 1, 1),
            shared_mem_bytes: 0,
        };
        let (min_chunk, max_splits) = (i32_of(self.decode.min_chunk.max(1))?, i32_of(MAX_SPLITS)?);
        let group = s.n_heads / s.n_kv_heads;
        if runs > 0
            && s.head_dim <= PREFILL_HEAD_DIM
            && s.head_dim.is_multiple_of(8)
            && (1..=PREFILL_PAIRS).contains(&group)
        {
            let (func, rows) = if self.prefill.flash(keys.dtype(), s.head_dim) {
                let name = format!("flash_prefill_{}_{}", suffix(keys.dtype())?, s.head_dim);
                let func = dev.get_or_load_custom_func(&name, FLASH_MODULE, FLASH_PTX)?;
                (func, FLASH_ROWS)
            } else {
                let name = format!("paged_prefill_{}_{per_lane}", suffix(keys.dtype())?);
                (
                    dev.get_or_load_custom_func(&name, MODULE, PTX)?,
                    PREFILL_PAIRS,
                )
            };
            let tq = (rows / group).min(RUN);
            let subruns = RUN.div_ceil(tq);
            let cfg = LaunchConfig {
                grid_dim: ((runs * subruns) as u32, s.n_kv_heads as u32, 1),
                block_dim: (128, 1, 1),
                shared_mem_bytes: 0,
            };
            let (tq, subruns) = (i32_of(tq)?, i32_of(subruns)?);
            macro_rules! prefill {
                ($t:ty) => {{
                    let keys = keys.as_cuda_slice::<$t>()?.slice(keys_l.start_offset()..);
                    let values = values
                        .as_cuda_slice::<$t>()?
                        .slice(values_l.start_offset()..);
                    let mut b = func.builder();
                    b.arg(&q)
                        .arg(&keys)
                        .arg(&values)
                        .arg(&mut out)
                        .arg(&positions)
                        .arg(&token_seq)
                        .arg(&table_start)
                        .arg(&block_tables)
                        .arg(&run_firsts)
                        .arg(&tq)
                        .arg(&subruns)
                        .arg(&n_heads)
                        .arg(&n_kv_heads)
                        .arg(&head_dim)
                        .arg(&block_size)
                        .arg(&s.scale)
                        .arg(&window)
                        .arg(&softcap);
                    // SAFETY: reads stay within the step's block tables
                    // (checked against the cache by the runner), the
                    // queries and the runs (each within the step's tokens);
                    // the runs cover every token once, so writes cover `out`
                    // exactly.
                    unsafe { b.launch(cfg) }.w()?;
                }};
            }
            match keys.dtype() {
                DType::F32 => prefill!(f32),
                DType::F16 => prefill!(half::f16),
                DType::BF16 => prefill!(half::bf16),
                other => candle_core::bail!("a KV cache of {other:?}"),
            }
            return Ok((
                CudaStorage::wrap_cuda_slice(out, dev),
                Shape::from((tokens, width)),
            ));
        }
        let new_kv = match self.new_kv {
            Some((k, v)) if self.meta.inline_write => {
                Some((k.storage_and_layout(), v.storage_and_layout()))
            }
            Some(_) => candle_core::bail!("new keys for a step that writes them first"),
            None => None,
        };
        let new_views = match &new_kv {
            Some(((k, k_l), (v, v_l))) => {
                let (Storage::Cuda(k), Storage::Cuda(v)) = (&**k, &**v) else {
                    candle_core::bail!("new keys off the GPU");
                };
                if k_l.shape().dims2()? != (tokens, s.n_kv_heads * s.head_dim)
                    || v_l.shape() != k_l.shape()
                    || !k_l.is_contiguous()
                    || !v_l.is_contiguous()
                {
                    candle_core::bail!("new keys {:?} and values {:?}", k_l.shape(), v_l.shape());
                }
                Some((
                    k.as_cuda_slice::<f32>()?.slice(k_l.start_offset()..),
                    v.as_cuda_slice::<f32>()?.slice(v_l.start_offset()..),
                ))
            }
            None => None,
        };
        if self.quantize && !group_quantizes(s) {
            candle_core::bail!(
                "8-bit attention outputs for groups of {}",
                group * s.head_dim
            );
        }
        // SAFETY: with `quantize` the kernel writes every quant, scale and
        // sum (each (token, KV head) writes its group's super-blocks).
        let q8 = if self.quantize && tokens > 0 {
            Some(unsafe { dev.alloc::<u8>(q8_bytes(tokens, width)) }?)
        } else {
            None
        };
        let q8_views = q8.as_ref().map(|buf| q8_parts(buf, tokens, width));
        let null = 0u64;
        macro_rules! launch {
            ($t:ty) => {{
                let keys = keys.as_cuda_slice::<$t>()?.slice(keys_l.start_offset()..);
                let values = values
                    .as_cuda_slice::<$t>()?
                    .slice(values_l.start_offset()..);
                let stream = dev.cuda_stream();
                let mut b = Args::new(&func, &stream);
                b.arg(&q)
                    .arg(&keys)
                    .arg(&values)
                    .arg(&out)
                    .arg(&part_ml)
                    .arg(&part_acc)
                    .arg(tickets)
                    .arg(&positions)
                    .arg(&token_seq)
                    .arg(&table_start)
                    .arg(&block_tables);
                match &new_views {
                    Some((k, v)) => b.arg(k).arg(v),
                    None => b.arg(&null).arg(&null),
                };
                b.arg(&slots);
                match &q8_views {
                    Some((qs, d, sums)) => b.arg(qs).arg(d).arg(sums),
                    None => b.arg(&null).arg(&null).arg(&null),
                };
                b.arg(&n_heads)
                    .arg(&n_kv_heads)
                    .arg(&head_dim)
                    .arg(&block_size)
                    .arg(&s.scale)
                    .arg(&window)
                    .arg(&softcap)
                    .arg(&min_chunk)
                    .arg(&max_splits);
                // SAFETY: reads stay within the step's block tables (checked
                // against the cache by the runner), the queries and the new
                // keys (rows of the token's own sequence); writes cover `out`
                // (and the Q8_K buffer) exactly, and with new keys each
                // token's slot (below the cache's length, as for `write`).
                unsafe { b.launch(cfg, self.launch) }?;
            }};
        }
        if tokens > 0 {
            match keys.dtype() {
                DType::F32 => launch!(f32),
                DType::F16 => launch!(half::f16),
                DType::BF16 => launch!(half::bf16),
                other => candle_core::bail!("a KV cache of {other:?}"),
            }
        }
        *self.q8.borrow_mut() = q8.map(|buf| (buf, dev.clone()));
        Ok((
            CudaStorage::wrap_cuda_slice(out, dev),
            Shape::from((tokens, width)),
        ))
    }
}
