//! Prints a tokenizer's special ids, flags, end-of-generation set and a hash
//! of all token attributes (for comparison with llama.cpp's view of a vocabulary).
//!
//! `cargo run --release -p mlxr-tokenizer --example vocab_info -- MODEL.gguf`

use mlxr_formats::gguf::GgufFile;
use mlxr_tokenizer::Tokenizer;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: vocab_info MODEL.gguf")?;
    let file = GgufFile::open(&path)?;
    let tok = Tokenizer::from_gguf(file.metadata())?;
    let id = |x: Option<u32>| x.map_or(-1, |v| v as i64);
    let eog: Vec<String> = tok.eog_ids().iter().map(u32::to_string).collect();
    let mut h: u64 = 0;
    for i in 0..tok.vocab_size() as u32 {
        h = h
            .wrapping_mul(1000003)
            .wrapping_add(tok.token_attrs(i).unwrap().bits() as u64);
    }
    println!(
        "bos={} eos={} eot={} add_bos={} add_eos={} eog=[{}] attrs={h}",
        id(tok.bos()),
        id(tok.eos()),
        id(tok.eot()),
        tok.add_bos() as u8,
        tok.add_eos() as u8,
        eog.join(",")
    );
    Ok(())
}
