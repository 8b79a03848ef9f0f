//! Tests' stand-in for the daemon: a Unix socket in a fresh directory that
//! accepts one connection, reads the request and lets the test write the
//! raw response (at its own pace).

use std::io::{BufRead, BufReader, Read};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;

pub struct TestServer {
    dir: PathBuf,
    path: PathBuf,
    thread: Option<JoinHandle<Received>>,
}

/// A request as the server got it: the head, and the body (chunked transfer
/// decoded).
#[derive(Debug, Default)]
pub struct Received {
    pub head: String,
    pub body: Vec<u8>,
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
        Self::accept(move |mut conn| {
            let request = read_request(&mut conn);
            respond(conn);
            request
        })
    }

    /// Serves one connection with `serve`, which reads the request itself
    /// (at its own pace) and returns what it got.
    pub fn accept(serve: impl FnOnce(UnixStream) -> Received + Send + 'static) -> Self {
        let dir = temp_dir("sock");
        let path = dir.join("d.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let thread = std::thread::spawn(move || {
            let (conn, _) = listener.accept().unwrap();
            serve(conn)
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

    /// The request the server got (after it answered), as text.
    pub fn finish(self) -> String {
        let got = self.received();
        got.head + &String::from_utf8_lossy(&got.body)
    }

    /// The request the server got (after it answered).
    pub fn received(mut self) -> Received {
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Reads a request's head and its whole body.
pub fn read_request(conn: &mut UnixStream) -> Received {
    let head = read_head(conn);
    let header = |name: &str| {
        head.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name)
                .then(|| v.trim().to_ascii_lowercase())
        })
    };
    let body = if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        read_chunked(conn)
    } else {
        let len = header("content-length").map_or(0, |v| v.parse::<usize>().unwrap());
        let mut body = vec![0; len];
        conn.read_exact(&mut body).unwrap();
        body
    };
    Received { head, body }
}

/// Reads up to the blank line that ends a request's head.
pub fn read_head(conn: &mut UnixStream) -> String {
    let mut data = Vec::new();
    let mut byte = [0; 1];
    while !data.ends_with(b"\r\n\r\n") {
        if conn.read(&mut byte).unwrap() == 0 {
            break;
        }
        data.push(byte[0]);
    }
    String::from_utf8_lossy(&data).to_string()
}

fn read_chunked(conn: &mut UnixStream) -> Vec<u8> {
    let mut reader = BufReader::new(conn);
    let mut body = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let size = usize::from_str_radix(line.trim_end(), 16).unwrap();
        let mut chunk = vec![0; size + 2];
        reader.read_exact(&mut chunk).unwrap();
        assert_eq!(&chunk[size..], b"\r\n", "a chunk without its CRLF");
        if size == 0 {
            return body;
        }
        body.extend_from_slice(&chunk[..size]);
    }
}
