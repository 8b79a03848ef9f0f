//! Per-sequence block tables over a [`BlockPool`], with prefix reuse.
//!
//! A sequence's table maps its token positions to KV slots: position `p`
//! lives in slot `p % block_size` of block `table[p / block_size]`.
//!
//! Prefix reuse: when a prompt arrives, its full blocks are hashed in a chain
//! ([`hash_full_blocks`]) and the longest run of leading blocks already in
//! the cache is shared (ref count + 1, taken out of the free list if it was
//! free). Those tokens need no prefill.
//!
//! The last prompt token is never a hit: prefill must run on at least one
//! token to produce the logits of the first generated token. If every full
//! block of a block-aligned prompt is cached, `cached_tokens` would be `len`;
//! reporting `len - 1` instead would mean recomputing that last token *into
//! the last shared block*, writing a block other sequences read. We never
//! write into a shared block, so the whole last block is dropped from the hit
//! instead: it gets a fresh private block and `cached_tokens = len -
//! block_size` (at most `block_size` tokens recomputed, and only in this
//! case). The fresh block is full but its hash is already cached by the
//! block we did not share, so it is not registered a second time.
//!
//! A block's hash is registered (made findable) only once the forward pass
//! has written its KV: the scheduler calls [`BlockManager::mark_computed`]
//! after each pass. A prompt that arrives while another sequence is still
//! prefilling the same prefix therefore misses those blocks and computes its
//! own copy; it can never read KV that was not written yet, and a sequence
//! preempted or aborted mid-prefill leaves no half-written block in the cache.

use std::collections::HashMap;

use mlxr_tokenizer::TokenId;

use super::block_pool::{BlockId, BlockPool};
use super::prefix_hash::{hash_block, hash_full_blocks, BlockHash, ExtraKey};

/// Identifies a sequence (request) to the block manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeqId(pub u64);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KvError {
    #[error("out of KV blocks: need {needed} free, have {free}")]
    OutOfBlocks { needed: usize, free: usize },
    #[error("unknown sequence {0:?}")]
    UnknownSeq(SeqId),
    #[error("sequence {0:?} already has blocks")]
    SeqExists(SeqId),
    #[error("the prompt is empty")]
    EmptyPrompt,
}

/// The result of [`BlockManager::allocate_prompt`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    /// The sequence's block table (covers every prompt token).
    pub blocks: Vec<BlockId>,
    /// Leading prompt tokens whose KV is already in `blocks` (a multiple of
    /// `block_size`, always `< prompt length`); prefill starts here.
    pub cached_tokens: usize,
}

/// Prefix-cache counters, in tokens, since creation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PrefixCacheStats {
    /// Prompt tokens looked up (every allocated prompt's full length).
    pub queries: u64,
    /// Of those, tokens served from the cache.
    pub hits: u64,
}

impl PrefixCacheStats {
    pub fn hit_rate(&self) -> f64 {
        if self.queries == 0 {
            0.0
        } else {
            self.hits as f64 / self.queries as f64
        }
    }
}

#[derive(Debug, Clone)]
struct SeqState {
    blocks: Vec<BlockId>,
    /// Every token with a reserved slot (prompt + decode so far).
    tokens: Vec<TokenId>,
    /// Chained hashes of the full blocks so far (`hashes.len() ==
    /// tokens.len() / block_size`).
    hashes: Vec<BlockHash>,
    /// Leading blocks whose hashes are registered in the pool (or were
    /// offered: another block may already cache the same prefix).
    registered: usize,
    extra: ExtraKey,
}

/// What a prompt allocation would do, computed without changing anything.
struct PromptPlan {
    hashes: Vec<BlockHash>,
    hits: Vec<BlockId>,
    /// Free blocks the allocation consumes: new blocks plus hit blocks that
    /// are currently free.
    free_needed: usize,
}

