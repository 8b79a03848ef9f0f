//! The tensor-parallel forward pass on the CPU backend: the tiny models
//! (tests/fixtures/tiny-models: GGUF f32 files, the llama quantized here,
//! Hugging Face folders) split over a [`LocalWorld`] of 2 and 4 ranks on
//! threads, against the whole model (a world of one) on the same weights.
//!
//! Every rank gets the same logits, bit for bit (the all-reduce sums in rank
//! order on each). Against the whole model they differ by f32 rounding only:
//! a row-parallel matmul sums its input in per-rank parts that the
//! all-reduce adds, in another order than one dot product over all of it.
//! `TOLERANCE` bounds that, relative to the largest logit; a rank that
//! skips an all-reduce or gathers its logits out of order is off by whole
//! units.

mod common;

use std::path::{Path, PathBuf};

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{DType, Device, Tensor};
use mlxr_formats::gguf::writer::GgufWriter;
use mlxr_formats::gguf::{GgmlType, GgufFile};
use mlxr_models::tensor_parallel::{run_local_world, Collective, LocalWorld, ShardError};
use mlxr_models::{CpuBackend, DecoderModel, KvGeometry, ModelError, RowOrder, Session};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use common::{argmax, rel_diff, BLOCK};

/// Relative to the largest logit (see the module doc). Measured at most
/// 1.9e-6 with f32 and F16 weights; with Q8_0 and Q4_0 the logits came out
/// bit-equal on these shapes (a few blocks a row), but the kernels' per-lane
/// sums are no more order-free than f32's.
const TOLERANCE: f32 = 1e-4;
/// Greedy steps after the prompt.
const STEPS: usize = 8;
const BLOCKS_PER_SEQ: usize = 4;

fn fixtures() -> PathBuf {
    mlxr_testkit::fixture_path("tiny-models")
}

fn gguf(name: &str) -> GgufFile {
    let path = fixtures().join("gguf").join(format!("{name}.f32.gguf"));
    GgufFile::open(path).unwrap()
}

/// `file` (f32) with its 2-D weights in `ty`, or in `down` for the MLP's
/// down projections.
fn quantized(file: &GgufFile, ty: GgmlDType, down: GgmlDType) -> GgufFile {
    let mut w = GgufWriter::new();
    for (key, value) in file.metadata().iter() {
        if key != "general.alignment" {
            w = w.kv(key, value.clone());
        }
    }
    for info in file.tensors() {
        assert_eq!(info.ggml_type, GgmlType::F32, "{}", info.name);
        let values: Vec<f32> = file
            .tensor_data(info)
            .unwrap()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let shape = info.shape();
        if shape.len() != 2 {
            w = w.tensor_f32(&info.name, &info.dims, &values);
            continue;
        }
        let ty = if info.name.ends_with("ffn_down.weight") {
            down
        } else {
            ty
        };
        let t = Tensor::from_vec(values, shape, &Device::Cpu).unwrap();
        let q = QTensor::quantize(&t, ty).unwrap();
        let stored = match ty {
            GgmlDType::Q8_0 => GgmlType::Q8_0,
            GgmlDType::Q4_0 => GgmlType::Q4_0,
            GgmlDType::Q4K => GgmlType::Q4_K,
            GgmlDType::F16 => GgmlType::F16,
            _ => unreachable!(),
        };
        w = w.tensor(
            &info.name,
            &info.dims,
            stored,
            q.data().unwrap().into_owned(),
        );
    }
    GgufFile::from_bytes(w.build()).unwrap()
}

/// `file` with a bias on every attention output and down projection (none
/// of the tiny models has one): a row-parallel layer's bias must be added
/// once, not once a rank.
fn with_row_parallel_biases(file: &GgufFile) -> GgufFile {
    let mut rng = StdRng::seed_from_u64(5);
    let mut w = GgufWriter::new();
    for (key, value) in file.metadata().iter() {
        if key != "general.alignment" {
            w = w.kv(key, value.clone());
        }
    }
    for info in file.tensors() {
        let data = file.tensor_data(info).unwrap().to_vec();
        w = w.tensor(&info.name, &info.dims, info.ggml_type, data);
        if let Some(stem) = info
            .name
            .strip_suffix(".weight")
            .filter(|n| n.ends_with(".attn_output") || n.ends_with(".ffn_down"))
        {
            let rows = info.shape()[0];
            let bias: Vec<f32> = (0..rows).map(|_| rng.random_range(-0.5..0.5)).collect();
            w = w.tensor_f32(format!("{stem}.bias"), &[rows as u64], &bias);
        }
    }
    GgufFile::from_bytes(w.build()).unwrap()
}

