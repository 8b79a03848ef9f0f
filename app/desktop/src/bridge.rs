//! The IPC bridge between the web UI's `fetch` and the daemon's Unix socket.
//!
//! The page's fetch shim (`shim.js`) posts each API request as a JSON
//! message, then its body as numbered pieces of a few MiB, the last one
//! marked; [`Bridge::handle`] sends the request over the socket on a thread
//! of its own, writing each piece as it arrives (with the known
//! `Content-Length`, else chunked), and reports the response as [`Event`]s
//! — each piece's arrival at the daemon, the head, then every body piece as
//! the daemon writes it, then the end — which the app turns into calls of
//! the shim's functions ([`Event::script`]) that feed the response's
//! `ReadableStream`. A custom URI scheme cannot do this: wry hands its
//! handlers' responses to the page as whole bodies, so an SSE or NDJSON
//! stream would arrive only when it ends; and a multi-GB upload (a GGUF
//! import) in one message would sit whole in memory, twice.
//!
//! Only the API is reachable this way: paths under `/api/` and `/v1/`, and
//! `/health` and `/metrics`; anything else is refused.

use std::collections::HashMap;
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};

use base64::Engine;
use serde::Deserialize;

use crate::uds_http::{self, BodyLength, Upload};

/// A message from the page.
#[derive(Debug, Deserialize, PartialEq)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Message {
    Fetch(FetchRequest),
    /// A piece of a request's body.
    Body(Piece),
    /// The page aborted request `id` (an `AbortSignal`).
    Cancel {
        id: u64,
    },
}

#[derive(Debug, Deserialize, PartialEq)]
pub struct FetchRequest {
    pub id: u64,
    pub method: String,
    /// Path and query, e.g. `/api/chat` or `/api/mlxr/logs?tail=100`.
    pub path: String,
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    /// The body's size when known; `None`: sent chunked.
    #[serde(default)]
    pub length: Option<u64>,
}

/// A piece of a request's body: pieces are numbered from 0, and the last
/// one (which may be empty) ends the body.
#[derive(Debug, Deserialize, PartialEq)]
pub struct Piece {
    pub id: u64,
    pub seq: u64,
    /// The bytes, base64.
    #[serde(default)]
    pub data: String,
    #[serde(default)]
    pub last: bool,
}

/// What the app hears about a request.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// `bytes` of the request's body have been written to the daemon.
    Sent {
        id: u64,
        bytes: u64,
    },
    Head {
        id: u64,
        status: u16,
        status_text: String,
        headers: Vec<(String, String)>,
    },
    Chunk {
        id: u64,
        data: Vec<u8>,
    },
    End {
        id: u64,
    },
    Fail {
        id: u64,
        message: String,
    },
    /// `POST /api/pull` of `model` reported success (for a notification).
    PullFinished {
        model: String,
    },
}

impl Event {
    /// The JavaScript that hands this event to the page's shim (`None`: the
    /// page has no part in it).
    pub fn script(&self) -> Option<String> {
        Some(match self {
            Event::Sent { id, bytes } => format!("window.__mlxrBridge.sent({id},{bytes})"),
            Event::Head {
                id,
                status,
                status_text,
                headers,
            } => format!(
                "window.__mlxrBridge.head({id},{status},{},{})",
                js(status_text),
                js(headers)
            ),
            Event::Chunk { id, data } => format!(
                "window.__mlxrBridge.chunk({id},\"{}\")",
                base64::engine::general_purpose::STANDARD.encode(data)
            ),
            Event::End { id } => format!("window.__mlxrBridge.end({id})"),
            Event::Fail { id, message } => {
                format!("window.__mlxrBridge.fail({id},{})", js(message))
            }
            Event::PullFinished { .. } => return None,
        })
    }
}

/// `v` as a JavaScript literal.
fn js<T: serde::Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).expect("strings and pairs serialize")
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum Refusal {
    #[error("the desktop bridge only forwards the API (/api/, /v1/, /health, /metrics), not {0}")]
    NotApi(String),
    #[error("bad request body: {0}")]
    Body(String),
}

