//! Tests of the block manager, kept apart from it for length.
use super::*;

const NONE: ExtraKey = ExtraKey::NONE;

fn ids(v: &[u32]) -> Vec<BlockId> {
    v.iter().map(|&i| BlockId(i)).collect()
}

fn check(m: &BlockManager) {
    m.check_invariants().unwrap();
}

/// Allocates a prompt and, like a forward pass over it, marks it computed.
fn alloc(
    m: &mut BlockManager,
    seq: SeqId,
    tokens: &[TokenId],
    extra: ExtraKey,
) -> Result<Allocation, KvError> {
    let a = m.allocate_prompt(seq, tokens, extra)?;
    m.mark_computed(seq, tokens.len()).unwrap();
    Ok(a)
}

/// Appends tokens and marks them computed.
fn append(m: &mut BlockManager, seq: SeqId, tokens: &[TokenId]) -> Result<Vec<BlockId>, KvError> {
    let fresh = m.append_slot(seq, tokens)?;
    m.mark_computed(seq, m.num_tokens(seq).unwrap()).unwrap();
    Ok(fresh)
}

#[test]
fn blocks_are_found_only_once_computed() {
    let mut m = BlockManager::new(8, 4);
    let p: Vec<TokenId> = (0..10).collect();
    m.allocate_prompt(SeqId(1), &p, NONE).unwrap();
    // Nothing written yet: a second identical prompt computes its own copy.
    let b = m.allocate_prompt(SeqId(2), &p, NONE).unwrap();
    assert_eq!(b.cached_tokens, 0);
    // The first prefill chunk (6 tokens) completes block 0 only.
    m.mark_computed(SeqId(1), 6).unwrap();
    let c = m.allocate_prompt(SeqId(3), &p, NONE).unwrap();
    assert_eq!(c.cached_tokens, 4);
    check(&m);
    // Aborted mid-prefill: its uncomputed second block is not cached.
    m.free(SeqId(1)).unwrap();
    m.free(SeqId(2)).unwrap();
    let d = m.allocate_prompt(SeqId(4), &p, NONE).unwrap();
    assert_eq!(d.cached_tokens, 4);
    check(&m);
}

#[test]
fn prompt_gets_ceil_blocks_and_only_full_blocks_are_hashed() {
    let mut m = BlockManager::new(8, 4);
    let a = alloc(&mut m, SeqId(1), &[1, 2, 3, 4, 5, 6], NONE).unwrap();
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
    let a = alloc(&mut m, SeqId(1), &p, NONE).unwrap();
    // Same first 8 tokens, then diverges.
    let mut q = p[..8].to_vec();
    q.extend([50, 51, 52]);
    let b = alloc(&mut m, SeqId(2), &q, NONE).unwrap();
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
    alloc(&mut m, SeqId(1), &[1, 2, 3, 4, 5, 6, 7], NONE).unwrap();
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
    let a = alloc(&mut m, SeqId(1), &[1, 2, 3, 4, 5], NONE).unwrap();
    m.free(SeqId(1)).unwrap();
    assert_eq!(m.num_free_blocks(), 4);
    let b = alloc(&mut m, SeqId(2), &[1, 2, 3, 4, 6], NONE).unwrap();
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
    let a = alloc(&mut m, SeqId(1), &p, NONE).unwrap();
    let b = alloc(&mut m, SeqId(2), &p, NONE).unwrap();
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
    let c = alloc(&mut m, SeqId(3), &q, NONE).unwrap();
    assert_eq!(c.cached_tokens, 8);
    // A one-block prompt that is cached: nothing can be shared.
    let d = alloc(&mut m, SeqId(4), &p[..4], NONE).unwrap();
    assert_eq!(d.cached_tokens, 0);
    check(&m);
}

#[test]
fn lru_eviction_of_cached_prefix() {
    let mut m = BlockManager::new(3, 2);
    let a = alloc(&mut m, SeqId(1), &[1, 2, 3, 4, 5], NONE).unwrap();
    m.free(SeqId(1)).unwrap();
    let old = hash_full_blocks(&[1, 2, 3, 4], 2, NONE);
    assert_eq!(m.pool().block_hash(a.blocks[0]), Some(old[0]));
    assert_eq!(m.pool().num_cached_blocks(), 2);
    // Unrelated prompt needs 3 blocks: reuses all, evicting both hashes.
    alloc(&mut m, SeqId(2), &[7, 7, 7, 7, 7], NONE).unwrap();
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
    let c = alloc(&mut m, SeqId(3), &[1, 2, 3, 4, 5], NONE).unwrap();
    assert_eq!(c.cached_tokens, 0, "evicted prefix is gone");
    check(&m);
}

#[test]
fn free_is_tail_first_so_prefix_is_evicted_last() {
    let mut m = BlockManager::new(6, 2);
    let a = alloc(&mut m, SeqId(1), &[1, 2, 3, 4, 5, 6], NONE).unwrap();
    assert_eq!(a.blocks, ids(&[0, 1, 2]));
    m.free(SeqId(1)).unwrap();
    assert_eq!(m.pool().free_order(), ids(&[3, 4, 5, 2, 1, 0]));
    // Needs 4 blocks: takes the never-used ones, then the tail block 2;
    // the prefix blocks [1,2],[3,4] keep their hashes.
    let b = alloc(&mut m, SeqId(2), &[9; 7], NONE).unwrap();
    assert_eq!(b.blocks, ids(&[3, 4, 5, 2]));
    assert!(m.pool().block_hash(BlockId(0)).is_some());
    assert!(m.pool().block_hash(BlockId(1)).is_some());
    m.free(SeqId(2)).unwrap();
    let c = alloc(&mut m, SeqId(3), &[1, 2, 3, 4, 0], NONE).unwrap();
    assert_eq!(c.cached_tokens, 4);
    assert_eq!(c.blocks[..2], ids(&[0, 1]));
    check(&m);
}

