//! Engine benchmark (issue 3).
//!
//! 1. Throughput: C requests submitted at once, for each C in
//!    `--concurrency`; aggregate output tokens/s, TTFT, inter-token latency.
//! 2. TTFT under a long prefill: a ~2000-token prompt is submitted, then a
//!    short request right behind it; once per `--prefill-budgets` value
//!    (`max_num_batched_tokens`), each on a fresh engine.
//!
//! Prints a Markdown report, or one JSON object with `--json`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use clap::Parser;
use serde::Serialize;

use mlxr_engine::{
    EngineConfig, EngineHandle, Event, GenerateRequest, KvBudget, LoadedModel, Prompt,
    RequestStream, SamplingParams, Timings,
};

const DEFAULT_MODEL: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// Enough for the background request to outlast the long prefill: it gets
/// at most one token per engine step while the prefill runs.
const BACKGROUND_TOKENS: usize = 64;

#[derive(Parser)]
#[command(about = "Throughput and TTFT benchmark of the MLXR engine")]
struct Args {
    /// GGUF model (default: $MLXR_MODELS_DIR or ~/.cache/mlxr/models, + SmolLM2-135M-Instruct.Q4_1.gguf).
    #[arg(short = 'm', long)]
    model: Option<PathBuf>,
    /// Concurrency levels of the throughput scenario.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64")]
    concurrency: Vec<usize>,
    /// Tokens each throughput request generates.
    #[arg(long, default_value_t = 64)]
    max_tokens: usize,
    /// Prompt length of the long request in the TTFT scenario.
    #[arg(long, default_value_t = 2000)]
    long_prompt_tokens: usize,
    /// `max_num_batched_tokens` settings of the TTFT scenario (4096: no chunking).
    #[arg(long, value_delimiter = ',', default_value = "4096,512,256")]
    prefill_budgets: Vec<usize>,
    /// Wait between submitting the long and the short request.
    #[arg(long, default_value_t = 50)]
    admit_wait_ms: u64,
    /// KV cache memory (e.g. 1GiB), sized so the 64-way case does not preempt.
    #[arg(long, default_value = "1GiB")]
    kv_cache_mem: KvBudget,
    /// CPU threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Print JSON instead of Markdown.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Report {
    model: String,
    threads: String,
    max_tokens: usize,
    throughput: Vec<ThroughputRow>,
    long_prefill: Vec<LongPrefillRow>,
}

#[derive(Serialize)]
struct ThroughputRow {
    concurrency: usize,
    wall_s: f64,
    generated_tokens: usize,
    output_tokens_per_s: f64,
    mean_ttft_ms: f64,
    max_ttft_ms: f64,
    mean_inter_token_ms: f64,
    preemptions: u64,
}

#[derive(Serialize)]
struct LongPrefillRow {
    max_num_batched_tokens: usize,
    long_prompt_tokens: usize,
    short_prompt_tokens: usize,
    short_ttft_ms: f64,
    long_ttft_ms: f64,
    /// Longest stall of a request that was decoding meanwhile.
    background_max_gap_ms: f64,
    preemptions: u64,
}

/// What one finished request reported.
struct Finished {
    prompt_tokens: usize,
    generated: usize,
    timings: Timings,
}

fn main() -> Result<()> {
    let args = Args::parse();
    if let Some(n) = args.threads {
        ensure!(n > 0, "--threads must be at least 1");
        // candle's CPU kernels size their pools from this variable; set it
        // before the first tensor operation creates them.
        std::env::set_var("RAYON_NUM_THREADS", n.to_string());
    }
    let path = args.model.clone().unwrap_or_else(default_model_path);
    eprintln!("loading {}", path.display());
    let model = Arc::new(
        LoadedModel::load(&path, None).with_context(|| format!("loading {}", path.display()))?,
    );

    let throughput = throughput_scenario(&model, &args)?;
    let long_prefill = args
        .prefill_budgets
        .iter()
        .map(|&budget| long_prefill_scenario(&model, &args, budget))
        .collect::<Result<Vec<_>>>()?;

    let report = Report {
        model: path.display().to_string(),
        threads: std::env::var("RAYON_NUM_THREADS").unwrap_or_else(|_| "all cores".into()),
        max_tokens: args.max_tokens,
        throughput,
        long_prefill,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", markdown(&report));
    }
    Ok(())
}

fn default_model_path() -> PathBuf {
    let dir = std::env::var_os("MLXR_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").unwrap_or_default();
            PathBuf::from(home).join(".cache/mlxr/models")
        });
    dir.join(DEFAULT_MODEL)
}

fn engine_config(args: &Args, max_num_batched_tokens: usize, prefix_caching: bool) -> EngineConfig {
    let max_concurrency = args.concurrency.iter().copied().max().unwrap_or(1);
    EngineConfig {
        kv_budget: args.kv_cache_mem,
        max_num_batched_tokens,
        // As `mlxr serve` sets it: half the step for a running prompt while
        // others wait (4096 still reads the ~2000-token prompt in one pass).
        long_prefill_token_threshold: (max_num_batched_tokens / 2).max(1),
        max_num_seqs: max_concurrency.max(64),
        prefix_caching,
        ..EngineConfig::default()
    }
}