/// `n_seqs` sequences on a CPU backend that is `rank` of its world (one
/// kernel thread: the ranks share this machine's cores).
fn session(model: &DecoderModel, rank: LocalWorld, n_seqs: usize) -> Session<CpuBackend> {
    let kv = KvGeometry::new(model.config(), n_seqs * BLOCKS_PER_SEQ, BLOCK);
    let backend = CpuBackend::new(kv, DType::F32)
        .unwrap()
        .with_threads(1)
        .with_collective(Box::new(rank));
    Session::new(backend, n_seqs, BLOCKS_PER_SEQ, BLOCK)
}

/// Each step's logits and the greedy tokens.
#[derive(Debug, PartialEq)]
struct Run {
    logits: Vec<Vec<f32>>,
    tokens: Vec<u32>,
}

/// Rank `rank` of a world of `world` of a model.
type Load<'a> = dyn Fn(usize, usize) -> mlxr_models::Result<DecoderModel> + Sync + 'a;

fn from_gguf(
    file: &GgufFile,
) -> impl Fn(usize, usize) -> mlxr_models::Result<DecoderModel> + Sync + '_ {
    |rank, world| DecoderModel::load_rank(file, &Device::Cpu, Some(RowOrder::Ggml), rank, world)
}

fn from_dir(dir: &Path) -> impl Fn(usize, usize) -> mlxr_models::Result<DecoderModel> + Sync + '_ {
    |rank, world| DecoderModel::load_rank_dir(dir, &Device::Cpu, rank, world)
}

/// `prompt` prefilled, then `STEPS` greedy tokens decoded one a step, in a
/// world of `world`; checks every rank's run is the same and returns it.
fn greedy(load: &Load, world: usize, prompt: &[u32]) -> Run {
    let runs = run_local_world(world, |rank| -> mlxr_models::Result<Run> {
        let model = load(rank.rank(), world)?;
        let mut session = session(&model, rank, 1);
        // Each rank's cache holds its KV heads only.
        let kv_heads = model
            .shard()
            .map_or(model.config().n_kv_heads, |s| s.kv_heads.len());
        assert_eq!(session.backend().store().n_kv_heads(), kv_heads);
        let mut logits = vec![session.feed(&model, &[(0, prompt)])?.to_vec()];
        let mut tokens = Vec::new();
        for _ in 0..STEPS {
            let next = argmax(logits.last().unwrap());
            tokens.push(next);
            logits.push(session.feed(&model, &[(0, &[next])])?.to_vec());
        }
        Ok(Run { logits, tokens })
    });
    let mut runs = runs.into_iter().map(|r| r.unwrap());
    let first = runs.next().unwrap();
    for (rank, run) in runs.enumerate() {
        assert_eq!(run, first, "rank {} differs from rank 0", rank + 1);
    }
    first
}

/// The gap between the two largest logits, relative to the largest
/// magnitude (as [`rel_diff`]).
fn top2_gap(logits: &[f32]) -> f32 {
    let (mut first, mut second) = (f32::NEG_INFINITY, f32::NEG_INFINITY);
    for &l in logits {
        if l > first {
            (first, second) = (l, first);
        } else if l > second {
            second = l;
        }
    }
    let scale = logits.iter().fold(1f32, |m, v| m.max(v.abs()));
    (first - second) / scale
}

fn prompt(len: usize, vocab: usize) -> Vec<u32> {
    (0..len).map(|i| ((i * 37 + 11) % vocab) as u32).collect()
}

