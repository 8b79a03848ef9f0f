//! `mlxr pull`: asks the daemon to fetch a model and draws its progress. A
//! file or model folder on this machine is uploaded instead (the daemon may
//! be elsewhere, and reads no local paths unless started with
//! `--allow-local-pulls`).

use std::collections::HashMap;
use std::path::Path;

use anyhow::{bail, Result};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use mlxr_registry::{PullSource, Registry};
use serde_json::{json, Value};

use super::client::Client;
use super::interrupt;
use super::upload::upload_model;
use crate::cli::PullArgs;

pub fn pull(args: PullArgs) -> Result<()> {
    let client = Client::new(args.host.host.as_deref())?;
    pull_model(&client, &args.name)
}

pub fn bar_style() -> ProgressStyle {
    ProgressStyle::with_template(
        "{prefix} {bar:30} {percent:>3}% {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}",
    )
    .expect("valid template")
}

/// Streams `POST /api/pull`: one bar per digest, other statuses as lines.
/// Ctrl-C drops the connection, which cancels the pull on the server. A
/// path that exists here (and is not a URL, `hf.co/` or default name) is
/// uploaded and created under the name the daemon would give it.
pub fn pull_model(client: &Client, name: &str) -> Result<()> {
    if let Ok((PullSource::Local(path), model)) = Registry::resolve_source(name) {
        return create_from_path(client, &path, &model.to_string());
    }
    interrupt::install()?;
    interrupt::reset();
    let lines = client.post_stream("/api/pull", &json!({"model": name}))?;
    let multi = MultiProgress::new();
    let mut bars: HashMap<String, ProgressBar> = HashMap::new();
    let mut last_status = String::new();
    for line in lines {
        if interrupt::interrupted() {
            break;
        }
        let line: Value = line?;
        let status = line["status"].as_str().unwrap_or_default();
        match (line["digest"].as_str(), line["total"].as_u64()) {
            (Some(digest), Some(total)) => {
                let bar = bars.entry(digest.to_string()).or_insert_with(|| {
                    let bar = multi.add(ProgressBar::new(total));
                    bar.set_style(bar_style());
                    let short: String = digest
                        .trim_start_matches("sha256:")
                        .chars()
                        .take(12)
                        .collect();
                    bar.set_prefix(format!("pulling {short}"));
                    bar
                });
                bar.set_length(total);
                bar.set_position(line["completed"].as_u64().unwrap_or(0));
            }
            _ if status != last_status => {
                multi.suspend(|| eprintln!("{status}"));
            }
            _ => {}
        }
        last_status = status.to_string();
    }
    for bar in bars.values() {
        bar.finish();
    }
    if interrupt::interrupted() {
        bail!("pull of '{name}' cancelled");
    }
    if last_status != "success" {
        bail!("the pull of '{name}' ended before it succeeded");
    }
    Ok(())
}

/// Uploads the file or folder at `path` and creates `model` from it.
fn create_from_path(client: &Client, path: &Path, model: &str) -> Result<()> {
    let files = upload_model(client, path)?;
    let mut last_status = String::new();
    for line in client.post_stream("/api/create", &json!({"model": model, "files": files}))? {
        if let Some(status) = line?["status"].as_str() {
            eprintln!("{status}");
            last_status = status.to_string();
        }
    }
    if last_status != "success" {
        bail!(
            "creating '{model}' from {} ended before it succeeded",
            path.display()
        );
    }
    Ok(())
}
