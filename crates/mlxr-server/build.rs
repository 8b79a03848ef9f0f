//! Embeds the web GUI's built assets (`app/ui/dist`) when they exist.
//!
//! Writes `$OUT_DIR/ui_assets.rs`: a sorted `(path, bytes)` table of every
//! file under `dist`, each included with `include_bytes!`. Without `dist`
//! (a clean clone, no node) the table is empty and the daemon serves a page
//! explaining how to build the UI, so `cargo build` never needs node.

use std::path::{Path, PathBuf};
use std::{env, fs};

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let ui = manifest.join("../../app/ui");
    let dist = ui.join("dist");
    let mut files = Vec::new();
    if dist.is_dir() {
        println!("cargo:rerun-if-changed={}", dist.display());
        collect(&dist, &dist, &mut files);
    } else if ui.is_dir() {
        // `npm run build` creates `dist` inside it; a missing path would make
        // cargo rerun this script (and rebuild the crate) on every build.
        println!("cargo:rerun-if-changed={}", ui.display());
    } else {
        println!("cargo:rerun-if-changed=build.rs");
    }
    files.sort();
    let mut out = String::from("pub static ASSETS: &[(&str, &[u8])] = &[\n");
    for (rel, abs) in &files {
        out.push_str(&format!("    ({rel:?}, include_bytes!({abs:?})),\n"));
    }
    out.push_str("];\n");
    let target = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR")).join("ui_assets.rs");
    fs::write(target, out).expect("write ui_assets.rs");
}

/// Every file under `dir` as (`/`-separated path relative to `root`, absolute path).
fn collect(root: &Path, dir: &Path, files: &mut Vec<(String, String)>) {
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            collect(root, &path, files);
            continue;
        }
        let rel = path.strip_prefix(root).expect("under root");
        let rel: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let abs = path
            .canonicalize()
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        files.push((rel.join("/"), abs.to_string_lossy().into_owned()));
    }
}
