//! `mlxr bench`: prompt-processing and generation speed, measured the way
//! `llama-bench` measures them, through the same engine `mlxr generate` uses.
//!
//! - `ppN`: one request whose prompt is N random token ids, `max_tokens` 1.
//!   Timed by the engine from the step that first schedules the request to
//!   its first token: the forward passes over the prompt plus one sampling
//!   step (greedy). Queueing and model loading are not in it.
//! - `tgN`: a one-token prompt, then N + 1 tokens generated one step at a
//!   time (greedy, `ignore_eos`); timed from the first generated token to the
//!   last, i.e. exactly N decode steps, each a forward pass of one token plus
//!   greedy sampling.
//!
//! - at depth D (`-d D`): `ppN` first runs D random tokens untimed, then
//!   times the same D tokens plus N new ones, of which the prefix cache
//!   holds the D (so N are computed, reading D tokens of context); `tgN`'s
//!   prompt is D tokens, so its decode steps run at positions D to D + N.
//!
//! - with speculative decoding (`--spec-type`, `--model-draft`), `tgN`
//!   verifies drafts: still N + 1 tokens, in fewer steps; each test also
//!   reports the draft tokens proposed and accepted.
//!
//! Each test runs once as a warm-up, then `-r` times. Every run draws new
//! random ids, so no run reuses another's KV (the prefix cache is on only
//! for a depth above 0, and only the run's own prefix is in it).

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use anyhow::{bail, ensure, Context, Result};
use mlxr_engine::{
    DeviceChoice, EngineConfig, EngineHandle, FinishReason, GenerateRequest, KvBudget, LoadedModel,
    Prompt, SamplingParams,
};
use mlxr_formats::gguf::GgufFile;
use serde::{Deserialize, Serialize};

use super::bench_batched;
use crate::cli::{BenchArgs, BenchOutput};

/// One test's result; the keys are `llama-bench -o json`'s, so one parser
/// reads both tools' output.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct TestResult {
    pub model_filename: String,
    pub model_type: String,
    pub model_size: u64,
    pub model_n_params: u64,
    pub backend: String,
    pub n_threads: usize,
    pub n_batch: usize,
    pub type_kv: String,
    pub n_prompt: usize,
    pub n_gen: usize,
    #[serde(default)]
    pub n_depth: usize,
    pub test: String,
    pub avg_ns: u64,
    pub stddev_ns: u64,
    pub avg_ts: f64,
    pub stddev_ts: f64,
    pub samples_ns: Vec<u64>,
    pub samples_ts: Vec<f64>,
    /// Draft tokens verified and accepted over the timed runs (llama-server's
    /// `timings` names; not llama-bench keys).
    #[serde(default)]
    pub draft_n: usize,
    #[serde(default)]
    pub draft_n_accepted: usize,
}

pub fn bench(args: BenchArgs) -> Result<()> {
    ensure!(args.repetitions >= 1, "--repetitions must be at least 1");
    ensure!(args.batch_size >= 1, "--batch-size must be at least 1");
    ensure!(
        args.n_prompt.iter().chain(&args.n_gen).any(|&n| n > 0),
        "nothing to measure: give -p or -n a value above 0"
    );
    if !args.parallel.is_empty() {
        return bench_parallel(&args);
    }
    let results = match args.threads.as_slice() {
        [] => run_tests(&args, None)?,
        [one] => run_tests(&args, Some(*one))?,
        // The CPU thread pool is sized once per process: one child per count.
        many => {
            let mut all = Vec::new();
            for &t in many {
                all.extend(run_child(&args, t)?);
            }
            all
        }
    };
    match args.output {
        BenchOutput::Json => println!("{}", serde_json::to_string_pretty(&results)?),
        BenchOutput::Md => print_markdown(&results),
    }
    Ok(())
}

