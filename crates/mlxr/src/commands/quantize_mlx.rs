//! `mlxr quantize FOLDER OUT --type qB [--group-size G]`: a Hugging Face
//! folder as an MLX affine-quantized folder (mlxr-convert's hf_to_mlx), with
//! a bar over tensors and Ctrl-C as a clean stop.

use anyhow::{bail, Result};
use indicatif::ProgressBar;
use mlxr_convert::{hf_to_mlx, ConvertError, MlxQuantizeOptions};

use super::convert;
use super::interrupt;
use crate::cli::QuantizeArgs;

/// mlx_lm.convert's default group size.
const DEFAULT_GROUP_SIZE: usize = 64;

/// The bits of an MLX `--type` (`q2`..`q8`, any case); None for a GGUF type.
pub fn mlx_bits(file_type: &str) -> Option<u32> {
    let digits = file_type
        .strip_prefix('q')
        .or_else(|| file_type.strip_prefix('Q'))?;
    if digits.len() != 1 {
        return None;
    }
    digits.parse().ok()
}

pub fn quantize_mlx(args: &QuantizeArgs, bits: u32) -> Result<()> {
    let options = MlxQuantizeOptions::new(bits, args.group_size.unwrap_or(DEFAULT_GROUP_SIZE))?;
    if !convert::is_folder(&args.input) {
        bail!(
            "{}: MLX output (--type {}) is written from a Hugging Face safetensors folder, not a \
             GGUF file; for a GGUF, pick a GGUF type such as Q4_K_M",
            args.input.display(),
            args.file_type
        );
    }
    if args.output.exists() {
        if !args.force {
            bail!(
                "{} already exists; pass --force to overwrite it",
                args.output.display()
            );
        }
        super::convert::remove_model_folder(&args.output)?;
    }
    interrupt::install()?;
    interrupt::reset();
    let mut bar: Option<ProgressBar> = None;
    let label = format!("quantizing to MLX {bits}-bit, group {}", options.group_size);
    let result = hf_to_mlx(&args.input, &args.output, options, |p| {
        let b = bar.get_or_insert_with(|| convert::tensor_bar(p.total, label.clone()));
        b.set_position(p.index as u64);
        !interrupt::interrupted()
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let summary = match result {
        Ok(summary) => summary,
        Err(ConvertError::Cancelled) => bail!("quantize cancelled; nothing written"),
        Err(e) => return Err(e.into()),
    };
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    eprintln!(
        "wrote {} (MLX affine {bits}-bit, group {}; {} matrices quantized, {} tensors kept): \
         {:.2} MiB -> {:.2} MiB",
        args.output.display(),
        options.group_size,
        summary.quantized,
        summary.kept,
        mib(summary.input_bytes),
        mib(summary.output_bytes)
    );
    Ok(())
}
