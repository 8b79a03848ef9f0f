//! A safetensors file's start and a `config.json`, then the index file
//! reader. Input layout: `[u64 LE length][header JSON][config.json]`; the
//! whole input is also read as a `model.safetensors.index.json`. Every
//! function must return a value or an error, never panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use mlxr_formats::safetensors_folder::index_shards;
use mlxr_registry::{safetensors_details_from_headers, safetensors_header};
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let header = safetensors_header(data);
    let rest = match &header {
        // Parsed, so the prefix is a length that fits the input.
        Some(_) => {
            let len = u64::from_le_bytes(data[..8].try_into().unwrap()) as usize;
            &data[8 + len..]
        }
        None => data,
    };
    let config: Value = serde_json::from_slice(rest).unwrap_or(Value::Null);
    let headers: Vec<_> = header.into_iter().collect();
    let details = safetensors_details_from_headers(&headers, &config);
    assert_eq!(details.format, "safetensors");
    assert_eq!(details.families, [details.family.clone()]);
    assert!(!details.parameter_size.is_empty());

    // The loader's reader (candle uses the `safetensors` crate).
    if let Ok(st) = safetensors::SafeTensors::deserialize(data) {
        for (_, view) in st.tensors() {
            let n: usize = view.shape().iter().product();
            assert_eq!(view.data().len(), n * view.dtype().bitsize() / 8);
        }
    }

    for text in [std::str::from_utf8(data), std::str::from_utf8(rest)]
        .into_iter()
        .flatten()
    {
        if let Ok(shards) = index_shards(text) {
            assert!(!shards.is_empty());
            assert!(shards.windows(2).all(|w| w[0] < w[1]));
            assert!(shards
                .iter()
                .all(|s| !s.contains(['/', '\\']) && !s.starts_with('.')));
        }
    }
});
