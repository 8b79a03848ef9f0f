//! The daemon the app talks to: one already answering on the socket, or
//! `mlxr serve --socket PATH --no-tcp` started as the app's child (stopped
//! again on Stop and on Quit, and killed by the kernel should the app die).

use std::fs::OpenOptions;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::status::{self, Health};

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("cannot start {bin}: {source}")]
    Spawn { bin: String, source: std::io::Error },
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("mlxr serve exited ({status}) before it answered; its log: {log}")]
    Exited { status: String, log: PathBuf },
    #[error("the daemon on {0} was not started by this app: stop it where it was started (e.g. systemctl --user stop mlxr)")]
    NotOurs(PathBuf),
}

/// `mlxr serve`'s arguments for a daemon on `socket` only (also used by the
/// login service).
pub fn serve_args(socket: &Path) -> Vec<String> {
    vec![
        "serve".into(),
        "--socket".into(),
        socket.display().to_string(),
        "--no-tcp".into(),
    ]
}

pub struct Daemon {
    socket: PathBuf,
    bin: PathBuf,
    /// Where a started daemon's output goes.
    log: PathBuf,
    child: Option<Child>,
}

/// Whether a daemon answers on `socket` (also while it loads a model).
pub fn answers(socket: &Path) -> bool {
    status::health(socket, Duration::from_secs(2)) != Health::Down
}

impl Daemon {
    pub fn new(socket: PathBuf, bin: PathBuf, log: PathBuf) -> Self {
        Daemon {
            socket,
            bin,
            log,
            child: None,
        }
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Whether the app started the daemon and it still runs.
    pub fn child_running(&mut self) -> bool {
        match &mut self.child {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Connects to a daemon on the socket, or starts one. Returns at once;
    /// [`Daemon::wait_ready`] waits for it to answer.
    pub fn start(&mut self) -> Result<(), DaemonError> {
        if self.child_running() || answers(&self.socket) {
            return Ok(());
        }
        if let Some(dir) = self.socket.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|source| DaemonError::Io {
                    what: "creating",
                    path: dir.to_path_buf(),
                    source,
                })?;
        }
        if let Some(dir) = self.log.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|source| DaemonError::Io {
                what: "opening",
                path: self.log.clone(),
                source,
            })?;
        let _ = std::fs::set_permissions(&self.log, std::fs::Permissions::from_mode(0o600));
        let err = log.try_clone().map_err(|source| DaemonError::Io {
            what: "opening",
            path: self.log.clone(),
            source,
        })?;
        let mut cmd = Command::new(&self.bin);
        cmd.args(serve_args(&self.socket))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err);
        // The daemon goes when the app goes, even if the app is killed.
        #[cfg(target_os = "linux")]
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|source| DaemonError::Spawn {
            bin: self.bin.display().to_string(),
            source,
        })?;
        self.child = Some(child);
        Ok(())
    }

    /// Waits until the daemon answers (or the child exits).
    pub fn wait_ready(&mut self, timeout: Duration) -> Result<bool, DaemonError> {
        let end = Instant::now() + timeout;
        while Instant::now() < end {
            if answers(&self.socket) {
                return Ok(true);
            }
            if let Some(c) = &mut self.child {
                if let Ok(Some(status)) = c.try_wait() {
                    self.child = None;
                    return Err(DaemonError::Exited {
                        status: status.to_string(),
                        log: self.log.clone(),
                    });
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(false)
    }

    /// Stops the daemon the app started: SIGTERM (streams end cleanly),
    /// SIGKILL after 20 s.
    pub fn stop(&mut self) -> Result<(), DaemonError> {
        let Some(mut child) = self.child.take() else {
            return if answers(&self.socket) {
                Err(DaemonError::NotOurs(self.socket.clone()))
            } else {
                Ok(())
            };
        };
        if let Ok(None) = child.try_wait() {
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            let end = Instant::now() + Duration::from_secs(20);
            while Instant::now() < end {
                if let Ok(Some(_)) = child.try_wait() {
                    return Ok(());
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
        }
        let _ = child.wait();
        Ok(())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake `mlxr` that sleeps: the daemon's lifecycle without a model.
    fn fake_bin(dir: &Path, script: &str) -> PathBuf {
        let bin = dir.join("mlxr");
        std::fs::write(&bin, format!("#!/bin/sh\n{script}\n")).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        bin
    }

    #[test]
    fn starts_a_child_and_stop_leaves_no_process() {
        let dir = crate::test_server::temp_dir("daemon");
        let bin = fake_bin(&dir, "echo \"$@\"; exec sleep 60");
        let socket = dir.join("run/mlxr.sock");
        let mut d = Daemon::new(socket.clone(), bin, dir.join("serve.log"));
        d.start().unwrap();
        let pid = d.child.as_ref().unwrap().id() as libc::pid_t;
        assert!(d.child_running());
        // The socket's directory is private.
        let mode = std::fs::metadata(dir.join("run"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        // Nothing answers: not ready, but still running.
        assert!(!d.wait_ready(Duration::from_millis(300)).unwrap());
        d.stop().unwrap();
        assert!(!d.child_running());
        assert_eq!(unsafe { libc::kill(pid, 0) }, -1, "the child is gone");
        let log = std::fs::read_to_string(dir.join("serve.log")).unwrap();
        assert_eq!(
            log.trim(),
            format!("serve --socket {} --no-tcp", socket.display())
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_child_that_exits_is_an_error_naming_the_log() {
        let dir = crate::test_server::temp_dir("daemon-exit");
        let bin = fake_bin(&dir, "echo boom >&2; exit 3");
        let mut d = Daemon::new(dir.join("mlxr.sock"), bin, dir.join("serve.log"));
        d.start().unwrap();
        let err = d.wait_ready(Duration::from_secs(10)).unwrap_err();
        assert!(matches!(err, DaemonError::Exited { .. }), "{err}");
        assert!(err.to_string().contains("serve.log"), "{err}");
        assert_eq!(
            std::fs::read_to_string(dir.join("serve.log")).unwrap(),
            "boom\n"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
