//! `mlxr convert IN OUT`: a thin front over mlxr-convert (a folder to GGUF,
//! a GGUF to a folder), with a progress bar over the tensors and Ctrl-C as a
//! clean stop.

use std::path::Path;

use anyhow::{bail, Result};
use indicatif::{ProgressBar, ProgressStyle};
use mlxr_convert::{
    dequantize_folder, gguf_to_hf, hf_to_gguf, ConvertError, HfDtype, HfToGgufOptions, OutType,
};

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
    if !is_folder(&args.input) && !args.input.is_file() {
        bail!("{} does not exist", args.input.display());
    }
    let to_gguf = args
        .output
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gguf"));
    if args.output.exists() {
        if !args.force {
            bail!(
                "{} already exists; pass --force to overwrite it",
                args.output.display()
            );
        }
        if !to_gguf {
            remove_model_folder(&args.output)?;
        }
    }
    interrupt::install()?;
    interrupt::reset();
    match (is_folder(&args.input), to_gguf) {
        (true, true) => folder_to_gguf(&args),
        (true, false) => folder_to_folder(&args),
        (false, true) => bail!(
            "{} is a file and OUT ends in .gguf: to change a GGUF's types use `mlxr quantize IN OUT --type T`; `mlxr convert` writes a GGUF from a folder, or a folder from a GGUF",
            args.input.display()
        ),
        (false, false) => gguf_to_folder(&args),
    }
}

fn folder_dtype(outtype: &str) -> Result<HfDtype> {
    match HfDtype::from_outtype(outtype) {
        Some(d) => Ok(d),
        None => bail!(
            "--outtype {:?} cannot be written to a Hugging Face folder; valid: {}",
            outtype.to_ascii_lowercase(),
            HfDtype::OUTTYPES
        ),
    }
}

/// A quantized folder (FP8, 4-bit, MLX) to a float one.
fn folder_to_folder(args: &ConvertArgs) -> Result<()> {
    let dtype = folder_dtype(&args.outtype)?;
    let summary = cancelled(with_bar(|step| {
        dequantize_folder(&args.input, &args.output, dtype, |p| step(p.index, p.total))
    }))?;
    eprintln!(
        "wrote {}/ ({}, {dtype:?}, {} tensors, dequantized): {:.2} MiB",
        args.output.display(),
        summary.architecture,
        summary.tensors,
        summary.bytes as f64 / (1024.0 * 1024.0)
    );
    Ok(())
}

fn with_bar<T>(run: impl FnOnce(&mut dyn FnMut(usize, usize) -> bool) -> T) -> T {
    let mut bar: Option<ProgressBar> = None;
    let result = run(&mut |index, total| {
        let b = bar.get_or_insert_with(|| tensor_bar(total, "converting".into()));
        b.set_position(index as u64);
        !interrupt::interrupted()
    });
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    result
}

fn cancelled<T>(result: Result<T, ConvertError>) -> Result<T> {
    match result {
        Ok(s) => Ok(s),
        Err(ConvertError::Cancelled) => bail!("convert cancelled; nothing written"),
        Err(e) => Err(e.into()),
    }
}

fn folder_to_gguf(args: &ConvertArgs) -> Result<()> {
    let options = HfToGgufOptions {
        out_type: parse_outtype(&args.outtype)?,
        tokenizer_pre: args.tokenizer_pre.clone(),
    };
    let summary = cancelled(with_bar(|step| {
        hf_to_gguf(&args.input, &args.output, &options, |p| {
            step(p.index, p.total)
        })
    }))?;
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

fn gguf_to_folder(args: &ConvertArgs) -> Result<()> {
    let dtype = folder_dtype(&args.outtype)?;
    let summary = cancelled(with_bar(|step| {
        gguf_to_hf(&args.input, &args.output, dtype, |p| step(p.index, p.total))
    }))?;
    eprintln!(
        "wrote {}/ ({}, {dtype:?}, {} tensors): {:.2} MiB",
        args.output.display(),
        summary.architecture,
        summary.tensors,
        summary.bytes as f64 / (1024.0 * 1024.0)
    );
    Ok(())
}

/// Removes `folder` for `--force`: only a model folder (one with a
/// config.json), never an arbitrary one.
pub(super) fn remove_model_folder(folder: &std::path::Path) -> Result<()> {
    if !folder.join("config.json").is_file() {
        bail!(
            "{} exists and is not a model folder; not overwriting it",
            folder.display()
        );
    }
    std::fs::remove_dir_all(folder)?;
    Ok(())
}