#[derive(Debug, Clone)]
pub struct BlockManager {
    pool: BlockPool,
    seqs: HashMap<SeqId, SeqState>,
    stats: PrefixCacheStats,
}

impl BlockManager {
    pub fn new(num_blocks: usize, block_size: usize) -> Self {
        BlockManager {
            pool: BlockPool::new(num_blocks, block_size),
            seqs: HashMap::new(),
            stats: PrefixCacheStats::default(),
        }
    }

    pub fn pool(&self) -> &BlockPool {
        &self.pool
    }

    pub fn block_size(&self) -> usize {
        self.pool.block_size()
    }

    pub fn num_free_blocks(&self) -> usize {
        self.pool.num_free_blocks()
    }

    pub fn usage(&self) -> f64 {
        self.pool.usage()
    }

    pub fn stats(&self) -> PrefixCacheStats {
        self.stats
    }

    pub fn block_table(&self, seq: SeqId) -> Option<&[BlockId]> {
        self.seqs.get(&seq).map(|s| s.blocks.as_slice())
    }

    /// Tokens with a reserved slot in `seq` (its KV length once computed).
    pub fn num_tokens(&self, seq: SeqId) -> Option<usize> {
        self.seqs.get(&seq).map(|s| s.tokens.len())
    }

    pub fn num_seqs(&self) -> usize {
        self.seqs.len()
    }

    pub fn contains(&self, seq: SeqId) -> bool {
        self.seqs.contains_key(&seq)
    }

    fn plan_prompt(&self, tokens: &[TokenId], extra: ExtraKey) -> PromptPlan {
        let bs = self.block_size();
        let hashes = hash_full_blocks(tokens, bs, extra);
        let mut hits = Vec::new();
        let mut parent = BlockHash::ROOT;
        for (i, &h) in hashes.iter().enumerate() {
            match self
                .pool
                .lookup(h, parent, extra, &tokens[i * bs..(i + 1) * bs])
            {
                Some(id) => hits.push(id),
                None => break,
            }
            parent = h;
        }
        // The last prompt token is always recomputed; never share the block
        // it would be written into (see the module docs).
        if hits.len() * bs == tokens.len() {
            hits.pop();
        }
        let new_blocks = tokens.len().div_ceil(bs) - hits.len();
        let free_hits = hits.iter().filter(|&&id| self.pool.is_free(id)).count();
        PromptPlan {
            hashes,
            hits,
            free_needed: new_blocks + free_hits,
        }
    }

    /// Free blocks [`Self::allocate_prompt`] would consume for this prompt
    /// now (new blocks plus cached blocks it would take off the free list).
    pub fn blocks_needed_for_prompt(&self, tokens: &[TokenId], extra: ExtraKey) -> usize {
        self.plan_prompt(tokens, extra).free_needed
    }

    /// Whether [`Self::allocate_prompt`] would succeed for this prompt now.
    pub fn can_allocate(&self, tokens: &[TokenId], extra: ExtraKey) -> bool {
        !tokens.is_empty() && self.plan_prompt(tokens, extra).free_needed <= self.num_free_blocks()
    }

