//! The unit of work of one forward pass.

use crate::kv_cache::KvCache;

/// One sequence's share of a forward batch: `len` new tokens that continue a
/// sequence whose first `start_pos` tokens are already in `cache`.
///
/// A prefill chunk has `len > 1`, a decode step `len == 1`; both kinds can sit
/// in the same batch.
pub struct SeqChunk<'a> {
    pub start_pos: usize,
    pub len: usize,
    pub cache: &'a mut dyn KvCache,
}

impl SeqChunk<'_> {
    /// Absolute positions of the chunk's tokens.
    pub fn positions(&self) -> std::ops::Range<usize> {
        self.start_pos..self.start_pos + self.len
    }
}
