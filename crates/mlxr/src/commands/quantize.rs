//! `mlxr quantize IN OUT --type T`: a thin front over mlxr-quantize, with a
//! progress bar over the input's bytes and Ctrl-C as a clean stop.

use anyhow::{bail, ensure, Context, Result};
use indicatif::ProgressBar;
use mlxr_formats::GgufFile;
use mlxr_quantize::{quantize_model, FileType, QuantizeError, QuantizeOptions};

use super::interrupt;
use super::pull::bar_style;
use crate::cli::QuantizeArgs;

pub fn quantize(args: QuantizeArgs) -> Result<()> {
    let file_type: FileType = args.file_type.parse()?;
    if args.output.exists() && !args.force {
        bail!(
            "{} already exists; pass --force to overwrite it",
            args.output.display()
        );
    }
    let threads = args
        .threads
        .unwrap_or_else(mlxr_engine::config::default_threads);
    ensure!(threads > 0, "--threads must be at least 1");
    let input = GgufFile::open(&args.input)?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .context("starting the quantization threads")?;

    interrupt::install()?;
    interrupt::reset();
    let total: u64 = input.tensors().iter().map(|t| t.size_bytes).sum();
    let bar = ProgressBar::new(total);
    bar.set_style(bar_style());
    bar.set_prefix(format!("quantizing to {file_type}"));
    let mut done = 0u64;
    let options = QuantizeOptions {
        file_type,
        allow_requantize: args.allow_requantize,
    };
    let result = pool.install(|| {
        quantize_model(&input, &args.output, options, |p| {
            bar.set_position(done);
            done += p.tensor.info.size_bytes;
            !interrupt::interrupted()
        })
    });
    bar.finish_and_clear();
    let summary = match result {
        Ok(summary) => summary,
        Err(QuantizeError::Cancelled) => bail!("quantize cancelled; nothing written"),
        Err(e @ QuantizeError::Requantize { .. }) => {
            bail!("{e}: pass --allow-requantize")
        }
        Err(e) => return Err(e.into()),
    };
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    eprintln!(
        "wrote {} ({file_type}, {} tensors): {:.2} MiB -> {:.2} MiB",
        args.output.display(),
        summary.tensors.len(),
        mib(summary.input_bytes),
        mib(summary.output_bytes)
    );
    Ok(())
}
