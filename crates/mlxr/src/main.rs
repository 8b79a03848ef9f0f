//! `mlxr`: run local LLMs. Every command is a thin front over the library crates.

mod cli;
mod commands;
mod modelfile;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    if !matches!(cli.command, cli::Command::Serve(_)) {
        exit_quietly_on_closed_pipe();
    }
    match commands::dispatch(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {}", one_line(&err));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes on one line, leaving out causes whose text an
/// outer message already includes (library errors often quote their source).
fn one_line(err: &anyhow::Error) -> String {
    let mut line = err.to_string();
    for cause in err.chain().skip(1) {
        let text = cause.to_string();
        if !line.contains(&text) {
            line = format!("{line}: {text}");
        }
    }
    line
}

/// `mlxr generate ... | head` ends like other Unix tools when the reader
/// goes away, instead of panicking in `println!`. Not for `serve`, whose
/// sockets must see EPIPE as an error rather than a signal.
fn exit_quietly_on_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: restoring the default action of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
