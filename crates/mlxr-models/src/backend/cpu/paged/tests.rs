//! Paged attention against a dense f64 reference, plus the error cases.

use candle_core::{DType, Device, Tensor};
use half::{bf16, f16};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::{KvWriteOp, PagedAttentionOp, PagedKvStore, PagedSeq};
use crate::backend::cpu::CpuBackend;
use crate::backend::{AttentionSpec, Backend};
use crate::batch::SeqChunk;
use crate::step::Step;
use crate::ModelError;

const LAYERS: usize = 2;
const LAYER: usize = 1;

/// The CPU backend's attention over `chunks` (empty ones skipped) in the
/// blocks `tables`: `q` `[tokens, n_heads, head_dim]`, `k`/`v` `[tokens,
/// n_kv_heads, head_dim]`; returns `[tokens, n_heads * head_dim]`.
#[allow(clippy::too_many_arguments)]
fn backend_attend(
    b: &mut CpuBackend,
    tables: Vec<&[u32]>,
    layer: usize,
    spec: &AttentionSpec,
    chunks: &[SeqChunk],
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
) -> crate::Result<Tensor> {
    if tables.len() != chunks.len() {
        return Err(ModelError::InvalidBatch(format!(
            "{} chunks but {} block tables",
            chunks.len(),
            tables.len()
        )));
    }
    let mut step = Step::default();
    for (chunk, table) in chunks.iter().zip(tables) {
        if chunk.len > 0 {
            step.push(&vec![0; chunk.len], chunk.start_pos, table.iter().copied());
        }
    }
    step.finish(b.store().block_size())?;
    b.begin_step(&step, &[])?;
    let values = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let mut out = Vec::new();
    b.attend(
        layer,
        spec,
        &step,
        &values(q),
        &values(k),
        &values(v),
        &mut out,
    )?;
    let tokens = out.len() / (spec.n_heads * spec.head_dim);
    Ok(Tensor::from_vec(
        out,
        (tokens, spec.n_heads * spec.head_dim),
        &Device::Cpu,
    )?)
}

fn spec(
    n_heads: usize,
    n_kv_heads: usize,
    head_dim: usize,
    window: Option<usize>,
) -> AttentionSpec {
    AttentionSpec {
        n_heads,
        n_kv_heads,
        head_dim,
        scale: 1.0 / (head_dim as f32).sqrt(),
        sliding_window: window,
        softcap: None,
    }
}

fn round_to(x: f32, dtype: DType) -> f32 {
    match dtype {
        DType::F16 => f16::from_f32(x).to_f32(),
        DType::BF16 => bf16::from_f32(x).to_f32(),
        _ => x,
    }
}

fn random_rows(rng: &mut StdRng, rows: usize, width: usize, amplitude: f32) -> Vec<f32> {
    (0..rows * width)
        .map(|_| rng.random_range(-amplitude..amplitude))
        .collect()
}

/// One sequence's data for all its positions: `q` `[len, n_heads, head_dim]`,
/// `k`/`v` `[len, n_kv_heads, head_dim]`.
struct SeqData {
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
}

/// Dense attention in f64 of the query at `pos` on keys/values rounded to `dtype`.
fn reference(spec: &AttentionSpec, data: &SeqData, pos: usize, dtype: DType) -> Vec<f32> {
    let hd = spec.head_dim;
    let group = spec.n_heads / spec.n_kv_heads;
    let first = spec
        .sliding_window
        .map_or(0, |w| (pos + 1).saturating_sub(w));
    let mut out = Vec::with_capacity(spec.n_heads * hd);
    for h in 0..spec.n_heads {
        let kvh = h / group;
        let q = &data.q[(pos * spec.n_heads + h) * hd..][..hd];
        let row = |m: &[f32], j: usize| -> Vec<f64> {
            m[(j * spec.n_kv_heads + kvh) * hd..][..hd]
                .iter()
                .map(|&x| round_to(x, dtype) as f64)
                .collect()
        };
        let scores: Vec<f64> = (first..=pos)
            .map(|j| {
                let k = row(&data.k, j);
                let s =
                    q.iter().zip(&k).map(|(&a, b)| a as f64 * b).sum::<f64>() * spec.scale as f64;
                match spec.softcap {
                    Some(cap) => (s / cap as f64).tanh() * cap as f64,
                    None => s,
                }
            })
            .collect();
        let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
        let sum: f64 = weights.iter().sum();
        let mut acc = vec![0f64; hd];
        for (j, w) in (first..=pos).zip(&weights) {
            for (a, x) in acc.iter_mut().zip(row(&data.v, j)) {
                *a += w / sum * x;
            }
        }
        out.extend(acc.iter().map(|&x| x as f32));
    }
    out
}