/// Loads the model and starts an engine for `max_num_seqs` sequences of
/// `needed` tokens each; also returns the vocabulary the random ids come from.
fn start_engine(
    args: &BenchArgs,
    device: DeviceChoice,
    needed: usize,
    max_num_seqs: usize,
    prefix_caching: bool,
) -> Result<(EngineHandle, u64)> {
    let ctx = args.ctx_size.unwrap_or(needed.next_multiple_of(16));
    let lm = Arc::new(LoadedModel::load_on(&args.model, Some(ctx), device)?);
    ensure!(
        lm.context_size >= needed,
        "the tests need {needed} tokens of context; the model has {}",
        lm.context_size
    );
    let config = EngineConfig {
        device,
        kv_budget: KvBudget::Bytes(u64::MAX),
        kv_dtype: args.kv_dtype,
        max_num_seqs,
        // llama-bench's ubatch: a prompt up to this long is one forward pass.
        max_num_batched_tokens: args.batch_size,
        long_prefill_token_threshold: args.batch_size,
        prefix_caching,
        speculation: super::speculation(&args.spec),
        draft_model: args.spec.model_draft.clone(),
        draft_vocab: super::draft_vocab(&args.spec),
        ..EngineConfig::default()
    };
    let vocab = lm.model.config().vocab_size.min(lm.tokenizer.vocab_size()) as u64;
    Ok((EngineHandle::start(lm, config)?, vocab))
}

/// `--parallel`: every (B, PP, TG) once as a warm-up, then `-r` times;
/// the mean of each figure.
fn bench_parallel(args: &BenchArgs) -> Result<()> {
    ensure!(
        args.threads.len() <= 1,
        "--parallel takes one thread count (-t N)"
    );
    ensure!(
        args.parallel.iter().all(|&b| b >= 1),
        "--parallel values must be at least 1"
    );
    let prompts: Vec<usize> = args.n_prompt.iter().copied().filter(|&n| n > 0).collect();
    let gens: Vec<usize> = args.n_gen.iter().copied().filter(|&n| n >= 2).collect();
    ensure!(
        !prompts.is_empty() && !gens.is_empty(),
        "--parallel needs a prompt length (-p) above 0 and a generation length (-n) of at least 2"
    );
    ensure!(
        args.n_depth.iter().all(|&d| d == 0),
        "--parallel does not take a depth (-d)"
    );
    super::set_threads(args.threads.first().copied())?;
    let needed = prompts.iter().max().unwrap_or(&0) + gens.iter().max().unwrap_or(&0) + 1;
    let most = args.parallel.iter().copied().max().unwrap_or(1);
    let (engine, vocab) = start_engine(args, args.device.resolve()?, needed, most, false)?;
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut results = Vec::new();
    for &pl in &args.parallel {
        for &pp in &prompts {
            for &tg in &gens {
                let mut runs = Vec::new();
                for rep in 0..=args.repetitions {
                    let r = bench_batched::run(&engine, pp, tg, pl, || {
                        request((0..pp).map(|_| rng.below(vocab) as u32).collect(), tg)
                    })?;
                    if rep > 0 {
                        runs.push(r);
                    }
                }
                results.push(bench_batched::mean(&runs));
            }
        }
    }
    engine.shutdown();
    match args.output {
        BenchOutput::Json => println!("{}", serde_json::to_string_pretty(&results)?),
        BenchOutput::Md => {
            bench_batched::print_markdown(&results);
            println!();
            println!(
                "mlxr {} (engine path: EngineHandle, batch {}, KV {})",
                env!("CARGO_PKG_VERSION"),
                args.batch_size,
                format!("{:?}", args.kv_dtype).to_lowercase()
            );
        }
    }
    Ok(())
}