fn throughput_scenario(model: &Arc<LoadedModel>, args: &Args) -> Result<Vec<ThroughputRow>> {
    let engine = EngineHandle::start(model.clone(), engine_config(args, 512, true))?;
    warm_up(&engine)?;
    let mut rows = Vec::new();
    let mut next_prompt = 0;
    for &concurrency in &args.concurrency {
        eprintln!("throughput: {concurrency} concurrent requests");
        let requests: Vec<_> = (next_prompt..next_prompt + concurrency)
            .map(|i| short_request(&short_prompt(i), args.max_tokens))
            .collect();
        next_prompt += concurrency;
        rows.push(measure_throughput(&engine, &requests)?);
    }
    Ok(rows)
}

fn measure_throughput(
    engine: &EngineHandle,
    requests: &[GenerateRequest],
) -> Result<ThroughputRow> {
    let preemptions_before = engine.metrics().gauges().preemptions;
    let start = Instant::now();
    let streams = requests
        .iter()
        .map(|r| engine.submit(r))
        .collect::<Result<Vec<_>, _>>()?;
    // The event channels are unbounded, so reading the streams one after
    // another does not slow the engine down.
    let finished = streams
        .into_iter()
        .map(read_to_done)
        .collect::<Result<Vec<_>>>()?;
    let wall_s = start.elapsed().as_secs_f64();

    let generated_tokens: usize = finished.iter().map(|f| f.generated).sum();
    let ttfts: Vec<f64> = finished.iter().map(|f| f.timings.ttft_ms).collect();
    // Pooled over all gaps between consecutive tokens of every request.
    let decode_ms: f64 = finished.iter().map(|f| f.timings.predicted_ms).sum();
    let gaps: usize = finished.iter().map(|f| f.generated.saturating_sub(1)).sum();
    Ok(ThroughputRow {
        concurrency: requests.len(),
        wall_s,
        generated_tokens,
        output_tokens_per_s: generated_tokens as f64 / wall_s,
        mean_ttft_ms: mean(&ttfts),
        max_ttft_ms: ttfts.iter().copied().fold(0.0, f64::max),
        mean_inter_token_ms: if gaps > 0 {
            decode_ms / gaps as f64
        } else {
            0.0
        },
        preemptions: engine.metrics().gauges().preemptions - preemptions_before,
    })
}

fn long_prefill_scenario(
    model: &Arc<LoadedModel>,
    args: &Args,
    max_num_batched_tokens: usize,
) -> Result<LongPrefillRow> {
    eprintln!("long prefill: max_num_batched_tokens = {max_num_batched_tokens}");
    // A fresh engine per setting (the budget is fixed at start), and no
    // prefix cache so nothing of the long prompt is ever reused.
    let engine = EngineHandle::start(
        model.clone(),
        engine_config(args, max_num_batched_tokens, false),
    )?;
    warm_up(&engine)?;
    let background = start_background_decode(&engine)?;
    let long_text = long_prompt(&engine, args.long_prompt_tokens, max_num_batched_tokens);
    let long = engine.submit(&short_request(&long_text, 1))?;
    // Let the engine take the long prompt into its current step first.
    std::thread::sleep(Duration::from_millis(args.admit_wait_ms));
    let short = engine.submit(&short_request(
        "Question: what is the capital of France? Answer:",
        8,
    ))?;
    let short = read_to_done(short)?;
    let long = read_to_done(long)?;
    let background_max_gap_ms = background
        .join()
        .map_err(|_| anyhow::anyhow!("the background reader panicked"))??;
    Ok(LongPrefillRow {
        max_num_batched_tokens,
        long_prompt_tokens: long.prompt_tokens,
        short_prompt_tokens: short.prompt_tokens,
        short_ttft_ms: short.timings.ttft_ms,
        long_ttft_ms: long.timings.ttft_ms,
        background_max_gap_ms,
        preemptions: engine.metrics().gauges().preemptions,
    })
}

/// A request that is already decoding when the long prompt arrives; the
/// thread returns the longest gap between two of its tokens, which is how
/// long the long prefill stalled it.
fn start_background_decode(engine: &EngineHandle) -> Result<std::thread::JoinHandle<Result<f64>>> {
    let mut stream = engine.submit(&short_request(
        "Background: list the planets of the solar system.",
        BACKGROUND_TOKENS,
    ))?;
    match stream.blocking_next() {
        Some(Event::Token(_)) => {}
        other => bail!("the background request did not start decoding: {other:?}"),
    }
    Ok(std::thread::spawn(move || {
        let mut last = Instant::now();
        let mut max_gap = Duration::ZERO;
        while let Some(event) = stream.blocking_next() {
            match event {
                Event::Token(_) => {
                    max_gap = max_gap.max(last.elapsed());
                    last = Instant::now();
                }
                Event::Done { .. } => return Ok(max_gap.as_secs_f64() * 1000.0),
                Event::Error(message) => bail!("the background request failed: {message}"),
            }
        }
        bail!("the engine stopped before the background request finished")
    }))
}

