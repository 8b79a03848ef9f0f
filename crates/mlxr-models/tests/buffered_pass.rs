//! The buffered forward pass (`DecoderModel::forward_into`) on the real
//! models: the same logits as the tensor pass bit for bit, through prefill
//! chunks and batched decode steps, and no heap allocation in a decode step
//! once its workspace has seen a batch that large (counted by a global
//! allocator that only this test binary installs; a panic fails it).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use candle_core::{DType, Device};
use mlxr_formats::gguf::GgufFile;
use mlxr_models::{DecoderModel, PagedKvStore, PagedKvView, SeqChunk, Workspace};
use mlxr_testkit::{GEMMA3, SMOLLM2};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const BLOCK: usize = 16;
const BLOCKS_PER_SEQ: usize = 6;

fn store(model: &DecoderModel, seqs: usize, dtype: DType) -> PagedKvStore {
    let c = model.config();
    let blocks = BLOCKS_PER_SEQ * seqs;
    PagedKvStore::new(
        c.n_layers,
        blocks,
        BLOCK,
        c.n_kv_heads,
        c.head_dim,
        dtype,
        &Device::Cpu,
    )
    .unwrap()
}

fn argmax(row: &[f32]) -> u32 {
    let mut best = 0;
    for (i, v) in row.iter().enumerate() {
        if *v > row[best] {
            best = i;
        }
    }
    best as u32
}

/// Feeds `seqs` prompts (prefilled in chunks of different sizes), then
/// decodes them together greedily; every step through both passes, which
/// must agree bit for bit. Then decodes on through `forward_into` alone and
/// returns its allocations per step (after the first).
fn run(file: &str, dtype: DType) -> Option<Vec<usize>> {
    let path = mlxr_testkit::model_path(file)?;
    let model = DecoderModel::load(&GgufFile::open(&path).unwrap(), &Device::Cpu).unwrap();
    assert!(model.supports_buffered(), "{file}: no buffered pass");
    let prompts: Vec<Vec<u32>> = [37u32, 19, 5]
        .iter()
        .map(|&len| (0..len).map(|i| 100 + (i * 53 + len * 7) % 4000).collect())
        .collect();
    let chunk_sizes = [16usize, 7, 5];
    let (graph_store, buffered_store) = (store(&model, 3, dtype), store(&model, 3, dtype));
    let tables: Vec<Vec<u32>> = (0..3)
        .map(|s| {
            // Interleaved, descending: blocks of a sequence are not adjacent.
            (0..BLOCKS_PER_SEQ)
                .map(|b| (3 * BLOCKS_PER_SEQ - 1 - (b * 3 + s)) as u32)
                .collect()
        })
        .collect();
    let mut fed = [0usize; 3];
    let mut next: [Option<u32>; 3] = [None; 3];
    let mut ws = Workspace::default();
    let mut allocations = Vec::new();
    let mut graph_view = PagedKvView::new(&graph_store, tables.iter().map(Vec::as_slice).collect());
    let mut buffered_view =
        PagedKvView::new(&buffered_store, tables.iter().map(Vec::as_slice).collect());
    for step in 0..24 {
        let (mut tokens, mut chunks) = (Vec::new(), Vec::new());
        for s in 0..3 {
            match next[s] {
                Some(token) => {
                    tokens.push(token);
                    chunks.push(SeqChunk::new(fed[s], 1));
                }
                None => {
                    let take = chunk_sizes[s].min(prompts[s].len() - fed[s]);
                    tokens.extend_from_slice(&prompts[s][fed[s]..fed[s] + take]);
                    chunks.push(SeqChunk::new(fed[s], take));
                }
            }
        }
        let want = model
            .forward(&tokens, &chunks, &mut graph_view)
            .unwrap()
            .to_vec2::<f32>()
            .unwrap();
        let got = model
            .forward_into(&tokens, &chunks, &mut buffered_view, &mut ws)
            .unwrap();
        let vocab = model.config().vocab_size;
        assert_eq!(got.len(), 3 * vocab);
        for (s, (row, want)) in got.chunks_exact(vocab).zip(&want).enumerate() {
            assert!(
                row == want.as_slice(),
                "{file} {dtype:?}: step {step}, sequence {s}: the buffered pass differs"
            );
        }
        for (s, row) in want.iter().enumerate() {
            fed[s] += chunks[s].len;
            if fed[s] == prompts[s].len() || next[s].is_some() {
                next[s] = Some(argmax(row));
            }
        }
    }
    // Then decode steps through the buffered pass alone, as the engine runs
    // them (the tensor pass above allocates plenty on the pool's threads).
    assert!(next.iter().all(Option::is_some), "{file}: still prefilling");
    let mut tokens: Vec<u32> = next.iter().map(|t| t.unwrap()).collect();
    for step in 0..12 {
        let chunks: Vec<SeqChunk> = fed.iter().map(|&pos| SeqChunk::new(pos, 1)).collect();
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        let logits = model
            .forward_into(&tokens, &chunks, &mut buffered_view, &mut ws)
            .unwrap();
        let spent = ALLOCATIONS.load(Ordering::Relaxed) - before;
        if step > 0 {
            allocations.push(spent);
        }
        let vocab = model.config().vocab_size;
        for (s, row) in logits.chunks_exact(vocab).enumerate() {
            tokens[s] = argmax(row);
            fed[s] += 1;
        }
    }
    assert!(!allocations.is_empty(), "{file}: no decode steps measured");
    Some(allocations)
}

fn check(file: &str) {
    // The engine runs its passes on a pool thread; so does this test.
    rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap()
        .install(|| {
            for dtype in [DType::F16, DType::F32] {
                if let Some(allocations) = run(file, dtype) {
                    println!("{file} {dtype:?}: allocations per decode step {allocations:?}");
                    // An F32 store runs llama.cpp's exact attention, which
                    // keeps one score row as long as the context: it grows
                    // (doubling, once per pool thread) as sequences do.
                    let (allowed, growing_steps) = match dtype {
                        DType::F32 => (2, 1),
                        _ => (0, 0),
                    };
                    let total: usize = allocations.iter().sum();
                    let steps = allocations.iter().filter(|&&n| n > 0).count();
                    assert!(
                        total <= allowed && steps <= growing_steps,
                        "{file} {dtype:?}: decode steps allocated {allocations:?}"
                    );
                }
            }
        });
}

/// One test for both models, run without libtest (`harness = false` in
/// Cargo.toml): the allocation counter is global, so no other thread of this
/// binary may allocate while a model is measured.
fn main() {
    check(SMOLLM2);
    check(GEMMA3);
    println!("buffered_pass_on_real_models ... ok");
}
