//! A small blocking HTTP/1.1 client over a Unix domain socket: one request
//! per connection (`Connection: close`), its body sent whole or piece by
//! piece ([`start`], [`Upload`]), the response head parsed, the body handed
//! over piece by piece as it arrives (chunked transfer decoded), so a
//! stream of server-sent events or NDJSON lines passes through unbuffered.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("cannot reach the daemon at {path}: {source}")]
    Connect {
        path: String,
        source: std::io::Error,
    },
    #[error("talking to the daemon: {0}")]
    Io(#[from] std::io::Error),
    #[error("the daemon's answer is not HTTP: {0}")]
    Protocol(String),
}

/// A request to send.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub method: &'a str,
    /// Path and query, e.g. `/api/chat`.
    pub target: &'a str,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl<'a> Request<'a> {
    pub fn get(target: &'a str) -> Self {
        Request {
            method: "GET",
            target,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }
}

/// The status line and headers of a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub status: u16,
    pub reason: String,
    pub headers: Vec<(String, String)>,
}

impl Head {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A response whose body is still to be read.
pub struct Response {
    pub head: Head,
    body: Body,
}

enum Body {
    Chunked(BufReader<UnixStream>),
    Length(BufReader<UnixStream>, u64),
    UntilClose(BufReader<UnixStream>),
    Empty,
}

/// Headers the client sets itself; a caller's are dropped.
const OWN_HEADERS: [&str; 5] = [
    "host",
    "connection",
    "content-length",
    "transfer-encoding",
    "keep-alive",
];

/// Sends `req` to the daemon listening at `socket`. `timeout` bounds the
/// connect and each read (not the whole, possibly long, stream).
pub fn send(
    socket: &Path,
    req: &Request,
    timeout: Option<Duration>,
) -> Result<Response, HttpError> {
    send_on(connect(socket)?, req, timeout)
}

/// A connection to the daemon at `socket`.
pub fn connect(socket: &Path) -> Result<UnixStream, HttpError> {
    UnixStream::connect(socket).map_err(|source| HttpError::Connect {
        path: socket.display().to_string(),
        source,
    })
}

/// Sends `req` on a fresh connection (see [`send`]).
pub fn send_on(
    stream: UnixStream,
    req: &Request,
    timeout: Option<Duration>,
) -> Result<Response, HttpError> {
    stream.set_read_timeout(timeout)?;
    stream.set_write_timeout(timeout)?;
    let length = BodyLength::Known(req.body.len() as u64);
    let mut upload = start(stream, req.method, req.target, &req.headers, length)?;
    upload.write(&req.body)?;
    upload.finish()
}

/// How a request's body is framed: `Content-Length`, or chunked transfer
/// encoding when its size is not known up front.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyLength {
    Known(u64),
    Chunked,
}

/// A request whose head is sent and whose body goes out piece by piece
/// ([`Upload::write`]); [`Upload::finish`] ends it and reads the response.
pub struct Upload {
    stream: UnixStream,
    method: String,
    length: BodyLength,
    written: u64,
}

/// Sends the head of a request on `stream`; its body follows through the
/// returned [`Upload`].
pub fn start(
    stream: UnixStream,
    method: &str,
    target: &str,
    headers: &[(String, String)],
    length: BodyLength,
) -> Result<Upload, HttpError> {
    let mut out = Vec::with_capacity(256);
    write!(out, "{method} {target} HTTP/1.1\r\n")?;
    out.extend_from_slice(b"Host: localhost\r\nConnection: close\r\n");
    for (name, value) in headers {
        if OWN_HEADERS.contains(&name.to_ascii_lowercase().as_str())
            || name.contains(['\r', '\n', ':'])
            || value.contains(['\r', '\n'])
        {
            continue;
        }
        write!(out, "{name}: {value}\r\n")?;
    }
    match length {
        BodyLength::Known(0) if matches!(method, "GET" | "HEAD") => {}
        BodyLength::Known(len) => write!(out, "Content-Length: {len}\r\n")?,
        BodyLength::Chunked => out.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
    }
    out.extend_from_slice(b"\r\n");
    (&stream).write_all(&out)?;
    Ok(Upload {
        stream,
        method: method.to_string(),
        length,
        written: 0,
    })
}

