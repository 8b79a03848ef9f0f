//! The memory read bandwidth of this machine for 1..=T threads, each thread
//! streaming its own contiguous share of a buffer much larger than the
//! caches (as a decode step streams the weights), and the decode speed
//! that bandwidth allows a model of a given size:
//! `cargo run --release -p mlxr-models --example read_bandwidth -- 2 model.gguf`
//! (threads, then optionally a GGUF file whose size is the bytes a decode
//! step reads; the buffer is 1 GiB, or `MLXR_BW_MIB` MiB).
//!
//! Best of 20 passes: the bound a decode step could reach, not a typical
//! figure. Issue 18 counts a decode within 5% of it as at the bound.

use std::sync::Barrier;
use std::time::{Duration, Instant};

const PASSES: usize = 20;

/// Sums `words` with four independent chains, so the loop is bound by the
/// loads alone.
fn read(words: &[u64]) -> u64 {
    let mut acc = [0u64; 4];
    for c in words.chunks_exact(4) {
        for (a, &w) in acc.iter_mut().zip(c) {
            *a = a.wrapping_add(w);
        }
    }
    acc.iter().fold(0, |s, &a| s.wrapping_add(a))
}

/// The fastest of [`PASSES`] passes of `threads` threads over `buf`.
fn best_pass(buf: &[u64], threads: usize) -> Duration {
    let share = buf.len().div_ceil(threads);
    let barrier = Barrier::new(threads + 1);
    let mut best = Duration::MAX;
    std::thread::scope(|s| {
        for part in buf.chunks(share) {
            let barrier = &barrier;
            s.spawn(move || {
                let mut sink = 0u64;
                for _ in 0..PASSES {
                    barrier.wait();
                    sink = sink.wrapping_add(read(part));
                    barrier.wait();
                }
                std::hint::black_box(sink);
            });
        }
        for _ in 0..PASSES {
            barrier.wait();
            let start = Instant::now();
            barrier.wait();
            best = best.min(start.elapsed());
        }
    });
    best
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let threads: usize = match args.first() {
        Some(t) => t.parse()?,
        None => std::thread::available_parallelism()?.get(),
    };
    let model_bytes = match args.get(1) {
        Some(path) => Some(std::fs::metadata(path)?.len()),
        None => None,
    };
    let mib: usize = std::env::var("MLXR_BW_MIB")
        .ok()
        .map(|v| v.parse())
        .transpose()?
        .unwrap_or(1024);
    let words = mib << 17;
    // Written once, so every page is backed before timing.
    let buf: Vec<u64> = (0..words as u64).collect();
    for t in 1..=threads {
        let secs = best_pass(&buf, t).as_secs_f64();
        let gbs = (words * 8) as f64 / secs / 1e9;
        let bound = model_bytes
            .map(|b| {
                format!(
                    ", a {:.2} GB model at most {:.1} tok/s",
                    b as f64 / 1e9,
                    gbs * 1e9 / b as f64
                )
            })
            .unwrap_or_default();
        println!("{t} thread(s): {gbs:.1} GB/s read ({mib} MiB, best of {PASSES}){bound}");
    }
    Ok(())
}
