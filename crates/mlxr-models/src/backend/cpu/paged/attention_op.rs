//! Attention of a batch of sequence chunks over keys and values in cache
//! blocks, as a candle op with a CPU kernel.
//!
//! The op is the backend seam: `cpu_fwd` is below; a CUDA or Metal kernel
//! would fill in `cuda_fwd`/`metal_fwd` (which candle defaults to "not
//! implemented") over the same operands and descriptors.

use candle_core::backend::BackendStorage;
use candle_core::{bail, CpuStorage, CustomOp3, Layout, Result, Shape, Tensor};
use half::{bf16, f16};

use super::element::CacheElement;
use super::vector::{Portable, VectorOps};
use super::write_op::contiguous;
use super::{exact, tiled};

/// Queries of one work item: up to this many tokens of one sequence share
/// each key/value block they read (prefill); decode items have one token.
const QUERY_TILE: usize = 32;

/// One chunk of the batch: its queries sit at positions `start_pos..start_pos
/// + len` and see keys `0..start_pos + len`, whose position `p` lives at
/// offset `p % block_size` of block `table[p / block_size]`, where `table` is
/// `block_ids[table_start..table_start + table_len]` of the step.
#[derive(Clone, Copy, Debug, Default)]
pub struct PagedSeq {
    pub start_pos: usize,
    pub len: usize,
    pub table_start: usize,
    pub table_len: usize,
}

impl PagedSeq {
    /// This chunk's block table within the step's `block_ids` (empty when
    /// the range lies outside them).
    pub fn table<'t>(&self, block_ids: &'t [u32]) -> &'t [u32] {
        let end = self.table_start.saturating_add(self.table_len);
        block_ids.get(self.table_start..end).unwrap_or(&[])
    }
}

/// `q.apply_op3_no_bwd(&k_cache, &v_cache, &op)` (or [`Self::forward`]):
/// `q` `[tokens, n_heads, head_dim]` f32 holds the chunks' queries in order,
/// the caches are `[num_blocks, n_kv_heads, block_size, head_dim]` (F16,
/// BF16 or F32, both alike); the result is `[tokens, n_heads * head_dim]` f32.
/// Query head `h` reads KV head `h / (n_heads / n_kv_heads)`.
pub struct PagedAttentionOp<'a> {
    seqs: &'a [PagedSeq],
    block_ids: &'a [u32],
    scale: f32,
    sliding_window: Option<usize>,
    softcap: Option<f32>,
}

impl<'a> PagedAttentionOp<'a> {
    /// A query at position `p` sees keys `j <= p` with `p - j < window` when
    /// `sliding_window` is `Some(window)`; scores are `scale * q·k`, soft-capped
    /// to `cap * tanh(score / cap)` when `softcap` is `Some(cap)`.
    pub fn new(
        seqs: &'a [PagedSeq],
        block_ids: &'a [u32],
        scale: f32,
        sliding_window: Option<usize>,
        softcap: Option<f32>,
    ) -> Self {
        Self {
            seqs,
            block_ids,
            scale,
            sliding_window,
            softcap,
        }
    }

    pub fn forward(&self, q: &Tensor, k_cache: &Tensor, v_cache: &Tensor) -> Result<Tensor> {
        q.apply_op3_no_bwd(k_cache, v_cache, self)
    }
}

/// Checks that every block the chunks touch (written or read, within the
/// sliding window) is in its block table and names an existing block.
pub(crate) fn check_block_tables(
    seqs: &[PagedSeq],
    block_ids: &[u32],
    block_size: usize,
    num_blocks: usize,
    sliding_window: Option<usize>,
) -> std::result::Result<(), String> {
    for (i, seq) in seqs.iter().enumerate() {
        if seq.len == 0 {
            continue;
        }
        let Some(end) = seq.start_pos.checked_add(seq.len) else {
            return Err(format!("sequence {i}: position overflow"));
        };
        let table = seq.table(block_ids);
        if table.len() != seq.table_len {
            return Err(format!(
                "sequence {i}: block table outside the step's block ids"
            ));
        }
        let capacity = table.len().saturating_mul(block_size);
        if end > capacity {
            return Err(format!(
                "sequence {i}: position {} is beyond its block table ({} blocks of {block_size})",
                end - 1,
                table.len()
            ));
        }
        let first_block = first_key(seq.start_pos, sliding_window) / block_size;
        let last_block = (end - 1) / block_size;
        for &block in &table[first_block..=last_block] {
            if block as usize >= num_blocks {
                return Err(format!(
                    "sequence {i}: block id {block} out of range ({num_blocks} blocks)"
                ));
            }
        }
    }
    Ok(())
}

