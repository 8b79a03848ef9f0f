//! The CUDA backend: candle's ops on a CUDA device ([`CandleBackend`]:
//! cuBLAS, norms, RoPE, the quantized types we have no kernel for) with
//! kernels of our own where they matter:
//! - the KV cache in device memory as paged blocks of f16/bf16/f32 and
//!   attention over it (kernels/paged_attention.cu): one launch per layer for
//!   the whole mixed batch, reading each sequence's blocks through its block
//!   table (decode steps split each token's keys over blocks; prefill steps
//!   stage each run of consecutive tokens' keys in shared memory once); the
//!   step's metadata (slots, positions, block tables, prefill runs) is
//!   uploaded once per step, in one copy;
//! - Q4_K/Q6_K and Q4_0/Q4_1/Q5_0/Q8_0 matmuls of up to [`QUANT_ROWS`]
//!   rows (decode; at most 64, in tiles of 8 tokens) against activations
//!   quantized to 8 bits
//!   (kernels/quant_matmul.cu): for the K-quants the CPU backend's integer
//!   arithmetic, a token's result the same for every batch size up to 64;
//!   Q4_K/Q6_K steps of [`MMQ_FROM`] to [`MMQ_ROWS`] rows on the int8
//!   tensor cores (kernels/mmq.cu), the same bits as the decode kernels;
//! - F16 and BF16 matmuls of up to 8 rows against f32 activations
//!   (kernels/half_matvec.cu); longer steps go to cuBLAS;
//! - FP8 and bitsandbytes 4-bit weights kept in their codes, decoded inside
//!   the matmuls of up to 8 rows (kernels/decoded_matvec.cu); longer steps
//!   decode them to F16 for cuBLAS.

mod decoded;
mod graph;
mod half_matvec;
mod launch;
mod ops;
mod pinned;
mod quant_matmul;
mod rope;

use candle_core::quantized::QTensor;
use candle_core::{DType, Device, Tensor, TensorId};

use super::candle::{
    candle_glu, candle_rms_norm, candle_rope, slot_caches, CandleBackend, CandleDevice,
    KeptUploads, Replay,
};
use super::step_buffer::StepBuffer;
use super::{AttentionSpec, Glu, KvGeometry};
use crate::layers::{Linear, RmsNorm, Rope};
use crate::step::Step;
use crate::{ModelError, Result};

pub use decoded::CodedWeight;
pub use graph::{StepGraphs, MAX_RECORDED};
pub use launch::Launch;
pub use ops::PrefillAttention;
pub use ops::PTX;
use quant_matmul::Kernel;
pub use quant_matmul::{MatVec, BLOCK_PER_ROW_MOST};

pub type CudaBackend = CandleBackend<CudaKernels>;

/// CUDA device `ordinal` as the CUDA backend runs on it: one stream of its
/// own for every op from every thread (weights may load on another thread
/// than the one that steps the model), so candle's per-tensor events, which
/// order work across streams and cost host time on every op, are off.
pub fn device(ordinal: usize) -> Result<Device> {
    let device = Device::new_cuda_with_stream(ordinal)?;
    // SAFETY: every tensor of this device is used on its one stream only;
    // work on one stream runs in order, so no tensor is freed, read or
    // written before the work before it is done.
    unsafe { device.as_cuda_device()?.disable_event_tracking() };
    Ok(device)
}

