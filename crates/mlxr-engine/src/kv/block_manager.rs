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
//! Contract with the scheduler: a block's hash is registered as soon as it
//! is full of *scheduled* tokens (at [`BlockManager::allocate_prompt`] /
//! [`BlockManager::append_slot`]), before the forward pass writes its KV. A
//! sequence that hits such a block must not read it before the pass that
//! writes it has run (in practice: run prefill chunks in admission order).

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
        // Register the newly filled full blocks.
        for i in plan.hits.len()..plan.hashes.len() {
            let parent = if i == 0 {
                BlockHash::ROOT
            } else {
                plan.hashes[i - 1]
            };
            self.pool.register(
                blocks[i],
                plan.hashes[i],
                parent,
                extra,
                &tokens[i * bs..(i + 1) * bs],
            );
        }
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
    /// of `seq`, allocating blocks as the last one fills up, and register the
    /// hash of every block that becomes full. Returns the newly allocated
    /// blocks. Token ids are needed (not just a count) to hash the blocks
    /// they complete. On error nothing changes.
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
            let h = hash_block(parent, block_tokens, s.extra);
            self.pool
                .register(s.blocks[i], h, parent, s.extra, block_tokens);
            s.hashes.push(h);
        }
        debug_assert_eq!(s.blocks.len(), s.tokens.len().div_ceil(bs));
        Ok(fresh)
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
mod tests {
    use super::*;

    const NONE: ExtraKey = ExtraKey::NONE;

    fn ids(v: &[u32]) -> Vec<BlockId> {
        v.iter().map(|&i| BlockId(i)).collect()
    }

    fn check(m: &BlockManager) {
        m.check_invariants().unwrap();
    }

    #[test]
    fn prompt_gets_ceil_blocks_and_only_full_blocks_are_hashed() {
        let mut m = BlockManager::new(8, 4);
        let a = m
            .allocate_prompt(SeqId(1), &[1, 2, 3, 4, 5, 6], NONE)
            .unwrap();
        assert_eq!(a.blocks, ids(&[0, 1]));
        assert_eq!(a.cached_tokens, 0);
        assert!(m.pool().block_hash(BlockId(0)).is_some());
        assert_eq!(
            m.pool().block_hash(BlockId(1)),
            None,
            "partial block is never hashed"
        );
        assert_eq!(m.num_free_blocks(), 6);
        check(&m);
    }

    #[test]
    fn reuses_cached_chain_and_shares_ref_counts() {
        let mut m = BlockManager::new(8, 4);
        let p: Vec<TokenId> = (0..10).collect();
        let a = m.allocate_prompt(SeqId(1), &p, NONE).unwrap();
        // Same first 8 tokens, then diverges.
        let mut q = p[..8].to_vec();
        q.extend([50, 51, 52]);
        let b = m.allocate_prompt(SeqId(2), &q, NONE).unwrap();
        assert_eq!(b.cached_tokens, 8);
        assert_eq!(b.blocks[..2], a.blocks[..2]);
        assert_ne!(b.blocks[2], a.blocks[2]);
        assert_eq!(m.pool().ref_count(a.blocks[0]), 2);
        assert_eq!(m.pool().ref_count(a.blocks[1]), 2);
        assert_eq!(m.pool().ref_count(a.blocks[2]), 1);
        assert_eq!(
            m.stats(),
            PrefixCacheStats {
                queries: 21,
                hits: 8
            }
        );
        check(&m);
        // Freeing one sharer keeps the shared blocks in use.
        m.free(SeqId(1)).unwrap();
        assert_eq!(m.pool().ref_count(a.blocks[0]), 1);
        assert!(m.pool().is_free(a.blocks[2]));
        check(&m);
        m.free(SeqId(2)).unwrap();
        assert_eq!(m.num_free_blocks(), 8);
        check(&m);
    }

    #[test]
    fn chain_stops_at_first_miss() {
        let mut m = BlockManager::new(10, 2);
        m.allocate_prompt(SeqId(1), &[1, 2, 3, 4, 5, 6, 7], NONE)
            .unwrap();
        // Block 1 differs, so block 2 cannot hit even with equal tokens.
        let b = m
            .allocate_prompt(SeqId(2), &[1, 2, 9, 9, 5, 6, 7], NONE)
            .unwrap();
        assert_eq!(b.cached_tokens, 2);
        // A different extra key (adapter) shares nothing.
        let c = m
            .allocate_prompt(SeqId(3), &[1, 2, 3], ExtraKey(5))
            .unwrap();
        assert_eq!(c.cached_tokens, 0);
        check(&m);
    }

