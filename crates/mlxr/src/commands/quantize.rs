//! `mlxr quantize IN OUT --type T`: a thin front over mlxr-quantize, with a
//! progress bar over the input's bytes and Ctrl-C as a clean stop. A Hugging
//! Face folder IN is converted first (mlxr-convert's quantize_hf_folder).
//! `--type q2`..`q8` writes an MLX folder instead (quantize_mlx.rs).

use anyhow::{bail, ensure, Context, Result};
use indicatif::ProgressBar;
use mlxr_convert::{quantize_hf_folder, ConvertError, HfToGgufOptions};
use mlxr_formats::GgufFile;
use mlxr_quantize::{quantize_model, FileType, QuantizeError, QuantizeOptions, QuantizeSummary};

use super::convert;
use super::interrupt;
use super::pull::bar_style;
use crate::cli::QuantizeArgs;

pub fn quantize(args: QuantizeArgs) -> Result<()> {
    if let Some(bits) = super::quantize_mlx::mlx_bits(&args.file_type) {
        return super::quantize_mlx::quantize_mlx(&args, bits);
    }
    if args.group_size.is_some() {
        bail!(
            "--group-size is for MLX output (--type q2, q3, q4, q5, q6 or q8), not --type {}",
            args.file_type
        );
    }
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
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .context("starting the quantization threads")?;
    interrupt::install()?;
    interrupt::reset();
    if convert::is_folder(&args.input) {
        return quantize_folder(&args, file_type, &pool);
    }
    let input = GgufFile::open(&args.input)?;
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
    report(&args, file_type, &summary);
    Ok(())
}

/// A Hugging Face folder: converted (a bar over tensors), then quantized (a
/// bar over the intermediate file's bytes).
fn quantize_folder(
    args: &QuantizeArgs,
    file_type: FileType,
    pool: &rayon::ThreadPool,
) -> Result<()> {
    let convert_options = HfToGgufOptions {
        out_type: convert::parse_outtype(&args.outtype)?,
        tokenizer_pre: args.tokenizer_pre.clone(),
    };
    let options = QuantizeOptions {
        file_type,
        allow_requantize: args.allow_requantize,
    };
    let convert_bar: std::sync::Mutex<Option<ProgressBar>> = Default::default();
    let mut quantize_bar: Option<ProgressBar> = None;
    let result = pool.install(|| {
        quantize_hf_folder(
            &args.input,
            &args.output,
            &convert_options,
            options,
            |p| {
                let mut bar = convert_bar.lock().unwrap();
                let b =
                    bar.get_or_insert_with(|| convert::tensor_bar(p.total, "converting".into()));
                b.set_position(p.index as u64);
                !interrupt::interrupted()
            },
            |p| {
                if let Some(b) = convert_bar.lock().unwrap().take() {
                    b.finish_and_clear();
                }
                let b = quantize_bar.get_or_insert_with(|| {
                    convert::tensor_bar(p.total, format!("quantizing to {file_type}"))
                });
                b.set_position(p.index as u64);
                !interrupt::interrupted()
            },
        )
    });
    for b in [convert_bar.into_inner().unwrap(), quantize_bar]
        .into_iter()
        .flatten()
    {
        b.finish_and_clear();
    }
    let summary = match result {
        Ok(summary) => summary,
        Err(ConvertError::Cancelled | ConvertError::Quantize(QuantizeError::Cancelled)) => {
            bail!("quantize cancelled; nothing written")
        }
        Err(e) => return Err(e.into()),
    };
    report(args, file_type, &summary);
    Ok(())
}

fn report(args: &QuantizeArgs, file_type: FileType, summary: &QuantizeSummary) {
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    eprintln!(
        "wrote {} ({file_type}, {} tensors): {:.2} MiB -> {:.2} MiB",
        args.output.display(),
        summary.tensors.len(),
        mib(summary.input_bytes),
        mib(summary.output_bytes)
    );
}