impl CudaBackend {
    /// A cache of `kv` in `dtype` (F16, BF16 or F32) on `device`.
    /// The decode matmuls' shape is [`MatVec::default`], or the debug knob
    /// `MLXR_CUDA_MATVEC` (`block`, `warp`, `rows2`, `rows4`, `rows`, `rows:N`) that lets one binary benchmark
    /// each; likewise `MLXR_CUDA_F16_GEMM_ROWS` moves [`F16_GEMM_ROWS`],
    /// `MLXR_CUDA_F16_COPY_ROWS` [`F16_COPY_ROWS`] (and `MLXR_CUDA_F16_WEIGHTS`
    /// whether the copies are kept: [`keep_f16_copy`]),
    /// `MLXR_CUDA_QUANT_ROWS` (0 to 64) the most rows our Q8_K decode
    /// kernels take, `MLXR_CUDA_MMQ_FROM` and `MLXR_CUDA_MMQ_ROWS` (0 to 64)
    /// the fewest and most rows of Q4_K/Q6_K steps on the tensor cores (0:
    /// never), `MLXR_CUDA_GRAPH_ROWS` (0 to 64) the largest decode
    /// step recorded as a CUDA graph, `MLXR_CUDA_PREFILL` the [`PrefillAttention`] and
    /// `MLXR_CUDA_ATTN_CHUNK` the decode attention's fewest keys a split,
    /// `MLXR_CUDA_ATTN_GROUP` (1 to 8) the smallest query group its
    /// registers are sized for (8: one kernel for every model, as before
    /// the kernels were sized by the group),
    /// `MLXR_CUDA_DECODE_TOKENS` (0 to 64) the most sequences of a decode
    /// step the split decode attention takes, `MLXR_CUDA_PDL` (`on`, `off`)
    /// the [`Launch`] of our kernels.
    pub fn new(kv: KvGeometry, dtype: DType, device: &Device) -> Result<Self> {
        let mat_vec = match std::env::var("MLXR_CUDA_MATVEC") {
            Err(_) => MatVec::default(),
            Ok(name) => name.parse().map_err(ModelError::InvalidConfig)?,
        };
        let mut backend = Self::with_mat_vec(kv, dtype, device, mat_vec)?;
        let rows_knob = |name: &str, most: usize| -> Result<Option<usize>> {
            let Ok(rows) = std::env::var(name) else {
                return Ok(None);
            };
            match rows.parse() {
                Ok(n) if n <= most => Ok(Some(n)),
                _ => Err(ModelError::InvalidConfig(format!(
                    "{name}={rows}: not a number up to {most}"
                ))),
            }
        };
        if let Some(rows) = rows_knob("MLXR_CUDA_F16_GEMM_ROWS", usize::MAX)? {
            backend.kernels_mut().f16_gemm_rows = rows;
        }
        if let Some(rows) = rows_knob("MLXR_CUDA_F16_COPY_ROWS", usize::MAX)? {
            backend.kernels_mut().f16_copy_rows = rows;
        }
        if let Some(rows) = rows_knob("MLXR_CUDA_QUANT_ROWS", quant_matmul::MAX_ROWS)? {
            backend.kernels_mut().quant_rows = rows;
        }
        if let Some(rows) = rows_knob("MLXR_CUDA_MMQ_FROM", quant_matmul::MAX_ROWS)? {
            backend.kernels_mut().mmq_from = rows.max(1);
        }
        if let Some(rows) = rows_knob("MLXR_CUDA_MMQ_ROWS", quant_matmul::MAX_ROWS)? {
            backend.kernels_mut().mmq_rows = rows;
        }
        if let Some(rows) = rows_knob("MLXR_CUDA_GRAPH_ROWS", graph::MAX_RECORDED)? {
            backend.kernels_mut().graphs.set_most(rows);
        }
        if let Some(keys) = rows_knob("MLXR_CUDA_ATTN_CHUNK", 4096)? {
            backend.kernels_mut().attention.decode.min_chunk = keys.max(1);
        }
        if let Some(group) = rows_knob("MLXR_CUDA_ATTN_GROUP", ops::MAX_GROUP)? {
            backend.kernels_mut().attention.decode.group_floor = group.next_power_of_two();
        }
        if let Some(tokens) = rows_knob("MLXR_CUDA_DECODE_TOKENS", ops::DECODE_TOKENS)? {
            backend.kernels_mut().attention.decode_tokens = tokens;
        }
        if let Ok(name) = std::env::var("MLXR_CUDA_PDL") {
            backend.set_launch(name.parse().map_err(ModelError::InvalidConfig)?);
        }
        if let Ok(name) = std::env::var("MLXR_CUDA_PREFILL") {
            backend.kernels_mut().attention.prefill =
                name.parse().map_err(ModelError::InvalidConfig)?;
        }
        Ok(backend)
    }