    #[test]
    fn hit_on_free_cached_blocks_after_free() {
        let mut m = BlockManager::new(4, 2);
        let a = m.allocate_prompt(SeqId(1), &[1, 2, 3, 4, 5], NONE).unwrap();
        m.free(SeqId(1)).unwrap();
        assert_eq!(m.num_free_blocks(), 4);
        let b = m.allocate_prompt(SeqId(2), &[1, 2, 3, 4, 6], NONE).unwrap();
        assert_eq!(b.cached_tokens, 4);
        assert_eq!(b.blocks[..2], a.blocks[..2]);
        // Two free hits + one new block.
        assert_eq!(m.num_free_blocks(), 1);
        check(&m);
    }

    #[test]
    fn fully_cached_aligned_prompt_recomputes_last_block() {
        let mut m = BlockManager::new(8, 4);
        let p: Vec<TokenId> = (0..8).collect();
        let a = m.allocate_prompt(SeqId(1), &p, NONE).unwrap();
        let b = m.allocate_prompt(SeqId(2), &p, NONE).unwrap();
        // Never len: the last token is recomputed, in a private block.
        assert_eq!(b.cached_tokens, 4);
        assert_eq!(b.blocks[0], a.blocks[0]);
        assert_ne!(b.blocks[1], a.blocks[1]);
        assert_eq!(m.pool().ref_count(a.blocks[1]), 1);
        assert_eq!(
            m.pool().block_hash(b.blocks[1]),
            None,
            "duplicate hash not registered"
        );
        // Non-aligned prompt with every full block cached: all full blocks hit.
        let mut q = p.clone();
        q.push(99);
        let c = m.allocate_prompt(SeqId(3), &q, NONE).unwrap();
        assert_eq!(c.cached_tokens, 8);
        // A one-block prompt that is cached: nothing can be shared.
        let d = m.allocate_prompt(SeqId(4), &p[..4], NONE).unwrap();
        assert_eq!(d.cached_tokens, 0);
        check(&m);
    }

    #[test]
    fn lru_eviction_of_cached_prefix() {
        let mut m = BlockManager::new(3, 2);
        let a = m.allocate_prompt(SeqId(1), &[1, 2, 3, 4, 5], NONE).unwrap();
        m.free(SeqId(1)).unwrap();
        let old = hash_full_blocks(&[1, 2, 3, 4], 2, NONE);
        assert_eq!(m.pool().block_hash(a.blocks[0]), Some(old[0]));
        assert_eq!(m.pool().num_cached_blocks(), 2);
        // Unrelated prompt needs 3 blocks: reuses all, evicting both hashes.
        m.allocate_prompt(SeqId(2), &[7, 7, 7, 7, 7], NONE).unwrap();
        assert_eq!(
            m.pool().lookup(old[0], BlockHash::ROOT, NONE, &[1, 2]),
            None
        );
        assert_eq!(m.pool().lookup(old[1], old[0], NONE, &[3, 4]), None);
        assert!(a
            .blocks
            .iter()
            .all(|&id| m.pool().block_hash(id).is_none_or(|h| !old.contains(&h))));
        m.free(SeqId(2)).unwrap();
        let c = m.allocate_prompt(SeqId(3), &[1, 2, 3, 4, 5], NONE).unwrap();
        assert_eq!(c.cached_tokens, 0, "evicted prefix is gone");
        check(&m);
    }

    #[test]
    fn free_is_tail_first_so_prefix_is_evicted_last() {
        let mut m = BlockManager::new(6, 2);
        let a = m
            .allocate_prompt(SeqId(1), &[1, 2, 3, 4, 5, 6], NONE)
            .unwrap();
        assert_eq!(a.blocks, ids(&[0, 1, 2]));
        m.free(SeqId(1)).unwrap();
        assert_eq!(m.pool().free_order(), ids(&[3, 4, 5, 2, 1, 0]));
        // Needs 4 blocks: takes the never-used ones, then the tail block 2;
        // the prefix blocks [1,2],[3,4] keep their hashes.
        let b = m.allocate_prompt(SeqId(2), &[9; 7], NONE).unwrap();
        assert_eq!(b.blocks, ids(&[3, 4, 5, 2]));
        assert!(m.pool().block_hash(BlockId(0)).is_some());
        assert!(m.pool().block_hash(BlockId(1)).is_some());
        m.free(SeqId(2)).unwrap();
        let c = m.allocate_prompt(SeqId(3), &[1, 2, 3, 4, 0], NONE).unwrap();
        assert_eq!(c.cached_tokens, 4);
        assert_eq!(c.blocks[..2], ids(&[0, 1]));
        check(&m);
    }

