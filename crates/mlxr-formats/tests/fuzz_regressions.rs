//! Inputs the fuzzer (`fuzz/`, target `gguf_parse`) once crashed on, and
//! other hostile inputs: each must parse or fail cleanly, never panic.

use std::path::Path;

use mlxr_formats::gguf::GgufFile;

/// What the fuzz target does with a parsed file.
fn exercise(bytes: Vec<u8>) {
    let Ok(file) = GgufFile::from_bytes(bytes) else {
        return;
    };
    let m = file.metadata();
    for (key, value) in m.iter() {
        let _ = (value.to_string(), format!("{value:#}"));
        let _ = (
            m.get_str(key).is_ok(),
            m.get_u32(key).is_ok(),
            m.get_f32(key).is_ok(),
        );
        let _ = (
            m.get_i32_array(key).is_ok(),
            m.get_u32_per_layer(key, 3).is_ok(),
        );
    }
    let _ = file.check_supported();
    for t in file.tensors() {
        let raw = file.raw_tensor_data(t).unwrap();
        assert_eq!(raw.len() as u64, t.size_bytes);
        let _ = file.tensor_data(t);
    }
}

#[test]
fn every_stored_fuzz_regression_is_handled() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-regressions");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        let result = std::panic::catch_unwind(|| exercise(bytes));
        assert!(result.is_ok(), "panicked on {}", path.display());
        n += 1;
    }
    eprintln!("{n} fuzz regression inputs handled");
}

#[test]
fn every_prefix_and_single_byte_corruption_of_a_seed() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/gguf_parse");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        eprintln!("note: no seeds at {}", dir.display());
        return;
    };
    for entry in entries {
        let seed = std::fs::read(entry.unwrap().path()).unwrap();
        for len in 0..seed.len() {
            exercise(seed[..len].to_vec());
        }
        for i in 0..seed.len() {
            for v in [0x00, 0xff, 0x80, 0x7f, 0x09, 0x10] {
                let mut b = seed.clone();
                b[i] = v;
                exercise(b);
            }
        }
    }
}