    /// [`Self::new`] with the decode matmuls spread over the GPU as `mat_vec`.
    pub fn with_mat_vec(
        kv: KvGeometry,
        dtype: DType,
        device: &Device,
        mat_vec: MatVec,
    ) -> Result<Self> {
        let kernels = CudaKernels {
            attention: PagedAttention::new(kv, dtype, device)?,
            q8: None,
            mat_vec,
            f16_gemm_rows: F16_GEMM_ROWS,
            f16_copy_rows: F16_COPY_ROWS,
            quant_rows: QUANT_ROWS,
            mmq_from: MMQ_FROM,
            mmq_rows: MMQ_ROWS,
            launch: Launch::default(),
            graphs: graph::Graphs::new(device, StepGraphs::default())?,
            moves: 0,
            logits: pinned::PinnedHost::default(),
        };
        Ok(Self::with_kernels(kernels, device))
    }

    /// Whether our kernels may start while the one before them ends
    /// ([`Launch::Dependent`]) or not ([`Launch::Serial`], the default).
    pub fn set_launch(&mut self, launch: Launch) {
        let kernels = self.kernels_mut();
        kernels.launch = launch;
        kernels.attention.launch = launch;
    }

    /// The kernel of prefill steps' attention.
    pub fn set_prefill(&mut self, kernel: PrefillAttention) {
        self.kernels_mut().attention.prefill = kernel;
    }

    /// Whether decode steps are recorded and replayed as CUDA graphs (they
    /// are by default).
    pub fn set_graphs(&mut self, mode: StepGraphs) {
        self.kernels_mut().graphs.set_mode(mode);
    }

    /// The most rows our 8-bit decode kernels take (at most
    /// `quant_matmul::MAX_ROWS`; [`QUANT_ROWS`] by default): longer steps
    /// take candle's kernels or cuBLAS.
    pub fn set_quant_rows(&mut self, rows: usize) {
        self.kernels_mut().quant_rows = rows.min(quant_matmul::MAX_ROWS);
    }

    /// Q4_K/Q6_K steps of `from` to `to` rows on the int8 tensor cores
    /// ([`MMQ_FROM`] to [`MMQ_ROWS`] by default; `to` at most 64, 0 for
    /// never): the same bits as the decode kernels, only the time differs.
    pub fn set_tensor_core_rows(&mut self, from: usize, to: usize) {
        let kernels = self.kernels_mut();
        kernels.mmq_from = from.max(1);
        kernels.mmq_rows = to.min(quant_matmul::MAX_ROWS);
    }

    /// Many-sequence decode on our paths up to `rows` sequences (at most
    /// 64): our 8-bit matmuls, the split decode attention and recorded
    /// graphs, which without it stop at 8 (what `MLXR_CUDA_QUANT_ROWS`,
    /// `MLXR_CUDA_DECODE_TOKENS` and `MLXR_CUDA_GRAPH_ROWS` set one by one).
    pub fn set_many_sequence_rows(&mut self, rows: usize) {
        self.set_quant_rows(rows);
        let kernels = self.kernels_mut();
        kernels.attention.decode_tokens = rows.min(ops::DECODE_TOKENS);
        kernels.graphs.set_most(rows);
    }
}

/// Steps of up to this many rows run our 8-bit decode kernels by default;
/// longer ones candle's q8_1 kernels up to [`F16_GEMM_ROWS`]. Our kernels
/// take up to `quant_matmul::MAX_ROWS` (in tiles of 8 tokens beyond 8) on
/// request (`MLXR_CUDA_QUANT_ROWS`, [`CudaBackend::set_many_sequence_rows`]):
/// 8 by default until steps of 9-64 rows are measured side by side on a GPU
/// (written in session 46, when no GPU call returned; a tile loads each
/// token's activations per weight row as the one-tile kernels do, and on an
/// 8B model an 8-token step already took 2.7x a one-token step, so candle's
/// kernels may be faster at 32-64 rows, bench/results/gpu-2026-12-05-s46.md).
pub const QUANT_ROWS: usize = 8;

