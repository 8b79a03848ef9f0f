//! `mlxr list`, `ps`, `show`, `cp`, `rm`, `stop`: the daemon's model catalogue.

use anyhow::Result;
use serde_json::{json, Value};

use super::client::Client;
use super::format::{human_size, parse_time, print_table, relative_time};
use crate::cli::{CopyArgs, HostArg, RemoveArgs, ShowArgs, StopArgs};

fn short_id(digest: &Value) -> String {
    let digest = digest.as_str().unwrap_or_default();
    digest
        .trim_start_matches("sha256:")
        .chars()
        .take(12)
        .collect()
}

fn models(answer: &Value) -> &[Value] {
    answer["models"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

pub fn list(args: HostArg) -> Result<()> {
    let answer = Client::new(args.host.as_deref())?.get("/api/tags")?;
    let now = chrono::Utc::now();
    let rows: Vec<Vec<String>> = models(&answer)
        .iter()
        .map(|m| {
            vec![
                m["name"].as_str().unwrap_or_default().to_string(),
                short_id(&m["digest"]),
                human_size(m["size"].as_u64().unwrap_or(0)),
                m["modified_at"]
                    .as_str()
                    .and_then(parse_time)
                    .map(|t| relative_time(t, now))
                    .unwrap_or_default(),
            ]
        })
        .collect();
    print_table(&["NAME", "ID", "SIZE", "MODIFIED"], &rows);
    Ok(())
}

pub fn ps(args: HostArg) -> Result<()> {
    let answer = Client::new(args.host.as_deref())?.get("/api/ps")?;
    let now = chrono::Utc::now();
    let rows: Vec<Vec<String>> = models(&answer)
        .iter()
        .map(|m| {
            vec![
                m["name"].as_str().unwrap_or_default().to_string(),
                short_id(&m["digest"]),
                human_size(m["size"].as_u64().unwrap_or(0)),
                "100% CPU".to_string(),
                m["context_length"]
                    .as_u64()
                    .map(|c| c.to_string())
                    .unwrap_or_default(),
                m["expires_at"]
                    .as_str()
                    .and_then(parse_time)
                    .map(|t| relative_time(t, now))
                    .unwrap_or_else(|| "Forever".into()),
            ]
        })
        .collect();
    print_table(
        &["NAME", "ID", "SIZE", "PROCESSOR", "CONTEXT", "UNTIL"],
        &rows,
    );
    Ok(())
}

pub fn show(args: ShowArgs) -> Result<()> {
    let client = Client::new(args.host.host.as_deref())?;
    let info = client.post("/api/show", &json!({"model": args.name}))?;
    let text = |key: &str| info[key].as_str().unwrap_or_default().to_string();
    let piece = if args.modelfile {
        Some(text("modelfile"))
    } else if args.parameters {
        Some(text("parameters"))
    } else if args.template {
        Some(text("template"))
    } else if args.system {
        Some(text("system"))
    } else if args.license {
        Some(text("license"))
    } else {
        None
    };
    match piece {
        Some(p) => println!("{}", p.trim_end()),
        None => print_summary(&info),
    }
    Ok(())
}

fn print_summary(info: &Value) {
    let details = &info["details"];
    let model_info = &info["model_info"];
    let arch = model_info["general.architecture"]
        .as_str()
        .or(details["family"].as_str())
        .unwrap_or("unknown");
    let field = |key: &str| {
        let v = &model_info[format!("{arch}.{key}")];
        v.as_u64().map(|n| n.to_string()).unwrap_or_default()
    };
    println!("  Model");
    let rows = [
        ("architecture", arch.to_string()),
        (
            "parameters",
            details["parameter_size"].as_str().unwrap_or("").to_string(),
        ),
        ("context length", field("context_length")),
        ("embedding length", field("embedding_length")),
        (
            "quantization",
            details["quantization_level"]
                .as_str()
                .unwrap_or("")
                .to_string(),
        ),
    ];
    for (key, value) in rows.iter().filter(|(_, v)| !v.is_empty()) {
        println!("    {key:<20}{value}");
    }
    let parameters = info["parameters"].as_str().unwrap_or_default();
    if !parameters.trim().is_empty() {
        println!("\n  Parameters");
        for line in parameters.lines() {
            let mut parts = line.splitn(2, char::is_whitespace);
            let (key, value) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            println!("    {key:<20}{}", value.trim());
        }
    }
    for (title, key) in [("System", "system"), ("License", "license")] {
        if let Some(text) = info[key].as_str().filter(|s| !s.trim().is_empty()) {
            println!("\n  {title}");
            for line in text.lines().take(4) {
                println!("    {line}");
            }
        }
    }
}

pub fn copy(args: CopyArgs) -> Result<()> {
    let client = Client::new(args.host.host.as_deref())?;
    client.post(
        "/api/copy",
        &json!({"source": args.source, "destination": args.destination}),
    )?;
    println!("copied '{}' to '{}'", args.source, args.destination);
    Ok(())
}

pub fn remove(args: RemoveArgs) -> Result<()> {
    let client = Client::new(args.host.host.as_deref())?;
    for name in &args.names {
        client.delete("/api/delete", &json!({"model": name}))?;
        println!("deleted '{name}'");
    }
    Ok(())
}

pub fn stop(args: StopArgs) -> Result<()> {
    let client = Client::new(args.host.host.as_deref())?;
    client.post(
        "/api/generate",
        &json!({"model": args.name, "keep_alive": 0, "stream": false}),
    )?;
    Ok(())
}
