//! Content-addressed blob files: `blobs/sha256-<hex>`.
//!
//! A blob is always written to a temporary file in the same directory, hashed
//! while it is written, fsynced, and only then renamed to its final name, so a
//! crash or a killed pull never leaves a half-written blob under a digest
//! name. Temporary files (`tmp-*`) left by a crash are removed when the
//! registry opens; `*-partial` files are kept because downloads resume from
//! them, and only one download at a time writes each of them.

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use sha2::{Digest as _, Sha256};

use crate::digest::Digest;
use crate::error::{RegistryError, Result};
use crate::pull::Reporter;

/// Read buffer size for copies.
const CHUNK: usize = 256 * 1024;
/// Prefix of temporary blob files.
const TMP_PREFIX: &str = "tmp-";

/// How often a download waiting for another one checks for cancellation.
const CANCEL_POLL: Duration = Duration::from_millis(100);

/// The blob directory.
pub(crate) struct BlobStore {
    dir: PathBuf,
    next_tmp: AtomicU64,
    /// Keys of the partial files a download is writing now.
    downloading: Mutex<HashSet<String>>,
    download_ended: Condvar,
}

impl BlobStore {
    /// Creates `dir` if needed and removes stale temporary files.
    pub(crate) fn open(dir: PathBuf) -> Result<BlobStore> {
        fs::create_dir_all(&dir).map_err(|e| RegistryError::io_at("creating", &dir, e))?;
        let entries = fs::read_dir(&dir).map_err(|e| RegistryError::io_at("reading", &dir, e))?;
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with(TMP_PREFIX) {
                let _ = fs::remove_file(entry.path());
            }
        }
        Ok(BlobStore {
            dir,
            next_tmp: AtomicU64::new(0),
            downloading: Mutex::new(HashSet::new()),
            download_ended: Condvar::new(),
        })
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the blob with this digest lives (whether or not it exists).
    pub(crate) fn path(&self, digest: &Digest) -> PathBuf {
        self.dir.join(digest.file_name())
    }

    /// Whether the blob exists as a regular file.
    pub(crate) fn exists(&self, digest: &Digest) -> bool {
        self.path(digest).is_file()
    }

    /// A resumable download's partial file, keyed by a hex string (the
    /// expected digest, or a hash of the URL).
    pub(crate) fn partial_path(&self, key_hex: &str) -> PathBuf {
        self.dir.join(format!("sha256-{key_hex}-partial"))
    }

    /// Claims the partial file of `key` for one download. While another
    /// download holds it, reports `waiting` once, then waits (checking for
    /// cancellation every [`CANCEL_POLL`]) until it is released.
    pub(crate) fn claim_partial(
        &self,
        key: &str,
        r: &mut Reporter<'_>,
        waiting: &str,
    ) -> Result<PartialClaim<'_>> {
        let lock = || {
            self.downloading
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
        };
        if lock().contains(key) {
            r.status(waiting)?;
        }
        let mut busy = lock();
        while busy.contains(key) {
            r.check_cancel()?;
            busy = self
                .download_ended
                .wait_timeout(busy, CANCEL_POLL)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        busy.insert(key.to_string());
        Ok(PartialClaim {
            store: self,
            key: key.to_string(),
        })
    }

    /// A new, empty temporary blob file.
    pub(crate) fn temp(&self) -> Result<TempBlob> {
        let n = self.next_tmp.fetch_add(1, Ordering::Relaxed);
        let path = self
            .dir
            .join(format!("{TMP_PREFIX}{}-{n}", std::process::id()));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| RegistryError::io_at("creating", &path, e))?;
        Ok(TempBlob {
            path,
            file: Some(file),
            hasher: Sha256::new(),
            len: 0,
        })
    }

    /// Moves a finished, fsynced file to its final blob name.
    ///
    /// Either way the blob's modification time becomes now, so that
    /// `Registry::prune_unreferenced_blobs` in another process leaves it for
    /// the model about to reference it (an old orphan with the same content,
    /// or a resumed download whose partial file was already complete, would
    /// otherwise keep an old time).
    pub(crate) fn install(&self, from: &Path, digest: &Digest) -> Result<()> {
        let to = self.path(digest);
        if to.is_file() {
            // Same content already stored: keep the existing file.
            let _ = fs::remove_file(from);
            touch(&to);
            return Ok(());
        }
        touch(from);
        fs::rename(from, &to).map_err(|e| RegistryError::io_at("renaming blob to", &to, e))?;
        sync_dir(&self.dir);
        Ok(())
    }

    /// Bytes available to this process on the blobs' file system (`None`
    /// where it cannot be read).
    pub(crate) fn available_space(&self) -> Option<u64> {
        available_space(&self.dir)
    }

    /// Removes a blob file (missing is fine).
    pub(crate) fn remove(&self, digest: &Digest) -> Result<()> {
        let path = self.path(digest);
        match fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                Err(RegistryError::io_at("removing", &path, e))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(unix)]
