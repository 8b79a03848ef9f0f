//! `mlxr bench --parallel B,..`: aggregate speed of B sequences served
//! together, the figures `llama-batched-bench` prints (`-npp`, `-ntg`,
//! `-npl`), measured through the engine's continuous batching.
//!
//! For each B, prompt length PP and generation length TG: B requests of PP
//! random token ids and TG tokens each (greedy, `ignore_eos`) are submitted
//! at once, each read by its own thread, which notes when every token
//! arrives. The engine schedules decodes before prefill chunks, so the first
//! sequences decode while the last are still being prefilled; the phases are
//! therefore cut where all B sequences are in the same one:
//! - `T_PP`: from submission until every sequence has its first token;
//!   `S_PP` = B · PP / `T_PP`.
//! - `T_TG`: from then until the first sequence finishes, the window in which
//!   all B decode together; `S_TG` = tokens received in that window / `T_TG`.
//! - `T`: from submission until the last token; `S` = B · (PP + TG) / `T`.

use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use mlxr_engine::{EngineHandle, Event, FinishReason, GenerateRequest};
use serde::Serialize;

/// One configuration's result; the keys are `llama-batched-bench
/// --output-format jsonl`'s.
#[derive(Serialize, Debug, Clone, Copy, Default, PartialEq)]
pub struct BatchedResult {
    pub pp: usize,
    pub tg: usize,
    pub pl: usize,
    pub n_kv: usize,
    pub t_pp: f64,
    pub speed_pp: f64,
    pub t_tg: f64,
    pub speed_tg: f64,
    pub t: f64,
    pub speed: f64,
}

/// Runs B requests made by `request` (called B times) together and times
/// them as the module documents.
pub fn run(
    engine: &EngineHandle,
    pp: usize,
    tg: usize,
    pl: usize,
    mut request: impl FnMut() -> GenerateRequest,
) -> Result<BatchedResult> {
    ensure!(pl >= 1 && tg >= 2, "a batched test needs B ≥ 1 and TG ≥ 2");
    let requests: Vec<GenerateRequest> = (0..pl).map(|_| request()).collect();
    let start = Instant::now();
    let arrivals = std::thread::scope(|s| {
        let readers: Vec<_> = requests
            .iter()
            .map(|req| s.spawn(move || read_tokens(engine, req, tg)))
            .collect();
        readers
            .into_iter()
            .map(|r| {
                r.join()
                    .unwrap_or_else(|_| bail!("a reader thread panicked"))
            })
            .collect::<Result<Vec<_>>>()
    })?;
    let offsets: Vec<Vec<Duration>> = arrivals
        .iter()
        .map(|times| times.iter().map(|t| t.duration_since(start)).collect())
        .collect();
    Ok(summarize(pp, tg, &offsets))
}

/// Submits `req` and notes when each of its `tg` tokens arrives.
fn read_tokens(engine: &EngineHandle, req: &GenerateRequest, tg: usize) -> Result<Vec<Instant>> {
    let mut stream = engine.submit(req).context("submitting a request")?;
    let mut times = Vec::with_capacity(tg);
    while let Some(event) = stream.blocking_next() {
        match event {
            Event::Token(_) => times.push(Instant::now()),
            Event::Done { finish_reason, .. } => {
                ensure!(
                    finish_reason == FinishReason::Length && times.len() == tg,
                    "a sequence generated {} of {tg} tokens ({finish_reason:?})",
                    times.len()
                );
                return Ok(times);
            }
            Event::Error(e) => bail!("the engine failed a request: {e}"),
        }
    }
    bail!("a request's stream ended without finishing")
}

