//! Uploads a model's files from this machine to the daemon as blobs, for
//! `/api/create`: `mlxr create` (FROM a file or folder) and `mlxr pull PATH`.
//! Each file is hashed first, and sent only when the daemon lacks its blob.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result};
use indicatif::ProgressBar;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::client::Client;
use super::pull::bar_style;

/// Uploads a GGUF file, or a Hugging Face / MLX folder's weights and
/// companion files, and returns `/api/create`'s `files` (relative name →
/// digest).
pub fn upload_model(client: &Client, path: &Path) -> Result<Map<String, Value>> {
    let mut files = Map::new();
    if path.is_dir() {
        for rel in mlxr_registry::folder_files(path)? {
            files.insert(
                rel.clone(),
                json!(upload_file(client, &path.join(&rel), &rel)?),
            );
        }
    } else {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_else(|| "model.gguf".into());
        files.insert(name.clone(), json!(upload_file(client, path, &name)?));
    }
    Ok(files)
}

/// Hashes the file, and uploads it unless the daemon already has the blob.
fn upload_file(client: &Client, path: &Path, label: &str) -> Result<String> {
    let digest = sha256_file(path, label)?;
    let route = format!("/api/blobs/{digest}");
    if client.exists(&route)? {
        return Ok(digest);
    }
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let len = file.metadata()?.len();
    let bar = ProgressBar::new(len);
    bar.set_style(bar_style());
    bar.set_prefix(format!("uploading {label}"));
    let mut reader = bar.wrap_read(file);
    client
        .upload(&route, &mut reader, len)
        .with_context(|| format!("uploading {}", path.display()))?;
    bar.finish_and_clear();
    Ok(digest)
}

fn sha256_file(path: &Path, label: &str) -> Result<String> {
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let bar = ProgressBar::new(file.metadata()?.len());
    bar.set_style(bar_style());
    bar.set_prefix(format!("hashing {label}"));
    let mut reader = bar.wrap_read(file);
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = reader
            .read(&mut buf)
            .with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    bar.finish_and_clear();
    let hex: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(format!("sha256:{hex}"))
}