/// The first key position a query at `pos` sees.
fn first_key(pos: usize, sliding_window: Option<usize>) -> usize {
    sliding_window.map_or(0, |window| (pos + 1).saturating_sub(window))
}

impl CustomOp3 for PagedAttentionOp<'_> {
    fn name(&self) -> &'static str {
        "paged-attention"
    }

    fn cpu_fwd(
        &self,
        q: &CpuStorage,
        q_layout: &Layout,
        k: &CpuStorage,
        k_layout: &Layout,
        v: &CpuStorage,
        v_layout: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let &[tokens, n_heads, head_dim] = q_layout.dims() else {
            bail!("paged-attention: q shape {:?} is not 3-d", q_layout.dims())
        };
        let q = contiguous::<f32>(q, q_layout, "paged-attention: q")?;
        let mut out = vec![0f32; tokens * n_heads * head_dim];
        let scratch = &mut AttentionScratch::default();
        self.attend_into(
            [n_heads, head_dim],
            q,
            (k, k_layout),
            (v, v_layout),
            &mut out,
            scratch,
        )?;
        Ok((
            CpuStorage::F32(out),
            Shape::from((tokens, n_heads * head_dim)),
        ))
    }
}

/// Buffers of [`PagedAttentionOp::attend_into`], kept between calls.
#[derive(Default)]
pub struct AttentionScratch {
    items: Vec<WorkItem>,
    /// Per thread: its buffers and one work item's output.
    threads: Vec<(Scratch, Vec<f32>)>,
}

impl PagedAttentionOp<'_> {
    /// The op over buffers: `q` `[tokens, n_heads, head_dim]` (with `heads
    /// = [n_heads, head_dim]`), the caches as candle stores them, the
    /// result into `out` (`[tokens, n_heads * head_dim]`).
    pub fn attend_into(
        &self,
        heads: [usize; 2],
        q: &[f32],
        (k, k_layout): (&CpuStorage, &Layout),
        (v, v_layout): (&CpuStorage, &Layout),
        out: &mut [f32],
        scratch: &mut AttentionScratch,
    ) -> Result<()> {
        let dims = self.dims(heads, q.len(), k_layout, v_layout)?;
        if out.len() != q.len() {
            bail!(
                "paged-attention: {} outputs for {} queries",
                out.len(),
                q.len()
            )
        }
        match (k, v) {
            (CpuStorage::F32(_), CpuStorage::F32(_)) => {
                self.run_exact(&dims, q, k, k_layout, v, v_layout, out, scratch)
            }
            (CpuStorage::F16(_), CpuStorage::F16(_)) => {
                self.run::<f16>(&dims, q, k, k_layout, v, v_layout, out, scratch)
            }
            (CpuStorage::BF16(_), CpuStorage::BF16(_)) => {
                self.run::<bf16>(&dims, q, k, k_layout, v, v_layout, out, scratch)
            }
            _ => bail!(
                "paged-attention: unsupported cache dtypes {:?}/{:?}",
                k.dtype(),
                v.dtype()
            ),
        }
    }
}

struct Dims {
    tokens: usize,
    n_heads: usize,
    n_kv_heads: usize,
    /// Query heads per KV head.
    group: usize,
    head_dim: usize,
    block_size: usize,
}

/// Queries `first_pos..first_pos + len` of sequence `seq` for the query heads
/// of `kv_head`; `first_token` is the first one's row in `q`.
struct WorkItem {
    seq: usize,
    kv_head: usize,
    first_token: usize,
    first_pos: usize,
    len: usize,
}

/// Per-thread buffers, reused across work items.
#[derive(Default)]
struct Scratch {
    tile: tiled::TileScratch,
    exact: exact::ExactScratch,
    /// `[queries, keys]`: scores, then probabilities.
    scores: Vec<f32>,
    /// One block's key or value rows as f32.
    block: Vec<f32>,
    inv_sums: Vec<f32>,
}

