//! Milliseconds per sample embedding 32 short sentences one at a time
//! (batch 1) and in one call (batch 32), mean ± sd over 10 runs.
//!
//! cargo run --release -p mlxr-embed --example embed_timing [-- MODEL_DIR]
//! (default: $MLXR_MODELS_DIR/all-MiniLM-L6-v2; threads: RAYON_NUM_THREADS)

use std::path::PathBuf;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("MLXR_MODELS_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/mlxr/models")
                })
                .join("all-MiniLM-L6-v2")
        });
    let start = Instant::now();
    let model = mlxr_embed::EmbeddingModel::load(&dir)?;
    println!("load: {:.0} ms", start.elapsed().as_secs_f64() * 1e3);

    let subjects = [
        "The cat",
        "A dog",
        "My neighbour",
        "The engineer",
        "A child",
        "The robot",
        "Our team",
        "The pilot",
    ];
    let actions = [
        "sat on the mat.",
        "ran across the busy street.",
        "wrote a short poem about rain.",
        "fixed the broken server at night.",
    ];
    let sentences: Vec<String> = subjects
        .iter()
        .flat_map(|s| actions.iter().map(move |a| format!("{s} {a}")))
        .collect();
    let texts: Vec<&str> = sentences.iter().map(String::as_str).collect();

    model.embed(&texts, true)?; // warm-up
    for batch in [1, 32] {
        let runs = 10;
        let mut per_sample = Vec::with_capacity(runs);
        for _ in 0..runs {
            let start = Instant::now();
            for chunk in texts.chunks(batch) {
                model.embed(chunk, true)?;
            }
            per_sample.push(start.elapsed().as_secs_f64() * 1e3 / texts.len() as f64);
        }
        let mean = per_sample.iter().sum::<f64>() / runs as f64;
        let sd =
            (per_sample.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (runs - 1) as f64).sqrt();
        println!(
            "batch {batch:>2}: {mean:.2} ± {sd:.2} ms per sample ({} texts)",
            texts.len()
        );
    }
    Ok(())
}
