use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};
use mlxr_engine::{ChatMessage, EngineHandle, Event, GenerateRequest, Prompt, Timings};
use rustyline::error::ReadlineError;

use crate::cli::RunArgs;

pub fn run(args: RunArgs) -> Result<()> {
    let started = std::time::Instant::now();
    let engine = super::start_engine(&args.model)?;
    let load_ms = started.elapsed().as_secs_f64() * 1000.0;
    let mut chat = Chat {
        engine,
        messages: args.system.iter().map(|s| message("system", s)).collect(),
        args: &args,
        interrupted: Arc::new(AtomicBool::new(false)),
    };
    if args.verbose {
        eprintln!("load duration:        {}", duration(load_ms));
    }
    match &args.prompt {
        Some(prompt) => chat.reply(prompt),
        None => chat.interactive(),
    }
}

struct Chat<'a> {
    engine: EngineHandle,
    messages: Vec<ChatMessage>,
    args: &'a RunArgs,
    /// Set by Ctrl-C: stops the reply being written, not the program.
    interrupted: Arc<AtomicBool>,
}

impl Chat<'_> {
    fn interactive(&mut self) -> Result<()> {
        let flag = self.interrupted.clone();
        ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst))
            .context("installing the Ctrl-C handler")?;
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
        let s = &self.args.sampling;
        let request = GenerateRequest {
            prompt: Prompt::Chat(self.messages.clone()),
            sampling: super::sampling_params(s, None),
            max_tokens: s.max_tokens,
            stop: s.stop.clone(),
            ignore_eos: s.ignore_eos,
            priority: 0,
        };
        self.interrupted.store(false, Ordering::SeqCst);
        let interrupted = self.interrupted.clone();
        let stdout = std::io::stdout();
        let result = self.engine.generate(&request, |event| {
            let text = match event {
                Event::Token(t) => &t.text,
                Event::Done { text, .. } => text,
                Event::Error(_) => return true,
            };
            let mut out = stdout.lock();
            let written = out.write_all(text.as_bytes()).and_then(|_| out.flush());
            written.is_ok() && !interrupted.load(Ordering::SeqCst)
        });
        let generation = match result {
            Ok(g) => g,
            Err(e) => {
                self.messages.pop();
                return Err(e.into());
            }
        };
        println!();
        self.messages.push(message("assistant", &generation.text));
        if self.args.verbose {
            print_timings(&generation.timings);
        }
        Ok(())
    }
}

fn message(role: &str, content: &str) -> ChatMessage {
    ChatMessage {
        role: role.into(),
        content: content.into(),
    }
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
}

fn duration(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{:.3}s", ms / 1000.0)
    } else {
        format!("{ms:.3}ms")
    }
}