fn available_space(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `path` is a NUL-terminated string and `stat` is a valid out
    // pointer; statvfs only writes to it and returns 0 on success.
    let rc = unsafe { libc::statvfs(path.as_ptr(), stat.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: statvfs returned 0, so it filled the struct.
    let stat = unsafe { stat.assume_init() };
    // The field types differ between platforms (u32 on some, u64 here).
    #[allow(clippy::unnecessary_cast)]
    Some((stat.f_bavail as u64).saturating_mul(stat.f_frsize as u64))
}

#[cfg(not(unix))]
fn available_space(_dir: &Path) -> Option<u64> {
    None
}

/// The right to write one partial file; released on drop.
pub(crate) struct PartialClaim<'a> {
    store: &'a BlobStore,
    key: String,
}

impl Drop for PartialClaim<'_> {
    fn drop(&mut self) {
        self.store
            .downloading
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.key);
        self.store.download_ended.notify_all();
    }
}

/// Best-effort: sets the file's modification time to now.
fn touch(path: &Path) {
    if let Ok(f) = File::open(path) {
        let _ = f.set_modified(SystemTime::now());
    }
}

/// Best-effort fsync of a directory so a rename survives a crash.
pub(crate) fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// A temporary blob file being written and hashed. Dropping it without
/// [`TempBlob::finish`] deletes the file.
pub(crate) struct TempBlob {
    path: PathBuf,
    file: Option<File>,
    hasher: Sha256,
    len: u64,
}

impl TempBlob {
    /// Appends bytes.
    pub(crate) fn write_all(&mut self, buf: &[u8]) -> Result<()> {
        let file = self.file.as_mut().expect("temp blob already finished");
        file.write_all(buf)
            .map_err(|e| RegistryError::io_at("writing", &self.path, e))?;
        self.hasher.update(buf);
        self.len += buf.len() as u64;
        Ok(())
    }

    /// Bytes written so far.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Copies all of `reader` in, calling `on_progress` with the running total.
    pub(crate) fn copy_from(
        &mut self,
        reader: &mut dyn Read,
        on_progress: &mut dyn FnMut(u64) -> Result<()>,
    ) -> Result<u64> {
        let path = self.path.clone();
        copy_chunks(reader, &mut |chunk| self.write_all(chunk), on_progress)
            .map_err(|e| with_read_context(e, &path))
    }

    /// Like [`TempBlob::copy_from`], but stops with
    /// [`RegistryError::BlobTooLarge`] as soon as the input passes `max_len`
    /// bytes (nothing past the limit is written; dropping `self` then
    /// deletes the file).
    pub(crate) fn copy_from_capped(&mut self, reader: &mut dyn Read, max_len: u64) -> Result<u64> {
        let path = self.path.clone();
        copy_chunks(
            reader,
            &mut |chunk| {
                if self.len.saturating_add(chunk.len() as u64) > max_len {
                    return Err(RegistryError::BlobTooLarge { limit: max_len });
                }
                self.write_all(chunk)
            },
            &mut |_| Ok(()),
        )
        .map_err(|e| with_read_context(e, &path))
    }

    /// Fsyncs, checks the digest and moves the file to its blob name. On a
    /// mismatch the file is deleted and nothing is kept.
    pub(crate) fn finish(mut self, store: &BlobStore, expected: Option<&Digest>) -> Result<Digest> {
        let file = self.file.take().expect("temp blob already finished");
        file.sync_all()
            .map_err(|e| RegistryError::io_at("syncing", &self.path, e))?;
        drop(file);
        let hasher = std::mem::take(&mut self.hasher);
        let actual = Digest::from_hasher(hasher);
        if let Some(expected) = expected {
            if *expected != actual {
                return Err(RegistryError::DigestMismatch {
                    expected: expected.clone(),
                    actual,
                });
            }
        }
        store.install(&self.path, &actual)?;
        Ok(actual)
    }
}

impl Drop for TempBlob {
    fn drop(&mut self) {
        self.file.take();
        let _ = fs::remove_file(&self.path);
    }
}

fn with_read_context(e: RegistryError, path: &Path) -> RegistryError {
    match e {
        RegistryError::Io { context, source } if context.is_empty() => RegistryError::Io {
            context: format!("reading the source for {}", path.display()),
            source,
        },
        e => e,
    }
}

/// Reads `reader` to the end in chunks, handing each chunk to `sink` and the
/// running byte count to `on_progress` (at most about every 1 MiB, and once
/// at the end). Read errors carry an empty context for the caller to fill.
pub(crate) fn copy_chunks(
    reader: &mut dyn Read,
    sink: &mut dyn FnMut(&[u8]) -> Result<()>,
    on_progress: &mut dyn FnMut(u64) -> Result<()>,
) -> Result<u64> {
    const REPORT_EVERY: u64 = 1 << 20;
    let mut buf = vec![0u8; CHUNK];
    let mut total = 0u64;
    let mut reported = 0u64;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(RegistryError::io(String::new(), e)),
        };
        sink(&buf[..n])?;
        total += n as u64;
        if total - reported >= REPORT_EVERY {
            reported = total;
            on_progress(total)?;
        }
    }
    if reported != total || total == 0 {
        on_progress(total)?;
    }
    Ok(total)
}
