//! "Launch at login": the daemon as a systemd user service on Linux
//! (`~/.config/systemd/user/mlxr.service`, enabled by its link in
//! `default.target.wants`, as `systemctl --user enable` makes it) or a
//! launchd agent on macOS (`~/Library/LaunchAgents/org.mlxr.serve.plist`,
//! loaded at login by launchd). Both files come from one [`Service`]; the
//! macOS one is generated and unit-tested here but was never run on a Mac.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum AutostartError {
    #[error("HOME is not set")]
    NoHome,
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What runs at login: `program args…` with `env`.
#[derive(Debug, Clone, PartialEq)]
pub struct Service {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

impl Service {
    /// `mlxr serve` on `socket` only, with MLXR's home if one is set.
    pub fn daemon(mlxr: &Path, socket: &Path, home: Option<&Path>) -> Self {
        Service {
            program: mlxr.to_path_buf(),
            args: crate::daemon::serve_args(socket),
            env: home
                .map(|h| vec![("MLXR_HOME".to_string(), h.display().to_string())])
                .unwrap_or_default(),
        }
    }
}

/// A systemd user unit.
pub fn systemd_unit(s: &Service) -> String {
    let mut exec = vec![systemd_quote(&s.program.display().to_string())];
    exec.extend(s.args.iter().map(|a| systemd_quote(a)));
    let env: String = s
        .env
        .iter()
        .map(|(k, v)| format!("Environment={}\n", systemd_quote(&format!("{k}={v}"))))
        .collect();
    format!(
        "# Written by mlxr-desktop (Launch at login); removed when that is turned off.\n\
         [Unit]\n\
         Description=MLXR inference daemon\n\
         \n\
         [Service]\n\
         ExecStart={}\n\
         {env}\
         Restart=on-failure\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n",
        exec.join(" ")
    )
}

fn systemd_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-:=+,@".contains(c))
    {
        return s.replace('%', "%%");
    }
    let escaped = s
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('%', "%%");
    format!("\"{escaped}\"")
}

pub const LAUNCHD_LABEL: &str = "org.mlxr.serve";

/// A launchd agent property list.
pub fn launchd_plist(s: &Service) -> String {
    let mut argv = format!(
        "    <string>{}</string>\n",
        xml(&s.program.display().to_string())
    );
    for a in &s.args {
        argv += &format!("    <string>{}</string>\n", xml(a));
    }
    let env = if s.env.is_empty() {
        String::new()
    } else {
        let pairs: String = s
            .env
            .iter()
            .map(|(k, v)| {
                format!(
                    "    <key>{}</key>\n    <string>{}</string>\n",
                    xml(k),
                    xml(v)
                )
            })
            .collect();
        format!("  <key>EnvironmentVariables</key>\n  <dict>\n{pairs}  </dict>\n")
    };
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n\
         <plist version=\"1.0\">\n\
         <dict>\n\
         \x20 <key>Label</key>\n\
         \x20 <string>{LAUNCHD_LABEL}</string>\n\
         \x20 <key>ProgramArguments</key>\n\
         \x20 <array>\n{argv}  </array>\n\
         {env}\
         \x20 <key>RunAtLoad</key>\n\
         \x20 <true/>\n\
         </dict>\n\
         </plist>\n"
    )
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The files that make the service start at login, under the user's
/// `home`: `(file, contents)` and, for systemd, the enabling link.
pub struct Files {
    pub file: PathBuf,
    pub contents: String,
    pub link: Option<PathBuf>,
}