    #[test]
    fn append_slot_grows_and_hashes_full_blocks() {
        let mut m = BlockManager::new(4, 2);
        m.allocate_prompt(SeqId(1), &[1, 2, 3], NONE).unwrap();
        assert_eq!(m.append_slot(SeqId(1), &[4]).unwrap(), vec![]);
        let last = m.block_table(SeqId(1)).unwrap()[1];
        assert!(
            m.pool().block_hash(last).is_some(),
            "block hashed once full"
        );
        let grown = m.append_slot(SeqId(1), &[5]).unwrap();
        assert_eq!(grown.len(), 1);
        assert_eq!(m.pool().block_hash(grown[0]), None);
        assert_eq!(m.num_tokens(SeqId(1)), Some(5));
        check(&m);
        // Decode-produced blocks are reusable by a later prompt.
        let b = m.allocate_prompt(SeqId(2), &[1, 2, 3, 4, 8], NONE).unwrap();
        assert_eq!(b.cached_tokens, 4);
        check(&m);
        // Multi-token append spanning blocks, then out of blocks.
        assert_eq!(m.num_free_blocks(), 0);
        assert!(!m.can_append(SeqId(1), 2).unwrap());
        assert!(m.can_append(SeqId(1), 1).unwrap());
        assert_eq!(
            m.append_slot(SeqId(1), &[6, 7]),
            Err(KvError::OutOfBlocks { needed: 1, free: 0 })
        );
        assert_eq!(
            m.num_tokens(SeqId(1)),
            Some(5),
            "failed append changes nothing"
        );
        check(&m);
    }

    #[test]
    fn errors() {
        let mut m = BlockManager::new(2, 2);
        assert_eq!(
            m.allocate_prompt(SeqId(1), &[], NONE),
            Err(KvError::EmptyPrompt)
        );
        assert_eq!(
            m.allocate_prompt(SeqId(1), &[1, 2, 3, 4, 5], NONE),
            Err(KvError::OutOfBlocks { needed: 3, free: 2 })
        );
        assert!(!m.can_allocate(&[1, 2, 3, 4, 5], NONE));
        assert!(m.can_allocate(&[1, 2, 3], NONE));
        m.allocate_prompt(SeqId(1), &[1], NONE).unwrap();
        assert_eq!(
            m.allocate_prompt(SeqId(1), &[1], NONE),
            Err(KvError::SeqExists(SeqId(1)))
        );
        assert_eq!(m.free(SeqId(9)), Err(KvError::UnknownSeq(SeqId(9))));
        assert_eq!(
            m.append_slot(SeqId(9), &[1]),
            Err(KvError::UnknownSeq(SeqId(9)))
        );
        assert_eq!(
            m.can_append(SeqId(9), 1),
            Err(KvError::UnknownSeq(SeqId(9)))
        );
        assert_eq!(m.stats().queries, 1, "failed allocations are not counted");
        check(&m);
    }

    #[test]
    fn can_allocate_counts_free_hits() {
        // A hit on a free block consumes a free block just like a new one.
        let mut m = BlockManager::new(2, 2);
        m.allocate_prompt(SeqId(1), &[1, 2, 3], NONE).unwrap();
        m.free(SeqId(1)).unwrap();
        assert!(m.can_allocate(&[1, 2, 3], NONE));
        assert!(!m.can_allocate(&[1, 2, 3, 4, 5], NONE));
        let a = m.allocate_prompt(SeqId(2), &[1, 2, 3], NONE).unwrap();
        assert_eq!(a.cached_tokens, 2);
        check(&m);
    }

    /// splitmix64: a tiny seeded RNG so the property test needs no crate.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// 1000 random allocate / append / free / abort steps, prompts over a
    /// 3-token alphabet with shared stems so prefixes collide; invariants
    /// checked after every step, then no leaks once everything is freed.
    #[test]
    fn random_operations_keep_invariants() {
        for seed in [1u64, 2, 3, 0xdead_beef] {
            random_run(seed);
        }
    }