struct Case {
    n_heads: usize,
    n_kv_heads: usize,
    head_dim: usize,
    block_size: usize,
    dtype: DType,
    window: Option<usize>,
    /// `schedules[i][s]`: how many tokens sequence `i` adds at step `s`.
    schedules: Vec<Vec<usize>>,
    q_amplitude: f32,
    softcap: Option<f32>,
}

/// Runs every step of `case` through the CPU backend over shuffled blocks
/// and returns the largest difference from the dense reference.
fn max_error(case: &Case, rng: &mut StdRng) -> f32 {
    max_error_against(case, case.softcap, rng)
}

/// [`max_error`] against a reference with the soft cap `reference_cap`.
fn max_error_against(case: &Case, reference_cap: Option<f32>, rng: &mut StdRng) -> f32 {
    let spec = AttentionSpec {
        softcap: case.softcap,
        ..spec(case.n_heads, case.n_kv_heads, case.head_dim, case.window)
    };
    let reference_spec = AttentionSpec {
        softcap: reference_cap,
        ..spec
    };
    let (hd, bs) = (case.head_dim, case.block_size);
    let totals: Vec<usize> = case.schedules.iter().map(|s| s.iter().sum()).collect();
    let data: Vec<SeqData> = totals
        .iter()
        .map(|&n| SeqData {
            q: random_rows(rng, n, case.n_heads * hd, case.q_amplitude),
            k: random_rows(rng, n, case.n_kv_heads * hd, 1.0),
            v: random_rows(rng, n, case.n_kv_heads * hd, 1.0),
        })
        .collect();

    // Every sequence gets its blocks (plus a spare) from one shuffled pool.
    let needs: Vec<usize> = totals.iter().map(|n| n.div_ceil(bs) + 1).collect();
    let num_blocks = needs.iter().sum::<usize>() + 3;
    let mut ids: Vec<u32> = (0..num_blocks as u32).collect();
    ids.shuffle(rng);
    let mut tables = Vec::new();
    let mut taken = 0;
    for need in &needs {
        tables.push(ids[taken..taken + need].to_vec());
        taken += need;
    }

    let store = PagedKvStore::new(
        LAYERS,
        num_blocks,
        bs,
        case.n_kv_heads,
        hd,
        case.dtype,
        &Device::Cpu,
    )
    .unwrap();
    let mut b = CpuBackend::with_store(store);
    let steps = case.schedules.iter().map(Vec::len).max().unwrap_or(0);
    let mut done = vec![0usize; data.len()];
    let mut worst = 0f32;
    for step in 0..steps {
        let chunks: Vec<SeqChunk> = case
            .schedules
            .iter()
            .zip(&done)
            .map(|(s, &start)| SeqChunk {
                start_pos: start,
                len: s.get(step).copied().unwrap_or(0),
            })
            .collect();
        let gather = |pick: fn(&SeqData) -> &Vec<f32>, heads: usize| {
            let mut rows = Vec::new();
            for (chunk, d) in chunks.iter().zip(&data) {
                let width = heads * hd;
                rows.extend_from_slice(&pick(d)[chunk.start_pos * width..][..chunk.len * width]);
            }
            let tokens = rows.len() / (heads * hd);
            Tensor::from_vec(rows, (tokens, heads, hd), &Device::Cpu).unwrap()
        };
        let q = gather(|d| &d.q, case.n_heads);
        let k = gather(|d| &d.k, case.n_kv_heads);
        let v = gather(|d| &d.v, case.n_kv_heads);
        let tables = tables.iter().map(Vec::as_slice).collect();
        let out = backend_attend(&mut b, tables, LAYER, &spec, &chunks, &q, &k, &v).unwrap();
        let out: Vec<Vec<f32>> = out.to_vec2().unwrap();
        let mut row = 0;
        for (chunk, d) in chunks.iter().zip(&data) {
            for pos in chunk.start_pos..chunk.start_pos + chunk.len {
                let want = reference(&reference_spec, d, pos, case.dtype);
                for (a, b) in out[row].iter().zip(&want) {
                    worst = worst.max((a - b).abs());
                }
                row += 1;
            }
        }
        for (d, chunk) in done.iter_mut().zip(&chunks) {
            *d += chunk.len;
        }
    }
    worst
}

