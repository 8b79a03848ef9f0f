//! Tests' stand-in for the daemon: a Unix socket in a fresh directory that
//! accepts one connection, reads the request and lets the test write the
//! raw response (at its own pace).

use std::io::Read;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;

pub struct TestServer {
    dir: PathBuf,
    path: PathBuf,
    thread: Option<JoinHandle<String>>,
}

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A directory of its own under the system's temporary directory.
pub fn temp_dir(what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "mlxr-desktop-{what}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

impl TestServer {
    /// Serves one connection with `respond`, which gets the connection after
    /// the request was read.
    pub fn start(respond: impl FnOnce(UnixStream) + Send + 'static) -> Self {
        let dir = temp_dir("sock");
        let path = dir.join("d.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let thread = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let request = read_request(&mut conn);
            respond(conn);
            request
        });
        TestServer {
            dir,
            path,
            thread: Some(thread),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The request the server got (after it answered).
    pub fn finish(mut self) -> String {
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn read_request(conn: &mut UnixStream) -> String {
    let mut data = Vec::new();
    let mut byte = [0; 1];
    while !data.ends_with(b"\r\n\r\n") {
        if conn.read(&mut byte).unwrap() == 0 {
            break;
        }
        data.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&data).to_string();
    let len = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse::<usize>().unwrap())
        })
        .unwrap_or(0);
    let mut body = vec![0; len];
    conn.read_exact(&mut body).unwrap();
    head + &String::from_utf8_lossy(&body)
}
