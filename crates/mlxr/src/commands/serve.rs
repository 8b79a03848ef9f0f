//! `mlxr serve`.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use mlxr_engine::EngineConfig;
use mlxr_registry::{PullPolicy, Registry, BLOBS_DIR};
use mlxr_server::catalog::{resolve_draft, FileCatalog, ModelCatalog, RegistryCatalog};
use mlxr_server::{KeepAlive, LogBuffer, ModelManager, ModelSpec, ServerConfig};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use super::serve_config;
use crate::cli::{ServeArgs, SpecArgs};

pub fn serve(mut args: ServeArgs) -> Result<()> {
    if let Some(path) = args.config.clone() {
        let file = serve_config::read(&path)?;
        serve_config::apply(&mut args, file, serve_config::serve_matches().as_ref())?;
    }
    super::set_threads(args.threads)?;
    // Log lines go to stderr and into the buffer the web UI's Logs page tails.
    let logs = LogBuffer::default();
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::EnvFilter::try_from_env("MLXR_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
        .with(logs.layer())
        .init();

    anyhow::ensure!(
        args.names.len() <= args.models.len(),
        "--name is given {} times but -m only {}",
        args.names.len(),
        args.models.len()
    );
    let files = args
        .models
        .iter()
        .enumerate()
        .map(|(i, path)| {
            let name = match args.names.get(i) {
                Some(n) => n.clone(),
                None => default_name(path),
            };
            ModelSpec::from_file(&name, path).map_err(anyhow::Error::msg)
        })
        .collect::<Result<Vec<_>>>()?;
    let home = match &args.home {
        Some(h) => h.clone(),
        None => default_home()?,
    };
    let registry = Registry::open(&home)
        .with_context(|| format!("opening the model registry in {}", home.display()))?
        .with_pull_policy(PullPolicy {
            allow_local: args.allow_local_pulls,
            allow_insecure: args.allow_insecure_pulls,
        });
    prune_blobs(&registry);
    let registry = Arc::new(registry);
    let catalog = RegistryCatalog::new(registry.clone(), FileCatalog::new(files));
    let draft_model = draft_model(&args.spec, &catalog)?;

    let keep_alive = KeepAlive::parse(&serde_json::Value::String(args.keep_alive.clone()))
        .map_err(|e| anyhow::anyhow!("--keep-alive: {e}"))?;
    let load_timeout = mlxr_server::models::parse_go_duration(&args.load_timeout)
        .ok()
        .and_then(|s| std::time::Duration::try_from_secs_f64(s).ok())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "--load-timeout: invalid duration '{}' (e.g. 5m, 30s)",
                args.load_timeout
            )
        })?;
    // A device this build or machine lacks fails here, not at first use.
    let device = args.device.resolve().context("--device")?;
    let engine = EngineConfig {
        device,
        kv_budget: args.kv_cache_mem,
        kv_dtype: args.kv_dtype,
        max_num_seqs: args.max_num_seqs,
        max_num_batched_tokens: args.max_batched_tokens,
        long_prefill_token_threshold: (args.max_batched_tokens / 2).max(1),
        speculation: super::speculation(&args.spec),
        draft_model,
        draft_vocab: super::draft_vocab(&args.spec),
        grammar_masks: args.grammar_masks,
        ..EngineConfig::default()
    };
    let models = Arc::new(
        ModelManager::new(
            Arc::new(catalog),
            engine,
            args.ctx_size,
            keep_alive,
            args.max_loaded_models,
        )
        .with_max_memory(args.max_loaded_memory.map(|b| b.bytes()))
        .with_load_timeout(load_timeout),
    );
    // The flag's `requires` cannot see a config file's keys.
    anyhow::ensure!(
        !args.no_tcp || args.socket.is_some(),
        "no_tcp needs a socket (--socket PATH): there would be nothing to listen on"
    );
    anyhow::ensure!(
        !args.no_tcp || args.grpc_port.is_none(),
        "no_tcp and grpc_port exclude each other (the gRPC port is a TCP port)"
    );
    let config = ServerConfig {
        host: args.host,
        tcp: !args.no_tcp,
        socket: args.socket,
        socket_group: args.socket_group,
        grpc_port: args.grpc_port,
        api_key: args.api_key.filter(|k| !k.is_empty()),
        cors_origins: args.origins,
        allowed_hosts: args.allowed_hosts,
        body_limit: args.body_limit,
        max_blob_size: args
            .max_blob_size
            .map_or_else(mlxr_server::ollama::blobs::default_max_blob_size, |s| s.0),
        home: Some(home),
        threads: args.threads,
        logs,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(mlxr_server::serve(models, registry, config))?;
    Ok(())
}

/// Set (non-empty), `mlxr serve` keeps orphan blobs at start, as Ollama's
/// `OLLAMA_NOPRUNE`.
const NOPRUNE_ENV: &str = "MLXR_NOPRUNE";

/// `--model-draft`: a model file, or the name of a model this daemon serves
/// (pulled, created or given with `-m --name`).
fn draft_model(spec: &SpecArgs, catalog: &dyn ModelCatalog) -> Result<Option<PathBuf>> {
    let Some(given) = &spec.model_draft else {
        return Ok(None);
    };
    let given = given.to_string_lossy();
    resolve_draft(catalog, &given)
        .map(Some)
        .map_err(|e| anyhow::anyhow!("--model-draft {given}: {e}"))
}

/// Removes the blob files no model references (see
/// [`Registry::prune_unreferenced_blobs`]) unless [`NOPRUNE_ENV`] is set,
/// and logs how many and how large. A failure is only a warning: the server
/// starts anyway.
fn prune_blobs(registry: &Registry) {
    if std::env::var_os(NOPRUNE_ENV).is_some_and(|v| !v.is_empty()) {
        tracing::info!("{NOPRUNE_ENV} is set: keeping unreferenced blobs");
        return;
    }
    // The sizes are read first, since the files are gone once pruned (a
    // blob's name fixes its content, so a size read before is its size).
    let blobs = registry.home().join(BLOBS_DIR);
    let sizes: HashMap<OsString, u64> = std::fs::read_dir(&blobs)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name(), e.metadata().ok()?.len())))
        .collect();
    match registry.prune_unreferenced_blobs() {
        Ok(removed) if removed.is_empty() => {}
        Ok(removed) => {
            let bytes: u64 = removed
                .iter()
                .filter_map(|d| sizes.get(OsStr::new(&d.file_name())))
                .sum();
            tracing::info!(
                count = removed.len(),
                bytes,
                "pruned {} unreferenced blob(s) ({}) from {}",
                removed.len(),
                super::format::human_size(bytes),
                blobs.display()
            );
        }
        Err(e) => {
            tracing::warn!("pruning unreferenced blobs failed (the server starts anyway): {e}")
        }
    }
}

/// `SmolLM2-135M-Instruct.Q4_1.gguf` -> `smollm2-135m-instruct.q4_1`.
fn default_name(path: &std::path::Path) -> String {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().to_lowercase())
        .unwrap_or_else(|| "model".into());
    stem.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

pub fn default_home() -> Result<PathBuf> {
    let home = std::env::var_os("HOME").context("HOME is not set; pass --home or set MLXR_HOME")?;
    Ok(PathBuf::from(home).join(".mlxr"))
}