    /// Give `seq` a block table covering `tokens`, sharing the longest chain
    /// of cached full blocks. On error nothing changes.
    pub fn allocate_prompt(
        &mut self,
        seq: SeqId,
        tokens: &[TokenId],
        extra: ExtraKey,
    ) -> Result<Allocation, KvError> {
        if tokens.is_empty() {
            return Err(KvError::EmptyPrompt);
        }
        if self.seqs.contains_key(&seq) {
            return Err(KvError::SeqExists(seq));
        }
        let bs = self.block_size();
        let plan = self.plan_prompt(tokens, extra);
        let free = self.num_free_blocks();
        if plan.free_needed > free {
            return Err(KvError::OutOfBlocks {
                needed: plan.free_needed,
                free,
            });
        }
        // Touch hits first so allocating fresh blocks cannot evict them.
        for &id in &plan.hits {
            self.pool.touch(id);
        }
        let num_new = tokens.len().div_ceil(bs) - plan.hits.len();
        let fresh = self
            .pool
            .allocate_n(num_new)
            .expect("free blocks were counted");
        let mut blocks = plan.hits.clone();
        blocks.extend(fresh);
        let cached_tokens = plan.hits.len() * bs;
        debug_assert!(cached_tokens < tokens.len());
        debug_assert_eq!(blocks.len(), tokens.len().div_ceil(bs));
        self.stats.queries += tokens.len() as u64;
        self.stats.hits += cached_tokens as u64;
        self.seqs.insert(
            seq,
            SeqState {
                blocks: blocks.clone(),
                tokens: tokens.to_vec(),
                registered: plan.hits.len(),
                hashes: plan.hashes,
                extra,
            },
        );
        Ok(Allocation {
            blocks,
            cached_tokens,
        })
    }

    /// Free blocks `append_slot(seq, n tokens)` would take.
    fn blocks_needed(&self, s: &SeqState, new_token_count: usize) -> usize {
        (s.tokens.len() + new_token_count).div_ceil(self.block_size()) - s.blocks.len()
    }

    /// Whether `seq` can grow by `new_token_count` tokens now.
    pub fn can_append(&self, seq: SeqId, new_token_count: usize) -> Result<bool, KvError> {
        let s = self.seqs.get(&seq).ok_or(KvError::UnknownSeq(seq))?;
        Ok(self.blocks_needed(s, new_token_count) <= self.num_free_blocks())
    }

    /// Reserve slots for `new_tokens` (usually one decode token) at the end
    /// of `seq`, allocating blocks as the last one fills up, and hash every
    /// block that becomes full. Returns the newly allocated blocks. Token ids
    /// are needed (not just a count) to hash the blocks they complete. On
    /// error nothing changes.
    pub fn append_slot(
        &mut self,
        seq: SeqId,
        new_tokens: &[TokenId],
    ) -> Result<Vec<BlockId>, KvError> {
        let bs = self.block_size();
        let s = self.seqs.get(&seq).ok_or(KvError::UnknownSeq(seq))?;
        let needed = self.blocks_needed(s, new_tokens.len());
        let free = self.num_free_blocks();
        if needed > free {
            return Err(KvError::OutOfBlocks { needed, free });
        }
        let fresh = self
            .pool
            .allocate_n(needed)
            .expect("free blocks were counted");
        let s = self.seqs.get_mut(&seq).expect("checked above");
        s.blocks.extend_from_slice(&fresh);
        s.tokens.extend_from_slice(new_tokens);
        while s.hashes.len() < s.tokens.len() / bs {
            let i = s.hashes.len();
            let parent = s.hashes.last().copied().unwrap_or(BlockHash::ROOT);
            let block_tokens = &s.tokens[i * bs..(i + 1) * bs];
            s.hashes.push(hash_block(parent, block_tokens, s.extra));
        }
        debug_assert_eq!(s.blocks.len(), s.tokens.len().div_ceil(bs));
        Ok(fresh)
    }

    /// The first `num_computed` tokens of `seq` now have their KV written:
    /// make the full blocks among them findable by later prompts.
    pub fn mark_computed(&mut self, seq: SeqId, num_computed: usize) -> Result<(), KvError> {
        let bs = self.block_size();
        let s = self.seqs.get_mut(&seq).ok_or(KvError::UnknownSeq(seq))?;
        let full = (num_computed / bs).min(s.hashes.len());
        for i in s.registered..full {
            let parent = if i == 0 {
                BlockHash::ROOT
            } else {
                s.hashes[i - 1]
            };
            self.pool.register(
                s.blocks[i],
                s.hashes[i],
                parent,
                s.extra,
                &s.tokens[i * bs..(i + 1) * bs],
            );
        }
        s.registered = s.registered.max(full);
        Ok(())
    }

