//! `mlxr pull`: asks the daemon to fetch a model and draws its progress.

use std::collections::HashMap;

use anyhow::{bail, Result};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use serde_json::{json, Value};

use super::client::Client;
use super::interrupt;
use crate::cli::PullArgs;

pub fn pull(args: PullArgs) -> Result<()> {
    let client = Client::new(args.host.host.as_deref());
    pull_model(&client, &args.name)
}

pub fn bar_style() -> ProgressStyle {
    ProgressStyle::with_template(
        "{prefix} {bar:30} {percent:>3}% {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}",
    )
    .expect("valid template")
}

/// Streams `POST /api/pull`: one bar per digest, other statuses as lines.
/// Ctrl-C drops the connection, which cancels the pull on the server.
pub fn pull_model(client: &Client, name: &str) -> Result<()> {
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
