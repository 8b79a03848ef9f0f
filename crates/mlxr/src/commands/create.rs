//! `mlxr create NAME -f Modelfile`: uploads the model file when the daemon
//! lacks it, then asks it to create the model.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use mlxr_registry::modelfile::{self, Modelfile};
use serde_json::{json, Map, Value};

use super::client::Client;
use super::upload::upload_model;
use crate::cli::CreateArgs;

pub fn create(args: CreateArgs) -> Result<()> {
    let client = Client::new(args.host.host.as_deref())?;
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("reading {}", args.file.display()))?;
    let modelfile = modelfile::parse(&text).with_context(|| format!("{}", args.file.display()))?;
    let folder = args.file.parent().unwrap_or(Path::new("."));
    let mut body = request_body(&args.name, &modelfile);
    match local_file(folder, &modelfile.from) {
        // A GGUF file, or a Hugging Face or MLX folder's files.
        Some(path) => body["files"] = Value::Object(upload_model(&client, &path)?),
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
