//! `mlxr`: run local LLMs. Every command is a thin front over the library crates.

mod cli;
mod commands;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    keep_large_buffers_in_the_heap();
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

/// A forward pass allocates and frees activation buffers of a few MiB per
/// op. glibc serves blocks that large with fresh `mmap`s, so every op paid
/// for page faults and zeroing again (about 7% of a 512-token prefill);
/// from the heap they are reused. Freed memory above 256 MiB still goes
/// back to the system.
///
/// That threshold holds per malloc arena, and glibc gives threads up to
/// eight arenas per core: under `serve`'s many threads RSS grew 9% over a
/// two-minute load test (921 -> 1,005 MiB, still climbing) and stayed flat
/// with two arenas (646 MiB, +0.01%; tests/api/test_load.py). So two,
/// unless `MALLOC_ARENA_MAX` says otherwise.
fn keep_large_buffers_in_the_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only tunes the allocator; called before any thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 64 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
        if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
            libc::mallopt(libc::M_ARENA_MAX, 2);
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