    /// Drop `seq`'s slots from `len` on (the rejected draft tokens of a
    /// speculative step), releasing the blocks past the new end. Blocks
    /// already registered in the prefix cache are never cut: their tokens
    /// were computed and committed. On error nothing changes.
    pub fn truncate(&mut self, seq: SeqId, len: usize) -> Result<(), KvError> {
        let bs = self.block_size();
        let s = self.seqs.get_mut(&seq).ok_or(KvError::UnknownSeq(seq))?;
        let len = len.min(s.tokens.len()).max(s.registered * bs);
        s.tokens.truncate(len);
        s.hashes.truncate(len / bs);
        let keep = len.div_ceil(bs);
        for id in s.blocks.drain(keep..).rev() {
            self.pool.release(id);
        }
        Ok(())
    }

    /// Rewrites `seq`'s token ids from `from` on (a draft model's tokens in
    /// slots reserved with placeholders), rehashing the blocks they fill.
    /// The slots and blocks stay; blocks already registered are not touched.
    pub fn replace_tail(
        &mut self,
        seq: SeqId,
        from: usize,
        tokens: &[TokenId],
    ) -> Result<(), KvError> {
        let bs = self.block_size();
        let s = self.seqs.get_mut(&seq).ok_or(KvError::UnknownSeq(seq))?;
        debug_assert!(from >= s.registered * bs, "registered blocks are committed");
        let end = (from + tokens.len()).min(s.tokens.len());
        s.tokens[from..end].copy_from_slice(&tokens[..end - from]);
        s.hashes.truncate(from / bs);
        while s.hashes.len() < s.tokens.len() / bs {
            let i = s.hashes.len();
            let parent = s.hashes.last().copied().unwrap_or(BlockHash::ROOT);
            s.hashes
                .push(hash_block(parent, &s.tokens[i * bs..(i + 1) * bs], s.extra));
        }
        Ok(())
    }

    /// Release all of `seq`'s blocks (finish, abort or preempt). Blocks go
    /// to the free list tail-first, so a sequence's shared prefix blocks are
    /// the last of them to be evicted. Their hashes stay cached.
    pub fn free(&mut self, seq: SeqId) -> Result<(), KvError> {
        let s = self.seqs.remove(&seq).ok_or(KvError::UnknownSeq(seq))?;
        for &id in s.blocks.iter().rev() {
            self.pool.release(id);
        }
        Ok(())
    }

    /// Consistency check across pool and tables (tests/debugging): pool
    /// invariants hold, every block's ref count equals the number of table
    /// entries naming it, and each sequence's blocks/hashes match its tokens.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.pool.check_invariants()?;
        let bs = self.block_size();
        let mut refs = vec![0u32; self.pool.num_blocks()];
        for (seq, s) in &self.seqs {
            if s.blocks.len() != s.tokens.len().div_ceil(bs)
                || s.hashes.len() != s.tokens.len() / bs
            {
                return Err(format!("{seq:?}: table does not match its tokens"));
            }
            if s.hashes != hash_full_blocks(&s.tokens, bs, s.extra) {
                return Err(format!("{seq:?}: stale block hashes"));
            }
            for (i, &id) in s.blocks.iter().enumerate() {
                refs[id.index()] += 1;
                // A cached block in a table holds exactly this table's tokens.
                if let Some(cached) = self.pool.cached_tokens(id) {
                    if s.hashes.get(i) != self.pool.block_hash(id).as_ref()
                        || cached != &s.tokens[i * bs..(i + 1) * bs]
                    {
                        return Err(format!("{seq:?}: block {} caches other content", id.0));
                    }
                }
            }
        }
        for (i, &r) in refs.iter().enumerate() {
            let actual = self.pool.ref_count(BlockId(i as u32));
            if actual != r {
                return Err(format!(
                    "block {i}: ref_count {actual} but {r} table entries"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "block_manager_tests.rs"]
mod tests;