fn tolerance(dtype: DType) -> f32 {
    if dtype == DType::F32 {
        1e-5
    } else {
        1e-4
    }
}

/// Several sequences per batch: a prefill, then steps that mix decode (1),
/// prefill over the cached prefix (2..20) and idle sequences (0).
fn random_schedules(rng: &mut StdRng) -> Vec<Vec<usize>> {
    let n_seqs = rng.random_range(1..=3);
    (0..n_seqs)
        .map(|_| {
            let mut steps = vec![rng.random_range(1..=37)];
            for _ in 0..4 {
                steps.push(match rng.random_range(0..4) {
                    0 => 0,
                    1 | 2 => 1,
                    _ => rng.random_range(2..20),
                });
            }
            steps
        })
        .collect()
}

#[test]
fn matches_dense_reference_over_shapes() {
    let mut rng = StdRng::seed_from_u64(0x9a9ed);
    // (n_heads, n_kv_heads, head_dim): GQA ratios 1, 2, 3, 4.
    let heads = [
        (4, 4, 64),
        (4, 2, 64),
        (9, 3, 64),
        (8, 2, 64),
        (2, 2, 256),
        (4, 1, 256),
    ];
    for (n_heads, n_kv_heads, head_dim) in heads {
        for block_size in [1, 4, 16] {
            for dtype in [DType::F32, DType::F16, DType::BF16] {
                for window in [None, Some(1), Some(3), Some(17), Some(1000)] {
                    let case = Case {
                        n_heads,
                        n_kv_heads,
                        head_dim,
                        block_size,
                        dtype,
                        window,
                        schedules: random_schedules(&mut rng),
                        q_amplitude: if rng.random_bool(0.5) { 1.0 } else { 8.0 },
                        softcap: None,
                    };
                    let err = max_error(&case, &mut rng);
                    assert!(
                        err < tolerance(dtype),
                        "heads {n_heads}/{n_kv_heads}x{head_dim}, block {block_size}, \
                         {dtype:?}, window {window:?}, {:?}: max error {err}",
                        case.schedules
                    );
                }
            }
        }
    }
}

#[test]
fn long_prefill_with_sliding_window_skips_old_blocks() {
    let mut rng = StdRng::seed_from_u64(7);
    // Gemma 3 270M shapes, a window much smaller than the context.
    for (dtype, window) in [
        (DType::F32, Some(64)),
        (DType::BF16, Some(64)),
        (DType::F16, None),
    ] {
        let case = Case {
            n_heads: 4,
            n_kv_heads: 1,
            head_dim: 256,
            block_size: 16,
            dtype,
            window,
            schedules: vec![vec![150, 1, 90, 1], vec![3, 200, 1, 1]],
            q_amplitude: 4.0,
            softcap: None,
        };
        let err = max_error(&case, &mut rng);
        assert!(
            err < tolerance(dtype),
            "{dtype:?} {window:?}: max error {err}"
        );
    }
}

/// Gemma 2's soft-capped scores on every kernel of the paged op: the exact
/// path (F32 store), the tiled one (F16/BF16, head dimension a multiple of
/// 16) and the vector one (other head dimensions); prefills longer than a
/// query tile (32) and a key chunk (64), decodes, windows. Each against the
/// capped f64 reference, and far from the uncapped one (the cap bites).
#[test]
fn soft_capped_scores_match_dense_reference_on_every_kernel() {
    let mut rng = StdRng::seed_from_u64(0x5c4b);
    for (head_dim, dtype) in [
        (32, DType::F32),
        (24, DType::F32),
        (32, DType::F16),
        (64, DType::BF16),
        (24, DType::F16),
        (8, DType::BF16),
    ] {
        for window in [None, Some(5), Some(70)] {
            let case = Case {
                n_heads: 4,
                n_kv_heads: 2,
                head_dim,
                block_size: 16,
                dtype,
                window,
                schedules: vec![vec![100, 1, 40, 1], vec![3, 70, 1, 1], vec![1, 1, 0, 2]],
                q_amplitude: 8.0,
                softcap: Some(2.0),
            };
            let label = format!("head_dim {head_dim}, {dtype:?}, window {window:?}");
            let err = max_error(&case, &mut rng);
            assert!(err < tolerance(dtype), "{label}: max error {err}");
            let uncapped = max_error_against(&case, None, &mut rng);
            assert!(
                uncapped > 100.0 * tolerance(dtype),
                "{label}: the cap changes the output by only {uncapped}"
            );
        }
    }
}

