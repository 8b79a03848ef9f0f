//! Bookkeeping for a paged KV cache: which fixed-size blocks of KV slots each
//! sequence owns, and which full blocks hold a reusable, hashed prompt prefix.
//!
//! No tensors live here. The model side owns a pool of `num_blocks *
//! block_size` KV slots per layer; this module hands out [`BlockId`]s into it.
//!
//! - [`prefix_hash`]: chained hashes of full blocks ([`BlockHash`]).
//! - [`block_pool`]: ref-counted blocks, an LRU free list with O(1) removal,
//!   and the hash -> block map of cached prefixes (evicted lazily on reuse).
//! - [`block_manager`]: per-sequence block tables, prompt allocation with
//!   prefix reuse, decode growth, freeing, prefix-cache hit counters.

pub mod block_manager;
pub mod block_pool;
pub mod prefix_hash;

pub use block_manager::{Allocation, BlockManager, KvError, PrefixCacheStats, SeqId};
pub use block_pool::{BlockId, BlockPool};
pub use prefix_hash::{hash_block, hash_full_blocks, BlockHash, ExtraKey};
