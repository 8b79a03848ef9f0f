//! Megatron-style tensor parallelism: the part of each weight that rank `r`
//! of a world of `N` GPUs holds, and the collectives that join the ranks'
//! parts in the one forward pass ([`crate::DecoderModel::forward`]).
//!
//! - Attention: the query heads split evenly; the KV heads too where there
//!   are at least as many as ranks, else each rank keeps the one KV head its
//!   queries read (replicated on N / n_kv_heads ranks). q, k and v are
//!   column-parallel (a rank keeps their rows for its heads), the output
//!   projection row-parallel (its columns for those heads): the ranks'
//!   partial outputs add up to the whole, by an all-reduce.
//! - MLP: gate and up column-parallel, down row-parallel over the same
//!   slice of the intermediate width, again summed by an all-reduce.
//! - The LM head splits by vocabulary rows; its logits are all-gathered.
//!   The embedding table is kept whole on every rank for now (a
//!   vocab-parallel embedding would need one more all-reduce).
//!
//! A row-parallel weight is cut along its input dimension, so each rank's
//! columns must be whole quantization blocks (`block`: 256 for K-quants, 32
//! for the legacy types, 1 for floats).
//!
//! What runs: [`crate::DecoderModel::load_rank`] loads a rank's part of a
//! GGUF model ([`ShardedWeights`]: every GGML type, cut without
//! dequantizing), whose config has the rank's heads and intermediate width
//! (its paged KV cache holds only its KV heads); the forward pass calls
//! [`crate::Backend::all_reduce`] after the attention output and down
//! projections and [`crate::Backend::all_gather_cols`] after the LM head.
//! The CPU backend implements them over a [`Collective`]; the one there is,
//! [`LocalWorld`], runs the ranks on threads of one process (tests, the
//! CPU). Missing: NCCL behind [`Collective`], the collectives on the CUDA
//! backend, safetensors folders (GGUF only), a launcher, the engine's
//! `--tensor-parallel N`; nothing has run on two GPUs.

mod collective;
mod sources;
mod weights;

use std::ops::Range;

pub use collective::{run_local_world, Collective, CollectiveError, LocalWorld};
pub use weights::{ShardSource, ShardedWeights};

use crate::ModelConfig;

/// Why a model cannot be split over a world of that size.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ShardError {
    #[error("rank {rank} of a world of {world}")]
    Rank { rank: usize, world: usize },
    #[error("{n_heads} query heads do not split over {world} ranks")]
    QueryHeads { n_heads: usize, world: usize },
    #[error(
        "{n_kv_heads} KV heads over {world} ranks: neither splits the other \
         (fewer KV heads than ranks are replicated when they divide the ranks)"
    )]
    KvHeads { n_kv_heads: usize, world: usize },
    #[error("an intermediate width of {width} does not split over {world} ranks")]
    Intermediate { width: usize, world: usize },
    #[error(
        "{what}: {columns} columns a rank are not whole blocks of {block} \
         (a row-parallel weight is cut along its quantization blocks)"
    )]
    Blocks {
        what: &'static str,
        columns: usize,
        block: usize,
    },
}

/// What one rank holds, in heads, intermediate units and vocabulary rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardPlan {
    pub rank: usize,
    pub world: usize,
    pub q_heads: Range<usize>,
    pub kv_heads: Range<usize>,
    pub intermediate: Range<usize>,
    pub vocab: Range<usize>,
    head_dim: usize,
}

impl ShardPlan {
    /// Rank `rank`'s part of `config`'s weights in a world of `world`,
    /// row-parallel weights quantized in blocks of `block` values.
    pub fn new(
        config: &ModelConfig,
        rank: usize,
        world: usize,
        block: usize,
    ) -> Result<Self, ShardError> {
        Self::with_blocks(config, rank, world, [block, block])
    }

    /// [`Self::new`] with the attention output projections quantized in
    /// blocks of `blocks[0]`, the down projections in blocks of `blocks[1]`.
    pub fn with_blocks(
        config: &ModelConfig,
        rank: usize,
        world: usize,
        [attention_block, down_block]: [usize; 2],
    ) -> Result<Self, ShardError> {
        if world == 0 || rank >= world {
            return Err(ShardError::Rank { rank, world });
        }
        let (n_heads, n_kv_heads) = (config.n_heads, config.n_kv_heads);
        if !n_heads.is_multiple_of(world) {
            return Err(ShardError::QueryHeads { n_heads, world });
        }
        let kv_heads = if n_kv_heads >= world && n_kv_heads.is_multiple_of(world) {
            split(n_kv_heads, rank, world)
        } else if n_kv_heads < world && world.is_multiple_of(n_kv_heads) {
            let head = rank / (world / n_kv_heads);
            head..head + 1
        } else {
            return Err(ShardError::KvHeads { n_kv_heads, world });
        };
        let width = config.intermediate_size;
        if !width.is_multiple_of(world) {
            return Err(ShardError::Intermediate { width, world });
        }
        let blocks = |what, columns: usize, block: usize| {
            if columns.is_multiple_of(block.max(1)) {
                Ok(())
            } else {
                Err(ShardError::Blocks {
                    what,
                    columns,
                    block,
                })
            }
        };
        let attention = n_heads / world * config.head_dim;
        blocks("the attention output", attention, attention_block)?;
        blocks("the MLP's down projection", width / world, down_block)?;
        Ok(Self {
            rank,
            world,
            q_heads: split(n_heads, rank, world),
            kv_heads,
            intermediate: split(width, rank, world),
            vocab: split_uneven(config.vocab_size, rank, world),
            head_dim: config.head_dim,
        })
    }

