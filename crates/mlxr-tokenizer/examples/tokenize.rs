//! Tokenize text with a GGUF model's tokenizer and print ids and pieces.
//!
//! `cargo run --release -p mlxr-tokenizer --example tokenize -- MODEL.gguf "text" [--no-special] [--no-parse]`

use std::time::Instant;

use mlxr_formats::gguf::GgufFile;
use mlxr_tokenizer::Tokenizer;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = args
        .first()
        .ok_or("usage: tokenize MODEL.gguf TEXT [--no-special] [--no-parse]")?;
    let text = args.get(1).cloned().unwrap_or_default();
    let add_special = !args.iter().any(|a| a == "--no-special");
    let parse_special = !args.iter().any(|a| a == "--no-parse");

    let t0 = Instant::now();
    let file = GgufFile::open(path)?;
    let t1 = Instant::now();
    let tok = Tokenizer::from_gguf(file.metadata())?;
    let t2 = Instant::now();
    eprintln!(
        "open {:.1} ms, tokenizer {:.1} ms: {tok:?}",
        (t1 - t0).as_secs_f64() * 1e3,
        (t2 - t1).as_secs_f64() * 1e3
    );
    for w in tok.warnings() {
        eprintln!("warning: {w}");
    }
    let t3 = Instant::now();
    let ids = tok.encode(&text, add_special, parse_special);
    eprintln!("encode {:.3} ms", t3.elapsed().as_secs_f64() * 1e3);
    println!("{ids:?}");
    for &id in &ids {
        println!("{id:>7} {:?}", tok.token_text(id).unwrap_or("?"));
    }
    println!("decode: {:?}", tok.decode(&ids, true));
    Ok(())
}