/// Q4_K/Q6_K steps of [`MMQ_FROM`] to this many rows run on the int8 tensor
/// cores (kernels/mmq.cu, the decode kernels' bits) unless their weights'
/// F16 copies take them ([`F16_COPY_ROWS`]): on an H100, timed alone on the
/// 8B shapes, 1.2-2.6x the decode kernels at 8 tokens and 1.5-3.4x at 16;
/// in aggregate decode of the 8B-shaped Q4_K_M 8 sequences 766 → 1,224
/// tok/s, 16 1,742 → 1,875 (against candle's q8_1 kernels); at 32-64 rows
/// the F16 copies through cuBLAS are faster still
/// (bench/results/gpu-2026-12-06-s50.md).
pub const MMQ_ROWS: usize = 64;

/// The fewest rows of a step on the tensor cores: below, the decode kernels
/// were faster on every shape timed alone. Aggregate decode on an H100
/// against 5 (bench/results/gpu-2026-12-06-s50.md, call 9): 8B-shaped
/// Q4_K_M 3 sequences 508 → 547 tok/s, 4 592 → 693; Qwen2.5-1.5B-shaped 3
/// 1,014 → 1,174, 4 1,185 → 1,356.
pub const MMQ_FROM: usize = 3;

/// Steps of more rows than this multiply GGML-quantized weights as F16
/// (dequantized per call) through cuBLAS; steps of up to [`QUANT_ROWS`]
/// rows run our decode kernels and those in between candle's q8_1 kernels,
/// which decode 16–64 sequences twice as fast as the F16 route
/// (bench/results/gpu-2026-12-04-batched-rows.md).
pub const F16_GEMM_ROWS: usize = 64;

/// Steps of more rows than this multiply a weight's F16 copy (kept from the
/// load, [`keep_f16_copy`]) through cuBLAS instead of candle's q8_1 kernels;
/// prefill chunks (more than [`F16_GEMM_ROWS`]) use the copy in any case,
/// with no dequantization per call. On an H100 (8B-shaped Q4_K_M, aggregate
/// decode of N sequences against the q8_1 route): N = 32 2,183 vs 1,969
/// tok/s, N = 64 3,182 vs 2,155, prefill of 128-token prompts 1.6-2.4x; at
/// N = 16 equal on the 8B (1,345 vs 1,358) and slower on the SmolLM2 shape
/// (1,588 vs 1,979), hence 16 (bench/results/gpu-2026-12-06.md).
pub const F16_COPY_ROWS: usize = 16;

/// Whether the CUDA backend keeps a GGML-quantized weight `t` dequantized
/// to F16 beside its blocks (`MLXR_CUDA_F16_WEIGHTS`): `auto` (the default)
/// while the GPU keeps at least half its memory free after the copy, so a
/// model that fills a GPU is not pushed out of it (its later layers go
/// without); `on`; `off`. The KV cache is sized after the weights, from
/// what is left.
pub fn keep_f16_copy(t: &QTensor) -> Result<bool> {
    use candle_core::quantized::GgmlDType;
    let Device::Cuda(dev) = t.device() else {
        return Ok(false);
    };
    if matches!(t.dtype(), GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16)
        || t.shape().dims().len() != 2
    {
        return Ok(false);
    }
    match std::env::var("MLXR_CUDA_F16_WEIGHTS").as_deref() {
        Err(_) | Ok("auto") => {}
        Ok("on") => return Ok(true),
        Ok("off") => return Ok(false),
        Ok(other) => {
            return Err(ModelError::InvalidConfig(format!(
                "MLXR_CUDA_F16_WEIGHTS={other}: give auto, on or off"
            )))
        }
    }
    let (free, total) = dev
        .cuda_stream()
        .context()
        .mem_get_info()
        .map_err(|e| ModelError::InvalidConfig(format!("GPU memory: {e:?}")))?;
    let bytes = t.shape().elem_count() * 2;
    Ok(free.saturating_sub(bytes) >= total / 2)
}

