//! Shared test helpers: tiny GGUF files and a tiny HTTP server with Range.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use mlxr_formats::gguf::writer::GgufWriter;
use mlxr_formats::gguf::GgmlType;

/// A small valid GGUF: llama architecture, Q4_1 file type, `seed` varies
/// the bytes (so different seeds give different digests).
pub fn tiny_gguf(seed: u8) -> Vec<u8> {
    let q4_1: Vec<u8> = (0..4 * 20)
        .map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed))
        .collect();
    GgufWriter::new()
        .kv("general.architecture", "llama")
        .kv("general.name", format!("tiny-{seed}"))
        .kv("general.file_type", 3u32)
        .tensor("token_embd.weight", &[32, 4], GgmlType::Q4_1, q4_1)
        .tensor_f32("output_norm.weight", &[32], &[1.0; 32])
        .build()
}

pub fn write_file(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap();
}

/// Files under `dir` (recursively), as names relative to it.
pub fn files_in(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            out.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    out.sort();
    out
}

/// A one-file HTTP/1.1 server on 127.0.0.1 with `Range: bytes=N-` support.
pub struct TestServer {
    pub url: String,
    /// The `Range` header of every request, in order.
    pub ranges: Arc<Mutex<Vec<Option<String>>>>,
    /// While > 0, a request sends only `cut_at` body bytes (with the full
    /// Content-Length) and then drops the connection.
    pub failures_left: Arc<AtomicUsize>,
}

impl TestServer {
    pub fn start(body: Vec<u8>, cut_at: usize) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let ranges = Arc::new(Mutex::new(Vec::new()));
        let failures_left = Arc::new(AtomicUsize::new(0));
        let body = Arc::new(body);
        {
            let ranges = ranges.clone();
            let failures_left = failures_left.clone();
            thread::spawn(move || {
                for stream in listener.incoming() {
                    let Ok(stream) = stream else { continue };
                    let fail = failures_left
                        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                        .is_ok();
                    // One thread per connection: concurrent pulls overlap.
                    let (body, ranges) = (body.clone(), ranges.clone());
                    thread::spawn(move || serve(stream, &body, &ranges, fail.then_some(cut_at)));
                }
            });
        }
        TestServer {
            url: format!("http://{addr}/models/tiny-model.gguf"),
            ranges,
            failures_left,
        }
    }
}

fn serve(
    mut stream: TcpStream,
    body: &[u8],
    ranges: &Mutex<Vec<Option<String>>>,
    cut_at: Option<usize>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut range = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("range") {
                range = Some(v.trim().to_string());
            }
        }
    }
    ranges.lock().unwrap().push(range.clone());
    if !request_line.contains("/models/tiny-model.gguf") {
        stream.write_all(
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        )?;
        return Ok(());
    }
    let start = range
        .as_deref()
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.strip_suffix('-'))
        .and_then(|n| n.parse::<usize>().ok());
    let (status, start) = match start {
        Some(s) if s < body.len() => ("206 Partial Content", s),
        Some(_) => {
            stream.write_all(
                b"HTTP/1.1 416 Range Not Satisfiable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            )?;
            return Ok(());
        }
        None => ("200 OK", 0),
    };
    let rest = &body[start..];
    let mut head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nContent-Type: application/octet-stream\r\nAccept-Ranges: bytes\r\nConnection: close\r\n",
        rest.len()
    );
    if start > 0 {
        head.push_str(&format!(
            "Content-Range: bytes {start}-{}/{}\r\n",
            body.len() - 1,
            body.len()
        ));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    match cut_at {
        Some(n) => {
            stream.write_all(&rest[..n.min(rest.len())])?;
            stream.flush()?;
            // Drop without sending the rest: an interrupted transfer.
            stream.shutdown(std::net::Shutdown::Both)
        }
        None => stream.write_all(rest),
    }
}

/// An HTTP server on 127.0.0.1 that answers every request with
/// `302 Found` to `location`; returns its `http://host:port`.
pub fn start_redirector(location: String) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
            }
            let _ = stream.write_all(
                format!(
                    "HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                )
                .as_bytes(),
            );
        }
    });
    format!("http://{addr}")
}
