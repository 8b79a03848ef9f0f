//! A model folder's `config.json` text into the model configuration, as
//! `ModelConfig::from_hf_dir` reads it. Refusals are errors, never panics.
//! (It found that a huge `num_hidden_layers` aborted on allocation; layer
//! counts are now bounded, crates/mlxr-models/tests/fuzz_regressions.rs.)

#![no_main]

use libfuzzer_sys::fuzz_target;
use mlxr_models::ModelConfig;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(json) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    match ModelConfig::from_hf_json(&json) {
        Ok(cfg) => {
            assert_eq!(cfg.layers.len(), cfg.n_layers);
            assert!(cfg.n_heads > 0 && cfg.n_kv_heads > 0);
            assert_eq!(cfg.n_heads % cfg.n_kv_heads, 0);
            assert!(cfg.rope_dim > 0 && cfg.rope_dim <= cfg.head_dim);
            assert_eq!(cfg.rope_dim % 2, 0);
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