#[test]
fn append_slot_grows_and_hashes_full_blocks() {
    let mut m = BlockManager::new(4, 2);
    alloc(&mut m, SeqId(1), &[1, 2, 3], NONE).unwrap();
    assert_eq!(append(&mut m, SeqId(1), &[4]).unwrap(), vec![]);
    let last = m.block_table(SeqId(1)).unwrap()[1];
    assert!(
        m.pool().block_hash(last).is_some(),
        "block hashed once full"
    );
    let grown = append(&mut m, SeqId(1), &[5]).unwrap();
    assert_eq!(grown.len(), 1);
    assert_eq!(m.pool().block_hash(grown[0]), None);
    assert_eq!(m.num_tokens(SeqId(1)), Some(5));
    check(&m);
    // Decode-produced blocks are reusable by a later prompt.
    let b = alloc(&mut m, SeqId(2), &[1, 2, 3, 4, 8], NONE).unwrap();
    assert_eq!(b.cached_tokens, 4);
    check(&m);
    // Multi-token append spanning blocks, then out of blocks.
    assert_eq!(m.num_free_blocks(), 0);
    assert!(!m.can_append(SeqId(1), 2).unwrap());
    assert!(m.can_append(SeqId(1), 1).unwrap());
    assert_eq!(
        append(&mut m, SeqId(1), &[6, 7]),
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
fn truncate_drops_rejected_slots_and_caches_committed_tokens_only() {
    let mut m = BlockManager::new(8, 4);
    let p: Vec<TokenId> = (0..6).collect();
    alloc(&mut m, SeqId(1), &p, NONE).unwrap();
    // A speculative step: one decode token and five drafts, 12 slots.
    m.append_slot(SeqId(1), &[6, 70, 71, 72, 73, 74]).unwrap();
    assert_eq!(m.block_table(SeqId(1)).unwrap().len(), 3);
    assert_eq!(m.num_free_blocks(), 5);
    // Two drafts stand: 9 tokens, blocks 0..3 kept, block 2 holds one.
    m.truncate(SeqId(1), 9).unwrap();
    m.mark_computed(SeqId(1), 9).unwrap();
    check(&m);
    assert_eq!(m.num_tokens(SeqId(1)), Some(9));
    // None stand: the third block goes back.
    m.append_slot(SeqId(1), &[80, 81]).unwrap();
    m.truncate(SeqId(1), 8).unwrap();
    m.mark_computed(SeqId(1), 8).unwrap();
    check(&m);
    assert_eq!(m.block_table(SeqId(1)).unwrap().len(), 2);
    assert_eq!(m.num_free_blocks(), 6);
    // Only committed tokens were cached: the second block is [4, 5, 6, 70].
    let q = [0, 1, 2, 3, 4, 5, 6, 70, 9];
    let hit = alloc(&mut m, SeqId(2), &q, NONE).unwrap();
    assert_eq!(hit.cached_tokens, 8);
    let other = [0, 1, 2, 3, 4, 5, 6, 71, 9];
    let miss = alloc(&mut m, SeqId(3), &other, NONE).unwrap();
    assert_eq!(miss.cached_tokens, 4);
    // Registered blocks are never cut.
    m.truncate(SeqId(1), 2).unwrap();
    assert_eq!(m.num_tokens(SeqId(1)), Some(8));
    check(&m);
}

#[test]
fn errors() {
    let mut m = BlockManager::new(2, 2);
    assert_eq!(
        alloc(&mut m, SeqId(1), &[], NONE),
        Err(KvError::EmptyPrompt)
    );
    assert_eq!(
        alloc(&mut m, SeqId(1), &[1, 2, 3, 4, 5], NONE),
        Err(KvError::OutOfBlocks { needed: 3, free: 2 })
    );
    assert!(!m.can_allocate(&[1, 2, 3, 4, 5], NONE));
    assert!(m.can_allocate(&[1, 2, 3], NONE));
    alloc(&mut m, SeqId(1), &[1], NONE).unwrap();
    assert_eq!(
        alloc(&mut m, SeqId(1), &[1], NONE),
        Err(KvError::SeqExists(SeqId(1)))
    );
    assert_eq!(m.free(SeqId(9)), Err(KvError::UnknownSeq(SeqId(9))));
    assert_eq!(
        append(&mut m, SeqId(9), &[1]),
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
    alloc(&mut m, SeqId(1), &[1, 2, 3], NONE).unwrap();
    m.free(SeqId(1)).unwrap();
    assert!(m.can_allocate(&[1, 2, 3], NONE));
    assert!(!m.can_allocate(&[1, 2, 3, 4, 5], NONE));
    let a = alloc(&mut m, SeqId(2), &[1, 2, 3], NONE).unwrap();
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
                match alloc(&mut m, seq, &p, extra) {
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
                // Half the appends are speculative steps: all slots
                // reserved, a random prefix kept, the rest rolled back.
                let kept = match rng.below(2) {
                    0 => new.len(),
                    _ => rng.below(new.len() + 1),
                };
                let result = m.append_slot(seq, &new).inspect(|_| {
                    m.truncate(seq, before + kept).unwrap();
                    m.mark_computed(seq, before + kept).unwrap();
                });
                match result {
                    Ok(_) => {
                        assert!(can);
                        assert_eq!(m.num_tokens(seq), Some(before + kept));
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