impl Upload {
    /// Sends the next piece of the body.
    pub fn write(&mut self, piece: &[u8]) -> Result<(), HttpError> {
        if piece.is_empty() {
            return Ok(());
        }
        let after = self.written + piece.len() as u64;
        match self.length {
            BodyLength::Known(len) if after > len => {
                return Err(HttpError::Protocol(format!(
                    "the body is longer than its Content-Length {len}"
                )));
            }
            BodyLength::Known(_) => (&self.stream).write_all(piece)?,
            BodyLength::Chunked => {
                let mut framed = Vec::with_capacity(piece.len() + 20);
                write!(framed, "{:x}\r\n", piece.len())?;
                framed.extend_from_slice(piece);
                framed.extend_from_slice(b"\r\n");
                (&self.stream).write_all(&framed)?;
            }
        }
        self.written = after;
        Ok(())
    }

    /// The body's bytes sent so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Ends the body (it must have its announced length) and reads the
    /// response's head.
    pub fn finish(self) -> Result<Response, HttpError> {
        match self.length {
            BodyLength::Known(len) if self.written != len => {
                return Err(HttpError::Protocol(format!(
                    "the body ended after {} of its {len} bytes",
                    self.written
                )));
            }
            BodyLength::Known(_) => {}
            BodyLength::Chunked => (&self.stream).write_all(b"0\r\n\r\n")?,
        }
        self.response()
    }

    /// Reads the response's head without ending the body: the daemon may
    /// answer (a refusal) before it has read all of it.
    pub fn response(self) -> Result<Response, HttpError> {
        read_response(self.stream, &self.method)
    }
}

fn read_response(stream: UnixStream, method: &str) -> Result<Response, HttpError> {
    let mut reader = BufReader::new(stream);
    let head = read_head(&mut reader)?;
    let no_body = method == "HEAD" || matches!(head.status, 100..=199 | 204 | 304);
    let body = if no_body {
        Body::Empty
    } else if head
        .header("transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"))
    {
        Body::Chunked(reader)
    } else if let Some(len) = head.header("content-length") {
        let len = len
            .trim()
            .parse()
            .map_err(|_| HttpError::Protocol(format!("bad Content-Length '{len}'")))?;
        Body::Length(reader, len)
    } else {
        Body::UntilClose(reader)
    };
    Ok(Response { head, body })
}

fn read_line(reader: &mut impl BufRead) -> Result<String, HttpError> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Err(HttpError::Protocol("the connection closed early".into()));
    }
    Ok(line.trim_end_matches(['\r', '\n']).to_string())
}

fn read_head(reader: &mut impl BufRead) -> Result<Head, HttpError> {
    let status_line = read_line(reader)?;
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default();
    if !version.starts_with("HTTP/1.") {
        return Err(HttpError::Protocol(format!("status line '{status_line}'")));
    }
    let status = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| HttpError::Protocol(format!("status line '{status_line}'")))?;
    let reason = parts.next().unwrap_or_default().to_string();
    let mut headers = Vec::new();
    loop {
        let line = read_line(reader)?;
        if line.is_empty() {
            break;
        }
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| HttpError::Protocol(format!("header line '{line}'")))?;
        headers.push((name.trim().to_string(), value.trim().to_string()));
    }
    Ok(Head {
        status,
        reason,
        headers,
    })
}

