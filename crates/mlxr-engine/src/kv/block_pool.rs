//! The pool of KV blocks: ref counts, the LRU free list, and the map from
//! prefix hash to the block that holds that prefix.
//!
//! A block is either *in use* (`ref_count > 0`, owned by one or more block
//! tables) or *free* (`ref_count == 0`, in the free list exactly once). A free
//! block may still hold a cached prefix: it stays findable by its hash, and
//! [`BlockPool::touch`] can take it back out of the middle of the free list
//! in O(1). Its hash is dropped only when [`BlockPool::allocate`] reuses it
//! (lazy eviction). Allocation takes the least recently freed block (head);
//! freeing appends to the tail.

use std::collections::HashMap;

use mlxr_tokenizer::TokenId;

use super::prefix_hash::{BlockHash, ExtraKey};

/// Index of a block in the pool (and of its slots in the KV tensors:
/// slots `id * block_size .. (id + 1) * block_size`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockId(pub u32);

impl BlockId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// "No block" in the intrusive list links.
const NIL: u32 = u32::MAX;

/// What a cached block was hashed from; re-checked on every hit so a hash
/// collision can never hand out the wrong KV.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CachedKey {
    hash: BlockHash,
    parent: BlockHash,
    extra: ExtraKey,
    tokens: Vec<TokenId>,
}

#[derive(Debug, Clone)]
struct Block {
    ref_count: u32,
    /// Set while the block holds a registered full prefix block.
    cached: Option<CachedKey>,
    // Free-list links; meaningful only while `in_free_list`.
    prev: u32,
    next: u32,
    in_free_list: bool,
}

/// Intrusive doubly linked list threaded through `Block::{prev, next}`.
#[derive(Debug, Clone)]
struct FreeList {
    head: u32,
    tail: u32,
    len: usize,
}

impl FreeList {
    fn push_back(&mut self, blocks: &mut [Block], id: u32) {
        let b = &mut blocks[id as usize];
        debug_assert!(!b.in_free_list, "block {id} already free");
        b.in_free_list = true;
        b.prev = self.tail;
        b.next = NIL;
        if self.tail == NIL {
            self.head = id;
        } else {
            blocks[self.tail as usize].next = id;
        }
        self.tail = id;
        self.len += 1;
    }

    fn remove(&mut self, blocks: &mut [Block], id: u32) {
        let (prev, next) = {
            let b = &mut blocks[id as usize];
            debug_assert!(b.in_free_list, "block {id} not in the free list");
            b.in_free_list = false;
            let links = (b.prev, b.next);
            b.prev = NIL;
            b.next = NIL;
            links
        };
        if prev == NIL {
            self.head = next;
        } else {
            blocks[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            blocks[next as usize].prev = prev;
        }
        self.len -= 1;
    }

    fn pop_front(&mut self, blocks: &mut [Block]) -> Option<u32> {
        let id = self.head;
        if id == NIL {
            return None;
        }
        self.remove(blocks, id);
        Some(id)
    }
}

#[derive(Debug, Clone)]
pub struct BlockPool {
    blocks: Vec<Block>,
    free: FreeList,
    cached: HashMap<BlockHash, BlockId>,
    block_size: usize,
}

impl BlockPool {
    /// `num_blocks` blocks of `block_size` token slots, all free, in id order.
    pub fn new(num_blocks: usize, block_size: usize) -> Self {
        assert!(block_size > 0, "block_size must be positive");
        assert!(num_blocks < NIL as usize, "too many blocks");
        let mut pool = BlockPool {
            blocks: vec![
                Block {
                    ref_count: 0,
                    cached: None,
                    prev: NIL,
                    next: NIL,
                    in_free_list: false
                };
                num_blocks
            ],
            free: FreeList {
                head: NIL,
                tail: NIL,
                len: 0,
            },
            cached: HashMap::new(),
            block_size,
        };
        for id in 0..num_blocks as u32 {
            pool.free.push_back(&mut pool.blocks, id);
        }
        pool
    }

    pub fn block_size(&self) -> usize {
        self.block_size
    }

