//! The paged op over an F32 store against ggml's dense attention
//! (`kernels::attention`, llama.cpp's arithmetic): the same bits.

use candle_core::{DType, Device, Tensor};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::{KvWriteOp, PagedAttentionOp, PagedSeq};
use crate::backend::cpu::kernels::attention::AttnShape;
use crate::backend::cpu::kernels::ops::AttentionOp;
use crate::backend::AttentionSpec;

fn random(rng: &mut StdRng, n: usize, amplitude: f32) -> Vec<f32> {
    (0..n)
        .map(|_| rng.random_range(-amplitude..amplitude))
        .collect()
}

/// One sequence: `k`/`v` `[kv_len, n_kv_heads, d]`, `q` `[len, n_heads, d]`.
struct Seq {
    start_pos: usize,
    len: usize,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
}

fn dense(spec: &AttentionSpec, s: &Seq) -> Vec<u32> {
    let (nh, nkv, d) = (spec.n_heads, spec.n_kv_heads, spec.head_dim);
    let kv_len = s.start_pos + s.len;
    let heads_first = |x: &[f32]| {
        Tensor::from_slice(x, (kv_len, nkv, d), &Device::Cpu)
            .unwrap()
            .transpose(0, 1)
            .unwrap()
            .contiguous()
            .unwrap()
    };
    let q = Tensor::from_slice(&s.q, (s.len, nh, d), &Device::Cpu).unwrap();
    let op = AttentionOp {
        shape: AttnShape {
            len: s.len,
            n_heads: nh,
            n_kv_heads: nkv,
            head_dim: d,
            kv_len,
            start_pos: s.start_pos,
            window: spec.sliding_window,
        },
        scale: spec.scale,
        softcap: spec.softcap,
    };
    let out = q.apply_op3_no_bwd(&heads_first(&s.k), &heads_first(&s.v), &op);
    let out: Vec<f32> = out.unwrap().flatten_all().unwrap().to_vec1().unwrap();
    out.iter().map(|x| x.to_bits()).collect()
}

/// All sequences in one batch of the paged op over shuffled blocks.
fn paged(spec: &AttentionSpec, seqs: &[Seq], block_size: usize, rng: &mut StdRng) -> Vec<u32> {
    let (nh, nkv, d) = (spec.n_heads, spec.n_kv_heads, spec.head_dim);
    let needs: Vec<usize> = seqs
        .iter()
        .map(|s| (s.start_pos + s.len).div_ceil(block_size))
        .collect();
    let num_blocks: usize = needs.iter().sum::<usize>() + 2;
    let cache = || Tensor::zeros((num_blocks, nkv, block_size, d), DType::F32, &Device::Cpu);
    let (keys, values) = (cache().unwrap(), cache().unwrap());
    let mut ids: Vec<u32> = (0..num_blocks as u32).collect();
    ids.shuffle(rng);
    let mut tables = Vec::new();
    let mut taken = 0;
    for (s, need) in seqs.iter().zip(&needs) {
        let table = ids[taken..taken + need].to_vec();
        taken += need;
        let kv_len = s.start_pos + s.len;
        let slots: Vec<u32> = (0..kv_len)
            .map(|p| table[p / block_size] * block_size as u32 + (p % block_size) as u32)
            .collect();
        let slots = Tensor::new(slots.as_slice(), &Device::Cpu).unwrap();
        for (cache, rows) in [(&keys, &s.k), (&values, &s.v)] {
            let rows = Tensor::from_slice(rows, (kv_len, nkv, d), &Device::Cpu).unwrap();
            cache.inplace_op3(&rows, &slots, &KvWriteOp).unwrap();
        }
        tables.push(table);
    }
    let mut block_ids = Vec::new();
    let chunks: Vec<PagedSeq> = seqs
        .iter()
        .zip(&tables)
        .map(|(s, table)| {
            block_ids.extend_from_slice(table);
            PagedSeq {
                start_pos: s.start_pos,
                len: s.len,
                table_start: block_ids.len() - table.len(),
                table_len: table.len(),
            }
        })
        .collect();
    let q: Vec<f32> = seqs.iter().flat_map(|s| s.q.iter().copied()).collect();
    let tokens = q.len() / (nh * d);
    let q = Tensor::from_vec(q, (tokens, nh, d), &Device::Cpu).unwrap();
    let op = PagedAttentionOp::new(
        &chunks,
        &block_ids,
        spec.scale,
        spec.sliding_window,
        spec.softcap,
    );
    let out = op.forward(&q, &keys, &values).unwrap();
    let out: Vec<f32> = out.flatten_all().unwrap().to_vec1().unwrap();
    out.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn f32_store_matches_dense_attention_bit_for_bit() {
    let mut rng = StdRng::seed_from_u64(0xe4ac7);
    let d = 64;
    for (nh, nkv) in [(4, 4), (9, 3)] {
        // Soft-capped scores (Gemma 2) too, with a cap small enough to bite.
        let rules = [
            (None, None),
            (Some(5), None),
            (Some(40), None),
            (Some(100), None),
            (None, Some(2.0)),
            (Some(40), Some(2.0)),
        ];
        for (window, softcap) in rules {
            let spec = AttentionSpec {
                n_heads: nh,
                n_kv_heads: nkv,
                head_dim: d,
                scale: 0.125,
                sliding_window: window,
                softcap,
            };
            // (start_pos, len): decode and prefill chunks, some past a window.
            let shapes = [
                (0, 1),
                (7, 1),
                (130, 1),
                (0, 37),
                (19, 2),
                (70, 45),
                (3, 150),
            ];
            let seqs: Vec<Seq> = shapes
                .iter()
                .map(|&(start_pos, len)| {
                    let kv_len = start_pos + len;
                    let amplitude = if rng.random_bool(0.5) { 1.0 } else { 6.0 };
                    Seq {
                        start_pos,
                        len,
                        q: random(&mut rng, len * nh * d, amplitude),
                        k: random(&mut rng, kv_len * nkv * d, 1.0),
                        v: random(&mut rng, kv_len * nkv * d, 1.0),
                    }
                })
                .collect();
            let want: Vec<u32> = seqs.iter().flat_map(|s| dense(&spec, s)).collect();
            for block_size in [1, 16] {
                // Alone and all in one batch: each chunk keeps its own rules.
                let mut alone = Vec::new();
                for s in &seqs {
                    alone.extend(paged(&spec, std::slice::from_ref(s), block_size, &mut rng));
                }
                let batched = paged(&spec, &seqs, block_size, &mut rng);
                for got in [alone, batched] {
                    let differ = got.iter().zip(&want).filter(|(a, b)| a != b).count();
                    assert!(
                        differ == 0 && got.len() == want.len(),
                        "{nh}/{nkv} heads, window {window:?}, cap {softcap:?}, block {block_size}: \
                         {differ} of {} values differ",
                        want.len()
                    );
                }
            }
        }
    }
}
