use std::io::Write;

use anyhow::{Context, Result};
use mlxr_engine::{ChatMessage, Constraint, Event, GenerateRequest, Prompt};
use serde_json::json;

use crate::cli::GenerateArgs;

pub fn generate(args: GenerateArgs) -> Result<()> {
    let constraint = constraint(&args)?;
    let engine = super::start_engine(&args.model.model, &args.model.engine)?;
    let prompt = if args.raw {
        Prompt::Raw(args.prompt.clone())
    } else {
        Prompt::Chat(vec![ChatMessage::new("user", args.prompt.clone())])
    };
    let request = GenerateRequest {
        prompt,
        sampling: super::sampling_params(&args.sampling, args.logprobs),
        max_tokens: args.sampling.max_tokens,
        stop: args.sampling.stop.clone(),
        ignore_eos: args.sampling.ignore_eos,
        priority: 0,
        max_context: None,
        speculation: Default::default(),
        constraint,
        tools: Vec::new(),
    };
    let stdout = std::io::stdout();
    let generation = engine.generate(&request, |event| {
        if !args.json {
            let text = match event {
                Event::Token(t) => &t.text,
                Event::Done { text, .. } => text,
                Event::Error(_) => return true,
            };
            let mut out = stdout.lock();
            // A closed pipe (`| head`) ends the generation instead of failing it.
            return out
                .write_all(text.as_bytes())
                .and_then(|_| out.flush())
                .is_ok();
        }
        true
    })?;
    engine.shutdown();
    if args.json {
        let mut out = json!({
            "text": generation.text,
            "tokens": generation.tokens,
            "prompt_tokens": generation.prompt_tokens,
            "finish_reason": generation.finish_reason,
            "timings": generation.timings,
        });
        if args.logprobs.is_some() {
            out["logprobs"] = json!(generation
                .logprobs
                .iter()
                .map(|(chosen, top)| json!({
                    "id": chosen.id,
                    "token": chosen.token,
                    "logprob": chosen.logprob,
                    "top_logprobs": top,
                }))
                .collect::<Vec<_>>());
        }
        println!("{out}");
    } else {
        println!();
    }
    Ok(())
}

/// `--json-schema`, `--grammar` or `--regex`.
fn constraint(args: &GenerateArgs) -> Result<Option<Constraint>> {
    let read = |path: &std::path::Path| {
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
    };
    if let Some(path) = &args.json_schema {
        let schema = serde_json::from_str(&read(path)?)
            .with_context(|| format!("{}: not JSON", path.display()))?;
        return Ok(Some(Constraint::JsonSchema(schema)));
    }
    if let Some(path) = &args.grammar {
        return Ok(Some(Constraint::Lark(read(path)?)));
    }
    Ok(args.regex.clone().map(Constraint::Regex))
}
