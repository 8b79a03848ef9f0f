//! llama.cpp's own tokenizer test vectors (`models/ggml-vocab-*.gguf` with
//! `.inp`/`.out` files, checked by its `test-tokenizer-0` with
//! `add_special = false, parse_special = false`), run against our tokenizers.
//!
//! The files come from the pinned llama-cpp-python sdist
//! (`scripts/fetch-models.sh vocabs` puts them in
//! `$MLXR_MODELS_DIR/llama.cpp-vocabs`); `$MLXR_LLAMACPP_VOCABS` points at
//! another llama.cpp `models/` folder. Missing files skip the test with a
//! note, or fail it under `MLXR_REQUIRE_MODELS=1`.

use std::path::PathBuf;

use mlxr_formats::gguf::GgufFile;
use mlxr_tokenizer::{Tokenizer, TokenizerError};

fn vocab_dir() -> Option<PathBuf> {
    match std::env::var_os("MLXR_LLAMACPP_VOCABS") {
        Some(d) => Some(PathBuf::from(d)),
        None => mlxr_testkit::model_path(mlxr_testkit::LLAMACPP_VOCABS),
    }
}

/// (text, ids) pairs of one vocabulary's test files.
fn load_vectors(gguf: &std::path::Path) -> Option<Vec<(String, Vec<u32>)>> {
    let inp = std::fs::read_to_string(format!("{}.inp", gguf.display())).ok()?;
    let out = std::fs::read_to_string(format!("{}.out", gguf.display())).ok()?;
    let sep = "\n__ggml_vocab_test__\n";
    let mut texts = Vec::new();
    let mut pos = 0;
    while pos < inp.len() {
        match inp[pos..].find(sep) {
            Some(n) => {
                texts.push(inp[pos..pos + n].to_string());
                pos += n + sep.len();
            }
            None => {
                texts.push(inp[pos..].to_string());
                break;
            }
        }
    }
    let ids: Vec<Vec<u32>> = out
        .lines()
        .map(|l| {
            l.split_whitespace()
                .map(|t| t.parse().expect("token id"))
                .collect()
        })
        .collect();
    assert_eq!(
        texts.len(),
        ids.len(),
        "{}: .inp and .out disagree",
        gguf.display()
    );
    Some(texts.into_iter().zip(ids).collect())
}

#[test]
fn llamacpp_vocab_test_vectors() {
    let Some(dir) = vocab_dir() else {
        return;
    };
    let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("vocab dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "gguf"))
        .collect();
    entries.sort();
    let mut failures = Vec::new();
    let mut checked = 0;
    for path in entries {
        let Some(vectors) = load_vectors(&path) else {
            continue;
        };
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let file = GgufFile::open(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let tok = match Tokenizer::from_gguf(file.metadata()) {
            Ok(t) => t,
            Err(
                e @ (TokenizerError::UnsupportedModel(_) | TokenizerError::UnknownPreTokenizer(_)),
            ) => {
                mlxr_testkit::skip_note(&format!("{name}: not supported: {e}"));
                continue;
            }
            Err(e) => panic!("{name}: {e}"),
        };
        let mut bad = 0;
        for (text, want) in &vectors {
            let got = tok.encode(text, false, false);
            if &got != want {
                bad += 1;
                failures.push(format!(
                    "{name}: {text:?}\n  llama.cpp: {want:?}\n  mlxr:      {got:?}"
                ));
            }
        }
        checked += 1;
        eprintln!("{name}: {} vectors, {bad} differ", vectors.len());
    }
    eprintln!("{checked} vocabularies checked from {}", dir.display());
    assert!(checked > 0, "no test vectors in {}", dir.display());
    assert!(
        failures.is_empty(),
        "{} vectors differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