    fn random_run(seed: u64) {
        let bs = 4;
        let mut m = BlockManager::new(24, bs);
        let mut rng = Rng(seed);
        let stems: Vec<Vec<TokenId>> = (0..3)
            .map(|_| (0..12).map(|_| rng.below(3) as TokenId).collect())
            .collect();
        let mut live: Vec<SeqId> = Vec::new();
        let mut next_id = 0u64;
        let (mut hits, mut ooms) = (0u64, 0u64);
        for step in 0..1000 {
            match rng.below(10) {
                0..=3 => {
                    let stem = &stems[rng.below(stems.len())];
                    let keep = rng.below(stem.len() + 1);
                    let mut p = stem[..keep].to_vec();
                    p.extend((0..rng.below(10)).map(|_| rng.below(3) as TokenId));
                    if p.is_empty() {
                        p.push(0);
                    }
                    let extra = ExtraKey(rng.below(2) as u64);
                    let seq = SeqId(next_id);
                    next_id += 1;
                    let can = m.can_allocate(&p, extra);
                    let free_before = m.num_free_blocks();
                    match m.allocate_prompt(seq, &p, extra) {
                        Ok(a) => {
                            assert!(can, "step {step}: can_allocate said no");
                            assert!(a.cached_tokens < p.len() && a.cached_tokens % bs == 0);
                            assert_eq!(a.blocks.len(), p.len().div_ceil(bs));
                            hits += a.cached_tokens as u64;
                            live.push(seq);
                        }
                        Err(KvError::OutOfBlocks { .. }) => {
                            assert!(!can, "step {step}: can_allocate said yes");
                            assert_eq!(m.num_free_blocks(), free_before);
                            ooms += 1;
                        }
                        Err(e) => panic!("step {step}: {e}"),
                    }
                }
                4..=6 if !live.is_empty() => {
                    let seq = live[rng.below(live.len())];
                    let new: Vec<TokenId> = (0..1 + rng.below(3))
                        .map(|_| rng.below(3) as TokenId)
                        .collect();
                    let can = m.can_append(seq, new.len()).unwrap();
                    let before = m.num_tokens(seq).unwrap();
                    match m.append_slot(seq, &new) {
                        Ok(_) => {
                            assert!(can);
                            assert_eq!(m.num_tokens(seq), Some(before + new.len()));
                        }
                        Err(KvError::OutOfBlocks { .. }) => {
                            assert!(!can);
                            assert_eq!(m.num_tokens(seq), Some(before));
                            // Preempt (recompute): free the sequence.
                            m.free(seq).unwrap();
                            live.retain(|&s| s != seq);
                        }
                        Err(e) => panic!("step {step}: {e}"),
                    }
                }
                _ if !live.is_empty() => {
                    // Finish or abort: both free the whole table.
                    let seq = live.swap_remove(rng.below(live.len()));
                    m.free(seq).unwrap();
                    assert_eq!(m.free(seq), Err(KvError::UnknownSeq(seq)));
                }
                _ => {}
            }
            if let Err(e) = m.check_invariants() {
                panic!("seed {seed} step {step}: {e}");
            }
            let pool = m.pool();
            assert_eq!(
                pool.num_free_blocks() + pool.num_used_blocks(),
                pool.num_blocks()
            );
        }
        assert!(
            hits > 0 && ooms > 0,
            "seed {seed}: run too tame (hits {hits}, ooms {ooms})"
        );
        assert_eq!(m.stats().hits, hits);
        for seq in live.drain(..) {
            m.free(seq).unwrap();
        }
        // No leaks: every block free, each once.
        let pool = m.pool();
        assert_eq!(pool.num_free_blocks(), pool.num_blocks());
        assert_eq!(pool.usage(), 0.0);
        let mut order = pool.free_order();
        order.sort();
        assert_eq!(
            order,
            (0..pool.num_blocks() as u32)
                .map(BlockId)
                .collect::<Vec<_>>()
        );
        // Cached hashes still map to free blocks whose content matches.
        assert!(pool.num_cached_blocks() > 0);
        for i in 0..pool.num_blocks() as u32 {
            let id = BlockId(i);
            if let Some(h) = pool.block_hash(id) {
                assert!(pool.is_free(id));
                let tokens = pool.cached_tokens(id).unwrap().to_vec();
                assert_eq!(tokens.len(), bs);
                let key = pool.blocks_key_for_test(id);
                assert_eq!(h, hash_block(key.0, &tokens, key.1));
                assert_eq!(pool.lookup(h, key.0, key.1, &tokens), Some(id));
            }
        }
        m.check_invariants().unwrap();
    }
}