    /// The config of this rank's part of `config`'s model: its query heads,
    /// KV heads and intermediate width. The vocabulary stays whole: every
    /// rank embeds every token, and the gathered logits cover it all.
    pub fn rank_config(&self, config: &ModelConfig) -> ModelConfig {
        ModelConfig {
            n_heads: self.q_heads.len(),
            n_kv_heads: self.kv_heads.len(),
            intermediate_size: self.intermediate.len(),
            ..config.clone()
        }
    }

    /// The rows of the query projection (the columns of the output
    /// projection) this rank holds.
    pub fn q_rows(&self) -> Range<usize> {
        self.q_heads.start * self.head_dim..self.q_heads.end * self.head_dim
    }

    /// The rows of the key and value projections this rank holds.
    pub fn kv_rows(&self) -> Range<usize> {
        self.kv_heads.start * self.head_dim..self.kv_heads.end * self.head_dim
    }
}

/// Part `rank` of `n` in `world` equal parts (`n` a multiple of `world`).
fn split(n: usize, rank: usize, world: usize) -> Range<usize> {
    let per = n / world;
    rank * per..(rank + 1) * per
}

/// Part `rank` of `n` rows in `world` parts of ⌈n / world⌉, the last shorter.
fn split_uneven(n: usize, rank: usize, world: usize) -> Range<usize> {
    let per = n.div_ceil(world);
    (rank * per).min(n)..((rank + 1) * per).min(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Activation, RopeStyle};

    fn config(n_heads: usize, n_kv_heads: usize, hidden: usize, ffn: usize) -> ModelConfig {
        ModelConfig {
            architecture: "llama".into(),
            n_layers: 1,
            hidden_size: hidden,
            intermediate_size: ffn,
            n_heads,
            n_kv_heads,
            head_dim: hidden / n_heads,
            rope_dim: hidden / n_heads,
            rope_style: RopeStyle::Halves,
            rms_norm_eps: 1e-5,
            vocab_size: 151_936,
            context_length: 4096,
            activation: Activation::Silu,
            embedding_scale: None,
            qk_norm: false,
            post_norms: false,
            norm_offset: 0.0,
            attention_scale: 1.0,
            attn_logit_softcap: None,
            final_logit_softcap: None,
            layers: Vec::new(),
        }
    }

    #[test]
    fn an_8b_model_splits_over_2_to_16_ranks() {
        let llama = config(32, 8, 4096, 14336);
        let two = ShardPlan::new(&llama, 1, 2, 256).unwrap();
        assert_eq!((two.q_heads.clone(), two.kv_heads.clone()), (16..32, 4..8));
        assert_eq!((two.q_rows(), two.kv_rows()), (2048..4096, 512..1024));
        assert_eq!(two.intermediate, 7168..14336);
        assert_eq!(two.vocab, 75_968..151_936);
        let eight = ShardPlan::new(&llama, 7, 8, 256).unwrap();
        assert_eq!((eight.q_heads, eight.kv_heads), (28..32, 7..8));
        // 16 ranks, 8 KV heads: each kept by two ranks, the one their
        // queries read (group 4: queries 2r, 2r + 1 read KV head r / 2).
        // 14,336 / 16 = 896 columns of down are not whole K-quant blocks.
        assert!(ShardPlan::new(&llama, 0, 16, 256).is_err());
        for rank in 0..16 {
            let plan = ShardPlan::new(&llama, rank, 16, 32).unwrap();
            assert_eq!(plan.kv_heads, rank / 2..rank / 2 + 1);
            assert!(plan.q_heads.clone().all(|h| h / 4 == rank / 2));
        }
    }

    #[test]
    fn every_rank_together_covers_each_dimension_once() {
        let qwen = config(12, 2, 1536, 8960);
        for world in [1, 2, 4] {
            let plans: Vec<_> = (0..world)
                .map(|r| ShardPlan::new(&qwen, r, world, 32).unwrap())
                .collect();
            let joined = |f: fn(&ShardPlan) -> Range<usize>| {
                plans.iter().map(f).fold(0, |at, r| {
                    assert_eq!(r.start, at, "world {world}");
                    r.end
                })
            };
            assert_eq!(joined(|p| p.q_heads.clone()), 12);
            assert_eq!(joined(|p| p.intermediate.clone()), 8960);
            assert_eq!(joined(|p| p.vocab.clone()), 151_936);
        }
    }

    #[test]
    fn splits_that_do_not_fit_are_refused() {
        let qwen = config(12, 2, 1536, 8960);
        assert_eq!(
            ShardPlan::new(&qwen, 0, 3, 32),
            Err(ShardError::KvHeads {
                n_kv_heads: 2,
                world: 3
            })
        );
        assert_eq!(
            ShardPlan::new(&qwen, 0, 5, 32),
            Err(ShardError::QueryHeads {
                n_heads: 12,
                world: 5
            })
        );
        // 3 heads of 128 (384 columns of the output projection) and 2,240
        // columns of down a rank: not whole K-quant blocks.
        assert_eq!(
            ShardPlan::new(&qwen, 0, 4, 256),
            Err(ShardError::Blocks {
                what: "the attention output",
                columns: 384,
                block: 256
            })
        );
        assert_eq!(
            ShardPlan::new(&config(16, 2, 2048, 8960), 0, 4, 256),
            Err(ShardError::Blocks {
                what: "the MLP's down projection",
                columns: 2240,
                block: 256
            })
        );
        assert_eq!(
            ShardPlan::new(&qwen, 2, 2, 32),
            Err(ShardError::Rank { rank: 2, world: 2 })
        );
        assert!(ShardPlan::new(&config(32, 8, 4096, 14300), 0, 8, 1).is_err());
    }
}
