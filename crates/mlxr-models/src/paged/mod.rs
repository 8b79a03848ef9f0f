//! Paged KV cache: keys and values of all sequences in one pool of
//! fixed-size blocks per layer ([`PagedKvStore`]), addressed through
//! per-sequence block tables ([`PagedKvView`], the [`crate::KvCache`] the
//! model uses), with in-place candle ops that write new rows into their slots
//! ([`KvWriteOp`]) and attend over the blocks ([`PagedAttentionOp`], CPU
//! kernel; other backends plug in as that op's `cuda_fwd`/`metal_fwd`).

mod attention_op;
mod element;
mod exact;
mod store;
mod tiled;
mod vector;
mod view;
mod write_op;

#[cfg(test)]
mod exact_tests;
#[cfg(test)]
mod tests;

pub use attention_op::{AttentionScratch, PagedAttentionOp, PagedSeq};
pub use store::PagedKvStore;
pub use view::PagedKvView;
pub use write_op::{KvRowsWrite, KvWriteOp};