/// Loads the model once and runs every test at one thread count.
fn run_tests(args: &BenchArgs, threads: Option<usize>) -> Result<Vec<TestResult>> {
    super::set_threads(threads)?;
    let n_threads = threads.unwrap_or_else(default_threads);
    let max_prompt = args.n_prompt.iter().copied().max().unwrap_or(0);
    let max_gen = args.n_gen.iter().copied().max().unwrap_or(0);
    let max_depth = args.n_depth.iter().copied().max().unwrap_or(0);
    // Room for the longest test (the tg prompt is one token, plus one extra
    // generated token), rounded up to whole KV blocks.
    let needed = max_depth + max_prompt.max(max_gen + 2) + 1;
    let device = args.device.resolve()?;
    let (engine, vocab) = start_engine(args, device, needed, 1, max_depth > 0)?;
    let desc = describe(&args.model)?;
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut results = Vec::new();
    let tests = (args.n_prompt.iter().filter(|&&n| n > 0).map(|&n| (n, 0)))
        .chain(args.n_gen.iter().filter(|&&n| n > 0).map(|&n| (0, n)));
    let tests: Vec<(usize, usize)> = tests.collect();
    // llama-bench's order: every test at one depth, then the next depth.
    for &depth in &args.n_depth {
        for &(n_prompt, n_gen) in &tests {
            let mut samples_ns = Vec::new();
            let mut drafts = (0, 0);
            for rep in 0..=args.repetitions {
                let timings = if n_prompt > 0 {
                    time_prompt(&engine, depth, n_prompt, vocab, &mut rng)?
                } else {
                    time_generation(&engine, depth, n_gen, vocab, &mut rng)?
                };
                if rep > 0 {
                    samples_ns.push(timings.0);
                    drafts = (drafts.0 + timings.1, drafts.1 + timings.2);
                }
            }
            let test = Test {
                n_prompt,
                n_gen,
                n_depth: depth,
            };
            let mut result = summarize(&desc, args, device, n_threads, test, samples_ns);
            (result.draft_n, result.draft_n_accepted) = drafts;
            results.push(result);
        }
    }
    engine.shutdown();
    Ok(results)
}

/// What one timed run gives: ns, draft tokens verified, accepted.
type RunTimings = (u64, usize, usize);

/// ns to process `n` random prompt tokens after `depth` cached ones (and
/// sample one token).
fn time_prompt(
    engine: &EngineHandle,
    depth: usize,
    n: usize,
    vocab: u64,
    rng: &mut XorShift,
) -> Result<RunTimings> {
    let mut ids: Vec<u32> = (0..depth).map(|_| rng.below(vocab) as u32).collect();
    if depth > 0 {
        engine.generate(&request(ids.clone(), 1), |_| true)?;
    }
    ids.extend((0..n).map(|_| rng.below(vocab) as u32));
    let g = engine.generate(&request(ids, 1), |_| true)?;
    ensure!(
        g.timings.prompt_n == n,
        "the engine computed {} of {n} prompt tokens after a depth of {depth} \
         (the depth must be a whole number of KV blocks, 16 tokens)",
        g.timings.prompt_n
    );
    Ok(((g.timings.prompt_ms * 1e6) as u64, 0, 0))
}

/// ns for `n` single-token decode steps after a prompt of `depth` tokens
/// (one token at depth 0).
fn time_generation(
    engine: &EngineHandle,
    depth: usize,
    n: usize,
    vocab: u64,
    rng: &mut XorShift,
) -> Result<RunTimings> {
    let ids = (0..depth.max(1)).map(|_| rng.below(vocab) as u32).collect();
    let g = engine.generate(&request(ids, n + 1), |_| true)?;
    ensure!(
        g.finish_reason == FinishReason::Length && g.timings.predicted_n == n + 1,
        "generated {} of {} tokens ({:?})",
        g.timings.predicted_n,
        n + 1,
        g.finish_reason
    );
    // From the first token to the last: n decode steps (fewer when drafts
    // stand).
    Ok((
        (g.timings.predicted_ms * 1e6) as u64,
        g.timings.draft_n,
        g.timings.draft_n_accepted,
    ))
}

fn request(ids: Vec<u32>, max_tokens: usize) -> GenerateRequest {
    GenerateRequest {
        sampling: SamplingParams {
            temperature: 0.0,
            ..SamplingParams::default()
        },
        max_tokens: Some(max_tokens),
        ignore_eos: true,
        ..GenerateRequest::new(Prompt::Tokens(ids))
    }
}

/// What llama-bench's model, size and params columns show.
struct ModelDesc {
    filename: String,
    kind: String,
    size: u64,
    params: u64,
}

fn describe(path: &Path) -> Result<ModelDesc> {
    if path.is_dir() {
        return describe_folder(path);
    }
    let file = GgufFile::open(path)?;
    let meta = file.metadata();
    let size = file.tensors().iter().map(|t| t.size_bytes).sum();
    let params = file.tensors().iter().map(|t| t.n_elements()).sum();
    let arch = meta.opt_str("general.architecture")?.unwrap_or("?");
    let label = match meta.opt_str("general.size_label")? {
        Some(l) => l.to_string(),
        None => mlxr_registry::human_number(params),
    };
    let ftype = meta
        .opt_u32("general.file_type")?
        .and_then(mlxr_registry::file_type_name)
        .unwrap_or("?");
    Ok(ModelDesc {
        filename: path.display().to_string(),
        kind: format!("{arch} {label} {ftype}"),
        size,
        params,
    })
}

