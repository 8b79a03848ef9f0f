//! `mlxr-desktop`: MLXR's desktop app — the web UI in a window and a tray
//! icon, with a daemon on the user's Unix socket (see README.md).

mod app;
mod autostart;
mod bridge;
mod daemon;
mod icons;
mod notify;
mod paths;
mod protocol;
mod status;
mod test_hook;
#[cfg(test)]
mod test_server;
mod tray;
mod uds_http;

use anyhow::Result;

const USAGE: &str = "\
Usage: mlxr-desktop [--print-paths | --version | --help]

MLXR's desktop app: the web UI in a window and a tray icon. It connects to
the daemon on its Unix socket, or starts `mlxr serve --socket PATH --no-tcp`.

Environment:
  MLXR_SOCKET  the daemon's socket (default: $MLXR_HOME/mlxr.sock when
               MLXR_HOME is set, else $XDG_RUNTIME_DIR/mlxr/mlxr.sock)
  MLXR_HOME    MLXR's home (default ~/.mlxr)
  MLXR_BIN     the mlxr binary (default: beside mlxr-desktop, else on PATH)
";

fn main() -> Result<()> {
    let settings = app::Settings::from_env()?;
    match std::env::args().nth(1).as_deref() {
        None => app::run(settings),
        Some("--print-paths") => {
            println!("socket {}", settings.socket.display());
            println!("daemon {}", app::serve_command(&settings));
            Ok(())
        }
        Some("--version") => {
            println!("mlxr-desktop {}", env!("CARGO_PKG_VERSION"));
            Ok(())
        }
        Some("--help" | "-h") => {
            print!("{USAGE}");
            Ok(())
        }
        Some(other) => anyhow::bail!("unknown argument {other}\n{USAGE}"),
    }
}
