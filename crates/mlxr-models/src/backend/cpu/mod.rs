//! The CPU backend: host buffers, the kernels of [`crate::backend::cpu::kernels`]
//! (ggml's x86/ARM arithmetic bit for bit, VNNI tiles), the paged store of
//! [`crate::backend::cpu::paged`], and the spin pool the kernels split their rows over.
//! Once it has run a step of a given size, later steps up to that size
//! allocate nothing (for weights with a kernel; other weight kinds go
//! through candle's CPU ops and allocate).

pub mod kernels;
pub mod paged;

use candle_core::{Device, Tensor};

use super::{softcap, AttentionSpec, Backend, Glu, KvGeometry};
use crate::layers::{Embedding, Linear, RmsNorm, Rope};
use crate::step::Step;
use crate::tensor_parallel::Collective;
use crate::{ModelError, Result};
use kernels::ops::{rms_norm_rows, GluOp};
use kernels::{MatmulScratch, SpinPool};
use paged::{check_block_tables, AttentionScratch, PagedAttentionOp, PagedKvStore};

pub struct CpuBackend {
    store: PagedKvStore,
    /// The kernels' threads, taken out while a step runs on them.
    pool: Option<SpinPool>,
    threads: usize,
    matmul: MatmulScratch,
    attention: AttentionScratch,
    /// `cos`/`sin` of every token's angles, per RoPE of the model.
    rope_tables: Vec<(Vec<f32>, Vec<f32>)>,
    tokens: usize,
    /// Rows of the residual stream: the step's tokens, then (after
    /// `select_rows`) the rows that get logits.
    rows: usize,
    /// This rank's tensor-parallel world, when it is in one.
    world: Option<Box<dyn Collective>>,
    /// The all-gathered logits before they replace this rank's.
    gathered: Vec<f32>,
}

impl CpuBackend {
    /// A backend over a KV cache of `kv` in `dtype` (F16, BF16 or F32; F32
    /// runs llama.cpp's exact attention), with as many kernel threads as
    /// rayon's current pool.
    pub fn new(kv: KvGeometry, dtype: candle_core::DType) -> Result<Self> {
        let store = PagedKvStore::new(
            kv.n_layers,
            kv.num_blocks,
            kv.block_size,
            kv.n_kv_heads,
            kv.head_dim,
            dtype,
            &Device::Cpu,
        )?;
        Ok(Self::with_store(store))
    }

    pub fn with_store(store: PagedKvStore) -> Self {
        Self {
            store,
            pool: None,
            threads: rayon::current_num_threads(),
            matmul: MatmulScratch::default(),
            attention: AttentionScratch::default(),
            rope_tables: Vec::new(),
            tokens: 0,
            rows: 0,
            world: None,
            gathered: Vec::new(),
        }
    }

    /// Kernel threads for this backend (by default as many as rayon's
    /// current pool): one each for the ranks of a world on one machine.
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = threads.max(1);
        self
    }

    /// This backend as a rank of `world`, for a tensor-parallel model.
    pub fn with_collective(mut self, world: Box<dyn Collective>) -> Self {
        self.world = Some(world);
        self
    }

    /// The paged KV cache (for inspection).
    pub fn store(&self) -> &PagedKvStore {
        &self.store
    }
}

/// `buf` resized to `len` values (a shorter length keeps the capacity).
fn sized(buf: &mut Vec<f32>, len: usize) -> &mut [f32] {
    buf.resize(len, 0.0);
    buf
}

fn check_width(what: &str, len: usize, width: usize) -> Result<usize> {
    if width == 0 || !len.is_multiple_of(width) {
        return Err(ModelError::InvalidBatch(format!(
            "{what}: {len} values are not rows of {width}"
        )));
    }
    Ok(len / width)
}

impl Backend for CpuBackend {
    type Act = Vec<f32>;

    fn num_blocks(&self) -> usize {
        self.store.num_blocks()
    }