/// The model in worlds of `worlds` against the whole model: every step's
/// logits within `TOLERANCE` and the same greedy tokens.
fn matches_the_whole_model(label: &str, load: &Load, worlds: &[usize]) {
    let prompt = prompt(13, load(0, 1).unwrap().config().vocab_size);
    let whole = greedy(load, 1, &prompt);
    // The greedy tokens are a check only where the top two logits are
    // further apart than the tolerance.
    let gap = whole
        .logits
        .iter()
        .map(|l| top2_gap(l))
        .fold(f32::INFINITY, f32::min);
    assert!(gap > 10.0 * TOLERANCE, "{label}: a top-2 gap of {gap}");
    for &world in worlds {
        let split = greedy(load, world, &prompt);
        let worst = split
            .logits
            .iter()
            .zip(&whole.logits)
            .map(|(a, b)| rel_diff(a, b))
            .fold(0f32, f32::max);
        eprintln!("{label}, world {world}: logits within {worst:.1e} of the whole model's");
        assert!(worst <= TOLERANCE, "{label}, world {world}: {worst}");
        assert_eq!(split.tokens, whole.tokens, "{label}, world {world}");
    }
}

#[test]
fn the_tiny_models_split_over_2_and_4_ranks_match_the_whole() {
    // 4 query heads, 2 KV heads: 4 ranks keep one query head each and
    // replicate the KV heads. Phi-3's fused QKV and gate/up are cut into
    // their parts; Qwen 2 (biases, tied head), Qwen 3 (QK-norm) and Gemma 2
    // (post-norms, soft caps) cover the rest of the forward pass.
    for name in ["llama", "qwen2", "qwen3", "phi3", "gemma2-gguf"] {
        matches_the_whole_model(name, &from_gguf(&gguf(name)), &[2, 4]);
    }
}

#[test]
fn hugging_face_folders_split_over_2_and_4_ranks_match_the_whole() {
    // Gemma 3: sliding-window layers with their own RoPE.
    for name in ["llama", "qwen2", "phi3", "gemma3"] {
        let dir = fixtures().join(name);
        matches_the_whole_model(&format!("{name} (folder)"), &from_dir(&dir), &[2, 4]);
    }
    // BF16 matrices stay 16-bit, cut by rows and columns.
    let (half, wide) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let llama = fixtures().join("llama");
    common::rounded::write_rounded(&llama, safetensors::Dtype::BF16, half.path(), wide.path());
    matches_the_whole_model("llama BF16 (folder)", &from_dir(half.path()), &[2, 4]);
    // MLX-quantized weights are not cut.
    let mlx = fixtures().join("llama-mlx-q4-g64");
    let err = DecoderModel::load_rank_dir(&mlx, &Device::Cpu, 0, 2)
        .err()
        .unwrap();
    assert!(err.to_string().contains("not supported"), "{err}");
}

#[test]
fn a_row_parallel_bias_is_added_once() {
    let llama = gguf("llama");
    let biased = with_row_parallel_biases(&llama);
    let plain = greedy(&from_gguf(&llama), 1, &prompt(13, 384)).logits;
    let whole = greedy(&from_gguf(&biased), 1, &prompt(13, 384)).logits;
    assert!(
        rel_diff(&whole[0], &plain[0]) > 1e-2,
        "the biases were not loaded"
    );
    matches_the_whole_model("llama with biases", &from_gguf(&biased), &[2, 4]);
}

#[test]
fn quantized_weights_are_cut_on_whole_blocks() {
    let llama = gguf("llama");
    let f32_logits = greedy(&from_gguf(&llama), 1, &prompt(13, 384)).logits;
    for ty in [GgmlDType::Q8_0, GgmlDType::Q4_0, GgmlDType::F16] {
        let file = quantized(&llama, ty, ty);
        let logits = greedy(&from_gguf(&file), 1, &prompt(13, 384)).logits;
        let off = rel_diff(&logits[0], &f32_logits[0]);
        eprintln!("llama {ty:?}: the whole model within {off:.1e} of f32's");
        assert!(off > 0.0, "{ty:?}: the weights were not quantized");
        matches_the_whole_model(&format!("llama {ty:?}"), &from_gguf(&file), &[2, 4]);
    }
}