impl PagedAttentionOp<'_> {
    fn dims(
        &self,
        [n_heads, head_dim]: [usize; 2],
        q_len: usize,
        k: &Layout,
        v: &Layout,
    ) -> Result<Dims> {
        let tokens = q_len / (n_heads * head_dim).max(1);
        if tokens * n_heads * head_dim != q_len {
            bail!("paged-attention: {q_len} query values are not rows of {n_heads} heads of {head_dim}")
        }
        let &[num_blocks, n_kv_heads, block_size, cache_head_dim] = k.dims() else {
            bail!("paged-attention: cache shape {:?} is not 4-d", k.dims())
        };
        if v.dims() != k.dims() {
            bail!(
                "paged-attention: key cache {:?} vs value cache {:?}",
                k.dims(),
                v.dims()
            )
        }
        if head_dim != cache_head_dim || n_kv_heads == 0 || n_heads % n_kv_heads != 0 {
            bail!(
                "paged-attention: q {:?} does not fit the cache {:?}",
                [tokens, n_heads, head_dim],
                k.dims()
            )
        }
        let chunk_tokens: usize = self.seqs.iter().map(|s| s.len).sum();
        if chunk_tokens != tokens {
            bail!("paged-attention: the chunks hold {chunk_tokens} tokens, q has {tokens}")
        }
        if let Err(msg) = check_block_tables(
            self.seqs,
            self.block_ids,
            block_size,
            num_blocks,
            self.sliding_window,
        ) {
            bail!("paged-attention: {msg}")
        }
        Ok(Dims {
            tokens,
            n_heads,
            n_kv_heads,
            group: n_heads / n_kv_heads,
            head_dim,
            block_size,
        })
    }

    fn work_items(&self, dims: &Dims, items: &mut Vec<WorkItem>) {
        items.clear();
        let mut first_token = 0;
        for (seq_index, seq) in self.seqs.iter().enumerate() {
            for tile in (0..seq.len).step_by(QUERY_TILE) {
                for kv_head in 0..dims.n_kv_heads {
                    items.push(WorkItem {
                        seq: seq_index,
                        kv_head,
                        first_token: first_token + tile,
                        first_pos: seq.start_pos + tile,
                        len: QUERY_TILE.min(seq.len - tile),
                    });
                }
            }
            first_token += seq.len;
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn run<T: CacheElement + candle_core::WithDType>(
        &self,
        dims: &Dims,
        q: &[f32],
        k: &CpuStorage,
        k_layout: &Layout,
        v: &CpuStorage,
        v_layout: &Layout,
        out: &mut [f32],
        scratch: &mut AttentionScratch,
    ) -> Result<()> {
        let k = contiguous::<T>(k, k_layout, "paged-attention: key cache")?;
        let v = contiguous::<T>(v, v_layout, "paged-attention: value cache")?;
        #[cfg(target_arch = "x86_64")]
        let wide = super::vector::avx2_fma_available();
        self.run_items(dims, out, scratch, |scratch, item, out| {
            // Every item that fits the tiled kernel takes it, decode steps
            // included: a row's result then depends only on its position and
            // keys, never on how its sequence was chunked or batched.
            if dims.head_dim.is_multiple_of(16) {
                return tiled::attend_tile(&self.tile(dims, item, q, k, v), &mut scratch.tile, out);
            }
            #[cfg(target_arch = "x86_64")]
            if wide {
                // SAFETY: the CPU has AVX2 and FMA (checked above).
                return unsafe { self.attend_avx2(dims, item, q, k, v, scratch, out) };
            }
            self.attend::<T, Portable>(dims, item, q, k, v, scratch, out)
        });
        Ok(())
    }

    /// An F32 store, in llama.cpp's arithmetic ([`exact`]).
    #[allow(clippy::too_many_arguments)]
    fn run_exact(
        &self,
        dims: &Dims,
        q: &[f32],
        k: &CpuStorage,
        k_layout: &Layout,
        v: &CpuStorage,
        v_layout: &Layout,
        out: &mut [f32],
        scratch: &mut AttentionScratch,
    ) -> Result<()> {
        let k = contiguous::<f32>(k, k_layout, "paged-attention: key cache")?;
        let v = contiguous::<f32>(v, v_layout, "paged-attention: value cache")?;
        let hd = dims.head_dim;
        self.run_items(dims, out, scratch, |scratch, item, out| {
            let seq = &self.seqs[item.seq];
            let rows = |cache| exact::HeadRows {
                cache,
                table: seq.table(self.block_ids),
                n_kv_heads: dims.n_kv_heads,
                kv_head: item.kv_head,
                block_size: dims.block_size,
                head_dim: hd,
            };
            let (keys, values) = (rows(k), rows(v));
            out.clear();
            out.resize(item.len * dims.group * hd, 0.0);
            for (t, out) in out.chunks_exact_mut(dims.group * hd).enumerate() {
                let pos = item.first_pos + t;
                let range = (first_key(pos, self.sliding_window), pos + 1);
                let at =
                    (item.first_token + t) * dims.n_heads * hd + item.kv_head * dims.group * hd;
                let q_rows = q[at..at + dims.group * hd].chunks_exact(hd);
                for (q, out) in q_rows.zip(out.chunks_exact_mut(hd)) {
                    let one_token = seq.len == 1;
                    exact::attend_row(
                        &keys,
                        &values,
                        q,
                        range,
                        (self.scale, self.softcap),
                        one_token,
                        &mut scratch.exact,
                        out,
                    );
                }
            }
        });
        Ok(())
    }

    fn tile<'s, T>(
        &'s self,
        dims: &Dims,
        item: &WorkItem,
        q: &'s [f32],
        k: &'s [T],
        v: &'s [T],
    ) -> tiled::Tile<'s, T> {
        let rows = |cache| tiled::BlockRows {
            cache,
            table: self.seqs[item.seq].table(self.block_ids),
            n_kv_heads: dims.n_kv_heads,
            kv_head: item.kv_head,
            block_size: dims.block_size,
        };
        let q_stride = dims.n_heads * dims.head_dim;
        tiled::Tile {
            q,
            q_offset: item.first_token * q_stride + item.kv_head * dims.group * dims.head_dim,
            q_stride,
            group: dims.group,
            len: item.len,
            first_pos: item.first_pos,
            head_dim: dims.head_dim,
            scale: self.scale,
            softcap: self.softcap,
            window: self.sliding_window,
            keys: rows(k),
            values: rows(v),
        }
    }

    /// Runs `attend` over the work items in parallel and places each item's
    /// output `[len, group, head_dim]` (per token, the contiguous run of its
    /// KV head's query heads) into `[tokens, n_heads * head_dim]`.
    ///
    /// Thread `t` of `n` takes items `t, t + n, ...` (later items of a
    /// prompt see more keys, so neighbours go to different threads) with its
    /// own buffers from `scratch`.
    fn run_items<F>(&self, dims: &Dims, out: &mut [f32], scratch: &mut AttentionScratch, attend: F)
    where
        F: Fn(&mut Scratch, &WorkItem, &mut Vec<f32>) + Sync,
    {
        let AttentionScratch { items, threads, .. } = scratch;
        self.work_items(dims, items);
        let n = crate::backend::cpu::kernels::current_threads().clamp(1, items.len().max(1));
        if threads.len() < n {
            threads.resize_with(n, Default::default);
        }
        let row = dims.n_heads * dims.head_dim;
        let run = dims.group * dims.head_dim;
        assert_eq!(out.len(), dims.tokens * row);
        let out = crate::backend::cpu::kernels::SendPtr(out.as_mut_ptr());
        let items = &*items;
        let threads = crate::backend::cpu::kernels::SendPtr(threads.as_mut_ptr());
        crate::backend::cpu::kernels::for_each_thread(n, |t| {
            // SAFETY: t < n <= threads.len(); each region thread takes its own.
            let (scratch, result) = unsafe { &mut *threads.get().add(t) };
            for item in items.iter().skip(t).step_by(n) {
                attend(scratch, item, result);
                for (i, src) in result.chunks_exact(run).enumerate() {
                    let at = (item.first_token + i) * row + item.kv_head * run;
                    assert!(at + run <= dims.tokens * row);
                    // SAFETY: in bounds (checked); items own disjoint
                    // (token, KV head) runs of the output.
                    unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), out.get().add(at), run) };
                }
            }
        });
    }

    /// [`Self::attend`] with the AVX2+FMA vector ops, compiled for AVX2 so
    /// they inline (and the remaining loops vectorize 8 wide).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn attend_avx2<T: CacheElement>(
        &self,
        dims: &Dims,
        item: &WorkItem,
        q: &[f32],
        k: &[T],
        v: &[T],
        scratch: &mut Scratch,
        out: &mut Vec<f32>,
    ) {
        self.attend::<T, super::vector::Avx2Fma>(dims, item, q, k, v, scratch, out)
    }

    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn attend<T: CacheElement, V: VectorOps>(
        &self,
        dims: &Dims,
        item: &WorkItem,
        q: &[f32],
        k: &[T],
        v: &[T],
        scratch: &mut Scratch,
        out: &mut Vec<f32>,
    ) {
        let (hd, group, bs) = (dims.head_dim, dims.group, dims.block_size);
        let table = self.seqs[item.seq].table(self.block_ids);
        let last_pos = item.first_pos + item.len - 1;
        let lo = first_key(item.first_pos, self.sliding_window);
        let ctx = last_pos + 1 - lo;
        let n_queries = item.len * group;

        let Scratch {
            scores,
            block,
            inv_sums,
            ..
        } = scratch;
        scores.clear();
        scores.resize(n_queries * ctx, 0.0);
        block.resize(bs * hd, 0.0);
        // Keys `key_from..key_to` of cache block `b`, and for each query the
        // keys of that range it sees.
        let block_rows = |b: usize| {
            let key_from = lo.max(b * bs);
            let key_to = (last_pos + 1).min((b + 1) * bs);
            let base = (table[b] as usize * dims.n_kv_heads + item.kv_head) * bs * hd;
            let offset = base + (key_from - b * bs) * hd;
            (key_from, key_to, offset..offset + (key_to - key_from) * hd)
        };
        let query_keys = |t: usize, key_from: usize, key_to: usize| {
            let pos = item.first_pos + t;
            first_key(pos, self.sliding_window).max(key_from)..(pos + 1).min(key_to)
        };
        let q_rows = |t: usize| {
            let at = (item.first_token + t) * dims.n_heads * hd + item.kv_head * group * hd;
            &q[at..at + group * hd]
        };

        for b in lo / bs..=last_pos / bs {
            let (key_from, key_to, range) = block_rows(b);
            let keys = T::as_f32(&k[range], block);
            for t in 0..item.len {
                let visible = query_keys(t, key_from, key_to);
                for (g, q_row) in q_rows(t).chunks_exact(hd).enumerate() {
                    let row = &mut scores[(t * group + g) * ctx..][..ctx];
                    for j in visible.clone() {
                        let key = &keys[(j - key_from) * hd..][..hd];
                        let score = V::dot(q_row, key) * self.scale;
                        row[j - lo] = match self.softcap {
                            Some(cap) => crate::backend::softcap(score, cap),
                            None => score,
                        };
                    }
                }
            }
        }

        inv_sums.clear();
        for t in 0..item.len {
            let pos = item.first_pos + t;
            let visible = first_key(pos, self.sliding_window) - lo..pos + 1 - lo;
            for g in 0..group {
                let row = &mut scores[(t * group + g) * ctx..][visible.clone()];
                inv_sums.push(softmax_in_place(row));
            }
        }

        out.clear();
        out.resize(n_queries * hd, 0.0);
        for b in lo / bs..=last_pos / bs {
            let (key_from, key_to, range) = block_rows(b);
            let values = T::as_f32(&v[range], block);
            for t in 0..item.len {
                let visible = query_keys(t, key_from, key_to);
                for g in 0..group {
                    let query = t * group + g;
                    let probs = &scores[query * ctx..][..ctx];
                    let acc = &mut out[query * hd..][..hd];
                    for j in visible.clone() {
                        V::axpy(acc, probs[j - lo], &values[(j - key_from) * hd..][..hd]);
                    }
                }
            }
        }
        for (acc, inv_sum) in out.chunks_exact_mut(hd).zip(inv_sums.iter()) {
            acc.iter_mut().for_each(|x| *x *= inv_sum);
        }
    }
}

/// Replaces `row` by `exp(row - max)` and returns `1 / sum`.
#[inline(always)]
fn softmax_in_place(row: &mut [f32]) -> f32 {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0f32;
    for x in row.iter_mut() {
        *x = (*x - max).exp();
        sum += *x;
    }
    1.0 / sum
}