    pub fn num_blocks(&self) -> usize {
        self.blocks.len()
    }

    pub fn num_free_blocks(&self) -> usize {
        self.free.len
    }

    pub fn num_used_blocks(&self) -> usize {
        self.blocks.len() - self.free.len
    }

    /// Fraction of blocks in use, in `[0, 1]` (0 for an empty pool).
    pub fn usage(&self) -> f64 {
        if self.blocks.is_empty() {
            0.0
        } else {
            self.num_used_blocks() as f64 / self.blocks.len() as f64
        }
    }

    pub fn ref_count(&self, id: BlockId) -> u32 {
        self.blocks[id.index()].ref_count
    }

    pub fn is_free(&self, id: BlockId) -> bool {
        self.blocks[id.index()].in_free_list
    }

    /// The prefix hash a block is registered under, if any.
    pub fn block_hash(&self, id: BlockId) -> Option<BlockHash> {
        self.blocks[id.index()].cached.as_ref().map(|k| k.hash)
    }

    /// Number of hashes in the prefix cache (in-use and free blocks).
    pub fn num_cached_blocks(&self) -> usize {
        self.cached.len()
    }

    /// The block caching exactly this block of this prefix, whether in use or
    /// free. The stored key is compared in full, so a hash collision is a
    /// miss, never a wrong hit.
    pub fn lookup(
        &self,
        hash: BlockHash,
        parent: BlockHash,
        extra: ExtraKey,
        tokens: &[TokenId],
    ) -> Option<BlockId> {
        let id = *self.cached.get(&hash)?;
        let key = self.blocks[id.index()].cached.as_ref()?;
        debug_assert_eq!(key.hash, hash);
        (key.parent == parent && key.extra == extra && key.tokens == tokens).then_some(id)
    }

    /// Take the least recently freed block, evicting its cached prefix (if
    /// any); it comes back with `ref_count == 1`.
    pub fn allocate(&mut self) -> Option<BlockId> {
        let id = self.free.pop_front(&mut self.blocks)?;
        let block = &mut self.blocks[id as usize];
        debug_assert_eq!(block.ref_count, 0, "free block {id} is referenced");
        block.ref_count = 1;
        if let Some(key) = block.cached.take() {
            let evicted = self.cached.remove(&key.hash);
            debug_assert_eq!(evicted, Some(BlockId(id)));
        }
        Some(BlockId(id))
    }

    /// Take `n` blocks, or none at all if fewer than `n` are free.
    pub fn allocate_n(&mut self, n: usize) -> Option<Vec<BlockId>> {
        if n > self.num_free_blocks() {
            return None;
        }
        Some(
            (0..n)
                .map(|_| self.allocate().expect("counted free blocks"))
                .collect(),
        )
    }

    /// One more reference to a block (a prefix-cache hit). A free block
    /// leaves the free list and keeps its cached hash.
    pub fn touch(&mut self, id: BlockId) {
        if self.blocks[id.index()].in_free_list {
            debug_assert_eq!(self.blocks[id.index()].ref_count, 0);
            self.free.remove(&mut self.blocks, id.0);
        }
        self.blocks[id.index()].ref_count += 1;
    }

    /// Drop one reference; at zero the block goes to the tail of the free
    /// list, keeping its cached hash until it is reused.
    pub fn release(&mut self, id: BlockId) {
        let block = &mut self.blocks[id.index()];
        assert!(
            block.ref_count > 0,
            "release of unreferenced block {}",
            id.0
        );
        block.ref_count -= 1;
        if block.ref_count == 0 {
            self.free.push_back(&mut self.blocks, id.0);
        }
    }

    /// Register an in-use, full block as caching `hash`. Returns false (and
    /// registers nothing) if another block already caches that hash, or this
    /// block is already registered: the first copy of a prefix stays the
    /// canonical one.
    pub fn register(
        &mut self,
        id: BlockId,
        hash: BlockHash,
        parent: BlockHash,
        extra: ExtraKey,
        tokens: &[TokenId],
    ) -> bool {
        debug_assert_eq!(tokens.len(), self.block_size, "only full blocks are hashed");
        debug_assert!(
            self.blocks[id.index()].ref_count > 0,
            "register of a free block"
        );
        if self.cached.contains_key(&hash) || self.blocks[id.index()].cached.is_some() {
            return false;
        }
        self.cached.insert(hash, id);
        self.blocks[id.index()].cached = Some(CachedKey {
            hash,
            parent,
            extra,
            tokens: tokens.to_vec(),
        });
        true
    }