/// The last logits of three prompts fed one sequence a step, then in one
/// step, then of one decode step of each alone and of all three in one step,
/// in a world of `world`: `[alone, batched, decoded alone, decoded
/// batched]`, each `[3, vocab]`.
fn batched_and_alone(file: &GgufFile, world: usize) -> [Vec<f32>; 4] {
    let prompts = [prompt(9, 384), prompt(3, 200), prompt(1, 100)];
    let runs = run_local_world(world, |rank| -> mlxr_models::Result<_> {
        let r = rank.rank();
        let kernels = Some(RowOrder::Independent);
        let model = DecoderModel::load_rank(file, &Device::Cpu, kernels, r, world)?;
        let mut session = session(&model, rank, prompts.len());
        let mut alone = Vec::new();
        for (seq, p) in prompts.iter().enumerate() {
            alone.push(session.feed(&model, &[(seq, p)])?.to_vec());
        }
        let next: Vec<[u32; 1]> = alone.iter().map(|l| [argmax(l)]).collect();
        let mut decoded_alone = Vec::new();
        for (seq, t) in next.iter().enumerate() {
            decoded_alone.push(session.feed(&model, &[(seq, t)])?.to_vec());
        }
        for seq in 0..prompts.len() {
            session.truncate(seq, 0);
        }
        let chunks: Vec<(usize, &[u32])> =
            prompts.iter().map(|p| p.as_slice()).enumerate().collect();
        let batched = session.feed(&model, &chunks)?.to_vec();
        let chunks: Vec<(usize, &[u32])> = next.iter().map(|t| t.as_slice()).enumerate().collect();
        let decoded = session.feed(&model, &chunks)?.to_vec();
        Ok([alone.concat(), batched, decoded_alone.concat(), decoded])
    });
    let mut runs = runs.into_iter().map(|r| r.unwrap());
    let first = runs.next().unwrap();
    assert!(runs.all(|run| run == first), "the ranks differ");
    first
}

#[test]
fn a_batched_step_equals_each_sequence_alone() {
    // Qwen 2: biases on q, k and v, a tied head.
    let file = gguf("qwen2");
    let [whole_alone, _, whole_decoded, _] = batched_and_alone(&file, 1);
    let [alone, batched, decoded_alone, decoded] = batched_and_alone(&file, 2);
    for (label, got, want) in [
        ("prefill batched vs alone", &batched, &alone),
        ("decode batched vs alone", &decoded, &decoded_alone),
        (
            "prefill batched vs the whole model alone",
            &batched,
            &whole_alone,
        ),
        (
            "decode batched vs the whole model alone",
            &decoded,
            &whole_decoded,
        ),
    ] {
        let diff = rel_diff(got, want);
        eprintln!("world 2, {label}: within {diff:.1e}");
        assert!(diff <= TOLERANCE, "{label}: {diff}");
    }
}

#[test]
fn worlds_the_model_does_not_split_over_are_refused() {
    let llama = gguf("llama");
    let load = |file: &GgufFile, rank, world| {
        DecoderModel::load_rank(file, &Device::Cpu, None, rank, world).err()
    };
    let shard = |e: Option<ModelError>| match e {
        Some(ModelError::Shard(e)) => e,
        other => panic!("expected a ShardError, got {other:?}"),
    };
    // 4 query heads over 3 or 8 ranks; rank 2 of 2.
    assert_eq!(
        shard(load(&llama, 0, 3)),
        ShardError::QueryHeads {
            n_heads: 4,
            world: 3
        }
    );
    assert!(matches!(
        shard(load(&llama, 0, 8)),
        ShardError::QueryHeads { .. }
    ));
    assert_eq!(
        shard(load(&llama, 2, 2)),
        ShardError::Rank { rank: 2, world: 2 }
    );
    // Q4_K down projections (blocks of 256) over 2 ranks: 128 columns each.
    let k_quant_down = quantized(&llama, GgmlDType::Q8_0, GgmlDType::Q4K);
    assert_eq!(
        shard(load(&k_quant_down, 0, 2)),
        ShardError::Blocks {
            what: "the MLP's down projection",
            columns: 128,
            block: 256
        }
    );
    assert!(load(&k_quant_down, 0, 1).is_none());
}

#[test]
fn a_rank_outside_a_world_refuses_to_run() {
    let llama = gguf("llama");
    let model = DecoderModel::load_rank(&llama, &Device::Cpu, None, 0, 2).unwrap();
    let kv = KvGeometry::new(model.config(), BLOCKS_PER_SEQ, BLOCK);
    let backend = CpuBackend::new(kv, DType::F32).unwrap().with_threads(1);
    let mut session = Session::new(backend, 1, BLOCKS_PER_SEQ, BLOCK);
    let err = session.feed(&model, &[(0, &[1, 2, 3])]).unwrap_err();
    assert!(err.to_string().contains("without a world"), "{err}");
}