/// A Hugging Face / MLX folder: `model_type`, parameter count and dtype
/// from the safetensors headers (MLX: the integer width), bytes on disk.
fn describe_folder(dir: &Path) -> Result<ModelDesc> {
    let shards = mlxr_registry::folder_weights(dir)?;
    let paths: Vec<std::path::PathBuf> = shards.iter().map(|s| dir.join(s)).collect();
    let refs: Vec<&Path> = paths.iter().map(|p| p.as_path()).collect();
    let details = mlxr_registry::safetensors_details(&refs, Some(&dir.join("config.json")))?;
    let size = paths
        .iter()
        .map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .sum();
    let params = from_human(&details.parameter_size);
    Ok(ModelDesc {
        filename: dir.display().to_string(),
        kind: format!(
            "{} {} {}",
            details.family, details.parameter_size, details.quantization_level
        ),
        size,
        params,
    })
}

/// `"134.52M"` → 134_520_000 (the registry's human-readable count).
fn from_human(text: &str) -> u64 {
    let (digits, scale) = match text.chars().last() {
        Some('K') => (&text[..text.len() - 1], 1e3),
        Some('M') => (&text[..text.len() - 1], 1e6),
        Some('B') => (&text[..text.len() - 1], 1e9),
        Some('T') => (&text[..text.len() - 1], 1e12),
        _ => (text, 1.0),
    };
    (digits.parse::<f64>().unwrap_or(0.0) * scale).round() as u64
}

/// One test's lengths, as llama-bench names them.
#[derive(Clone, Copy)]
struct Test {
    n_prompt: usize,
    n_gen: usize,
    n_depth: usize,
}

impl Test {
    /// `pp512`, `tg128`, `pp512 @ d512`.
    fn name(&self) -> String {
        let base = if self.n_prompt > 0 {
            format!("pp{}", self.n_prompt)
        } else {
            format!("tg{}", self.n_gen)
        };
        match self.n_depth {
            0 => base,
            d => format!("{base} @ d{d}"),
        }
    }
}

fn summarize(
    desc: &ModelDesc,
    args: &BenchArgs,
    device: DeviceChoice,
    n_threads: usize,
    test: Test,
    samples_ns: Vec<u64>,
) -> TestResult {
    let tokens = (test.n_prompt + test.n_gen) as f64;
    let samples_ts: Vec<f64> = samples_ns
        .iter()
        .map(|&ns| tokens * 1e9 / (ns.max(1) as f64))
        .collect();
    let as_f64: Vec<f64> = samples_ns.iter().map(|&ns| ns as f64).collect();
    let (avg_ns, sd_ns) = mean_sd(&as_f64);
    let (avg_ts, stddev_ts) = mean_sd(&samples_ts);
    TestResult {
        model_filename: desc.filename.clone(),
        model_type: desc.kind.clone(),
        model_size: desc.size,
        model_n_params: desc.params,
        // llama-bench's names for its backends.
        backend: match device {
            DeviceChoice::Cuda(_) => "CUDA",
            DeviceChoice::Metal(_) => "Metal",
            DeviceChoice::Cpu | DeviceChoice::Auto => "CPU",
        }
        .into(),
        n_threads,
        n_batch: args.batch_size,
        type_kv: format!("{:?}", args.kv_dtype).to_lowercase(),
        n_prompt: test.n_prompt,
        n_gen: test.n_gen,
        n_depth: test.n_depth,
        test: test.name(),
        avg_ns: avg_ns as u64,
        stddev_ns: sd_ns as u64,
        avg_ts,
        stddev_ts,
        samples_ns,
        samples_ts,
        draft_n: 0,
        draft_n_accepted: 0,
    }
}

