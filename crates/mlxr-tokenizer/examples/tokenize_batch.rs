//! Batch tokenization for differential testing against llama.cpp.
//!
//! Reads `tokenize<TAB>ID<TAB>HEX_TEXT` lines (the request format of
//! `scripts/llamacpp-reference`) on stdin and writes one JSON object per line:
//! `{"id":"ID","ids":[...],"detok_hex":"..."}` with `encode(text, true, true)`
//! and `decode(ids, true)`.
//!
//! With `--flags`, lines are `ID<TAB>ADD_SPECIAL<TAB>PARSE_SPECIAL<TAB>HEX_TEXT`
//! (flags `0`/`1`) and the output adds per-token pieces; decoding and pieces
//! then leave control tokens out.
//!
//! `cargo run --release -p mlxr-tokenizer --example tokenize_batch -- MODEL.gguf [--flags] < requests`

use std::io::{BufRead, Write};

use mlxr_formats::gguf::GgufFile;
use mlxr_tokenizer::Tokenizer;

fn hex_decode(s: &str) -> Vec<u8> {
    if s == "-" {
        return Vec::new();
    }
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: tokenize_batch MODEL.gguf < requests")?;
    let file = GgufFile::open(&path)?;
    let tok = Tokenizer::from_gguf(file.metadata())?;
    let flags_mode = std::env::args().any(|a| a == "--flags");
    let hex = |b: &[u8]| b.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let f: Vec<&str> = line.split('\t').collect();
        if flags_mode {
            if f.len() != 4 {
                continue;
            }
            let text = String::from_utf8(hex_decode(f[3]))?;
            let ids = tok.encode(&text, f[1] == "1", f[2] == "1");
            let pieces: Vec<String> = ids
                .iter()
                .map(|&id| hex(&tok.token_to_piece(id, false)))
                .collect();
            let detok = hex(&tok.decode_bytes(&ids, false));
            let ids: Vec<String> = ids.iter().map(u32::to_string).collect();
            writeln!(
                out,
                "{{\"id\":\"{}\",\"ids\":[{}],\"detok_hex\":\"{detok}\",\"pieces\":\"{}\"}}",
                f[0],
                ids.join(","),
                pieces.join(",")
            )?;
            continue;
        }
        if f.len() != 3 || f[0] != "tokenize" {
            continue;
        }
        let text = String::from_utf8(hex_decode(f[2]))?;
        let ids = tok.encode(&text, true, true);
        let detok: String = tok
            .decode_bytes(&ids, true)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let ids: Vec<String> = ids.iter().map(u32::to_string).collect();
        writeln!(
            out,
            "{{\"id\":\"{}\",\"ids\":[{}],\"detok_hex\":\"{detok}\"}}",
            f[1],
            ids.join(",")
        )?;
    }
    Ok(())
}
