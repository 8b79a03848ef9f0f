mod bench;
mod bench_batched;
mod client;
mod convert;
mod create;
mod format;
mod generate;
mod grpc_client;
mod interrupt;
mod models;
mod pull;
mod quantize;
mod quantize_mlx;
mod remote_chat;
mod run;
mod serve;
mod serve_config;
mod tokenize;
#[cfg(unix)]
mod unix_socket;
mod upload;

use anyhow::Result;
use std::sync::Arc;

use mlxr_engine::{
    EngineConfig, EngineHandle, KvBudget, LoadedModel, SamplingParams, SpecOverrides,
};

use std::path::Path;

use crate::cli::{Cli, Command, EngineArgs, SamplingArgs, SpecArgs};

pub fn dispatch(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Run(args) => run::run(args),
        Command::Generate(args) => generate::generate(args),
        Command::Tokenize(args) => tokenize::tokenize(args),
        Command::Bench(args) => bench::bench(args),
        Command::Serve(args) => serve::serve(args),
        Command::Pull(args) => pull::pull(args),
        Command::List(args) => models::list(args),
        Command::Ps(args) => models::ps(args),
        Command::Show(args) => models::show(args),
        Command::Create(args) => create::create(args),
        Command::Cp(args) => models::copy(args),
        Command::Rm(args) => models::remove(args),
        Command::Stop(args) => models::stop(args),
        Command::Quantize(args) => quantize::quantize(args),
        Command::Convert(args) => convert::convert(args),
    }
}

/// Loads the model and starts an engine for one conversation at a time.
fn start_engine(path: &Path, args: &EngineArgs) -> Result<EngineHandle> {
    let lm = Arc::new(load_model(path, args)?);
    let config = EngineConfig {
        device: args.device,
        kv_budget: args.kv_cache_mem.unwrap_or(KvBudget::Bytes(u64::MAX)),
        kv_dtype: args.kv_dtype,
        max_num_seqs: 1,
        speculation: speculation(&args.spec),
        draft_model: args.spec.model_draft.clone(),
        draft_vocab: draft_vocab(&args.spec),
        ..EngineConfig::default()
    };
    Ok(EngineHandle::start(lm, config)?)
}

/// `--draft-vocab`: 0 for the whole vocabulary.
pub(crate) fn draft_vocab(args: &SpecArgs) -> Option<usize> {
    match args.draft_vocab {
        None => EngineConfig::default().draft_vocab,
        Some(0) => None,
        n => n,
    }
}

/// The speculation requests get by default, as the flags set it (the engine
/// checks it at start: a bad value fails there, not at the first request).
pub(crate) fn speculation(args: &SpecArgs) -> SpecOverrides {
    SpecOverrides {
        spec_type: args.spec_type,
        n_max: args.draft_max,
        n_min: args.draft_min,
        p_min: args.draft_p_min,
        ngram_min: None,
        ngram_max: None,
        draft_length: args.draft_length,
    }
}

/// Applies `--threads` and loads the model onto `--device`.
fn load_model(path: &Path, args: &EngineArgs) -> Result<LoadedModel> {
    set_threads(args.threads)?;
    Ok(LoadedModel::load_on(
        path,
        args.ctx_size,
        args.device.resolve()?,
    )?)
}

/// Sizes the kernels' thread pool: `--threads`, else `RAYON_NUM_THREADS`,
/// else the physical cores.
fn set_threads(threads: Option<usize>) -> Result<()> {
    if let Some(n) = threads {
        anyhow::ensure!(n > 0, "--threads must be at least 1");
    }
    let n = threads.unwrap_or_else(mlxr_engine::config::default_threads);
    // candle's CPU kernels and rayon size their pools from this variable;
    // set it before the first tensor operation creates them.
    std::env::set_var("RAYON_NUM_THREADS", n.to_string());
    Ok(())
}

fn sampling_params(args: &SamplingArgs, logprobs: Option<usize>) -> SamplingParams {
    let d = SamplingParams::default();
    SamplingParams {
        temperature: args.temperature.unwrap_or(d.temperature),
        top_k: args.top_k.unwrap_or(d.top_k),
        top_p: args.top_p.unwrap_or(d.top_p),
        min_p: args.min_p.unwrap_or(d.min_p),
        repeat_penalty: args.repeat_penalty.unwrap_or(d.repeat_penalty),
        repeat_last_n: args.repeat_last_n.unwrap_or(d.repeat_last_n),
        presence_penalty: args.presence_penalty.unwrap_or(d.presence_penalty),
        frequency_penalty: args.frequency_penalty.unwrap_or(d.frequency_penalty),
        logit_bias: Vec::new(),
        seed: args.seed,
        logprobs,
    }
}
