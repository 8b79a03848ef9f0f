//! Reference parity with llama.cpp on the real models.
//!
//! For each model in `$MLXR_MODELS_DIR` (default `~/.cache/mlxr/models`),
//! `tests/fixtures/llamacpp/<model>.json` at the workspace root holds
//! llama.cpp's output: `llama_tokenize(text, add_special = true,
//! parse_special = true)` for every `tokenize[].text` and
//! `generate[].prompt`. A model that is absent is skipped; a model that is
//! present without its fixture, or any differing id, fails.

use std::path::PathBuf;
use std::time::Instant;

use mlxr_formats::gguf::GgufFile;
use mlxr_tokenizer::{StreamDecoder, Tokenizer};
use serde_json::Value;

use mlxr_testkit::{GEMMA3, SMOLLM2};

fn fixtures_dir() -> PathBuf {
    mlxr_testkit::fixture_path("llamacpp")
}

/// The tokenizer of a model, or `None` (with a message) when the model file is absent.
fn load(model: &str) -> Option<Tokenizer> {
    let path = mlxr_testkit::model_path(model)?;
    let file = GgufFile::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let t = Instant::now();
    let tok =
        Tokenizer::from_gguf(file.metadata()).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    eprintln!(
        "{model}: tokenizer loaded in {:.1} ms ({} tokens)",
        t.elapsed().as_secs_f64() * 1e3,
        tok.vocab_size()
    );
    Some(tok)
}

struct Case {
    what: String,
    text: String,
    ids: Vec<u32>,
    add_special: bool,
    parse_special: bool,
}

fn ids_of(v: &Value, what: &str) -> Vec<u32> {
    v.as_array()
        .unwrap_or_else(|| panic!("{what}: expected an array of ids, got {v}"))
        .iter()
        .map(|x| x.as_u64().unwrap_or_else(|| panic!("{what}: bad id {x}")) as u32)
        .collect()
}

