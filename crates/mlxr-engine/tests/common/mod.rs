//! What the engine's batched tests share: loading a real model and the
//! engine configurations a batch must give the same tokens under.

use std::sync::Arc;

use mlxr_engine::{EngineConfig, KvBudget, LoadedModel};
use mlxr_testkit::model_path;

/// The model `file` with a 2,048-token context, or `None` when it is not
/// fetched (a failure under `MLXR_REQUIRE_MODELS=1`).
pub fn load(file: &str) -> Option<Arc<LoadedModel>> {
    let path = model_path(file)?;
    Some(Arc::new(LoadedModel::load(&path, Some(2048)).unwrap()))
}

/// Bytes of one 16-token block of `lm`'s f16 KV cache.
pub fn block_bytes(lm: &LoadedModel) -> u64 {
    let c = lm.model.config();
    (2 * c.n_layers * 16 * c.n_kv_heads * c.head_dim * 2) as u64
}

/// `base` as it is, with a KV budget of `tight_blocks` blocks (forces
/// preemption), with 7-token steps (prompts split into chunks, decodes
/// sharing steps with them) and with prefix caching off.
pub fn batch_variants(
    base: EngineConfig,
    lm: &LoadedModel,
    tight_blocks: u64,
) -> [(&'static str, EngineConfig); 4] {
    [
        ("batched", base.clone()),
        (
            "tight KV budget",
            EngineConfig {
                kv_budget: KvBudget::Bytes(tight_blocks * block_bytes(lm)),
                ..base.clone()
            },
        ),
        (
            "7-token steps",
            EngineConfig {
                max_num_batched_tokens: 7,
                ..base.clone()
            },
        ),
        (
            "no prefix cache",
            EngineConfig {
                prefix_caching: false,
                ..base
            },
        ),
    ]
}