/// The files for this platform (macOS: the launchd agent; elsewhere the
/// systemd unit).
pub fn files(service: &Service, user_home: &Path, macos: bool) -> Files {
    if macos {
        Files {
            file: user_home
                .join("Library/LaunchAgents")
                .join(format!("{LAUNCHD_LABEL}.plist")),
            contents: launchd_plist(service),
            link: None,
        }
    } else {
        let dir = user_home.join(".config/systemd/user");
        Files {
            file: dir.join("mlxr.service"),
            contents: systemd_unit(service),
            link: Some(dir.join("default.target.wants/mlxr.service")),
        }
    }
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> AutostartError {
    let path = path.to_path_buf();
    move |source| AutostartError::Io { what, path, source }
}

impl Files {
    pub fn for_user(service: &Service) -> Result<Files, AutostartError> {
        let home = std::env::var_os("HOME").ok_or(AutostartError::NoHome)?;
        Ok(files(service, Path::new(&home), cfg!(target_os = "macos")))
    }

    pub fn is_enabled(&self) -> bool {
        self.file.is_file() && self.link.as_ref().is_none_or(|l| l.exists())
    }

    pub fn enable(&self) -> Result<(), AutostartError> {
        let dir = self.file.parent().expect("the file is in a directory");
        std::fs::create_dir_all(dir).map_err(io("creating", dir))?;
        std::fs::write(&self.file, &self.contents).map_err(io("writing", &self.file))?;
        if let Some(link) = &self.link {
            let wants = link.parent().expect("the link is in a directory");
            std::fs::create_dir_all(wants).map_err(io("creating", wants))?;
            let _ = std::fs::remove_file(link);
            std::os::unix::fs::symlink(&self.file, link).map_err(io("linking", link))?;
        }
        reload();
        Ok(())
    }

    pub fn disable(&self) -> Result<(), AutostartError> {
        for path in self.link.iter().chain([&self.file]) {
            match std::fs::remove_file(path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(io("removing", path)(e))
                }
                _ => {}
            }
        }
        reload();
        Ok(())
    }
}

/// Tells a running systemd user manager that the unit files changed (there
/// may be none, e.g. in a container: the files take effect at next login).
fn reload() {
    if cfg!(target_os = "linux") {
        let _ = std::process::Command::new("systemctl")
            .args(["--user", "daemon-reload"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service() -> Service {
        Service::daemon(
            Path::new("/usr/bin/mlxr"),
            Path::new("/run/user/1000/mlxr/mlxr.sock"),
            Some(Path::new("/home/u/my models & more")),
        )
    }

    #[test]
    fn the_systemd_unit_runs_the_socket_only_daemon() {
        let unit = systemd_unit(&service());
        assert!(
            unit.contains(
                "\nExecStart=/usr/bin/mlxr serve --socket /run/user/1000/mlxr/mlxr.sock --no-tcp\n"
            ),
            "{unit}"
        );
        assert!(
            unit.contains("\nEnvironment=\"MLXR_HOME=/home/u/my models & more\"\n"),
            "{unit}"
        );
        assert!(
            unit.contains("\n[Install]\nWantedBy=default.target\n"),
            "{unit}"
        );
        assert_eq!(systemd_quote("50%"), "\"50%%\"");
    }

    #[test]
    fn the_launchd_plist_has_the_same_command() {
        let plist = launchd_plist(&service());
        let argv = "  <key>ProgramArguments</key>\n  <array>\n    <string>/usr/bin/mlxr</string>\n    \
                    <string>serve</string>\n    <string>--socket</string>\n    \
                    <string>/run/user/1000/mlxr/mlxr.sock</string>\n    <string>--no-tcp</string>\n  </array>\n";
        assert!(plist.contains(argv), "{plist}");
        assert!(plist
            .contains("<key>MLXR_HOME</key>\n    <string>/home/u/my models &amp; more</string>"));
        assert!(plist.contains("<key>Label</key>\n  <string>org.mlxr.serve</string>"));
        assert!(plist.contains("<key>RunAtLoad</key>\n  <true/>"));
        // Well-formed enough for a strict reader: every tag closes.
        for tag in ["plist", "dict", "array"] {
            assert_eq!(
                plist.matches(&format!("<{tag}")).count(),
                plist.matches(&format!("</{tag}>")).count(),
                "{tag}"
            );
        }
    }

    #[test]
    fn enable_and_disable_write_and_remove_the_unit_and_its_link() {
        let home = crate::test_server::temp_dir("autostart");
        let f = files(&service(), &home, false);
        assert_eq!(f.file, home.join(".config/systemd/user/mlxr.service"));
        assert!(!f.is_enabled());
        f.enable().unwrap();
        assert!(f.is_enabled());
        assert_eq!(std::fs::read_to_string(&f.file).unwrap(), f.contents);
        let link = f.link.as_ref().unwrap();
        assert_eq!(std::fs::read_link(link).unwrap(), f.file);
        f.enable().unwrap(); // again: no error
        f.disable().unwrap();
        assert!(!f.is_enabled() && !f.file.exists() && !link.exists());
        f.disable().unwrap();
        let mac = files(&service(), &home, true);
        assert_eq!(
            mac.file,
            home.join("Library/LaunchAgents/org.mlxr.serve.plist")
        );
        mac.enable().unwrap();
        assert!(mac.is_enabled());
        assert!(std::fs::read_to_string(&mac.file)
            .unwrap()
            .starts_with("<?xml"));
        std::fs::remove_dir_all(home).unwrap();
    }
}
