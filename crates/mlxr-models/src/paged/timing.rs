//! Timings of the paged attention op (ignored tests, not checks):
//! `cargo test --release -p mlxr-models --lib paged::timing -- --ignored --nocapture --test-threads 1`

use candle_core::{DType, Device, Tensor};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::{KvWriteOp, PagedAttentionOp, PagedKvStore, PagedSeq};

/// (name, n_heads, n_kv_heads, head_dim, window): SmolLM2, Gemma 3 270M.
const MODELS: [(&str, usize, usize, usize, Option<usize>); 3] = [
    ("smollm2", 9, 3, 64, None),
    ("gemma3 local", 4, 1, 256, Some(512)),
    ("gemma3 global", 4, 1, 256, None),
];

/// The best of `runs` calls of one layer's attention for `n_seqs` sequences
/// that each add `len` tokens after `cached` ones.
#[allow(clippy::too_many_arguments)]
fn time_layer(
    dtype: DType,
    (n_heads, n_kv_heads, head_dim, window): (usize, usize, usize, Option<usize>),
    n_seqs: usize,
    cached: usize,
    len: usize,
    runs: usize,
) -> std::time::Duration {
    let mut rng = StdRng::seed_from_u64(1);
    let block_size = 16;
    let blocks_per_seq = (cached + len).div_ceil(block_size);
    let num_blocks = n_seqs * blocks_per_seq;
    let store = PagedKvStore::new(
        1,
        num_blocks,
        block_size,
        n_kv_heads,
        head_dim,
        dtype,
        &Device::Cpu,
    )
    .unwrap();
    let fill = |t: &Tensor, seed: u64| {
        let mut rng = StdRng::seed_from_u64(seed);
        let values: Vec<f32> = (0..t.elem_count())
            .map(|_| rng.random_range(-1.0..1.0))
            .collect();
        let rows = Tensor::from_vec(
            values,
            (num_blocks * block_size, n_kv_heads, head_dim),
            &Device::Cpu,
        )
        .unwrap();
        let slots: Vec<u32> = (0..(num_blocks * block_size) as u32).collect();
        let slots = Tensor::new(slots.as_slice(), &Device::Cpu).unwrap();
        t.inplace_op3(&rows, &slots, &KvWriteOp).unwrap();
    };
    fill(store.keys(0).unwrap(), 2);
    fill(store.values(0).unwrap(), 3);
    let mut ids: Vec<u32> = (0..num_blocks as u32).collect();
    ids.shuffle(&mut rng);
    let seqs: Vec<PagedSeq> = ids
        .chunks(blocks_per_seq)
        .map(|block_table| PagedSeq {
            start_pos: cached,
            len,
            block_table,
        })
        .collect();
    let tokens = n_seqs * len;
    let q: Vec<f32> = (0..tokens * n_heads * head_dim)
        .map(|_| rng.random_range(-1.0..1.0))
        .collect();
    let q = Tensor::from_vec(q, (tokens, n_heads, head_dim), &Device::Cpu).unwrap();
    let op = PagedAttentionOp::new(seqs, 1.0 / (head_dim as f32).sqrt(), window);
    let (keys, values) = (store.keys(0).unwrap(), store.values(0).unwrap());
    op.forward(&q, keys, values).unwrap();
    // The fastest of many calls: the machine may be busy with other work.
    (0..runs)
        .map(|_| {
            let start = std::time::Instant::now();
            op.forward(&q, keys, values).unwrap();
            start.elapsed()
        })
        .min()
        .unwrap()
}

#[test]
#[ignore = "timing, not a check"]
fn decode_timing() {
    let (n_seqs, cached) = (16, 1000);
    for dtype in [DType::F16, DType::F32] {
        for (name, h, kvh, d, window) in MODELS {
            let best = time_layer(dtype, (h, kvh, d, window), n_seqs, cached, 1, 200);
            println!("decode {name} {dtype:?}: {n_seqs} sequences x {cached} cached tokens, one layer: {best:?} (best of 200)");
        }
    }
}

#[test]
#[ignore = "timing, not a check"]
fn prefill_timing() {
    let (cached, len) = (1536, 512);
    for dtype in [DType::F16, DType::F32] {
        for (name, h, kvh, d, window) in MODELS {
            let best = time_layer(dtype, (h, kvh, d, window), 1, cached, len, 10);
            println!("prefill {name} {dtype:?}: {len} queries after {cached} cached, one layer: {best:?} (best of 10)");
        }
    }
}
