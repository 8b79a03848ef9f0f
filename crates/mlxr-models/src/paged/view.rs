//! The paged cache as the model sees it for one forward batch.

use candle_core::{DType, Device, Tensor};

use super::attention_op::{check_block_tables, AttentionScratch, PagedAttentionOp, PagedSeq};
use super::store::PagedKvStore;
use crate::batch::SeqChunk;
use crate::kv_cache::{AttentionSpec, KvCache};
use crate::{ModelError, Result};

/// The store plus the block table of each sequence of a batch: sequence `i`
/// keeps position `p` at offset `p % block_size` of block
/// `block_tables[i][p / block_size]`.
pub struct PagedKvView<'a> {
    pub store: &'a PagedKvStore,
    pub block_tables: Vec<&'a [u32]>,
    /// The chunks of the current call with their tables (reused).
    paged: Vec<PagedSeq<'a>>,
}

impl<'a> PagedKvView<'a> {
    pub fn new(store: &'a PagedKvStore, block_tables: Vec<&'a [u32]>) -> Self {
        Self {
            store,
            block_tables,
            paged: Vec::new(),
        }
    }

    /// [`KvCache::attend`]: writes `k`/`v` into the chunks' slots of `layer`,
    /// then attends. A position beyond a block table, or a block id the store
    /// does not have, is [`ModelError::InvalidBatch`] and nothing is written.
    pub fn attend_batch(
        &mut self,
        layer: usize,
        spec: &AttentionSpec,
        seqs: &[SeqChunk],
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
    ) -> Result<Tensor> {
        let tokens = self.check_shapes(spec, seqs, q, k, v)?;
        let values = |t: &Tensor| -> Result<Vec<f32>> {
            Ok(t.to_dtype(DType::F32)?.flatten_all()?.to_vec1()?)
        };
        let (q, k, v) = (values(q)?, values(k)?, values(v)?);
        let mut out = vec![0f32; q.len()];
        let scratch = &mut AttentionScratch::default();
        self.attend_into(layer, spec, seqs, [&q, &k, &v], &mut out, scratch)?;
        Ok(Tensor::from_vec(
            out,
            (tokens, spec.n_heads * spec.head_dim),
            &Device::Cpu,
        )?)
    }

    /// [`Self::attend_batch`] over buffers: `q` `[tokens, n_heads,
    /// head_dim]`, `k`/`v` `[tokens, n_kv_heads, head_dim]` in, the attention
    /// output `[tokens, n_heads * head_dim]` into `out`.
    #[allow(clippy::too_many_arguments)]
    pub fn attend_into(
        &mut self,
        layer: usize,
        spec: &AttentionSpec,
        seqs: &[SeqChunk],
        [q, k, v]: [&[f32]; 3],
        out: &mut [f32],
        scratch: &mut AttentionScratch,
    ) -> Result<()> {
        let tokens = self.check_lengths(spec, seqs, [q, k, v, out])?;
        self.paged.clear();
        let tables = self.block_tables.iter();
        self.paged.extend(
            seqs.iter()
                .zip(tables)
                .map(|(chunk, &block_table)| PagedSeq {
                    start_pos: chunk.start_pos,
                    len: chunk.len,
                    block_table,
                }),
        );
        let paged = &self.paged;
        let block_size = self.store.block_size();
        check_block_tables(
            paged,
            block_size,
            self.store.num_blocks(),
            spec.sliding_window,
        )
        .map_err(ModelError::InvalidBatch)?;
        if tokens == 0 {
            return Ok(());
        }
        scratch.slots.clear();
        scratch.slots.extend(paged.iter().flat_map(|seq| {
            (seq.start_pos..seq.start_pos + seq.len).map(move |pos| {
                // Fits in u32: the store caps num_blocks * block_size.
                seq.block_table[pos / block_size] * block_size as u32 + (pos % block_size) as u32
            })
        }));
        self.store.write(layer, &scratch.slots, k, v)?;
        let op = PagedAttentionOp::new(paged, spec.scale, spec.sliding_window);
        let heads = [spec.n_heads, spec.head_dim];
        self.store
            .read(layer, |keys, values| {
                op.attend_into(heads, q, keys, values, out, scratch)
            })?
            .map_err(|e| ModelError::candle(format!("layer {layer}: paged attention"), e))
    }

    /// The chunks match the block tables and `spec` the store.
    fn check_geometry(&self, spec: &AttentionSpec, seqs: &[SeqChunk]) -> Result<()> {
        let invalid = |msg: String| ModelError::InvalidBatch(msg);
        if seqs.len() != self.block_tables.len() {
            return Err(invalid(format!(
                "{} chunks but {} block tables",
                seqs.len(),
                self.block_tables.len()
            )));
        }
        let store = self.store;
        if spec.n_kv_heads != store.n_kv_heads()
            || spec.head_dim != store.head_dim()
            || spec.n_heads == 0
            || spec.n_heads % spec.n_kv_heads != 0
        {
            return Err(invalid(format!(
                "attention {spec:?} does not fit the paged store ({} KV heads of dimension {})",
                store.n_kv_heads(),
                store.head_dim()
            )));
        }
        Ok(())
    }

    fn total_tokens(seqs: &[SeqChunk]) -> Result<usize> {
        seqs.iter()
            .try_fold(0usize, |sum, chunk| sum.checked_add(chunk.len))
            .ok_or_else(|| ModelError::InvalidBatch("chunk lengths overflow".into()))
    }

    /// The token count, when `seqs` fit the block tables and `q`, `k`, `v`
    /// and `out` have their lengths.
    fn check_lengths(
        &self,
        spec: &AttentionSpec,
        seqs: &[SeqChunk],
        [q, k, v, out]: [&[f32]; 4],
    ) -> Result<usize> {
        self.check_geometry(spec, seqs)?;
        let tokens = Self::total_tokens(seqs)?;
        let (q_len, kv_len) = (
            tokens * spec.n_heads * spec.head_dim,
            tokens * spec.n_kv_heads * spec.head_dim,
        );
        if q.len() != q_len || out.len() != q_len || k.len() != kv_len || v.len() != kv_len {
            return Err(ModelError::InvalidBatch(format!(
                "{tokens} tokens need {q_len} query and output values and {kv_len} key and value \
                 values, got {}, {}, {} and {}",
                q.len(),
                out.len(),
                k.len(),
                v.len()
            )));
        }
        Ok(tokens)
    }

    /// Checks the batch against the store and returns its token count.
    fn check_shapes(
        &self,
        spec: &AttentionSpec,
        seqs: &[SeqChunk],
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
    ) -> Result<usize> {
        let invalid = |msg: String| ModelError::InvalidBatch(msg);
        self.check_geometry(spec, seqs)?;
        let tokens = Self::total_tokens(seqs)?;
        let expect = |t: &Tensor, name: &str, heads: usize| {
            let want = [tokens, heads, spec.head_dim];
            if t.dims() == want {
                Ok(())
            } else {
                Err(invalid(format!(
                    "{name} has shape {:?}, expected {want:?}",
                    t.dims()
                )))
            }
        };
        expect(q, "q", spec.n_heads)?;
        expect(k, "k", spec.n_kv_heads)?;
        expect(v, "v", spec.n_kv_heads)?;
        Ok(tokens)
    }
}

impl KvCache for PagedKvView<'_> {
    fn attend(
        &mut self,
        layer: usize,
        spec: &AttentionSpec,
        seqs: &[SeqChunk],
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
    ) -> Result<Tensor> {
        self.attend_batch(layer, spec, seqs, q, k, v)
    }
}