/// Mean and sample standard deviation (0 for one sample), as llama-bench.
fn mean_sd(xs: &[f64]) -> (f64, f64) {
    if xs.is_empty() {
        return (0.0, 0.0);
    }
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    if xs.len() < 2 {
        return (mean, 0.0);
    }
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

/// The thread count candle's pool gets without `-t`.
fn default_threads() -> usize {
    mlxr_engine::config::default_threads()
}

/// Runs this program again for one thread count and reads its JSON.
fn run_child(args: &BenchArgs, threads: usize) -> Result<Vec<TestResult>> {
    let list = |v: &[usize]| {
        v.iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.arg("bench")
        .arg("-m")
        .arg(&args.model)
        .args(["-p", &list(&args.n_prompt), "-n", &list(&args.n_gen)])
        .args(["-d", &list(&args.n_depth)])
        .args(["-t", &threads.to_string()])
        .args(["-r", &args.repetitions.to_string()])
        .args(["-b", &args.batch_size.to_string()])
        .args(["--kv-dtype", &format!("{:?}", args.kv_dtype).to_lowercase()])
        .args(["--device", &args.device.to_string()])
        .args(args.spec.to_flags())
        .args(["-o", "json"]);
    if let Some(c) = args.ctx_size {
        cmd.args(["-c", &c.to_string()]);
    }
    let out = cmd
        .output()
        .context("running mlxr bench for one thread count")?;
    if !out.status.success() {
        bail!(
            "mlxr bench -t {threads} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

fn print_markdown(results: &[TestResult]) {
    println!(
        "| {:<30} | {:>10} | {:>10} | {:<10} | {:>7} | {:>15} | {:>20} |",
        "model", "size", "params", "backend", "threads", "test", "t/s"
    );
    println!(
        "| {} | {}: | {}: | {} | {}: | {}: | {}: |",
        "-".repeat(30),
        "-".repeat(9),
        "-".repeat(9),
        "-".repeat(10),
        "-".repeat(6),
        "-".repeat(14),
        "-".repeat(19)
    );
    for r in results {
        println!(
            "| {:<30} | {:>10} | {:>10} | {:<10} | {:>7} | {:>15} | {:>20} |",
            r.model_type,
            size(r.model_size),
            params(r.model_n_params),
            r.backend,
            r.n_threads,
            r.test,
            format!("{:.2} ± {:.2}", r.avg_ts, r.stddev_ts)
        );
    }
    println!();
    for r in results.iter().filter(|r| r.draft_n > 0) {
        println!(
            "{} (t = {}): {} of {} draft tokens accepted ({:.1}%)",
            r.test,
            r.n_threads,
            r.draft_n_accepted,
            r.draft_n,
            100.0 * r.draft_n_accepted as f64 / r.draft_n as f64
        );
    }
    println!(
        "mlxr {} (engine path: EngineHandle, batch {}, KV {})",
        env!("CARGO_PKG_VERSION"),
        results.first().map_or(0, |r| r.n_batch),
        results.first().map_or("?", |r| r.type_kv.as_str()),
    );
}

fn size(bytes: u64) -> String {
    let b = bytes as f64;
    if b < 1024.0 * 1024.0 * 1024.0 {
        format!("{:.2} MiB", b / 1024.0 / 1024.0)
    } else {
        format!("{:.2} GiB", b / 1024.0 / 1024.0 / 1024.0)
    }
}

fn params(n: u64) -> String {
    let x = n as f64;
    if x < 1e9 {
        format!("{:.2} M", x / 1e6)
    } else {
        format!("{:.2} B", x / 1e9)
    }
}

/// Random token ids; the figures do not depend on which ids.
struct XorShift(u64);

impl XorShift {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_sample_sd() {
        assert_eq!(mean_sd(&[]), (0.0, 0.0));
        assert_eq!(mean_sd(&[3.0]), (3.0, 0.0));
        let (m, sd) = mean_sd(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!(m, 5.0);
        assert!((sd - 2.138_089_935).abs() < 1e-6);
    }

    #[test]
    fn test_names_are_llama_bench_names() {
        let t = |n_prompt, n_gen, n_depth| {
            Test {
                n_prompt,
                n_gen,
                n_depth,
            }
            .name()
        };
        assert_eq!(t(512, 0, 0), "pp512");
        assert_eq!(t(0, 128, 0), "tg128");
        assert_eq!(t(512, 0, 512), "pp512 @ d512");
        assert_eq!(t(0, 128, 4096), "tg128 @ d4096");
    }

    #[test]
    fn sizes_print_like_llama_bench() {
        assert_eq!(size(96_574_080), "92.10 MiB");
        assert_eq!(params(134_515_008), "134.52 M");
    }
}