    /// The token ids a cached block was registered with.
    pub fn cached_tokens(&self, id: BlockId) -> Option<&[TokenId]> {
        self.blocks[id.index()]
            .cached
            .as_ref()
            .map(|k| k.tokens.as_slice())
    }

    /// `(parent, extra)` a cached block was registered with.
    #[cfg(test)]
    pub(crate) fn blocks_key_for_test(&self, id: BlockId) -> (BlockHash, ExtraKey) {
        let key = self.blocks[id.index()]
            .cached
            .as_ref()
            .expect("cached block");
        (key.parent, key.extra)
    }

    /// Free block ids from LRU head (next to be reused) to tail.
    pub fn free_order(&self) -> Vec<BlockId> {
        let mut out = Vec::with_capacity(self.free.len);
        let mut cur = self.free.head;
        while cur != NIL {
            out.push(BlockId(cur));
            cur = self.blocks[cur as usize].next;
        }
        out
    }

    /// Full O(n) consistency check of the pool (for tests and debugging):
    /// the free list is well linked, holds exactly the blocks with
    /// `ref_count == 0`, each once; free + used == total; the hash map and
    /// the per-block cached keys agree both ways.
    pub fn check_invariants(&self) -> Result<(), String> {
        let n = self.blocks.len();
        let mut seen = vec![false; n];
        let mut prev = NIL;
        let mut cur = self.free.head;
        let mut count = 0;
        while cur != NIL {
            let i = cur as usize;
            if i >= n || seen[i] {
                return Err(format!("free list revisits or overruns at block {cur}"));
            }
            seen[i] = true;
            let b = &self.blocks[i];
            if !b.in_free_list || b.ref_count != 0 || b.prev != prev {
                return Err(format!("free list block {cur} inconsistent: {b:?}"));
            }
            count += 1;
            prev = cur;
            cur = b.next;
        }
        if prev != self.free.tail || count != self.free.len {
            return Err(format!(
                "free list tail/len wrong: len {} walked {count}",
                self.free.len
            ));
        }
        for (i, b) in self.blocks.iter().enumerate() {
            if b.in_free_list != seen[i] {
                return Err(format!(
                    "block {i} in_free_list flag disagrees with the list"
                ));
            }
            if (b.ref_count == 0) != seen[i] {
                return Err(format!(
                    "block {i}: ref_count {} but free={}",
                    b.ref_count, seen[i]
                ));
            }
            if let Some(key) = &b.cached {
                if self.cached.get(&key.hash) != Some(&BlockId(i as u32)) {
                    return Err(format!("block {i} cached key not in the hash map"));
                }
                if key.tokens.len() != self.block_size {
                    return Err(format!("block {i} cached with a partial block"));
                }
            }
        }
        for (hash, id) in &self.cached {
            match self.blocks.get(id.index()).and_then(|b| b.cached.as_ref()) {
                Some(key) if key.hash == *hash => {}
                _ => return Err(format!("hash {hash:?} maps to block {} without it", id.0)),
            }
        }
        if self.num_free_blocks() + self.num_used_blocks() != n {
            return Err("free + used != total".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::prefix_hash::hash_block;

    fn ids(v: &[u32]) -> Vec<BlockId> {
        v.iter().map(|&i| BlockId(i)).collect()
    }

    fn register(pool: &mut BlockPool, id: BlockId, tokens: &[TokenId]) -> BlockHash {
        let h = hash_block(BlockHash::ROOT, tokens, ExtraKey::NONE);
        assert!(pool.register(id, h, BlockHash::ROOT, ExtraKey::NONE, tokens));
        h
    }

    #[test]
    fn allocates_from_head_frees_to_tail() {
        let mut pool = BlockPool::new(4, 2);
        assert_eq!(pool.free_order(), ids(&[0, 1, 2, 3]));
        let a = pool.allocate().unwrap();
        let b = pool.allocate().unwrap();
        assert_eq!((a, b), (BlockId(0), BlockId(1)));
        assert_eq!(pool.num_free_blocks(), 2);
        assert!((pool.usage() - 0.5).abs() < 1e-12);
        pool.release(b);
        pool.release(a);
        // LRU: the blocks freed first are reused first.
        assert_eq!(pool.free_order(), ids(&[2, 3, 1, 0]));
        assert_eq!(pool.allocate(), Some(BlockId(2)));
        pool.check_invariants().unwrap();
    }

    #[test]
    fn out_of_blocks() {
        let mut pool = BlockPool::new(2, 2);
        assert!(pool.allocate_n(3).is_none());
        assert_eq!(
            pool.num_free_blocks(),
            2,
            "a failed allocate_n takes nothing"
        );
        assert_eq!(pool.allocate_n(2).unwrap(), ids(&[0, 1]));
        assert!(pool.allocate().is_none());
        assert_eq!(pool.usage(), 1.0);
    }

    #[test]
    fn touch_removes_from_middle_of_free_list() {
        let mut pool = BlockPool::new(5, 2);
        let all = pool.allocate_n(5).unwrap();
        for &id in &all {
            pool.release(id);
        }
        pool.touch(BlockId(2));
        assert_eq!(pool.free_order(), ids(&[0, 1, 3, 4]));
        assert_eq!(pool.ref_count(BlockId(2)), 1);
        pool.touch(BlockId(0));
        pool.touch(BlockId(4));
        assert_eq!(pool.free_order(), ids(&[1, 3]));
        pool.touch(BlockId(2));
        assert_eq!(pool.ref_count(BlockId(2)), 2);
        pool.release(BlockId(2));
        assert!(!pool.is_free(BlockId(2)));
        pool.release(BlockId(2));
        assert_eq!(pool.free_order(), ids(&[1, 3, 2]));
        pool.check_invariants().unwrap();
    }

    #[test]
    fn free_cached_block_stays_findable_until_reused() {
        let mut pool = BlockPool::new(2, 2);
        let a = pool.allocate().unwrap();
        let h = register(&mut pool, a, &[7, 8]);
        pool.release(a);
        assert!(pool.is_free(a));
        assert_eq!(
            pool.lookup(h, BlockHash::ROOT, ExtraKey::NONE, &[7, 8]),
            Some(a)
        );
        // Content is re-checked: a (forged) colliding key is a miss.
        assert_eq!(
            pool.lookup(h, BlockHash::ROOT, ExtraKey::NONE, &[7, 9]),
            None
        );
        assert_eq!(pool.lookup(h, BlockHash::ROOT, ExtraKey(1), &[7, 8]), None);
        // Block 1 is at the head, so the cached block survives one allocation.
        assert_eq!(pool.allocate(), Some(BlockId(1)));
        assert_eq!(pool.block_hash(a), Some(h));
        // The next allocation reuses it and evicts the hash.
        assert_eq!(pool.allocate(), Some(a));
        assert_eq!(pool.block_hash(a), None);
        assert_eq!(
            pool.lookup(h, BlockHash::ROOT, ExtraKey::NONE, &[7, 8]),
            None
        );
        assert_eq!(pool.num_cached_blocks(), 0);
        pool.check_invariants().unwrap();
    }

    #[test]
    fn first_registration_wins() {
        let mut pool = BlockPool::new(2, 2);
        let a = pool.allocate().unwrap();
        let b = pool.allocate().unwrap();
        let h = register(&mut pool, a, &[1, 2]);
        assert!(!pool.register(b, h, BlockHash::ROOT, ExtraKey::NONE, &[1, 2]));
        assert_eq!(pool.block_hash(b), None);
        assert_eq!(
            pool.lookup(h, BlockHash::ROOT, ExtraKey::NONE, &[1, 2]),
            Some(a)
        );
        pool.check_invariants().unwrap();
    }
}