/// A store with 4 blocks of 4 positions, 2 KV heads of dimension 8.
fn small_store() -> PagedKvStore {
    PagedKvStore::new(LAYERS, 4, 4, 2, 8, DType::F32, &Device::Cpu).unwrap()
}

fn inputs(tokens: usize, n_heads: usize, n_kv_heads: usize) -> (Tensor, Tensor, Tensor) {
    let t = |heads| Tensor::ones((tokens, heads, 8), DType::F32, &Device::Cpu).unwrap();
    (t(n_heads), t(n_kv_heads), t(n_kv_heads))
}

fn expect_invalid(result: crate::Result<Tensor>, what: &str) {
    match result {
        Err(ModelError::InvalidBatch(msg)) => assert!(!msg.is_empty()),
        Err(other) => panic!("{what}: expected InvalidBatch, got {other}"),
        Ok(_) => panic!("{what}: expected an error"),
    }
}

fn cache_is_zero(store: &PagedKvStore) -> bool {
    let sum: f32 = store
        .keys(LAYER)
        .unwrap()
        .abs()
        .unwrap()
        .sum_all()
        .unwrap()
        .to_scalar()
        .unwrap();
    sum == 0.0
}

#[test]
fn rejects_bad_batches_without_writing() {
    let mut b = CpuBackend::with_store(small_store());
    let spec = spec(4, 2, 8, None);
    let (q, k, v) = inputs(2, 4, 2);
    let chunk = [SeqChunk {
        start_pos: 3,
        len: 2,
    }];
    let mut attend =
        |tables: Vec<&[u32]>, layer, spec: &AttentionSpec, chunks: &[SeqChunk], q: &Tensor| {
            backend_attend(&mut b, tables, layer, spec, chunks, q, &k, &v)
        };

    // Position 4 needs a second block.
    expect_invalid(
        attend(vec![&[0]], LAYER, &spec, &chunk, &q),
        "beyond the table",
    );
    // Block 9 does not exist.
    expect_invalid(attend(vec![&[0, 9]], LAYER, &spec, &chunk, &q), "block id");
    expect_invalid(
        attend(vec![&[0, 1], &[2]], LAYER, &spec, &chunk, &q),
        "table count",
    );
    expect_invalid(attend(vec![&[0, 1]], LAYERS, &spec, &chunk, &q), "layer");
    let wrong_spec = self::spec(4, 1, 8, None);
    expect_invalid(
        attend(vec![&[0, 1]], LAYER, &wrong_spec, &chunk, &q),
        "spec",
    );
    let (q3, _, _) = inputs(3, 4, 2);
    expect_invalid(attend(vec![&[0, 1]], LAYER, &spec, &chunk, &q3), "q shape");
    let overflow = [SeqChunk {
        start_pos: usize::MAX,
        len: 2,
    }];
    expect_invalid(
        attend(vec![&[0, 1]], LAYER, &spec, &overflow, &q),
        "overflow",
    );
    assert!(cache_is_zero(b.store()));
    let mut attend =
        |tables: Vec<&[u32]>, layer, spec: &AttentionSpec, chunks: &[SeqChunk], q: &Tensor| {
            backend_attend(&mut b, tables, layer, spec, chunks, q, &k, &v)
        };

    // Blocks outside the sliding window are not read, so they are not checked.
    let windowed = self::spec(4, 2, 8, Some(2));
    let far = [SeqChunk {
        start_pos: 5,
        len: 2,
    }];
    attend(vec![&[99, 0]], LAYER, &windowed, &far, &q).unwrap();
}

