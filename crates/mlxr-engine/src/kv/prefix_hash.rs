//! Chained hashes of full KV blocks.
//!
//! A block's hash covers `(parent hash, extra key, the block's token ids)`,
//! where the parent is the hash of the previous block of the same sequence
//! (or [`BlockHash::ROOT`] for the first block). So one hash names a whole
//! prefix: two sequences share block `i` only if they agree on every token
//! of blocks `0..=i` and on the extra key.
//!
//! Only FULL blocks are hashed: a partial block can still grow and so is
//! never shared.
//!
//! The hash is FNV-1a (64-bit) over explicit little-endian bytes, followed by
//! a splitmix64 finaliser to spread the bits. It uses no per-process random
//! key, so it is stable across processes, platforms and releases of Rust
//! (it may be persisted or compared between processes). It is not
//! collision-resistant against an adversary; the block pool therefore also
//! keeps each cached block's key and re-checks it on every hit.

use mlxr_tokenizer::TokenId;

/// The hash of one full block and, through its parent chain, of the prefix
/// that ends with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockHash(pub u64);

impl BlockHash {
    /// The parent of a sequence's first block (a fixed, arbitrary seed).
    pub const ROOT: BlockHash = BlockHash(0x6d6c_7872_5f6b_7630); // "mlxr_kv0"
}

/// Whatever besides the tokens decides the KV contents of a block: the model
/// or adapter (LoRA) id, a tenant salt, ... `ExtraKey::NONE` for plain use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ExtraKey(pub u64);

impl ExtraKey {
    pub const NONE: ExtraKey = ExtraKey(0);
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv1a(mut state: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        state ^= u64::from(b);
        state = state.wrapping_mul(FNV_PRIME);
    }
    state
}

/// splitmix64's finaliser: every input bit affects every output bit.
fn finalise(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Hash one block given its parent's hash (`BlockHash::ROOT` for the first).
pub fn hash_block(parent: BlockHash, tokens: &[TokenId], extra: ExtraKey) -> BlockHash {
    let mut h = fnv1a(FNV_OFFSET, &parent.0.to_le_bytes());
    h = fnv1a(h, &extra.0.to_le_bytes());
    h = fnv1a(h, &(tokens.len() as u64).to_le_bytes());
    for &t in tokens {
        h = fnv1a(h, &t.to_le_bytes());
    }
    BlockHash(finalise(h))
}

/// The chained hashes of every full block of `tokens`; a trailing partial
/// block gets none.
pub fn hash_full_blocks(tokens: &[TokenId], block_size: usize, extra: ExtraKey) -> Vec<BlockHash> {
    assert!(block_size > 0, "block_size must be positive");
    let mut parent = BlockHash::ROOT;
    tokens
        .chunks_exact(block_size)
        .map(|block| {
            parent = hash_block(parent, block, extra);
            parent
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_value() {
        // Pinned: the hash must not change between builds or processes.
        let a = hash_block(BlockHash::ROOT, &[1, 2, 3, 4], ExtraKey::NONE);
        assert_eq!(
            a,
            hash_block(BlockHash::ROOT, &[1, 2, 3, 4], ExtraKey::NONE)
        );
        assert_eq!(a, BlockHash(PINNED));
    }
    const PINNED: u64 = 7_614_426_871_588_403_991; // checked against a Python FNV-1a + splitmix64 twin

    #[test]
    fn partial_block_is_not_hashed() {
        assert_eq!(hash_full_blocks(&[1, 2, 3], 4, ExtraKey::NONE).len(), 0);
        assert_eq!(
            hash_full_blocks(&[1, 2, 3, 4, 5], 4, ExtraKey::NONE).len(),
            1
        );
        assert_eq!(hash_full_blocks(&[1; 8], 4, ExtraKey::NONE).len(), 2);
    }

    #[test]
    fn chained_over_parent_tokens_and_extra_key() {
        let x = hash_full_blocks(&[1, 2, 3, 4, 5, 6, 7, 8], 4, ExtraKey::NONE);
        let y = hash_full_blocks(&[9, 2, 3, 4, 5, 6, 7, 8], 4, ExtraKey::NONE);
        let z = hash_full_blocks(&[1, 2, 3, 4, 5, 6, 7, 8], 4, ExtraKey(7));
        // Same second-block tokens, different prefix: different hash.
        assert_ne!(x[1], y[1]);
        assert_ne!(x[0], z[0]);
        assert_ne!(x[1], z[1]);
        // The chain is the per-block hash fed forward.
        assert_eq!(x[1], hash_block(x[0], &[5, 6, 7, 8], ExtraKey::NONE));
        // Identical blocks at different depths differ.
        let same = hash_full_blocks(&[3; 8], 4, ExtraKey::NONE);
        assert_ne!(same[0], same[1]);
    }
}