/// The figures of B sequences whose tokens arrived at `offsets[i]` (from
/// submission; each `tg` long, in order).
fn summarize(pp: usize, tg: usize, offsets: &[Vec<Duration>]) -> BatchedResult {
    let pl = offsets.len();
    let all_started = offsets.iter().map(|t| t[0]).max().unwrap_or_default();
    let first_done = offsets.iter().map(|t| t[tg - 1]).min().unwrap_or_default();
    let all_done = offsets.iter().map(|t| t[tg - 1]).max().unwrap_or_default();
    let in_window = offsets
        .iter()
        .flatten()
        .filter(|&&t| t > all_started && t <= first_done)
        .count();
    let t_pp = all_started.as_secs_f64();
    let t_tg = first_done.saturating_sub(all_started).as_secs_f64();
    let t = all_done.as_secs_f64();
    let per_s = |n: usize, secs: f64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
    BatchedResult {
        pp,
        tg,
        pl,
        n_kv: pl * (pp + tg),
        t_pp,
        speed_pp: per_s(pl * pp, t_pp),
        t_tg,
        speed_tg: per_s(in_window, t_tg),
        t,
        speed: per_s(pl * (pp + tg), t),
    }
}

/// The mean of each figure over `runs` (of one configuration).
pub fn mean(runs: &[BatchedResult]) -> BatchedResult {
    let n = runs.len().max(1) as f64;
    let avg = |f: fn(&BatchedResult) -> f64| runs.iter().map(f).sum::<f64>() / n;
    let first = runs.first().copied().unwrap_or_default();
    BatchedResult {
        t_pp: avg(|r| r.t_pp),
        speed_pp: avg(|r| r.speed_pp),
        t_tg: avg(|r| r.t_tg),
        speed_tg: avg(|r| r.speed_tg),
        t: avg(|r| r.t),
        speed: avg(|r| r.speed),
        ..first
    }
}

pub fn print_markdown(results: &[BatchedResult]) {
    println!(
        "| {:>6} | {:>6} | {:>4} | {:>6} | {:>8} | {:>9} | {:>8} | {:>9} | {:>8} | {:>9} |",
        "PP", "TG", "B", "N_KV", "T_PP s", "S_PP t/s", "T_TG s", "S_TG t/s", "T s", "S t/s"
    );
    println!(
        "|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|",
        "-".repeat(8),
        "-".repeat(8),
        "-".repeat(6),
        "-".repeat(8),
        "-".repeat(10),
        "-".repeat(11),
        "-".repeat(10),
        "-".repeat(11),
        "-".repeat(10),
        "-".repeat(11)
    );
    for r in results {
        println!(
            "| {:>6} | {:>6} | {:>4} | {:>6} | {:>8.3} | {:>9.2} | {:>8.3} | {:>9.2} | {:>8.3} | {:>9.2} |",
            r.pp, r.tg, r.pl, r.n_kv, r.t_pp, r.speed_pp, r.t_tg, r.speed_tg, r.t, r.speed
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: &[u64]) -> Vec<Duration> {
        v.iter().map(|&m| Duration::from_millis(m)).collect()
    }

    #[test]
    fn phases_are_cut_where_every_sequence_is_in_the_same_one() {
        // Two sequences of PP 10, TG 4: the second's prompt is done at
        // 300 ms, the first finishes at 500 ms.
        let offsets = [ms(&[100, 200, 400, 500]), ms(&[300, 400, 500, 600])];
        let r = summarize(10, 4, &offsets);
        assert_eq!((r.pl, r.n_kv), (2, 28));
        assert!((r.t_pp - 0.3).abs() < 1e-9);
        assert!((r.speed_pp - 20.0 / 0.3).abs() < 1e-6);
        // In (300, 500]: 400 and 500 of the first, 400 and 500 of the second.
        assert!((r.t_tg - 0.2).abs() < 1e-9);
        assert!((r.speed_tg - 4.0 / 0.2).abs() < 1e-6);
        assert!((r.t - 0.6).abs() < 1e-9 && (r.speed - 28.0 / 0.6).abs() < 1e-6);
    }

    #[test]
    fn an_empty_window_reports_no_speed() {
        let offsets = [ms(&[100, 150]), ms(&[200, 250])];
        let r = summarize(1, 2, &offsets);
        assert_eq!(r.t_tg, 0.0);
        assert_eq!(r.speed_tg, 0.0);
    }
}