#[test]
fn ops_reject_out_of_range_blocks_and_slots() {
    let store = small_store();
    let (q, k, _) = inputs(1, 4, 2);
    let table = [0u32, 4];
    let seqs = [PagedSeq {
        start_pos: 4,
        len: 1,
        table_start: 0,
        table_len: table.len(),
    }];
    let op = PagedAttentionOp::new(&seqs, &table, 1.0, None, None);
    let (keys, values) = (store.keys(0).unwrap(), store.values(0).unwrap());
    assert!(op.forward(&q, &keys, &values).is_err());

    let slots = Tensor::new(&[16u32], &Device::Cpu).unwrap();
    assert!(keys.inplace_op3(&k, &slots, &KvWriteOp).is_err());
    let k = k.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    assert!(store.write(0, &[16], &k, &k).is_err());
    assert!(cache_is_zero(&store));
}

#[test]
fn write_op_places_rows_in_their_slots() {
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        let store = PagedKvStore::new(1, 3, 2, 2, 4, dtype, &Device::Cpu).unwrap();
        let rows: Vec<f32> = (0..2 * 2 * 4).map(|i| i as f32 + 0.5).collect();
        // Token 0 to block 2 offset 1, token 1 to block 0 offset 0.
        let slots = [5u32, 0];
        // Through the op on a tensor, and through the store.
        let keys = Tensor::zeros((3, 2, 2, 4), dtype, &Device::Cpu).unwrap();
        let row_tensor = Tensor::from_slice(&rows, (2, 2, 4), &Device::Cpu).unwrap();
        let slot_tensor = Tensor::new(&slots, &Device::Cpu).unwrap();
        keys.inplace_op3(&row_tensor, &slot_tensor, &KvWriteOp)
            .unwrap();
        store.write(0, &slots, &rows, &rows).unwrap();
        assert_eq!(
            store
                .values(0)
                .unwrap()
                .to_dtype(DType::F32)
                .unwrap()
                .to_vec3_4d(),
            keys.to_dtype(DType::F32).unwrap().to_vec3_4d()
        );
        let cache: Vec<Vec<Vec<Vec<f32>>>> = store
            .keys(0)
            .unwrap()
            .to_dtype(DType::F32)
            .unwrap()
            .to_vec3_4d();
        let want = |token: usize| -> Vec<Vec<f32>> {
            (0..2)
                .map(|head| {
                    (0..4)
                        .map(|d| ((token * 2 + head) * 4 + d) as f32 + 0.5)
                        .collect()
                })
                .collect()
        };
        let at = |block: usize, offset: usize| -> Vec<Vec<f32>> {
            cache[block]
                .iter()
                .map(|head| head[offset].clone())
                .collect()
        };
        assert_eq!(at(2, 1), want(0));
        assert_eq!(at(0, 0), want(1));
        assert_eq!(cache[1], vec![vec![vec![0.0; 4]; 2]; 2]);
    }
}

trait ToVec4 {
    fn to_vec3_4d(&self) -> Vec<Vec<Vec<Vec<f32>>>>;
}

impl ToVec4 for Tensor {
    fn to_vec3_4d(&self) -> Vec<Vec<Vec<Vec<f32>>>> {
        (0..self.dim(0).unwrap())
            .map(|i| self.get(i).unwrap().to_vec3().unwrap())
            .collect()
    }
}

#[test]
fn store_sizes_and_dtypes() {
    assert_eq!(
        PagedKvStore::bytes_per_block(30, 16, 3, 64, DType::F16),
        2 * 30 * 16 * 3 * 64 * 2
    );
    let store = PagedKvStore::new(3, 5, 16, 3, 64, DType::BF16, &Device::Cpu).unwrap();
    assert_eq!(store.keys(2).unwrap().dims(), [5, 3, 16, 64]);
    assert_eq!(store.values(2).unwrap().dtype(), DType::BF16);
    assert!(matches!(
        PagedKvStore::new(1, 4, 4, 1, 8, DType::U8, &Device::Cpu),
        Err(ModelError::InvalidConfig(_))
    ));
    assert!(matches!(
        PagedKvStore::new(1, 0, 4, 1, 8, DType::F16, &Device::Cpu),
        Err(ModelError::InvalidConfig(_))
    ));
}