/// The paged attention and the quantized matmuls.
pub struct CudaKernels {
    attention: PagedAttention,
    /// The last activation quantized to Q8_K, by the id of its tensor: the
    /// q, k and v (gate and up) projections read the same input, and the
    /// norm or GLU that made it quantized it in the same launch.
    q8: Option<(TensorId, Tensor)>,
    mat_vec: MatVec,
    f16_gemm_rows: usize,
    /// Steps of more rows multiply weights' F16 copies where kept.
    f16_copy_rows: usize,
    /// Steps of up to this many rows run our Q8_K decode kernels.
    quant_rows: usize,
    /// Q4_K/Q6_K steps of `mmq_from` to `mmq_rows` rows run on the tensor
    /// cores.
    mmq_from: usize,
    mmq_rows: usize,
    launch: Launch,
    graphs: graph::Graphs,
    /// The step buffers' moves (the backend's and the attention's).
    moves: u64,
    logits: pinned::PinnedHost,
}

impl CudaKernels {
    /// The most rows whose norms and GLUs quantize their outputs for our
    /// matmuls: they run our fused kernels then, even where the matmuls
    /// take the F16 copies (8B-shaped Q4_K_M on an H100, 32 sequences
    /// 2,946 → 3,350 tok/s, 64 4,347 → 5,128 against candle's ops,
    /// bench/results/gpu-2026-12-06-s50.md, call 8).
    fn q8_rows(&self) -> usize {
        self.quant_rows.max(self.mmq_rows)
    }
}

/// Whether `x` is f32 `[tokens, k]` of at most `rows` tokens, a step our
/// 8-bit activation kernels take.
fn takes(x: &Tensor, rows: usize) -> bool {
    x.dtype() == DType::F32
        && x.dims2().is_ok_and(|(tokens, k)| {
            (1..=rows.min(quant_matmul::MAX_ROWS)).contains(&tokens) && quant_matmul::quantizable(k)
        })
}

impl CandleDevice for CudaKernels {
    fn geometry(&self) -> &KvGeometry {
        &self.attention.kv
    }

    fn begin_step(&mut self, step: &Step, moves: u64) -> Result<()> {
        self.q8 = None;
        self.attention.begin_step(step)?;
        self.moves = moves + self.attention.meta_buf.moves();
        Ok(())
    }

    fn replay(&mut self, step: &Step) -> Result<Replay> {
        self.graphs.replay(step, self.moves)
    }

    fn keep_uploads(&self) -> Result<Option<KeptUploads>> {
        let dev = self.attention.device.as_cuda_device()?;
        Ok(Some(KeptUploads::new(dev.enable_cuda_graph_htod_cache())))
    }

    fn begin_record(&mut self, step: &Step) -> Result<()> {
        self.graphs.begin_record(step)
    }

    fn end_record(&mut self, ran: Result<Tensor>) -> Result<Tensor> {
        let recorded = self.graphs.end_record(ran);
        if recorded.is_err() {
            // Made while recording: memory of no graph.
            std::mem::forget(self.q8.take());
        }
        recorded
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
        let quantize = q.dim(0)? <= self.quant_rows;
        let (out, q8) = self
            .attention
            .attend(layer, spec, step, q, k, v, quantize)?;
        if let Some(q8) = q8 {
            self.q8 = Some((out.id(), q8));
        }
        Ok(out)
    }

    fn rms_norm(&mut self, x: &Tensor, norm: &RmsNorm) -> Result<Tensor> {
        if !takes(x, self.q8_rows())
            || norm.weight().dtype() != DType::F32
            || x.dims2()?.1 != norm.dim()
        {
            return candle_rms_norm(x, norm);
        }
        let (y, yq) = quant_matmul::rms_norm_q8(x, norm.weight(), norm.eps(), self.launch)?;
        self.q8 = Some((y.id(), yq));
        Ok(y)
    }

    fn add_rms_norm(&mut self, x: &Tensor, y: &Tensor, norm: &RmsNorm) -> Result<(Tensor, Tensor)> {
        if !takes(x, self.q8_rows())
            || y.dims() != x.dims()
            || y.dtype() != DType::F32
            || norm.weight().dtype() != DType::F32
            || x.dims2()?.1 != norm.dim()
        {
            let sum = (x + y)?;
            let normed = self.rms_norm(&sum, norm)?;
            return Ok((sum, normed));
        }
        let (sum, normed, q) =
            quant_matmul::add_rms_norm_q8(x, y, norm.weight(), norm.eps(), self.launch)?;
        self.q8 = Some((normed.id(), q));
        Ok((sum, normed))
    }

