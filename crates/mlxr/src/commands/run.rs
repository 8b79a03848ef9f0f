//! `mlxr run`: the chat loop, shared by the in-process engine (`-m FILE`)
//! and the daemon (`remote_chat`).

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Result};
use mlxr_engine::{ChatMessage, EngineHandle, Event, GenerateRequest, Prompt, Timings};
use rustyline::error::ReadlineError;

use super::interrupt;
use crate::cli::{RunArgs, SamplingArgs};

/// Something that answers a conversation, streaming the reply.
pub trait Backend {
    /// Writes the reply to `messages` through `on_text` (which returns false
    /// to stop it) and returns the whole reply.
    fn reply(
        &mut self,
        messages: &[ChatMessage],
        on_text: &mut dyn FnMut(&str) -> bool,
    ) -> Result<String>;
}

pub fn run(args: RunArgs) -> Result<()> {
    let (file, prompt) = match (&args.model, &args.name) {
        (Some(file), name) => {
            if args.prompt.is_some() {
                bail!("with -m, give only one PROMPT");
            }
            (Some(file.clone()), name.clone())
        }
        (None, Some(name)) if is_model_path(&PathBuf::from(name)) => {
            (Some(PathBuf::from(name)), args.prompt.clone())
        }
        (None, Some(_)) => return super::remote_chat::run(&args),
        (None, None) => bail!("give a model: `mlxr run NAME` (daemon) or `mlxr run -m FILE`"),
    };
    let file = file.expect("set above");
    if args.tools.is_some() {
        bail!("--tools needs a model served by `mlxr serve` (mlxr run NAME), not a file run in-process");
    }
    if file.is_dir() && mlxr_embed::is_embedding_folder(&file) {
        return embed_locally(&file, prompt.as_deref());
    }
    let started = std::time::Instant::now();
    let engine = super::start_engine(&file, &args.engine)?;
    if args.verbose {
        let load_ms = started.elapsed().as_secs_f64() * 1000.0;
        eprintln!("load duration:        {}", duration(load_ms));
    }
    let backend = Local {
        engine: engine.clone(),
        sampling: &args.sampling,
        verbose: args.verbose,
    };
    let result = chat(backend, args.system.as_deref(), prompt.as_deref());
    engine.shutdown();
    result
}

/// One reply to `prompt`, or an interactive chat when there is none.
pub fn chat(backend: impl Backend, system: Option<&str>, prompt: Option<&str>) -> Result<()> {
    let mut chat = Chat {
        backend,
        messages: system.iter().map(|s| message("system", s)).collect(),
    };
    match prompt {
        Some(prompt) => chat.reply(prompt),
        None => chat.interactive(),
    }
}

struct Chat<B> {
    backend: B,
    messages: Vec<ChatMessage>,
}

impl<B: Backend> Chat<B> {
    fn interactive(&mut self) -> Result<()> {
        // Ctrl-C stops the reply being written, not the program.
        interrupt::install()?;
        let mut editor = rustyline::DefaultEditor::new()?;
        loop {
            match editor.readline(">>> ") {
                Ok(line) => {
                    let line = line.trim();
                    if line.is_empty() {
                        continue;
                    }
                    if line == "/bye" {
                        return Ok(());
                    }
                    if line == "/?" || line == "/help" {
                        eprintln!("Type a message and press Enter. /bye or Ctrl-D leaves; Ctrl-C stops a reply.");
                        continue;
                    }
                    let _ = editor.add_history_entry(line);
                    self.reply(line)?;
                }
                Err(ReadlineError::Interrupted) => {
                    eprintln!("Use Ctrl-D or /bye to exit.");
                }
                Err(ReadlineError::Eof) => return Ok(()),
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Answers `prompt`, streaming the reply, and keeps both in the history.
    fn reply(&mut self, prompt: &str) -> Result<()> {
        self.messages.push(message("user", prompt));
        interrupt::reset();
        let stdout = std::io::stdout();
        let mut on_text = |text: &str| {
            let mut out = stdout.lock();
            let written = out.write_all(text.as_bytes()).and_then(|_| out.flush());
            written.is_ok() && !interrupt::interrupted()
        };
        let text = match self.backend.reply(&self.messages, &mut on_text) {
            Ok(text) => text,
            Err(e) => {
                self.messages.pop();
                return Err(e);
            }
        };
        self.messages.push(message("assistant", &text));
        Ok(())
    }
}

/// The model file run in this process.
struct Local<'a> {
    engine: EngineHandle,
    sampling: &'a SamplingArgs,
    verbose: bool,
}

impl Backend for Local<'_> {
    fn reply(
        &mut self,
        messages: &[ChatMessage],
        on_text: &mut dyn FnMut(&str) -> bool,
    ) -> Result<String> {
        let s = self.sampling;
        let request = GenerateRequest {
            prompt: Prompt::Chat(messages.to_vec()),
            sampling: super::sampling_params(s, None),
            max_tokens: s.max_tokens,
            stop: s.stop.clone(),
            ignore_eos: s.ignore_eos,
            priority: 0,
            max_context: None,
            speculation: Default::default(),
            constraint: None,
            tools: Vec::new(),
        };
        let generation = self.engine.generate(&request, |event| match event {
            Event::Token(t) => on_text(&t.text),
            Event::Done { text, .. } => on_text(text),
            Event::Error(_) => true,
        })?;
        println!();
        if self.verbose {
            print_timings(&generation.timings);
        }
        Ok(generation.text)
    }
}

fn message(role: &str, content: &str) -> ChatMessage {
    ChatMessage::new(role, content)
}

fn print_timings(t: &Timings) {
    eprintln!("prompt eval count:    {} token(s)", t.prompt_n);
    eprintln!("prompt eval duration: {}", duration(t.prompt_ms));
    eprintln!(
        "prompt eval rate:     {:.2} tokens/s",
        t.prompt_tokens_per_second()
    );
    eprintln!("eval count:           {} token(s)", t.predicted_n);
    eprintln!("eval duration:        {}", duration(t.predicted_ms));
    eprintln!(
        "eval rate:            {:.2} tokens/s",
        t.predicted_tokens_per_second()
    );
    if t.draft_n > 0 {
        eprintln!(
            "draft acceptance:     {} of {} draft token(s) ({:.0}%)",
            t.draft_n_accepted,
            t.draft_n,
            100.0 * t.draft_n_accepted as f64 / t.draft_n as f64
        );
    }
}

pub fn duration(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{:.3}s", ms / 1000.0)
    } else {
        format!("{ms:.3}ms")
    }
}

/// A GGUF file, or a folder with a `config.json` (Hugging Face or MLX).
fn is_model_path(path: &std::path::Path) -> bool {
    path.is_file() || path.join("config.json").is_file()
}

/// `mlxr run` on an embedding model prints the text's vector as JSON.
fn embed_locally(dir: &std::path::Path, text: Option<&str>) -> Result<()> {
    let text = text.ok_or_else(|| {
        anyhow::anyhow!(
            "{} is an embedding model: give the TEXT to embed",
            dir.display()
        )
    })?;
    let model = mlxr_embed::EmbeddingModel::load(dir)?;
    let out = model.embed(&[text], true)?;
    println!("{}", serde_json::json!(out.vectors[0]));
    Ok(())
}
