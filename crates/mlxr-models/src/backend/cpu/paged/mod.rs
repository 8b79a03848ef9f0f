//! The CPU backend's paged KV cache: keys and values of all sequences in one
//! pool of fixed-size blocks per layer ([`PagedKvStore`]), addressed through
//! per-sequence block tables (a [`crate::Step`]'s), with ops that write new
//! rows into their slots ([`KvWriteOp`]) and attend over the blocks
//! ([`PagedAttentionOp`]).

mod attention_op;
mod element;
mod exact;
mod store;
mod tiled;
pub(crate) mod vector;
mod write_op;

#[cfg(test)]
mod exact_tests;
#[cfg(test)]
mod tests;

pub(crate) use attention_op::check_block_tables;
pub use attention_op::{AttentionScratch, PagedAttentionOp, PagedSeq};
pub use store::PagedKvStore;
pub use write_op::{KvRowsWrite, KvWriteOp};