    fn glu(&mut self, gate: &Tensor, up: &Tensor, glu: Glu) -> Result<Tensor> {
        if glu != Glu::Silu
            || !takes(gate, self.q8_rows())
            || up.dims() != gate.dims()
            || up.dtype() != DType::F32
        {
            return candle_glu(gate, up, glu);
        }
        let (y, yq) = quant_matmul::swiglu_q8(gate, up, self.launch)?;
        self.q8 = Some((y.id(), yq));
        Ok(y)
    }

    fn rope(
        &mut self,
        q: &Tensor,
        k: &Tensor,
        tables: (&Tensor, &Tensor),
        rope: &Rope,
        head_dim: usize,
    ) -> Result<(Tensor, Tensor)> {
        if !rope::takes(q, k, head_dim) {
            return candle_rope(q, k, tables, rope, head_dim);
        }
        rope::rope_qk(q, k, tables.0, tables.1, rope, head_dim, self.launch)
    }

    fn matmul(&mut self, x: &Tensor, w: &Linear) -> Result<Tensor> {
        Ok(self.matmuls(x, std::slice::from_ref(w))?.remove(0))
    }

    fn matmuls(&mut self, x: &Tensor, ws: &[Linear]) -> Result<Vec<Tensor>> {
        let halves: Option<Vec<&Tensor>> = ws
            .iter()
            .map(|w| {
                w.half_weight()
                    .filter(|h| half_matvec::takes(x, h, w.bias()))
            })
            .collect();
        if let Some(halves) = halves {
            return ws
                .iter()
                .zip(halves)
                .map(|(w, h)| half_matvec::matmul(x, h, w.bias()))
                .collect();
        }
        // Longer steps (prefill, many sequences) go to cuBLAS on weights
        // dequantized to F16: these per-row kernels re-read the activations
        // for every row and ran a 512-token prefill of an 8B model at 744
        // tok/s against candle's 5,300 (bench/results/gpu-2026-12-03-call1.md).
        let k = x.dim(1)?;
        let ours: Option<Vec<(&QTensor, Option<&Tensor>)>> = ws
            .iter()
            .map(|w| {
                let t = w.ggml_tensor().filter(|t| {
                    quant_matmul::supports(t) && t.shape().dims2().is_ok_and(|(_, wk)| wk == k)
                })?;
                let n = t.shape().dims2().ok()?.0;
                match w.bias() {
                    Some(b) if !quant_matmul::takes_bias(b, n) => None,
                    bias => Some((t, bias)),
                }
            })
            .collect();
        let rows = x.dim(0)?;
        let f16_copies = rows > self.f16_copy_rows && ws.iter().any(|w| w.has_f16_copy());
        let kernel = ours.as_ref().and_then(|ours| {
            let tensor_cores = (self.mmq_from..=self.mmq_rows).contains(&rows)
                && !f16_copies
                && ours.iter().all(|(t, _)| quant_matmul::tensor_cores_take(t));
            if tensor_cores {
                Some(Kernel::TensorCores(self.mat_vec))
            } else {
                (rows <= self.quant_rows).then_some(Kernel::MatVec(self.mat_vec))
            }
        });
        let (Some(ours), Some(kernel)) =
            (ours, kernel.filter(|_| takes(x, quant_matmul::MAX_ROWS)))
        else {
            return ws
                .iter()
                .map(|w| {
                    let kept = w.has_f16_copy() && rows > self.f16_copy_rows;
                    if kept || rows > self.f16_gemm_rows {
                        w.forward_dequantized_f16(x)
                    } else {
                        w.forward(x)
                    }
                })
                .collect();
        };
        let xq = match &self.q8 {
            Some((id, xq)) if *id == x.id() => xq.clone(),
            _ => {
                let xq = quant_matmul::quantize(x, self.launch)?;
                self.q8 = Some((x.id(), xq.clone()));
                xq
            }
        };
        // The biases are added in the same launch.
        quant_matmul::matmuls(&xq, rows, k, &ours, kernel, self.launch)
    }

    fn read<'a>(&'a mut self, x: &Tensor, _host: &'a mut Vec<f32>) -> Result<&'a [f32]> {
        self.logits.read(x)
    }
}

