//! The unit of work of one forward pass.

/// One sequence's share of a forward batch: `len` new tokens that continue a
/// sequence whose first `start_pos` tokens are already in the KV cache.
///
/// A prefill chunk has `len > 1`, a decode step `len == 1`; both kinds can sit
/// in the same batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqChunk {
    pub start_pos: usize,
    pub len: usize,
}

impl SeqChunk {
    pub fn new(start_pos: usize, len: usize) -> Self {
        Self { start_pos, len }
    }

    /// Absolute positions of the chunk's tokens.
    pub fn positions(&self) -> std::ops::Range<usize> {
        self.start_pos..self.start_pos + self.len
    }
}
