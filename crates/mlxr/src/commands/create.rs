//! `mlxr create NAME -f Modelfile`: uploads the model file when the daemon
//! lacks it, then asks it to create the model.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use indicatif::ProgressBar;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::client::Client;
use super::pull::bar_style;
use crate::cli::CreateArgs;
use crate::modelfile::{self, Modelfile};

pub fn create(args: CreateArgs) -> Result<()> {
    let client = Client::new(args.host.host.as_deref());
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("reading {}", args.file.display()))?;
    let modelfile = modelfile::parse(&text).with_context(|| format!("{}", args.file.display()))?;
    let folder = args.file.parent().unwrap_or(Path::new("."));
    let mut body = request_body(&args.name, &modelfile);
    match local_file(folder, &modelfile.from) {
        // A Hugging Face or MLX folder: its weights and companion files.
        Some(dir) if dir.is_dir() => {
            let mut files = Map::new();
            for rel in mlxr_registry::folder_files(&dir)? {
                files.insert(rel.clone(), json!(upload(&client, &dir.join(&rel))?));
            }
            body["files"] = Value::Object(files);
        }
        Some(path) => {
            let digest = upload(&client, &path)?;
            let file_name = path
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_else(|| "model.gguf".into());
            body["files"] = json!({ file_name: digest });
        }
        None => body["from"] = json!(modelfile.from),
    }
    for line in client.post_stream("/api/create", &body)? {
        if let Some(status) = line?["status"].as_str() {
            eprintln!("{status}");
        }
    }
    Ok(())
}

/// `FROM` names a file or model folder when it exists relative to the
/// Modelfile's folder (or as given), or looks like a path; otherwise it
/// names a model.
fn local_file(folder: &Path, from: &str) -> Option<PathBuf> {
    let expanded = match from.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME").map(|h| PathBuf::from(h).join(rest))?,
        None => PathBuf::from(from),
    };
    let candidate = if expanded.is_absolute() {
        expanded
    } else {
        folder.join(expanded)
    };
    let looks_like_path = from.ends_with(".gguf") || from.starts_with('.') || from.starts_with('/');
    (candidate.exists() || looks_like_path).then_some(candidate)
}

fn request_body(name: &str, m: &Modelfile) -> Value {
    let mut body = json!({ "model": name });
    if let Some(t) = &m.template {
        body["template"] = json!(t);
    }
    if let Some(s) = &m.system {
        body["system"] = json!(s);
    }
    if !m.parameters.is_empty() {
        body["parameters"] = Value::Object(parameters(&m.parameters));
    }
    if !m.messages.is_empty() {
        body["messages"] = json!(m
            .messages
            .iter()
            .map(|(role, content)| json!({"role": role, "content": content}))
            .collect::<Vec<_>>());
    }
    if !m.licenses.is_empty() {
        body["license"] = json!(m.licenses);
    }
    body
}

/// Numbers and booleans as JSON values; repeated keys (and `stop`) as lists.
fn parameters(pairs: &[(String, String)]) -> Map<String, Value> {
    let mut out = Map::new();
    for (key, raw) in pairs {
        let value = typed(raw);
        let repeats = key == "stop" || pairs.iter().filter(|(k, _)| k == key).count() > 1;
        if repeats {
            let list = out.entry(key.clone()).or_insert_with(|| json!([]));
            if let Value::Array(items) = list {
                items.push(value);
            }
        } else {
            out.insert(key.clone(), value);
        }
    }
    out
}

fn typed(raw: &str) -> Value {
    if let Ok(i) = raw.parse::<i64>() {
        json!(i)
    } else if let Ok(f) = raw.parse::<f64>() {
        json!(f)
    } else if let Ok(b) = raw.parse::<bool>() {
        json!(b)
    } else {
        json!(raw)
    }
}

/// Hashes the file, and uploads it unless the daemon already has the blob.
fn upload(client: &Client, path: &Path) -> Result<String> {
    let digest = sha256_file(path)?;
    let route = format!("/api/blobs/{digest}");
    if client.exists(&route)? {
        return Ok(digest);
    }
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let bar = ProgressBar::new(file.metadata()?.len());
    bar.set_style(bar_style());
    bar.set_prefix("copying file");
    let mut reader = bar.wrap_read(file);
    client.upload(&route, &mut reader)?;
    bar.finish_and_clear();
    Ok(digest)
}

fn sha256_file(path: &Path) -> Result<String> {
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let bar = ProgressBar::new(file.metadata()?.len());
    bar.set_style(bar_style());
    bar.set_prefix("hashing file");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_typed_and_stop_is_a_list() {
        let pairs = vec![
            ("temperature".to_string(), "0".to_string()),
            ("top_p".to_string(), "0.9".to_string()),
            ("stop".to_string(), "User:".to_string()),
        ];
        let map = parameters(&pairs);
        assert_eq!(map["temperature"], json!(0));
        assert_eq!(map["top_p"], json!(0.9));
        assert_eq!(map["stop"], json!(["User:"]));
    }
}