pub struct PagedAttention {
    device: Device,
    kv: KvGeometry,
    /// Per layer, `[num_blocks * block_size, n_kv_heads * head_dim]`.
    keys: Vec<Tensor>,
    values: Vec<Tensor>,
    meta: Option<ops::StepMeta>,
    meta_buf: StepBuffer<u32>,
    host: Vec<u32>,
    /// The decode kernel's merge counters ([`ops::StepMeta`]).
    tickets: Tensor,
    prefill: PrefillAttention,
    /// The decode kernel's debug knobs.
    decode: ops::DecodeTuning,
    /// The most sequences of a decode step that takes the split decode
    /// kernel (`ops::DECODE_TOKENS`).
    decode_tokens: usize,
    launch: Launch,
}

impl PagedAttention {
    pub fn new(kv: KvGeometry, dtype: DType, device: &Device) -> Result<Self> {
        if !device.is_cuda() {
            return Err(ModelError::InvalidConfig(format!(
                "the CUDA backend needs a CUDA device, not {device:?}"
            )));
        }
        if !matches!(dtype, DType::F16 | DType::BF16 | DType::F32) {
            return Err(ModelError::InvalidConfig(format!(
                "a KV cache of {dtype:?} (f16, bf16 or f32)"
            )));
        }
        if kv.head_dim > ops::MAX_HEAD_DIM || !kv.head_dim.is_multiple_of(4) {
            return Err(ModelError::InvalidConfig(format!(
                "head dimension {} (the CUDA attention kernel takes multiples of 4 up to {})",
                kv.head_dim,
                ops::MAX_HEAD_DIM
            )));
        }
        let (keys, values) = slot_caches(&kv, dtype, device)?;
        let tickets = Tensor::zeros(ops::DECODE_TOKENS * kv.n_kv_heads, DType::U32, device)?;
        Ok(Self {
            device: device.clone(),
            kv,
            keys,
            values,
            meta: None,
            meta_buf: StepBuffer::default(),
            host: Vec::new(),
            tickets,
            prefill: PrefillAttention::default(),
            decode: ops::DecodeTuning::default(),
            decode_tokens: ops::SPLIT_TOKENS,
            launch: Launch::default(),
        })
    }

    fn begin_step(&mut self, step: &Step) -> Result<()> {
        self.meta = Some(ops::StepMeta::upload(
            step,
            &mut self.host,
            &mut self.meta_buf,
            &self.tickets,
            self.decode_tokens,
            &self.device,
        )?);
        Ok(())
    }

    /// The attention outputs, and with `quantize` (where the decode kernel
    /// can: [`ops::StepMeta::quantizes`]) the same in Q8_K.
    #[allow(clippy::too_many_arguments)]
    fn attend(
        &mut self,
        layer: usize,
        spec: &AttentionSpec,
        _step: &Step,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        quantize: bool,
    ) -> Result<(Tensor, Option<Tensor>)> {
        let (Some(keys), Some(values)) = (self.keys.get(layer), self.values.get(layer)) else {
            return Err(ModelError::InvalidBatch(format!("no layer {layer}")));
        };
        let meta = self
            .meta
            .as_ref()
            .ok_or_else(|| ModelError::InvalidBatch("attend before begin_step".into()))?;
        if spec.n_kv_heads != self.kv.n_kv_heads
            || spec.head_dim != self.kv.head_dim
            || !spec.n_heads.is_multiple_of(spec.n_kv_heads)
            || spec.n_heads / spec.n_kv_heads > ops::MAX_GROUP
        {
            return Err(ModelError::InvalidBatch(format!(
                "attention {spec:?} on a cache of {:?}",
                self.kv
            )));
        }
        let (k, v) = (k.contiguous()?, v.contiguous()?);
        let new_kv = if meta.writes_inline() {
            Some((&k, &v))
        } else {
            meta.write(keys, values, &k, &v)?;
            None
        };
        meta.attend(
            &q.contiguous()?,
            keys,
            values,
            new_kv,
            quantize && meta.quantizes(spec),
            spec,
            self.kv.block_size,
            self.prefill,
            self.decode,
            self.launch,
        )
    }
}
