mod generate;
mod run;
mod serve;
mod tokenize;

use anyhow::Result;
use std::sync::Arc;

use mlxr_engine::{EngineConfig, EngineHandle, KvBudget, LoadedModel, SamplingParams};

use crate::cli::{Cli, Command, ModelArgs, SamplingArgs};

pub fn dispatch(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Run(args) => run::run(args),
        Command::Generate(args) => generate::generate(args),
        Command::Tokenize(args) => tokenize::tokenize(args),
        Command::Serve(args) => serve::serve(args),
    }
}

/// Loads the model and starts an engine for one conversation at a time.
fn start_engine(args: &ModelArgs) -> Result<EngineHandle> {
    let lm = Arc::new(load_model(args)?);
    let config = EngineConfig {
        kv_budget: args.kv_cache_mem.unwrap_or(KvBudget::Bytes(u64::MAX)),
        kv_dtype: args.kv_dtype,
        max_num_seqs: 1,
        ..EngineConfig::default()
    };
    Ok(EngineHandle::start(lm, config)?)
}

/// Applies `--threads` and loads the model.
fn load_model(args: &ModelArgs) -> Result<LoadedModel> {
    set_threads(args.threads)?;
    Ok(LoadedModel::load(&args.model, args.ctx_size)?)
}

fn set_threads(threads: Option<usize>) -> Result<()> {
    if let Some(n) = threads {
        anyhow::ensure!(n > 0, "--threads must be at least 1");
        // candle's CPU kernels size their pools from this variable; set it
        // before the first tensor operation creates them.
        std::env::set_var("RAYON_NUM_THREADS", n.to_string());
    }
    Ok(())
}

fn sampling_params(args: &SamplingArgs, logprobs: Option<usize>) -> SamplingParams {
    SamplingParams {
        temperature: args.temperature,
        top_k: args.top_k,
        top_p: args.top_p,
        min_p: args.min_p,
        repeat_penalty: args.repeat_penalty,
        repeat_last_n: args.repeat_last_n,
        presence_penalty: args.presence_penalty,
        frequency_penalty: args.frequency_penalty,
        logit_bias: Vec::new(),
        seed: args.seed,
        logprobs,
    }
}