impl Response {
    /// The next piece of the body as the daemon sent it; `None` at its end.
    pub fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, HttpError> {
        match &mut self.body {
            Body::Empty => Ok(None),
            Body::Length(_, 0) => Ok(None),
            Body::Length(reader, left) => {
                let want = (*left).min(64 * 1024) as usize;
                let mut buf = vec![0; want];
                let n = reader.read(&mut buf)?;
                if n == 0 {
                    return Err(HttpError::Protocol("the body ended early".into()));
                }
                buf.truncate(n);
                *left -= n as u64;
                Ok(Some(buf))
            }
            Body::UntilClose(reader) => {
                let mut buf = vec![0; 64 * 1024];
                let n = reader.read(&mut buf)?;
                if n == 0 {
                    self.body = Body::Empty;
                    return Ok(None);
                }
                buf.truncate(n);
                Ok(Some(buf))
            }
            Body::Chunked(reader) => {
                let size_line = read_line(reader)?;
                let size = size_line.split(';').next().unwrap_or_default().trim();
                let size = usize::from_str_radix(size, 16)
                    .map_err(|_| HttpError::Protocol(format!("chunk size '{size_line}'")))?;
                if size == 0 {
                    // Trailers, then the blank line.
                    while !read_line(reader)?.is_empty() {}
                    self.body = Body::Empty;
                    return Ok(None);
                }
                let mut buf = vec![0; size];
                reader.read_exact(&mut buf)?;
                let mut crlf = [0; 2];
                reader.read_exact(&mut crlf)?;
                if crlf != *b"\r\n" {
                    return Err(HttpError::Protocol("a chunk lacks its CRLF".into()));
                }
                Ok(Some(buf))
            }
        }
    }

    /// The rest of the body, whole.
    pub fn read_all(mut self) -> Result<(Head, Vec<u8>), HttpError> {
        let mut all = Vec::new();
        while let Some(chunk) = self.next_chunk()? {
            all.extend_from_slice(&chunk);
        }
        Ok((self.head, all))
    }
}

/// `GET target`, the whole body; an error for a status other than 2xx.
pub fn get(socket: &Path, target: &str, timeout: Duration) -> Result<Vec<u8>, HttpError> {
    let (head, body) = send(socket, &Request::get(target), Some(timeout))?.read_all()?;
    if !(200..300).contains(&head.status) {
        return Err(HttpError::Protocol(format!(
            "GET {target}: {} {}",
            head.status, head.reason
        )));
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_server::TestServer;

    #[test]
    fn decodes_a_chunked_body_piece_by_piece() {
        let server = TestServer::start(|mut conn| {
            conn.write_all(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-A: b\r\n\r\n\
                  5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n",
            )
            .unwrap();
        });
        let mut resp = send(server.path(), &Request::get("/x"), None).unwrap();
        assert_eq!(resp.head.status, 200);
        assert_eq!(resp.head.header("x-a"), Some("b"));
        assert_eq!(resp.next_chunk().unwrap().unwrap(), b"hello");
        assert_eq!(resp.next_chunk().unwrap().unwrap(), b" world");
        assert_eq!(resp.next_chunk().unwrap(), None);
        let request = server.finish();
        assert!(request.starts_with("GET /x HTTP/1.1\r\n"), "{request}");
        assert!(request.contains("Connection: close\r\n"), "{request}");
    }

    #[test]
    fn reads_a_content_length_body_and_sends_the_callers_body() {
        let server = TestServer::start(|mut conn| {
            conn.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\nnopEXTRA")
                .unwrap();
        });
        let req = Request {
            method: "POST",
            target: "/api/chat",
            headers: vec![
                ("Content-Type".into(), "application/json".into()),
                ("Host".into(), "evil".into()),
                ("X-Bad".into(), "a\r\nInjected: 1".into()),
            ],
            body: b"{}".to_vec(),
        };
        let (head, body) = send(server.path(), &req, None).unwrap().read_all().unwrap();
        assert_eq!((head.status, head.reason.as_str()), (404, "Not Found"));
        assert_eq!(body, b"nop");
        let request = server.finish();
        assert!(request.contains("Content-Type: application/json\r\n"));
        assert!(request.contains("Content-Length: 2\r\n\r\n{}"), "{request}");
        assert!(
            !request.contains("evil") && !request.contains("Injected"),
            "{request}"
        );
    }

    #[test]
    fn a_missing_socket_is_a_connect_error() {
        let err = send(
            Path::new("/nonexistent/mlxr.sock"),
            &Request::get("/health"),
            None,
        )
        .err()
        .unwrap();
        assert!(matches!(err, HttpError::Connect { .. }), "{err}");
    }
}
