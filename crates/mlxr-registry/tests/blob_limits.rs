//! Uploads under a size cap: cut off as soon as they pass it, and whatever
//! goes wrong (too large, interrupted, wrong digest) nothing is left in the
//! blobs folder.

mod common;

use std::io::{self, Read};

use common::{files_in, tiny_gguf};
use mlxr_registry::{Digest, Registry, RegistryError, BLOB_SPACE_MARGIN};

/// An endless body (a chunked upload without a length) that counts what
/// was read from it.
struct Endless {
    read: u64,
}

impl Read for Endless {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        buf.fill(3);
        self.read += buf.len() as u64;
        Ok(buf.len())
    }
}

/// `left` bytes, then a reset connection.
struct Interrupted {
    left: usize,
}

impl Read for Interrupted {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            return Err(io::Error::new(io::ErrorKind::ConnectionReset, "gone"));
        }
        let n = buf.len().min(self.left);
        buf[..n].fill(5);
        self.left -= n;
        Ok(n)
    }
}

#[test]
fn an_upload_past_the_cap_is_cut_off_and_leaves_nothing() {
    let home = tempfile::tempdir().unwrap();
    let reg = Registry::open(home.path()).unwrap();
    let cap = 1 << 20;
    let mut body = Endless { read: 0 };
    let err = reg
        .put_blob_capped(&mut body, Some(&Digest::of_bytes(b"x")), cap)
        .unwrap_err();
    assert!(
        matches!(err, RegistryError::BlobTooLarge { limit } if limit == cap),
        "{err}"
    );
    assert!(err.to_string().contains("--max-blob-size"), "{err}");
    // Reading stops within one read buffer past the cap.
    assert!(body.read <= cap + (1 << 20), "read {} bytes", body.read);
    assert!(files_in(&home.path().join("blobs")).is_empty());
}

#[test]
fn an_upload_of_exactly_the_cap_is_kept() {
    let home = tempfile::tempdir().unwrap();
    let reg = Registry::open(home.path()).unwrap();
    let bytes = tiny_gguf(1);
    let digest = Digest::of_bytes(&bytes);
    let stored = reg
        .put_blob_capped(&mut bytes.as_slice(), Some(&digest), bytes.len() as u64)
        .unwrap();
    assert_eq!(stored, digest);
    assert_eq!(
        files_in(&home.path().join("blobs")),
        vec![digest.file_name()]
    );

    let err = reg
        .put_blob_capped(&mut tiny_gguf(2).as_slice(), None, bytes.len() as u64 - 1)
        .unwrap_err();
    assert!(matches!(err, RegistryError::BlobTooLarge { .. }), "{err}");
    assert_eq!(
        files_in(&home.path().join("blobs")),
        vec![digest.file_name()]
    );
}

#[test]
fn interrupted_or_mismatched_uploads_leave_nothing() {
    let home = tempfile::tempdir().unwrap();
    let reg = Registry::open(home.path()).unwrap();
    let err = reg
        .put_blob_capped(&mut Interrupted { left: 300_000 }, None, 1 << 30)
        .unwrap_err();
    assert!(matches!(err, RegistryError::Io { .. }), "{err}");
    assert!(files_in(&home.path().join("blobs")).is_empty());

    let wrong = Digest::of_bytes(b"something else");
    let err = reg
        .put_blob_capped(&mut tiny_gguf(3).as_slice(), Some(&wrong), 1 << 30)
        .unwrap_err();
    assert!(matches!(err, RegistryError::DigestMismatch { .. }), "{err}");
    assert!(files_in(&home.path().join("blobs")).is_empty());
}

#[test]
fn free_space_is_checked_with_a_margin() {
    let home = tempfile::tempdir().unwrap();
    let reg = Registry::open(home.path()).unwrap();
    reg.check_blob_space(1 << 20).unwrap();
    let err = reg.check_blob_space(u64::MAX / 2).unwrap_err();
    match err {
        RegistryError::NoSpace {
            needed,
            margin,
            available,
            ..
        } => {
            assert_eq!(margin, BLOB_SPACE_MARGIN);
            assert_eq!(needed, u64::MAX / 2 + BLOB_SPACE_MARGIN);
            assert!(available < needed);
        }
        e => panic!("{e}"),
    }
}
