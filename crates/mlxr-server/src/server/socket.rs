//! The Unix socket listener (`--socket PATH`): private from its first
//! instant, never taking the place of another daemon's live socket, and
//! removed at shutdown only while it is still ours.

use std::fs::DirBuilder;
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

/// Mode of the socket: the owner only, or owner and group with
/// `--socket-group`.
const OWNER_ONLY: u32 = 0o600;
const OWNER_AND_GROUP: u32 = 0o660;

/// The socket file while this server owns it; dropping it removes the
/// file unless something else has been put at the path since.
#[derive(Debug)]
pub struct OwnedSocket {
    path: PathBuf,
    /// (device, inode) of the socket we bound.
    id: (u64, u64),
}

impl Drop for OwnedSocket {
    fn drop(&mut self) {
        match std::fs::symlink_metadata(&self.path) {
            Ok(m) if (m.dev(), m.ino()) == self.id => {
                let _ = std::fs::remove_file(&self.path);
            }
            Ok(_) => tracing::warn!(
                "{} is no longer our socket; leaving it in place",
                self.path.display()
            ),
            Err(_) => {}
        }
    }
}

/// Binds `path` with mode 0600 (0660 and that group with `group`, a name
/// or a numeric id). A stale socket at `path` (nothing answers) is
/// replaced; a live one or any other file is an error and left alone.
pub fn bind(path: &Path, group: Option<&str>) -> io::Result<(UnixListener, OwnedSocket)> {
    let gid = group.map(group_id).transpose()?;
    clear_stale(path)?;
    // Bind inside a fresh private directory next to `path`, set the mode,
    // then hard-link the socket into place: nobody can connect before the
    // mode is set, and link (unlike rename) fails instead of replacing a
    // socket another daemon created meanwhile.
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let dir = dir.unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file path"))?;
    let private = dir.join(format!(
        ".{}.{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    DirBuilder::new().mode(0o700).create(&private)?;
    let result = bind_private(&private.join("s"), path, gid);
    let _ = std::fs::remove_file(private.join("s"));
    let _ = std::fs::remove_dir(&private);
    let listener = result?;
    let meta = std::fs::symlink_metadata(path)?;
    let owned = OwnedSocket {
        path: path.to_path_buf(),
        id: (meta.dev(), meta.ino()),
    };
    Ok((listener, owned))
}

fn bind_private(temp: &Path, path: &Path, gid: Option<libc::gid_t>) -> io::Result<UnixListener> {
    let listener = UnixListener::bind(temp)?;
    let mode = match gid {
        Some(gid) => {
            std::os::unix::fs::chown(temp, None, Some(gid))?;
            OWNER_AND_GROUP
        }
        None => OWNER_ONLY,
    };
    std::fs::set_permissions(temp, std::fs::Permissions::from_mode(mode))?;
    std::fs::hard_link(temp, path).map_err(|e| match e.kind() {
        io::ErrorKind::AlreadyExists => another_daemon(path),
        _ => e,
    })?;
    Ok(listener)
}

/// Removes a stale socket at `path`; errors if a daemon answers there or
/// the path is not a socket.
fn clear_stale(path: &Path) -> io::Result<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if !meta.file_type().is_socket() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "the path exists and is not a socket; not touching it (remove it or pick another path)",
        ));
    }
    match UnixStream::connect(path) {
        Ok(_) => Err(another_daemon(path)),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
            tracing::info!("removing the stale socket {}", path.display());
            std::fs::remove_file(path)
        }
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("cannot tell whether a daemon listens there: {e}"),
        )),
    }
}

fn another_daemon(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::AddrInUse,
        format!(
            "another daemon is listening on {} (stop it, or pick another --socket path)",
            path.display()
        ),
    )
}

/// The id of group `name` (or `name` itself when it is a number).
fn group_id(name: &str) -> io::Result<libc::gid_t> {
    if let Ok(gid) = name.parse() {
        return Ok(gid);
    }
    let unknown = || {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("--socket-group: unknown group '{name}'"),
        )
    };
    let c_name = std::ffi::CString::new(name).map_err(|_| unknown())?;
    let mut buf = vec![0u8; 16 << 10];
    loop {
        // SAFETY: `group` and `buf` outlive the call, which writes the
        // entry's strings into `buf` (at most its length) and sets
        // `found` to `&group` or null.
        let mut group: libc::group = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::group = std::ptr::null_mut();
        let rc = unsafe {
            libc::getgrnam_r(
                c_name.as_ptr(),
                &mut group,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut found,
            )
        };
        match rc {
            0 if found.is_null() => return Err(unknown()),
            0 => return Ok(group.gr_gid),
            libc::ERANGE if buf.len() < 1 << 24 => buf.resize(buf.len() * 2, 0),
            rc => return Err(io::Error::from_raw_os_error(rc)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_is_private_and_removed_only_while_ours() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mlxr.sock");
        let (listener, owned) = bind(&path, None).unwrap();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.file_type().is_socket());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        // Only the socket is left in the directory: no temporary names.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);

        let err = bind(&path, None).unwrap_err();
        assert!(err.to_string().contains("another daemon"), "{err}");

        drop(listener);
        drop(owned);
        assert!(!path.exists());
    }

    #[test]
    fn a_replaced_socket_is_left_alone_at_shutdown() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mlxr.sock");
        let (listener, owned) = bind(&path, None).unwrap();
        drop(listener);
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, "someone else's").unwrap();
        drop(owned);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "someone else's");
    }

    #[test]
    fn stale_sockets_are_replaced_and_other_files_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mlxr.sock");
        drop(UnixListener::bind(&path).unwrap());
        let (_listener, _owned) = bind(&path, None).unwrap();

        let file = dir.path().join("notes.txt");
        std::fs::write(&file, "keep me").unwrap();
        let err = bind(&file, None).unwrap_err();
        assert!(err.to_string().contains("not a socket"), "{err}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
    }

    #[test]
    fn a_group_opens_the_socket_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.sock");
        // SAFETY: getgid has no preconditions.
        let gid = unsafe { libc::getgid() };
        let _socket = bind(&path, Some(&gid.to_string())).unwrap();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o660);
        assert_eq!(meta.gid(), gid);

        assert_eq!(group_id("root").unwrap(), 0);
        let err = group_id("no-such-group-mlxr").unwrap_err();
        assert!(err.to_string().contains("unknown group"), "{err}");
    }
}
