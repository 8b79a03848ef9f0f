//! `mlxr serve`'s config file (TOML). Precedence: flags, then environment
//! variables, then the file, then built-in defaults. configs/server.toml
//! documents every key.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory};
use serde::Deserialize;

use crate::cli::{Cli, ServeArgs};

#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct ServeFile {
    host: Option<String>,
    socket: Option<PathBuf>,
    socket_group: Option<String>,
    no_tcp: Option<bool>,
    grpc_port: Option<u16>,
    home: Option<PathBuf>,
    api_key: Option<String>,
    origins: Option<Vec<String>>,
    allowed_hosts: Option<Vec<String>>,
    keep_alive: Option<String>,
    load_timeout: Option<String>,
    max_loaded_models: Option<usize>,
    max_loaded_memory: Option<String>,
    max_num_seqs: Option<usize>,
    max_batched_tokens: Option<usize>,
    threads: Option<usize>,
    ctx_size: Option<usize>,
    kv_cache_mem: Option<String>,
    kv_dtype: Option<String>,
    device: Option<String>,
    grammar_masks: Option<String>,
    body_limit: Option<usize>,
    max_blob_size: Option<String>,
    allow_local_pulls: Option<bool>,
    allow_insecure_pulls: Option<bool>,
    spec_type: Option<String>,
    draft_max: Option<usize>,
    draft_min: Option<usize>,
    draft_vocab: Option<usize>,
    draft_p_min: Option<f32>,
    draft_length: Option<String>,
    model_draft: Option<PathBuf>,
    /// Model files served besides the registry's, each `{ path, name }`.
    #[serde(default)]
    models: Vec<FileModel>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct FileModel {
    path: PathBuf,
    name: Option<String>,
}

pub fn read(path: &Path) -> Result<ServeFile> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the config file {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("config file {}", path.display()))
}

/// The `serve` arguments as given on this command line (to tell flags and
/// environment variables from defaults).
pub fn serve_matches() -> Option<ArgMatches> {
    let matches = Cli::command()
        .try_get_matches_from(std::env::args_os())
        .ok()?;
    matches.subcommand_matches("serve").cloned()
}

/// Fills every argument that was left at its default from the file.
pub fn apply(args: &mut ServeArgs, file: ServeFile, given: Option<&ArgMatches>) -> Result<()> {
    let from_default = |id: &str| {
        !matches!(
            given.and_then(|m| m.value_source(id)),
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        )
    };
    macro_rules! take {
        ($field:ident) => {
            if let Some(v) = file.$field {
                if from_default(stringify!($field)) {
                    args.$field = v;
                }
            }
        };
        (opt $field:ident) => {
            if let Some(v) = file.$field {
                if from_default(stringify!($field)) {
                    args.$field = Some(v);
                }
            }
        };
    }
    take!(host);
    take!(opt socket);
    take!(opt socket_group);
    take!(no_tcp);
    take!(opt grpc_port);
    take!(opt home);
    take!(opt api_key);
    take!(origins);
    take!(allowed_hosts);
    take!(keep_alive);
    take!(load_timeout);
    take!(max_loaded_models);
    take!(max_num_seqs);
    take!(max_batched_tokens);
    take!(opt threads);
    take!(opt ctx_size);
    take!(body_limit);
    take!(allow_local_pulls);
    take!(allow_insecure_pulls);
    if let Some(v) = file.max_blob_size {
        if from_default("max_blob_size") {
            args.max_blob_size = Some(
                v.parse()
                    .map_err(|e: String| anyhow::anyhow!("max_blob_size: {e}"))?,
            );
        }
    }
    if let Some(v) = file.kv_cache_mem {
        if from_default("kv_cache_mem") {
            args.kv_cache_mem = v
                .parse()
                .map_err(|e: String| anyhow::anyhow!("kv_cache_mem: {e}"))?;
        }
    }
    if let Some(v) = file.max_loaded_memory {
        if from_default("max_loaded_memory") {
            args.max_loaded_memory = Some(
                v.parse()
                    .map_err(|e: String| anyhow::anyhow!("max_loaded_memory: {e}"))?,
            );
        }
    }
    if let Some(v) = file.kv_dtype {
        if from_default("kv_dtype") {
            args.kv_dtype = v
                .parse()
                .map_err(|e: String| anyhow::anyhow!("kv_dtype: {e}"))?;
        }
    }
    if let Some(v) = file.grammar_masks {
        if from_default("grammar_masks") {
            args.grammar_masks = v
                .parse()
                .map_err(|e: String| anyhow::anyhow!("grammar_masks: {e}"))?;
        }
    }
    if let Some(v) = file.device {
        if from_default("device") {
            args.device = v
                .parse()
                .map_err(|e: String| anyhow::anyhow!("device: {e}"))?;
        }
    }
    if let Some(v) = file.spec_type {
        if from_default("spec_type") {
            args.spec.spec_type = Some(
                v.parse()
                    .map_err(|e: String| anyhow::anyhow!("spec_type: {e}"))?,
            );
        }
    }
    for (id, value, slot) in [
        ("draft_max", file.draft_max, &mut args.spec.draft_max),
        ("draft_min", file.draft_min, &mut args.spec.draft_min),
        ("draft_vocab", file.draft_vocab, &mut args.spec.draft_vocab),
    ] {
        if value.is_some() && from_default(id) {
            *slot = value;
        }
    }
    if file.draft_p_min.is_some() && from_default("draft_p_min") {
        args.spec.draft_p_min = file.draft_p_min;
    }
    if file.model_draft.is_some() && from_default("model_draft") {
        args.spec.model_draft = file.model_draft;
    }
    if let Some(v) = file.draft_length {
        if from_default("draft_length") {
            args.spec.draft_length = Some(
                v.parse()
                    .map_err(|e: String| anyhow::anyhow!("draft_length: {e}"))?,
            );
        }
    }
    if args.models.is_empty() {
        let names: Vec<Option<String>> = file.models.iter().map(|m| m.name.clone()).collect();
        if names.iter().any(Option::is_some) && names.iter().any(Option::is_none) {
            anyhow::bail!("config file: give every model a name, or none");
        }
        args.models = file.models.into_iter().map(|m| m.path).collect();
        args.names = names.into_iter().flatten().collect();
    }
    Ok(())
}
