//! The paged cache as the model sees it for one forward batch.

use candle_core::{DType, Tensor};

use super::attention_op::{check_block_tables, PagedAttentionOp, PagedSeq};
use super::store::PagedKvStore;
use super::write_op::KvWriteOp;
use crate::batch::SeqChunk;
use crate::kv_cache::{AttentionSpec, KvCache};
use crate::{ModelError, Result};

/// The store plus the block table of each sequence of a batch: sequence `i`
/// keeps position `p` at offset `p % block_size` of block
/// `block_tables[i][p / block_size]`.
pub struct PagedKvView<'a> {
    pub store: &'a PagedKvStore,
    pub block_tables: Vec<&'a [u32]>,
}

impl<'a> PagedKvView<'a> {
    pub fn new(store: &'a PagedKvStore, block_tables: Vec<&'a [u32]>) -> Self {
        Self {
            store,
            block_tables,
        }
    }

    /// [`KvCache::attend`]: writes `k`/`v` into the chunks' slots of `layer`,
    /// then attends. A position beyond a block table, or a block id the store
    /// does not have, is [`ModelError::InvalidBatch`] and nothing is written.
    pub fn attend_batch(
        &self,
        layer: usize,
        spec: &AttentionSpec,
        seqs: &[SeqChunk],
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
    ) -> Result<Tensor> {
        let (keys, values) = (self.store.keys(layer)?, self.store.values(layer)?);
        let tokens = self.check_shapes(spec, seqs, q, k, v)?;
        let paged: Vec<PagedSeq> = seqs
            .iter()
            .zip(&self.block_tables)
            .map(|(chunk, &block_table)| PagedSeq {
                start_pos: chunk.start_pos,
                len: chunk.len,
                block_table,
            })
            .collect();
        check_block_tables(
            &paged,
            self.store.block_size(),
            self.store.num_blocks(),
            spec.sliding_window,
        )
        .map_err(ModelError::InvalidBatch)?;
        if tokens == 0 {
            return Ok(Tensor::zeros(
                (0, spec.n_heads * spec.head_dim),
                DType::F32,
                q.device(),
            )?);
        }

        let slots = Tensor::from_vec(self.slots(&paged), tokens, q.device())?;
        let as_f32 = |t: &Tensor| t.to_dtype(DType::F32)?.contiguous();
        let (q, k, v) = (as_f32(q)?, as_f32(k)?, as_f32(v)?);
        keys.inplace_op3(&k, &slots, &KvWriteOp)
            .map_err(|e| ModelError::candle(format!("layer {layer}: storing keys"), e))?;
        values
            .inplace_op3(&v, &slots, &KvWriteOp)
            .map_err(|e| ModelError::candle(format!("layer {layer}: storing values"), e))?;
        PagedAttentionOp::new(paged, spec.scale, spec.sliding_window)
            .forward(&q, keys, values)
            .map_err(|e| ModelError::candle(format!("layer {layer}: paged attention"), e))
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
        let tokens = seqs
            .iter()
            .try_fold(0usize, |sum, chunk| sum.checked_add(chunk.len))
            .ok_or_else(|| ModelError::InvalidBatch("chunk lengths overflow".into()))?;
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

    /// The cache slot of every new token, in batch order.
    fn slots(&self, seqs: &[PagedSeq]) -> Vec<u32> {
        let block_size = self.store.block_size();
        seqs.iter()
            .flat_map(|seq| {
                (seq.start_pos..seq.start_pos + seq.len).map(move |pos| {
                    // Fits in u32: the store caps num_blocks * block_size.
                    seq.block_table[pos / block_size] * block_size as u32
                        + (pos % block_size) as u32
                })
            })
            .collect()
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
