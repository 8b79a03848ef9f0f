//! `mlxr convert IN OUT`: a thin front over mlxr-convert, with a progress
//! bar over the tensors and Ctrl-C as a clean stop.

use std::path::Path;

use anyhow::{bail, Result};
use indicatif::{ProgressBar, ProgressStyle};
use mlxr_convert::{hf_to_gguf, ConvertError, HfToGgufOptions, OutType};

use super::interrupt;
use crate::cli::ConvertArgs;

/// The bar of a conversion: tensors done out of all.
pub fn tensor_bar(total: usize, prefix: String) -> ProgressBar {
    let bar = ProgressBar::new(total as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{prefix} {bar:30} {percent:>3}% {pos}/{len} tensors ETA {eta}",
        )
        .expect("valid template"),
    );
    bar.set_prefix(prefix);
    bar
}

pub fn parse_outtype(name: &str) -> Result<OutType> {
    match OutType::parse(name) {
        Some(t) => Ok(t),
        None => bail!("unknown --outtype {name:?}; valid: {}", OutType::NAMES),
    }
}

/// Whether `path` is a folder to convert (else a GGUF file is expected).
pub fn is_folder(path: &Path) -> bool {
    path.is_dir()
}

pub fn convert(args: ConvertArgs) -> Result<()> {
    let out_type = parse_outtype(&args.outtype)?;
    if !is_folder(&args.input) {
        if args
            .input
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
            && args.input.is_file()
        {
            bail!(
                "{}: converting a GGUF file to a Hugging Face folder is not implemented yet (IN must be a Hugging Face safetensors folder)",
                args.input.display()
            );
        }
        bail!(
            "{} is not a folder; IN must be a Hugging Face safetensors folder (config.json, *.safetensors, tokenizer.json)",
            args.input.display()
        );
    }
    if !args
        .output
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
    {
        bail!(
            "OUT must end in .gguf ({}); writing a Hugging Face folder is not implemented yet",
            args.output.display()
        );
    }
    if args.output.exists() && !args.force {
        bail!(
            "{} already exists; pass --force to overwrite it",
            args.output.display()
        );
    }
    let options = HfToGgufOptions {
        out_type,
        tokenizer_pre: args.tokenizer_pre.clone(),
    };
    interrupt::install()?;
    interrupt::reset();
    let mut bar: Option<ProgressBar> = None;
    let result = hf_to_gguf(&args.input, &args.output, &options, |p| {
        let b = bar.get_or_insert_with(|| tensor_bar(p.total, "converting".into()));
        b.set_position(p.index as u64);
        !interrupt::interrupted()
    });
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let summary = match result {
        Ok(s) => s,
        Err(ConvertError::Cancelled) => bail!("convert cancelled; nothing written"),
        Err(e) => return Err(e.into()),
    };
    eprintln!(
        "wrote {} ({}, {:?}, {} tensors, {} parameters): {:.2} MiB",
        args.output.display(),
        summary.architecture,
        summary.out_type,
        summary.tensors.len(),
        summary.parameters,
        summary.output_bytes as f64 / (1024.0 * 1024.0)
    );
    Ok(())
}