/// One short request first, so allocations and thread pools are in place.
fn warm_up(engine: &EngineHandle) -> Result<()> {
    read_to_done(engine.submit(&short_request("Warm-up: count to three.", 4))?)?;
    Ok(())
}

fn short_request(prompt: &str, max_tokens: usize) -> GenerateRequest {
    GenerateRequest {
        sampling: SamplingParams::greedy(),
        max_tokens: Some(max_tokens),
        ignore_eos: true,
        ..GenerateRequest::new(Prompt::Raw(prompt.to_string()))
    }
}

/// Distinct short prompts; the number comes first so no two share a prefix block.
fn short_prompt(i: usize) -> String {
    const TOPICS: &[&str] = &[
        "a lighthouse keeper",
        "the history of bread",
        "a robot learning to paint",
        "why the sky is blue",
        "a city under the sea",
        "the life of a honeybee",
        "an old map found in an attic",
        "how volcanoes form",
    ];
    format!(
        "{i}. Write a short paragraph about {}.",
        TOPICS[i % TOPICS.len()]
    )
}

/// Varied text of at least `target` tokens; `salt` keeps prompts of different
/// runs apart.
fn long_prompt(engine: &EngineHandle, target: usize, salt: usize) -> String {
    const SUBJECTS: &[&str] = &[
        "The engineer",
        "A small fox",
        "The committee",
        "Our neighbour",
        "The old ship",
        "A student",
    ];
    const VERBS: &[&str] = &[
        "inspected",
        "painted",
        "forgot",
        "described",
        "carried",
        "measured",
        "repaired",
    ];
    const OBJECTS: &[&str] = &[
        "the bridge",
        "a red lantern",
        "seven letters",
        "the northern garden",
        "an unusual clock",
    ];
    const PLACES: &[&str] = &[
        "before dawn",
        "in the rain",
        "near the harbour",
        "after the meeting",
        "on a quiet Tuesday",
    ];
    let tokenizer = &engine.model().tokenizer;
    let mut text = format!("Run {salt}. Notes from a long day:\n");
    let mut i = 0;
    while tokenizer.encode(&text, true, true).len() < target {
        text.push_str(&format!(
            "{} {} {} {} (entry {i}). ",
            SUBJECTS[i % SUBJECTS.len()],
            VERBS[(i / 2) % VERBS.len()],
            OBJECTS[(i / 3) % OBJECTS.len()],
            PLACES[(i / 5) % PLACES.len()],
        ));
        i += 1;
    }
    text
}

/// Reads a stream until its `Done` event.
fn read_to_done(mut stream: RequestStream) -> Result<Finished> {
    let prompt_tokens = stream.prompt_tokens().len();
    let mut generated = 0;
    while let Some(event) = stream.blocking_next() {
        match event {
            Event::Token(_) => generated += 1,
            Event::Done { timings, .. } => {
                return Ok(Finished {
                    prompt_tokens,
                    generated,
                    timings,
                })
            }
            Event::Error(message) => bail!("request {:?} failed: {message}", stream.id()),
        }
    }
    bail!(
        "the engine stopped before request {:?} finished",
        stream.id()
    )
}

fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

fn markdown(report: &Report) -> String {
    let mut out = format!(
        "Model: `{}`; threads: {}; {} output tokens per throughput request (greedy, ignore_eos).\n\n",
        report.model, report.threads, report.max_tokens
    );
    out.push_str("### Throughput\n\n");
    out.push_str("| concurrency | wall (s) | generated tokens | output tok/s | mean TTFT (ms) | max TTFT (ms) | mean ITL (ms) | preemptions |\n");
    out.push_str("|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in &report.throughput {
        out.push_str(&format!(
            "| {} | {:.2} | {} | {:.1} | {:.0} | {:.0} | {:.1} | {} |\n",
            r.concurrency,
            r.wall_s,
            r.generated_tokens,
            r.output_tokens_per_s,
            r.mean_ttft_ms,
            r.max_ttft_ms,
            r.mean_inter_token_ms,
            r.preemptions
        ));
    }
    out.push_str("\n### TTFT of a short request behind a long prefill\n\n");
    out.push_str("| max_num_batched_tokens | long prompt (tokens) | short prompt (tokens) | short TTFT (ms) | long TTFT (ms) | decoding request's max gap (ms) | preemptions |\n");
    out.push_str("|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in &report.long_prefill {
        out.push_str(&format!(
            "| {} | {} | {} | {:.0} | {:.0} | {:.0} | {} |\n",
            r.max_num_batched_tokens,
            r.long_prompt_tokens,
            r.short_prompt_tokens,
            r.short_ttft_ms,
            r.long_ttft_ms,
            r.background_max_gap_ms,
            r.preemptions
        ));
    }
    out
}
