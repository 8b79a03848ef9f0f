//! The tensor-parallel plan on real weights (the tiny Llama fixture, f32):
//! column-parallel projections cut by rows give each rank its heads'
//! outputs, and row-parallel ones cut by columns give partial outputs that
//! add up to the whole (what the all-reduce will do), within f32 rounding.

use mlxr_models::tensor_parallel::ShardPlan;
use mlxr_models::ModelConfig;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn fixture() -> std::path::PathBuf {
    mlxr_testkit::fixture_path("tiny-models").join("llama")
}

/// Seeded values in [-1, 1).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(-1.0..1.0)).collect()
}

/// `w` ([rows, cols] row-major) times `x`, over `rows` and `cols` only.
fn product(
    w: &[f32],
    cols: usize,
    x: &[f32],
    rows: std::ops::Range<usize>,
    part: std::ops::Range<usize>,
) -> Vec<f32> {
    rows.map(|r| part.clone().map(|c| w[r * cols + c] * x[c]).sum())
        .collect()
}

/// The f32 tensor `{stem}.weight` and its `[rows, cols]`.
fn weight(file: &safetensors::SafeTensors, stem: &str) -> (Vec<f32>, usize, usize) {
    let view = file.tensor(&format!("{stem}.weight")).unwrap();
    assert_eq!(view.dtype(), safetensors::Dtype::F32);
    let values = view
        .data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    (values, view.shape()[0], view.shape()[1])
}

#[test]
fn shards_of_the_tiny_llama_add_up_to_its_projections() {
    let dir = fixture();
    let config = ModelConfig::from_hf_dir(&dir).unwrap();
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let weights = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let (wq, q_out, hidden) = weight(&weights, "model.layers.0.self_attn.q_proj");
    let (wk, kv_out, _) = weight(&weights, "model.layers.0.self_attn.k_proj");
    let (wo, o_out, o_in) = weight(&weights, "model.layers.0.self_attn.o_proj");
    let (wdown, down_out, ffn) = weight(&weights, "model.layers.0.mlp.down_proj");
    assert_eq!(
        (q_out, o_in, ffn),
        (
            config.n_heads * config.head_dim,
            q_out,
            config.intermediate_size
        )
    );
    let x = values(hidden, 1);
    let attn = values(o_in, 2);
    let glu = values(ffn, 3);
    let group = config.n_heads / config.n_kv_heads;
    // 4 query heads, 2 KV heads: 1 and 2 ranks split both, 4 replicate KV.
    for world in [1, 2, 4] {
        let mut q = Vec::new();
        let (mut o, mut down) = (vec![0f32; o_out], vec![0f32; down_out]);
        for rank in 0..world {
            let plan = ShardPlan::new(&config, rank, world, 1).unwrap();
            q.extend(product(&wq, hidden, &x, plan.q_rows(), 0..hidden));
            let k = product(&wk, hidden, &x, plan.kv_rows(), 0..hidden);
            assert_eq!(k.len(), plan.kv_heads.len() * config.head_dim);
            assert!(plan
                .q_heads
                .clone()
                .all(|h| plan.kv_heads.contains(&(h / group))));
            for (s, p) in o
                .iter_mut()
                .zip(product(&wo, o_in, &attn, 0..o_out, plan.q_rows()))
            {
                *s += p;
            }
            for (s, p) in down.iter_mut().zip(product(
                &wdown,
                ffn,
                &glu,
                0..down_out,
                plan.intermediate.clone(),
            )) {
                *s += p;
            }
        }
        assert_eq!(
            q,
            product(&wq, hidden, &x, 0..q_out, 0..hidden),
            "world {world}"
        );
        let close = |a: &[f32], b: &[f32]| {
            a.iter()
                .zip(b)
                .all(|(a, b)| (a - b).abs() <= 1e-5 * (1.0 + b.abs()))
        };
        assert!(
            close(&o, &product(&wo, o_in, &attn, 0..o_out, 0..o_in)),
            "world {world}"
        );
        assert!(
            close(&down, &product(&wdown, ffn, &glu, 0..down_out, 0..ffn)),
            "world {world}"
        );
        assert_eq!(kv_out, config.n_kv_heads * config.head_dim);
    }
    assert!(ShardPlan::new(&config, 0, 3, 1).is_err());
}
