//! Helpers shared by the test binaries (`mod common;` in each; each uses
//! some of them).
#![allow(dead_code)]

use std::io::Read;
use std::path::Path;

use mlxr_formats::GgufFile;
use sha2::{Digest, Sha256};

/// A tensor of a GGUF file as f32, by name.
pub fn values(file: &GgufFile, name: &str) -> Vec<f32> {
    let t = file
        .tensor(name)
        .unwrap_or_else(|| panic!("{name} missing"));
    mlxr_quantize::dequantize(
        t.ggml_type,
        file.raw_tensor_data(t).unwrap(),
        t.n_elements() as usize,
    )
    .unwrap()
}

/// Copies the files of a folder (not recursive).
pub fn copy_folder(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// A file's SHA-256, hex, read in 1 MiB pieces.
pub fn sha256(path: &Path) -> String {
    let mut f = std::fs::File::open(path).unwrap();
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    format!("{:x}", h.finalize())
}
