//! Where things are: the daemon's socket, the `mlxr` binary, MLXR's home.

use std::path::{Path, PathBuf};

/// Looks a variable up; tests pass their own.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// MLXR's home as `mlxr serve` picks it: `MLXR_HOME`, else `~/.mlxr`.
pub fn home(env: Env) -> Option<PathBuf> {
    env("MLXR_HOME")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| Path::new(&h).join(".mlxr")))
}

/// The daemon's socket: `MLXR_SOCKET`; else `$MLXR_HOME/mlxr.sock` when
/// `MLXR_HOME` is set (one daemon per home); else
/// `$XDG_RUNTIME_DIR/mlxr/mlxr.sock`; else `~/.mlxr/mlxr.sock`.
pub fn socket(env: Env) -> Option<PathBuf> {
    if let Some(s) = env("MLXR_SOCKET") {
        return Some(PathBuf::from(s));
    }
    if let Some(h) = env("MLXR_HOME") {
        return Some(Path::new(&h).join("mlxr.sock"));
    }
    if let Some(run) = env("XDG_RUNTIME_DIR") {
        return Some(Path::new(&run).join("mlxr").join("mlxr.sock"));
    }
    home(env).map(|h| h.join("mlxr.sock"))
}

/// The `mlxr` binary: `MLXR_BIN`; else `mlxr` beside this program (the
/// .deb installs both in /usr/bin); else `mlxr` on the `PATH`.
pub fn mlxr_bin(env: Env, own_exe: Option<&Path>) -> PathBuf {
    if let Some(bin) = env("MLXR_BIN") {
        return PathBuf::from(bin);
    }
    if let Some(beside) = own_exe.and_then(Path::parent).map(|d| d.join("mlxr")) {
        if beside.is_file() {
            return beside;
        }
    }
    PathBuf::from("mlxr")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn the_socket_follows_the_documented_order() {
        let all = env_of(&[
            ("MLXR_SOCKET", "/s.sock"),
            ("MLXR_HOME", "/h"),
            ("XDG_RUNTIME_DIR", "/run/user/1"),
            ("HOME", "/home/u"),
        ]);
        assert_eq!(socket(&all), Some("/s.sock".into()));
        let home = env_of(&[("MLXR_HOME", "/h"), ("XDG_RUNTIME_DIR", "/run/user/1")]);
        assert_eq!(socket(&home), Some("/h/mlxr.sock".into()));
        let run = env_of(&[("XDG_RUNTIME_DIR", "/run/user/1"), ("HOME", "/home/u")]);
        assert_eq!(socket(&run), Some("/run/user/1/mlxr/mlxr.sock".into()));
        let bare = env_of(&[("HOME", "/home/u")]);
        assert_eq!(socket(&bare), Some("/home/u/.mlxr/mlxr.sock".into()));
        assert_eq!(socket(&env_of(&[])), None);
    }

    #[test]
    fn the_binary_comes_from_mlxr_bin_then_beside_then_path() {
        let env = env_of(&[("MLXR_BIN", "/opt/mlxr")]);
        assert_eq!(mlxr_bin(&env, None), PathBuf::from("/opt/mlxr"));
        let dir = crate::test_server::temp_dir("bin");
        std::fs::write(dir.join("mlxr"), "").unwrap();
        let own = dir.join("mlxr-desktop");
        assert_eq!(mlxr_bin(&env_of(&[]), Some(&own)), dir.join("mlxr"));
        let elsewhere = Path::new("/nonexistent/mlxr-desktop");
        assert_eq!(
            mlxr_bin(&env_of(&[]), Some(elsewhere)),
            PathBuf::from("mlxr")
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
