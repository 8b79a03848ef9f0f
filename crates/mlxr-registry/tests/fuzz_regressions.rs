//! Inputs that once crashed a fuzz target of `fuzz/` (or were written to
//! reproduce a crash found while writing one): each must be handled without
//! a panic by the same calls the target makes. One folder per target.

use std::path::Path;

use mlxr_formats::safetensors_folder::index_shards;
use mlxr_registry::modelfile;
use mlxr_registry::{safetensors_details_from_headers, safetensors_header};
use serde_json::Value;

/// `fuzz_targets/safetensors_header.rs`: `[u64 length][header][config.json]`.
fn safetensors_header_target(data: &[u8]) {
    let header = safetensors_header(data);
    let rest = match &header {
        Some(_) => {
            let len = u64::from_le_bytes(data[..8].try_into().unwrap()) as usize;
            &data[8 + len..]
        }
        None => data,
    };
    let config: Value = serde_json::from_slice(rest).unwrap_or(Value::Null);
    let headers: Vec<_> = header.into_iter().collect();
    let _ = safetensors_details_from_headers(&headers, &config);
    for text in [std::str::from_utf8(data), std::str::from_utf8(rest)]
        .into_iter()
        .flatten()
    {
        let _ = index_shards(text);
    }
}

/// `fuzz_targets/modelfile.rs`.
fn modelfile_target(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = modelfile::parse(text);
    }
}

/// Feeds every file of `tests/fuzz-regressions/<target>/` to `run`; returns
/// how many there were.
fn replay(target: &str, run: fn(&[u8])) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz-regressions")
        .join(target);
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let result = std::panic::catch_unwind(|| run(&bytes));
        assert!(result.is_ok(), "panicked on {}", path.display());
        n += 1;
    }
    n
}

#[test]
fn safetensors_header_regressions() {
    assert!(replay("safetensors_header", safetensors_header_target) > 0);
}

#[test]
fn modelfile_regressions() {
    assert!(replay("modelfile", modelfile_target) > 0);
}