/// Whether the bridge forwards `path` (path and query) to the daemon.
pub fn is_api_path(path: &str) -> bool {
    let route = path.split(['?', '#']).next().unwrap_or_default();
    let clean = route.starts_with('/')
        && !route.contains("//")
        && !route.split('/').any(|seg| seg == ".." || seg == ".")
        && !route.contains('%')
        && !path.chars().any(|c| c.is_whitespace() || c.is_control());
    clean
        && (route.starts_with("/api/")
            || route.starts_with("/v1/")
            || route == "/health"
            || route == "/metrics")
}

/// A request in flight: where its body's pieces go until the last, and its
/// connection once open (cut on cancel).
struct InFlight {
    body: Option<Sender<Piece>>,
    conn: Option<UnixStream>,
}

/// Why a request's body did not reach the daemon whole.
enum BodyError {
    /// The page's pieces were bad, or stopped (a cancel).
    Page(String),
    /// Writing to the daemon failed; it may have answered already.
    Write(String),
}

/// Forwards the page's requests to the daemon's socket.
#[derive(Clone)]
pub struct Bridge {
    socket: PathBuf,
    inflight: Arc<Mutex<HashMap<u64, InFlight>>>,
}

impl Bridge {
    pub fn new(socket: PathBuf) -> Self {
        Bridge {
            socket,
            inflight: Arc::default(),
        }
    }

    /// Handles one message of the page; a fetch runs on its own thread and
    /// reports through `emit`.
    pub fn handle(&self, message: &str, emit: impl Fn(Event) + Send + 'static) {
        match serde_json::from_str::<Message>(message) {
            Ok(Message::Fetch(req)) => self.start(req, emit),
            Ok(Message::Body(piece)) => self.body_piece(piece),
            Ok(Message::Cancel { id }) => self.cancel(id),
            Err(e) => eprintln!("mlxr-desktop: a bridge message that is not one: {e}"),
        }
    }

    fn start(&self, req: FetchRequest, emit: impl Fn(Event) + Send + 'static) {
        let (body, pieces) = mpsc::channel();
        let entry = InFlight {
            body: Some(body),
            conn: None,
        };
        self.inflight.lock().unwrap().insert(req.id, entry);
        let bridge = self.clone();
        std::thread::spawn(move || bridge.run(req, pieces, &emit));
    }

    /// Passes a piece to its request's thread; pieces of a request that
    /// was refused, failed or cancelled are dropped.
    fn body_piece(&self, piece: Piece) {
        let mut inflight = self.inflight.lock().unwrap();
        let Some(entry) = inflight.get_mut(&piece.id) else {
            return;
        };
        let last = piece.last;
        if let Some(body) = &entry.body {
            let _ = body.send(piece);
        }
        if last {
            entry.body = None;
        }
    }

    fn cancel(&self, id: u64) {
        // Dropping the body's sender also stops a thread waiting for a piece.
        if let Some(entry) = self.inflight.lock().unwrap().remove(&id) {
            if let Some(conn) = entry.conn {
                let _ = conn.shutdown(Shutdown::Both);
            }
        }
    }

    /// Runs `req` to its end (on the caller's thread).
    fn run(&self, req: FetchRequest, pieces: Receiver<Piece>, emit: &dyn Fn(Event)) {
        let id = req.id;
        let result = self.forward(req, pieces, emit);
        // Gone before the page hears of the end: its connection closes.
        self.inflight.lock().unwrap().remove(&id);
        emit(match result {
            Ok(()) => Event::End { id },
            Err(message) => Event::Fail { id, message },
        });
    }

    /// Keeps `conn` to cut on cancel; an error if the request was cancelled
    /// already.
    fn register(&self, id: u64, conn: &UnixStream) -> Result<(), String> {
        let mut inflight = self.inflight.lock().unwrap();
        let entry = inflight.get_mut(&id).ok_or("cancelled")?;
        entry.conn = Some(conn.try_clone().map_err(|e| e.to_string())?);
        Ok(())
    }