fn cases(fixture: &str) -> Vec<Case> {
    let path = fixtures_dir().join(fixture);
    let json = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "the model is present but its llama.cpp fixture {} cannot be read: {e}",
            path.display()
        )
    });
    let v: Value =
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let flag = |e: &Value, k: &str| e.get(k).and_then(Value::as_bool).unwrap_or(true);
    let mut out = Vec::new();
    for (i, e) in v["tokenize"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
        .iter()
        .enumerate()
    {
        let what = format!("tokenize[{i}]");
        out.push(Case {
            text: e["text"]
                .as_str()
                .unwrap_or_else(|| panic!("{what}: no text"))
                .to_string(),
            ids: ids_of(&e["ids"], &what),
            add_special: flag(e, "add_special"),
            parse_special: flag(e, "parse_special"),
            what,
        });
    }
    for (i, e) in v["generate"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
        .iter()
        .enumerate()
    {
        let what = format!("generate[{i}].prompt");
        out.push(Case {
            text: e["prompt"]
                .as_str()
                .unwrap_or_else(|| panic!("{what}: no prompt"))
                .to_string(),
            ids: ids_of(&e["prompt_ids"], &what),
            add_special: true,
            parse_special: true,
            what,
        });
    }
    assert!(
        !out.is_empty(),
        "{}: no tokenize or generate entries",
        path.display()
    );
    out
}

fn show(tok: &Tokenizer, ids: &[u32]) -> String {
    let pieces: Vec<String> = ids
        .iter()
        .map(|&i| format!("{i}:{:?}", tok.token_text(i).unwrap_or("?")))
        .collect();
    pieces.join(" ")
}

/// `generate[]` entries that recorded generated ids and llama.cpp's
/// detokenization of them (`llama_detokenize(ids, remove_special = false,
/// unparse_special = true)`).
fn generated_outputs(fixture: &str) -> Vec<(String, Vec<u32>, String)> {
    let path = fixtures_dir().join(fixture);
    let Ok(json) = std::fs::read_to_string(&path) else {
        return Vec::new();
    };
    let v: Value =
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::new();
    for (i, e) in v["generate"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
        .iter()
        .enumerate()
    {
        let what = format!("generate[{i}]");
        let text = match (
            e.get("text_hex").and_then(Value::as_str),
            e.get("text").and_then(Value::as_str),
        ) {
            (Some(hex), _) => {
                let bytes: Vec<u8> = (0..hex.len() / 2)
                    .map(|k| u8::from_str_radix(&hex[2 * k..2 * k + 2], 16).unwrap())
                    .collect();
                String::from_utf8_lossy(&bytes).into_owned()
            }
            (None, Some(t)) => t.to_string(),
            _ => continue,
        };
        let Some(ids) = e.get("ids") else { continue };
        out.push((what.clone(), ids_of(ids, &what), text));
    }
    out
}

fn check_parity(model: &str, fixture: &str) {
    let Some(tok) = load(model) else { return };
    let cases = cases(fixture);
    let mut failures = Vec::new();
    for c in &cases {
        let got = tok.encode(&c.text, c.add_special, c.parse_special);
        if got != c.ids {
            let first = got
                .iter()
                .zip(&c.ids)
                .position(|(a, b)| a != b)
                .unwrap_or(got.len().min(c.ids.len()));
            failures.push(format!(
                "{}: text {:?}\n  llama.cpp: {:?}\n  mlxr:      {:?}\n  first difference at position {first}\n  llama.cpp pieces: {}\n  mlxr pieces:      {}",
                c.what,
                c.text,
                c.ids,
                got,
                show(&tok, &c.ids[first.min(c.ids.len())..(first + 6).min(c.ids.len())]),
                show(&tok, &got[first.min(got.len())..(first + 6).min(got.len())]),
            ));
            continue;
        }
        // Round trip: llama.cpp's ids, without the BOS it added, decode to the
        // text (special tokens rendered, since they were parsed).
        let body = match (c.add_special && tok.add_bos(), c.ids.first()) {
            (true, Some(&b)) if Some(b) == tok.bos() => &c.ids[1..],
            _ => &c.ids[..],
        };
        let body = if c.add_special && tok.add_eos() && body.last() == tok.eos().as_ref() {
            &body[..body.len() - 1]
        } else {
            body
        };
        let decoded = tok.decode(body, c.parse_special);
        if decoded != c.text {
            failures.push(format!(
                "{}: decode does not round-trip\n  text:    {:?}\n  decoded: {:?}",
                c.what, c.text, decoded
            ));
        }
        // Streaming gives the same text.
        let mut stream = StreamDecoder::with_special(c.parse_special);
        let mut streamed: String = body.iter().map(|&id| stream.push(&tok, id)).collect();
        streamed.push_str(&stream.finish());
        if !tok.clean_spaces() && !tok.add_space_prefix() && streamed != decoded {
            failures.push(format!(
                "{}: streaming differs\n  decode: {decoded:?}\n  stream: {streamed:?}",
                c.what
            ));
        }
    }
    // Generated ids decode (and stream) to the text llama.cpp made of them.
    for (what, ids, text) in generated_outputs(fixture) {
        let decoded = tok.decode(&ids, true);
        if decoded != text {
            failures.push(format!(
                "{what}: decoding generated ids\n  llama.cpp: {text:?}\n  mlxr:      {decoded:?}"
            ));
        }
        let mut stream = StreamDecoder::with_special(true);
        let mut streamed: String = ids.iter().map(|&id| stream.push(&tok, id)).collect();
        streamed.push_str(&stream.finish());
        if !tok.clean_spaces() && !tok.add_space_prefix() && streamed != text {
            failures.push(format!(
                "{what}: streaming generated ids\n  llama.cpp: {text:?}\n  stream:    {streamed:?}"
            ));
        }
    }
    eprintln!(
        "{model}: {} cases, {} failures",
        cases.len(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from llama.cpp:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
}

#[test]
fn smollm2_matches_llamacpp() {
    check_parity(SMOLLM2, "smollm2.json");
}

#[test]
fn gemma3_matches_llamacpp() {
    check_parity(GEMMA3, "gemma3.json");
}

/// About 10 kB of mixed text: prose, code, numbers, whitespace runs, emoji, CJK.
fn ten_kb_text() -> String {
    let para = "The quick brown fox jumps over the lazy dog; it's 3.14159 o'clock!\n\
                fn main() {\n    println!(\"héllo, wörld — {}\", 42 * 1_000);\n}\n\
                日本語のテキストと中文字符, emoji 😀🎉👍🏽 and   spaces\t\ttabs.\n\n";
    let mut s = String::new();
    while s.len() < 10_000 {
        s.push_str(para);
    }
    s
}

fn check_round_trip(model: &str) {
    let Some(tok) = load(model) else { return };
    let text = ten_kb_text();
    tok.encode("warm up", true, true);
    let t = Instant::now();
    let ids = tok.encode(&text, true, true);
    let enc = t.elapsed();
    let t = Instant::now();
    let back = tok.decode(&ids, false);
    let dec = t.elapsed();
    eprintln!(
        "{model}: encode {} bytes -> {} tokens in {:.2} ms, decode in {:.2} ms",
        text.len(),
        ids.len(),
        enc.as_secs_f64() * 1e3,
        dec.as_secs_f64() * 1e3
    );
    assert_eq!(back.trim_start(), text.trim_start());
}

#[test]
fn smollm2_round_trips_10kb() {
    check_round_trip(SMOLLM2);
}

#[test]
fn gemma3_round_trips_10kb() {
    check_round_trip(GEMMA3);
}

#[test]
fn end_of_generation_sets() {
    if let Some(tok) = load(SMOLLM2) {
        let id = |t: &str| tok.token_id(t).unwrap();
        // <|endoftext|>, <|im_end|> by text (eos is <|im_end|>), <reponame> as FIM repo token.
        assert_eq!(
            tok.eog_ids(),
            [id("<|endoftext|>"), id("<|im_end|>"), id("<reponame>")]
        );
        assert!(!tok.add_bos());
        assert_eq!(tok.eos(), Some(id("<|im_end|>")));
    }
    if let Some(tok) = load(GEMMA3) {
        let id = |t: &str| tok.token_id(t).unwrap();
        assert!(tok.is_eog(id("<eos>")) && tok.is_eog(id("<end_of_turn>")));
        // llama.cpp also stops at "</s>" (an EOG text) in Gemma 3's vocabulary.
        assert_eq!(
            tok.eog_ids(),
            [id("<eos>"), id("<end_of_turn>"), id("</s>")]
        );
        assert!(tok.add_bos() && !tok.add_space_prefix());
        assert_eq!(tok.bos(), Some(id("<bos>")));
    }
}

/// Streams `text`'s tokens; returns what each token emitted (plus `finish`).
fn stream_parts(tok: &Tokenizer, text: &str) -> Vec<String> {
    let ids = tok.encode(text, false, false);
    let mut stream = StreamDecoder::new();
    let mut parts: Vec<String> = ids.iter().map(|&i| stream.push(tok, i)).collect();
    parts.push(stream.finish());
    assert_eq!(parts.concat(), text);
    // Nothing is emitted mid-character: no replacement characters anywhere.
    assert!(parts.iter().all(|p| !p.contains('\u{FFFD}')), "{parts:?}");
    parts
}

#[test]
fn gemma3_streams_byte_fallback_emoji() {
    let Some(tok) = load(GEMMA3) else { return };
    // Characters Gemma has no piece for come out as four <0xNN> tokens each.
    let parts = stream_parts(&tok, "a\u{1FAE8}b \u{1D54F}");
    assert_eq!(
        parts,
        [
            "a",
            "",
            "",
            "",
            "\u{1FAE8}",
            "b",
            " ",
            "",
            "",
            "",
            "\u{1D54F}",
            ""
        ]
    );
}

#[test]
fn smollm2_streams_characters_split_across_tokens() {
    let Some(tok) = load(SMOLLM2) else { return };
    // Byte-level BPE spreads these characters' bytes over several tokens.
    let parts = stream_parts(&tok, "a\u{1FAE8}b \u{65E5}\u{672C}");
    // "Ġæ" carries the space and the first byte of 日: the space goes out at once.
    assert_eq!(
        parts,
        [
            "a",
            "",
            "",
            "\u{1FAE8}",
            "b",
            " ",
            "",
            "\u{65E5}",
            "\u{672C}",
            ""
        ]
    );
}
