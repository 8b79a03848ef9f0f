//! `mlxr run NAME`: the chat loop over the daemon's `POST /api/chat`.

use anyhow::{ensure, Context, Result};
use mlxr_engine::ChatMessage;
use serde_json::{json, Map, Value};

use super::client::{is_not_found, Client};
use super::run::{chat, duration, Backend};
use crate::cli::{RunArgs, SamplingArgs, SpecArgs};

pub fn run(args: &RunArgs) -> Result<()> {
    let name = args.name.clone().expect("checked by the caller");
    ensure!(
        args.engine.spec.model_draft.is_none(),
        "--model-draft loads a second model: give it to `mlxr serve` (or run a file with -m)"
    );
    let client = Client::new(args.host.host.as_deref())?;
    let shown = match client.post("/api/show", &json!({"model": name})) {
        Ok(shown) => shown,
        Err(e) if is_not_found(&e) => {
            super::pull::pull_model(&client, &name)?;
            client.post("/api/show", &json!({"model": name}))?
        }
        Err(e) => return Err(e),
    };
    let embeds = shown["capabilities"]
        .as_array()
        .is_some_and(|c| c.iter().any(|c| c == "embedding"));
    if embeds {
        return embed(&client, &name, args.prompt.as_deref());
    }
    let backend = Remote {
        client,
        model: name,
        options: options(&args.sampling, &args.engine.spec),
        keep_alive: args.keepalive.clone(),
        tools: args.tools.as_deref().map(read_tools).transpose()?,
        verbose: args.verbose,
    };
    chat(backend, args.system.as_deref(), args.prompt.as_deref())
}

/// An embedding model prints the text's vector as JSON, as `ollama run` does.
fn embed(client: &Client, model: &str, text: Option<&str>) -> Result<()> {
    let text = text.ok_or_else(|| {
        anyhow::anyhow!("'{model}' is an embedding model: give the TEXT to embed")
    })?;
    let out = client.post("/api/embed", &json!({"model": model, "input": text}))?;
    println!("{}", out["embeddings"][0]);
    Ok(())
}

struct Remote {
    client: Client,
    model: String,
    options: Map<String, Value>,
    keep_alive: Option<String>,
    /// `tools` for every turn (the daemon checks them).
    tools: Option<Value>,
    verbose: bool,
}

/// A `--tools` file: a JSON array.
fn read_tools(path: &std::path::Path) -> Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let tools: Value =
        serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
    ensure!(
        tools.is_array(),
        "{}: expected a JSON array of tool definitions",
        path.display()
    );
    Ok(tools)
}

impl Backend for Remote {
    fn reply(
        &mut self,
        messages: &[ChatMessage],
        on_text: &mut dyn FnMut(&str) -> bool,
    ) -> Result<String> {
        let mut body = json!({
            "model": self.model,
            "messages": messages
                .iter()
                .map(|m| json!({"role": m.role, "content": m.content}))
                .collect::<Vec<_>>(),
            "stream": true,
            "options": self.options,
        });
        if let Some(k) = &self.keep_alive {
            body["keep_alive"] = json!(k);
        }
        if let Some(tools) = &self.tools {
            body["tools"] = tools.clone();
        }
        let mut reply = String::new();
        let mut last = Value::Null;
        // Leaving the loop early drops the connection, which stops the
        // generation on the server.
        for chunk in self.client.post_stream("/api/chat", &body)? {
            let chunk = chunk?;
            let text = chunk["message"]["content"].as_str().unwrap_or_default();
            reply.push_str(text);
            if !text.is_empty() && !on_text(text) {
                break;
            }
            for call in chunk["message"]["tool_calls"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let f = &call["function"];
                let shown = format!(
                    "[tool call] {} {}\n",
                    f["name"].as_str().unwrap_or_default(),
                    f["arguments"]
                );
                if !on_text(&shown) {
                    break;
                }
            }
            if chunk["done"].as_bool() == Some(true) {
                last = chunk;
                break;
            }
        }
        println!();
        if self.verbose && !last.is_null() {
            print_timings(&last);
        }
        Ok(reply)
    }
}

/// Only the flags given on the command line, so the model's own
/// parameters (from its Modelfile) apply to the rest.
fn options(s: &SamplingArgs, spec: &SpecArgs) -> Map<String, Value> {
    let mut o = Map::new();
    let mut set = |key: &str, value: Option<Value>| {
        if let Some(v) = value {
            o.insert(key.to_string(), v);
        }
    };
    set("temperature", s.temperature.map(|v| json!(v)));
    set("top_k", s.top_k.map(|v| json!(v)));
    set("top_p", s.top_p.map(|v| json!(v)));
    set("min_p", s.min_p.map(|v| json!(v)));
    set("repeat_penalty", s.repeat_penalty.map(|v| json!(v)));
    set("repeat_last_n", s.repeat_last_n.map(|v| json!(v)));
    set("presence_penalty", s.presence_penalty.map(|v| json!(v)));
    set("frequency_penalty", s.frequency_penalty.map(|v| json!(v)));
    set("seed", s.seed.map(|v| json!(v)));
    set("num_predict", s.max_tokens.map(|v| json!(v)));
    if !s.stop.is_empty() {
        set("stop", Some(json!(s.stop)));
    }
    set(
        "speculative.type",
        spec.spec_type.map(|t| json!(t.to_string())),
    );
    set("speculative.n_max", spec.draft_max.map(|v| json!(v)));
    set("speculative.n_min", spec.draft_min.map(|v| json!(v)));
    set("speculative.p_min", spec.draft_p_min.map(|v| json!(v)));
    set(
        "speculative.draft_length",
        spec.draft_length.map(|l| json!(l.to_string())),
    );
    o
}

/// Ollama's `--verbose` block, from the final chunk's nanosecond durations.
fn print_timings(done: &Value) {
    let ns = |key: &str| done[key].as_u64().unwrap_or(0);
    let ms = |key: &str| ns(key) as f64 / 1e6;
    let rate = |count: &str, dur: &str| match ns(dur) {
        0 => 0.0,
        d => ns(count) as f64 / (d as f64 / 1e9),
    };
    eprintln!("total duration:       {}", duration(ms("total_duration")));
    eprintln!("load duration:        {}", duration(ms("load_duration")));
    eprintln!("prompt eval count:    {} token(s)", ns("prompt_eval_count"));
    eprintln!(
        "prompt eval duration: {}",
        duration(ms("prompt_eval_duration"))
    );
    eprintln!(
        "prompt eval rate:     {:.2} tokens/s",
        rate("prompt_eval_count", "prompt_eval_duration")
    );
    eprintln!("eval count:           {} token(s)", ns("eval_count"));
    eprintln!("eval duration:        {}", duration(ms("eval_duration")));
    eprintln!(
        "eval rate:            {:.2} tokens/s",
        rate("eval_count", "eval_duration")
    );
    if ns("draft_n") > 0 {
        eprintln!(
            "draft acceptance:     {} of {} draft token(s) ({:.0}%)",
            ns("draft_n_accepted"),
            ns("draft_n"),
            100.0 * ns("draft_n_accepted") as f64 / ns("draft_n") as f64
        );
    }
}
