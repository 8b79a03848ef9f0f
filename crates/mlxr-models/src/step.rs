//! One forward step: the tokens of a batch of sequence chunks and the
//! metadata every layer reads (positions, cache slots, block tables, the
//! rows that get logits), built once per step by the caller and uploaded
//! once by the backend.
//!
//! A chunk's last token gets logits (the next token's); a chunk that
//! verifies draft tokens (speculative decoding) gets them at its last
//! `1 + k` tokens.

use crate::backend::cpu::paged::PagedSeq;
use crate::batch::SeqChunk;
use crate::{ModelError, Result};

/// A batch of chunks with its paged-cache metadata. Reused between steps:
/// [`Self::clear`], [`Self::push`] each chunk, then [`Self::finish`]; once
/// a step of a given size has been built, building one allocates nothing.
#[derive(Default)]
pub struct Step {
    tokens: Vec<u32>,
    chunks: Vec<SeqChunk>,
    seqs: Vec<PagedSeq>,
    block_ids: Vec<u32>,
    positions: Vec<usize>,
    slots: Vec<u32>,
    /// Per chunk, how many of its last tokens get logits.
    scored: Vec<usize>,
    logit_rows: Vec<usize>,
    block_size: usize,
}

impl Step {
    pub fn clear(&mut self) {
        self.tokens.clear();
        self.chunks.clear();
        self.seqs.clear();
        self.block_ids.clear();
        self.positions.clear();
        self.slots.clear();
        self.scored.clear();
        self.logit_rows.clear();
    }

    /// Adds a chunk: `tokens` continue a sequence whose first `start_pos`
    /// tokens are cached, in blocks `block_table` (position `p` at offset `p
    /// % block_size` of block `block_table[p / block_size]`).
    pub fn push(
        &mut self,
        tokens: &[u32],
        start_pos: usize,
        block_table: impl IntoIterator<Item = u32>,
    ) {
        self.push_scored(tokens, start_pos, block_table, 1);
    }

    /// [`Self::push`] for a chunk whose last `scored` tokens get logits
    /// (a speculative step's last accepted token and its drafts).
    pub fn push_scored(
        &mut self,
        tokens: &[u32],
        start_pos: usize,
        block_table: impl IntoIterator<Item = u32>,
        scored: usize,
    ) {
        self.scored.push(scored);
        self.tokens.extend_from_slice(tokens);
        self.chunks.push(SeqChunk::new(start_pos, tokens.len()));
        let table_start = self.block_ids.len();
        self.block_ids.extend(block_table);
        self.seqs.push(PagedSeq {
            start_pos,
            len: tokens.len(),
            table_start,
            table_len: self.block_ids.len() - table_start,
        });
    }

    /// Computes the per-token metadata for blocks of `block_size` positions;
    /// an error when a chunk is empty or reaches past its block table.
    pub fn finish(&mut self, block_size: usize) -> Result<()> {
        let invalid = |msg: String| Err(ModelError::InvalidBatch(msg));
        if block_size == 0 {
            return invalid("block size 0".into());
        }
        self.block_size = block_size;
        self.positions.clear();
        self.slots.clear();
        self.logit_rows.clear();
        let mut row = 0usize;
        for (i, seq) in self.seqs.iter().enumerate() {
            let table = seq.table(&self.block_ids);
            let end = seq.start_pos.checked_add(seq.len);
            let Some(end) = end.filter(|&end| seq.len > 0 && end <= table.len() * block_size)
            else {
                return invalid(format!(
                    "chunk {i} ({} tokens from position {}) does not fit its block table of {} \
                     blocks of {block_size}",
                    seq.len,
                    seq.start_pos,
                    table.len()
                ));
            };
            let scored = self.scored[i];
            if scored == 0 || scored > seq.len {
                return invalid(format!(
                    "chunk {i}: logits for {scored} of its {} tokens",
                    seq.len
                ));
            }
            for pos in seq.start_pos..end {
                self.positions.push(pos);
                let block = table[pos / block_size] as usize;
                // Fits in u32 where the block exists: stores cap their slots.
                self.slots
                    .push((block * block_size + pos % block_size).min(u32::MAX as usize) as u32);
            }
            row += seq.len;
            self.logit_rows.extend(row - scored..row);
        }
        Ok(())
    }

    /// An error naming the first block id outside `0..num_blocks`.
    pub fn check_blocks(&self, num_blocks: usize) -> Result<()> {
        match self.block_ids.iter().find(|&&b| b as usize >= num_blocks) {
            Some(bad) => Err(ModelError::InvalidBatch(format!(
                "block id {bad} out of range ({num_blocks} blocks)"
            ))),
            None => Ok(()),
        }
    }

    /// The tokens of every chunk, in order.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    pub fn chunks(&self) -> &[SeqChunk] {
        &self.chunks
    }

    /// The chunks with their block tables (ranges of [`Self::block_ids`]).
    pub fn seqs(&self) -> &[PagedSeq] {
        &self.seqs
    }

    pub fn block_ids(&self) -> &[u32] {
        &self.block_ids
    }

    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// Each token's absolute position.
    pub fn positions(&self) -> &[usize] {
        &self.positions
    }

    /// Each token's cache slot (`block * block_size + offset`).
    pub fn slots(&self) -> &[u32] {
        &self.slots
    }

    /// The rows that get logits, ascending: each chunk's last, or last
    /// few when it verifies a draft.
    pub fn logit_rows(&self) -> &[usize] {
        &self.logit_rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_of_mixed_chunks() {
        let mut step = Step::default();
        step.push(&[1, 2, 3], 0, [7, 2]);
        step.push(&[9], 5, [4, 0]);
        step.finish(4).unwrap();
        assert_eq!(step.positions(), [0, 1, 2, 5]);
        assert_eq!(step.slots(), [28, 29, 30, 1]);
        assert_eq!(step.logit_rows(), [2, 3]);
        assert_eq!(step.seqs()[1].table(step.block_ids()), [4, 0]);
        assert!(step.check_blocks(8).is_ok());
        assert!(step.check_blocks(7).is_err());
    }

    #[test]
    fn a_verifying_chunk_gets_logits_at_its_last_rows() {
        let mut step = Step::default();
        step.push(&[1, 2, 3], 0, [7, 2]);
        step.push_scored(&[9, 8, 7], 5, [4, 0], 3);
        step.push_scored(&[5, 6], 0, [1], 1);
        step.finish(4).unwrap();
        assert_eq!(step.logit_rows(), [2, 3, 4, 5, 7]);
        step.clear();
        step.push_scored(&[1, 2], 0, [0], 3);
        assert!(step.finish(4).is_err(), "more scored rows than tokens");
    }

    #[test]
    fn chunks_past_their_table_or_empty_are_refused() {
        let mut step = Step::default();
        step.push(&[1, 2], 3, [0]);
        assert!(step.finish(4).is_err());
        step.clear();
        step.push(&[], 0, [0]);
        assert!(step.finish(4).is_err());
        step.clear();
        step.push(&[1], usize::MAX, [0]);
        assert!(step.finish(4).is_err());
    }
}