    fn forward(
        &self,
        req: FetchRequest,
        pieces: Receiver<Piece>,
        emit: &dyn Fn(Event),
    ) -> Result<(), String> {
        let id = req.id;
        if !is_api_path(&req.path) {
            return Err(Refusal::NotApi(req.path).to_string());
        }
        let method = req.method.to_ascii_uppercase();
        let conn = uds_http::connect(&self.socket).map_err(|e| e.to_string())?;
        // Registered before the request goes out: a cancel while the body
        // uploads or the daemon loads a model cuts the connection too.
        self.register(id, &conn)?;
        // No timeouts: a log tail may stay quiet for long, and the page may
        // take its time reading a large body; the page's abort (a cancel
        // message) ends the request.
        let length = req.length.map_or(BodyLength::Chunked, BodyLength::Known);
        let mut upload = uds_http::start(conn, &method, &req.path, &req.headers, length)
            .map_err(|e| e.to_string())?;
        let mut pull = PullWatch::wants(&method, &req.path).then(Vec::new);
        let response = match send_body(&mut upload, &pieces, id, emit, pull.as_mut()) {
            Ok(()) => upload.finish().map_err(|e| e.to_string()),
            Err(BodyError::Page(message)) => return Err(message),
            Err(BodyError::Write(message)) => upload.response().map_err(|_| message),
        };
        let mut response = response?;
        let head = &response.head;
        emit(Event::Head {
            id,
            status: head.status,
            status_text: head.reason.clone(),
            headers: head
                .headers
                .iter()
                .filter(|(n, _)| {
                    !["transfer-encoding", "connection", "keep-alive"]
                        .contains(&n.to_ascii_lowercase().as_str())
                })
                .cloned()
                .collect(),
        });
        let ok = (200..300).contains(&head.status);
        let mut pull = pull.and_then(|body| PullWatch::new(&body));
        while let Some(data) = response.next_chunk().map_err(|e| e.to_string())? {
            if let (true, Some(watch)) = (ok, pull.as_mut()) {
                if let Some(model) = watch.feed(&data) {
                    emit(Event::PullFinished { model });
                }
            }
            emit(Event::Chunk { id, data });
        }
        Ok(())
    }
}

/// Writes the page's pieces of the body to the daemon as they come, in
/// order, reporting each; `keep` collects the body too (a pull's request).
fn send_body(
    upload: &mut Upload,
    pieces: &Receiver<Piece>,
    id: u64,
    emit: &dyn Fn(Event),
    mut keep: Option<&mut Vec<u8>>,
) -> Result<(), BodyError> {
    for seq in 0.. {
        let piece = pieces
            .recv()
            .map_err(|_| BodyError::Page("the request was cancelled".into()))?;
        let data = decode_piece(&piece, seq).map_err(|e| BodyError::Page(e.to_string()))?;
        upload
            .write(&data)
            .map_err(|e| BodyError::Write(e.to_string()))?;
        if let Some(keep) = keep.as_mut() {
            keep.extend_from_slice(&data);
        }
        if !data.is_empty() {
            emit(Event::Sent {
                id,
                bytes: upload.written(),
            });
        }
        if piece.last {
            break;
        }
    }
    Ok(())
}

/// The bytes of `piece`, which must be the body's piece number `seq`.
fn decode_piece(piece: &Piece, seq: u64) -> Result<Vec<u8>, Refusal> {
    if piece.seq != seq {
        return Err(Refusal::Body(format!(
            "piece {} came where piece {seq} was due",
            piece.seq
        )));
    }
    base64::engine::general_purpose::STANDARD
        .decode(&piece.data)
        .map_err(|e| Refusal::Body(e.to_string()))
}

/// Watches a `POST /api/pull` stream for its `"status":"success"` line.
struct PullWatch {
    model: String,
    pending: Vec<u8>,
}

impl PullWatch {
    /// Whether a request is a pull (whose body names the model).
    fn wants(method: &str, path: &str) -> bool {
        method == "POST" && path.split('?').next() == Some("/api/pull")
    }

    fn new(body: &[u8]) -> Option<Self> {
        let json: serde_json::Value = serde_json::from_slice(body).ok()?;
        let model = json
            .get("model")
            .or_else(|| json.get("name"))?
            .as_str()?
            .to_string();
        Some(PullWatch {
            model,
            pending: Vec::new(),
        })
    }

    /// The model's name once the stream says it succeeded.
    fn feed(&mut self, data: &[u8]) -> Option<String> {
        self.pending.extend_from_slice(data);
        let mut done = false;
        while let Some(nl) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=nl).collect();
            let status = serde_json::from_slice::<serde_json::Value>(&line)
                .ok()
                .and_then(|v| v.get("status")?.as_str().map(str::to_string));
            done |= status.as_deref() == Some("success");
        }
        done.then(|| self.model.clone())
    }
}

#[cfg(test)]
mod tests;