    fn run<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        let pool = match self.pool.take() {
            Some(pool) => pool,
            None => match SpinPool::new(self.threads) {
                Ok(pool) => pool,
                // No threads to start: the kernels run on this one.
                Err(_) => return f(self),
            },
        };
        let out = pool.install(|| f(self));
        self.pool = Some(pool);
        out
    }

    fn begin_step(&mut self, step: &Step, ropes: &[Rope]) -> Result<()> {
        self.tokens = step.tokens().len();
        self.rows = self.tokens;
        self.rope_tables.resize_with(ropes.len(), Default::default);
        for (rope, (cos, sin)) in ropes.iter().zip(&mut self.rope_tables) {
            rope.fill_tables(step.positions(), cos, sin);
        }
        Ok(())
    }

    fn embed(&mut self, table: &Embedding, tokens: &[u32], out: &mut Vec<f32>) -> Result<()> {
        let hidden = table.cols();
        let rows = sized(out, tokens.len() * hidden);
        if table.has_rows() {
            for (row, &id) in rows.chunks_exact_mut(hidden).zip(tokens) {
                table.row_into(id, row)?;
            }
        } else {
            let t = table.forward(tokens, &Device::Cpu)?;
            rows.copy_from_slice(&t.flatten_all()?.to_vec1::<f32>()?);
        }
        Ok(())
    }

    fn scale(&mut self, x: &mut Vec<f32>, factor: f32) -> Result<()> {
        // As candle's affine op computes `x * scale` (plus 0).
        x.iter_mut().for_each(|v| *v = *v * factor + 0.0);
        Ok(())
    }

    fn rms_norm(&mut self, x: &Vec<f32>, norm: &RmsNorm, out: &mut Vec<f32>) -> Result<()> {
        check_width("rms_norm", x.len(), norm.dim())?;
        rms_norm_rows(x, norm.values(), norm.eps(), sized(out, x.len()));
        Ok(())
    }

    fn matmul(&mut self, x: &Vec<f32>, w: &Linear, out: &mut Vec<f32>) -> Result<()> {
        let (n, k) = w.shape();
        let m = check_width("matmul", x.len(), k)?;
        let out = sized(out, m * n);
        match w.kernel() {
            Some(op) => op.matmul_into(x, out, &mut self.matmul)?,
            None => {
                // A weight kind without a kernel here: candle's CPU op.
                let y = w.forward(&Tensor::from_slice(x, (m, k), &Device::Cpu)?)?;
                out.copy_from_slice(&y.flatten_all()?.to_vec1::<f32>()?);
                return Ok(());
            }
        }
        if let Some(bias) = w.bias_values() {
            for row in out.chunks_exact_mut(n) {
                row.iter_mut().zip(bias).for_each(|(y, b)| *y += b);
            }
        }
        Ok(())
    }

    fn split(&mut self, x: &Vec<f32>, widths: &[usize], outs: &mut [&mut Vec<f32>]) -> Result<()> {
        let total: usize = widths.iter().sum();
        let m = check_width("split", x.len(), total)?;
        let mut start = 0;
        for (&width, out) in widths.iter().zip(outs.iter_mut()) {
            let out = sized(out, m * width);
            for (dst, src) in out.chunks_exact_mut(width).zip(x.chunks_exact(total)) {
                dst.copy_from_slice(&src[start..start + width]);
            }
            start += width;
        }
        Ok(())
    }

    fn rope(
        &mut self,
        q: &mut Vec<f32>,
        k: &mut Vec<f32>,
        rope: &Rope,
        index: usize,
        head_dim: usize,
    ) -> Result<()> {
        let (cos, sin) = self
            .rope_tables
            .get(index)
            .ok_or_else(|| ModelError::InvalidBatch(format!("no RoPE table {index}")))?;
        for x in [q, k] {
            let per_token = check_width("rope", x.len(), self.tokens.max(1))?;
            check_width("rope", per_token, head_dim)?;
            rope.apply_in_place(x, self.tokens, head_dim, (cos, sin));
        }
        Ok(())
    }

    fn glu(&mut self, gate: &Vec<f32>, up: &Vec<f32>, glu: Glu, out: &mut Vec<f32>) -> Result<()> {
        if gate.len() != up.len() {
            return Err(ModelError::InvalidBatch(format!(
                "glu: gate of {} values, up of {}",
                gate.len(),
                up.len()
            )));
        }
        let out = sized(out, gate.len());
        // Rows split the work (one row: no thread wake-up for a decode).
        let width = gate.len() / self.rows.max(1);
        check_width("glu", gate.len(), width)?;
        match glu {
            Glu::Silu | Glu::GeluGgml => GluOp {
                gelu: glu == Glu::GeluGgml,
            }
            .rows(gate, up, width, out),
            Glu::GeluTanh => {
                for ((y, &g), &u) in out.iter_mut().zip(gate).zip(up) {
                    *y = gelu_tanh(g) * u;
                }
            }
        }
        Ok(())
    }

    fn add(&mut self, x: &mut Vec<f32>, y: &Vec<f32>) -> Result<()> {
        if x.len() != y.len() {
            return Err(ModelError::InvalidBatch(format!(
                "add: {} values plus {}",
                x.len(),
                y.len()
            )));
        }
        x.iter_mut().zip(y).for_each(|(x, y)| *x += y);
        Ok(())
    }

    fn softcap(&mut self, x: &mut Vec<f32>, cap: f32) -> Result<()> {
        x.iter_mut().for_each(|v| *v = softcap(*v, cap));
        Ok(())
    }

    fn attend(
        &mut self,
        layer: usize,
        spec: &AttentionSpec,
        step: &Step,
        q: &Vec<f32>,
        k: &Vec<f32>,
        v: &Vec<f32>,
        out: &mut Vec<f32>,
    ) -> Result<()> {
        let store = &self.store;
        if spec.n_kv_heads != store.n_kv_heads()
            || spec.head_dim != store.head_dim()
            || spec.n_heads == 0
            || !spec.n_heads.is_multiple_of(spec.n_kv_heads)
        {
            return Err(ModelError::InvalidBatch(format!(
                "attention {spec:?} does not fit the paged store ({} KV heads of dimension {})",
                store.n_kv_heads(),
                store.head_dim()
            )));
        }
        let tokens = step.tokens().len();
        let (q_len, kv_len) = (
            tokens * spec.n_heads * spec.head_dim,
            tokens * spec.n_kv_heads * spec.head_dim,
        );
        if q.len() != q_len || k.len() != kv_len || v.len() != kv_len {
            return Err(ModelError::InvalidBatch(format!(
                "{tokens} tokens need {q_len} query and {kv_len} key and value values, got {}, {} \
                 and {}",
                q.len(),
                k.len(),
                v.len()
            )));
        }
        let out = sized(out, q_len);
        // Nothing is written for a batch the kernel would refuse.
        check_block_tables(
            step.seqs(),
            step.block_ids(),
            store.block_size(),
            store.num_blocks(),
            spec.sliding_window,
        )
        .map_err(ModelError::InvalidBatch)?;
        store.write(layer, step.slots(), k, v)?;
        let op = PagedAttentionOp::new(
            step.seqs(),
            step.block_ids(),
            spec.scale,
            spec.sliding_window,
            spec.softcap,
        );
        let heads = [spec.n_heads, spec.head_dim];
        let scratch = &mut self.attention;
        store
            .read(layer, |keys, values| {
                op.attend_into(heads, q, keys, values, out, scratch)
            })?
            .map_err(|e| ModelError::candle(format!("layer {layer}: paged attention"), e))
    }

    fn all_reduce(&mut self, x: &mut Vec<f32>) -> Result<()> {
        let world = self.world.as_ref().ok_or_else(no_world)?;
        Ok(world.all_reduce_sum(x)?)
    }

    fn all_gather_cols(&mut self, x: &mut Vec<f32>, rows: usize) -> Result<()> {
        let world = self.world.as_ref().ok_or_else(no_world)?;
        world.all_gather_cols(x, rows, &mut self.gathered)?;
        std::mem::swap(x, &mut self.gathered);
        Ok(())
    }

    fn select_rows(&mut self, x: &mut Vec<f32>, rows: &[usize], width: usize) -> Result<()> {
        let have = check_width("select_rows", x.len(), width)?;
        for (j, &row) in rows.iter().enumerate() {
            if row >= have || j > row {
                return Err(ModelError::InvalidBatch(format!(
                    "select_rows: row {row} of {have} at {j}"
                )));
            }
            x.copy_within(row * width..(row + 1) * width, j * width);
        }
        x.truncate(rows.len() * width);
        self.rows = rows.len();
        Ok(())
    }

    fn read<'a>(&'a mut self, x: &'a Vec<f32>) -> Result<&'a [f32]> {
        Ok(x)
    }
}

fn no_world() -> ModelError {
    ModelError::InvalidConfig(
        "a tensor-parallel model on a CPU backend without a world (see `with_collective`)".into(),
    )
}

/// candle's `gelu` (tanh approximation) in f32.
fn gelu_tanh(x: f32) -> f32 {
    const SQRT_TWO_OVER_PI: f32 = 0.797_884_6;
    0.5 * x * (1.0 + (SQRT_TWO_OVER_PI * x * (1.0 + 0.044_715 * x * x)).tanh())
}
