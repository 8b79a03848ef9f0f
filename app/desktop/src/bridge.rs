//! The IPC bridge between the web UI's `fetch` and the daemon's Unix socket.
//!
//! The page's fetch shim (`shim.js`) posts each API request as a JSON
//! message; [`Bridge::handle`] sends it over the socket on a thread of its
//! own and reports the response as [`Event`]s — the head, then every body
//! piece as the daemon writes it, then the end — which the app turns into
//! calls of the shim's functions ([`Event::script`]) that feed the
//! response's `ReadableStream`. A custom URI scheme cannot do this: wry hands
//! its handlers' responses to the page as whole bodies, so an SSE or NDJSON
//! stream would arrive only when it ends.
//!
//! Only the API is reachable this way: paths under `/api/` and `/v1/`, and
//! `/health` and `/metrics`; anything else is refused.

use std::collections::HashMap;
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use base64::Engine;
use serde::Deserialize;

use crate::uds_http::{self, Request};

/// A message from the page.
#[derive(Debug, Deserialize, PartialEq)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Message {
    Fetch(FetchRequest),
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
    /// The body, base64.
    #[serde(default)]
    pub body: Option<String>,
}

/// What the app hears about a request.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
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

/// Forwards the page's requests to the daemon's socket.
#[derive(Clone)]
pub struct Bridge {
    socket: PathBuf,
    /// Connections of requests in flight, to cut on cancel.
    inflight: Arc<Mutex<HashMap<u64, UnixStream>>>,
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
            Ok(Message::Fetch(req)) => {
                let bridge = self.clone();
                std::thread::spawn(move || bridge.fetch(req, &emit));
            }
            Ok(Message::Cancel { id }) => {
                if let Some(conn) = self.inflight.lock().unwrap().remove(&id) {
                    let _ = conn.shutdown(Shutdown::Both);
                }
            }
            Err(e) => eprintln!("mlxr-desktop: a bridge message that is not one: {e}"),
        }
    }

    /// Runs `req` to its end (on the caller's thread).
    pub fn fetch(&self, req: FetchRequest, emit: &dyn Fn(Event)) {
        let id = req.id;
        match self.forward(req, emit) {
            Ok(()) => emit(Event::End { id }),
            Err(message) => emit(Event::Fail { id, message }),
        }
        self.inflight.lock().unwrap().remove(&id);
    }

    fn forward(&self, req: FetchRequest, emit: &dyn Fn(Event)) -> Result<(), String> {
        let id = req.id;
        let body = check(&req).map_err(|e| e.to_string())?;
        let method = req.method.to_ascii_uppercase();
        let request = Request {
            method: &method,
            target: &req.path,
            headers: req.headers,
            body,
        };
        let mut pull = PullWatch::new(&method, &req.path, &request.body);
        let conn = uds_http::connect(&self.socket).map_err(|e| e.to_string())?;
        // Registered before the request goes out: a cancel while the daemon
        // loads a model cuts the connection too.
        if let Ok(handle) = conn.try_clone() {
            self.inflight.lock().unwrap().insert(id, handle);
        }
        // No read timeout: a log tail may stay quiet for long; the page's
        // abort (a cancel message) ends the request.
        let mut response = uds_http::send_on(conn, &request, None).map_err(|e| e.to_string())?;
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

/// The request's body, if the bridge may forward it.
fn check(req: &FetchRequest) -> Result<Vec<u8>, Refusal> {
    if !is_api_path(&req.path) {
        return Err(Refusal::NotApi(req.path.clone()));
    }
    match &req.body {
        None => Ok(Vec::new()),
        Some(b64) => base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|e| Refusal::Body(e.to_string())),
    }
}

/// Watches a `POST /api/pull` stream for its `"status":"success"` line.
struct PullWatch {
    model: String,
    pending: Vec<u8>,
}

impl PullWatch {
    fn new(method: &str, path: &str, body: &[u8]) -> Option<Self> {
        if method != "POST" || path.split('?').next() != Some("/api/pull") {
            return None;
        }
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
mod tests {
    use std::io::Write;
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::test_server::TestServer;

    fn fetch(path: &str, body: Option<&str>) -> FetchRequest {
        FetchRequest {
            id: 7,
            method: "POST".into(),
            path: path.into(),
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: body.map(|b| base64::engine::general_purpose::STANDARD.encode(b)),
        }
    }

    #[test]
    fn api_paths_pass_and_others_do_not() {
        for ok in [
            "/api/chat",
            "/api/mlxr/logs?tail=100",
            "/v1/chat/completions",
            "/health",
            "/metrics",
        ] {
            assert!(is_api_path(ok), "{ok}");
        }
        for refused in [
            "/",
            "/ui/",
            "/ui/assets/x.js",
            "/healthz",
            "/api",
            "/api/../ui/",
            "/api/%2e%2e/ui",
            "/v1//x",
            "api/chat",
            "http://evil.example/api/chat",
            "/api/chat HTTP/1.1\r\nX: y",
        ] {
            assert!(!is_api_path(refused), "{refused}");
        }
    }

    #[test]
    fn a_path_outside_the_api_is_refused_without_touching_the_socket() {
        // No daemon listens there: a refusal cannot be a connect error.
        let bridge = Bridge::new("/nonexistent/mlxr.sock".into());
        let (tx, rx) = mpsc::channel();
        bridge.fetch(fetch("/ui/index.html", None), &move |e| tx.send(e).unwrap());
        let events: Vec<Event> = rx.try_iter().collect();
        assert_eq!(
            events,
            vec![Event::Fail {
                id: 7,
                message: Refusal::NotApi("/ui/index.html".into()).to_string()
            }]
        );
    }

    #[test]
    fn a_stream_passes_through_chunk_by_chunk_before_it_ends() {
        let (go_on_tx, go_on_rx) = mpsc::channel::<()>();
        let server = TestServer::start(move |mut conn| {
            conn.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n\
                  Transfer-Encoding: chunked\r\n\r\n",
            )
            .unwrap();
            for word in ["{\"w\":\"a\"}\n", "{\"w\":\"b\"}\n"] {
                write!(conn, "{:x}\r\n{word}\r\n", word.len()).unwrap();
                conn.flush().unwrap();
                // The next piece waits until the test saw this one.
                go_on_rx.recv().unwrap();
            }
            conn.write_all(b"0\r\n\r\n").unwrap();
        });
        let bridge = Bridge::new(server.path().to_path_buf());
        let (tx, rx) = mpsc::channel();
        let req = fetch("/api/chat", Some("{\"model\":\"m\"}"));
        let worker = std::thread::spawn(move || {
            bridge.fetch(req, &move |e| tx.send((Instant::now(), e)).unwrap())
        });
        let next = || rx.recv_timeout(Duration::from_secs(10)).unwrap().1;
        let Event::Head {
            status, headers, ..
        } = next()
        else {
            panic!("the head comes first")
        };
        assert_eq!(status, 200);
        assert!(headers.iter().all(|(n, _)| n != "Transfer-Encoding"));
        // Each piece arrives while the daemon still holds the rest back:
        // nothing is buffered until the response ends.
        assert_eq!(
            next(),
            Event::Chunk {
                id: 7,
                data: b"{\"w\":\"a\"}\n".to_vec()
            }
        );
        go_on_tx.send(()).unwrap();
        assert_eq!(
            next(),
            Event::Chunk {
                id: 7,
                data: b"{\"w\":\"b\"}\n".to_vec()
            }
        );
        go_on_tx.send(()).unwrap();
        assert_eq!(next(), Event::End { id: 7 });
        worker.join().unwrap();
        let request = server.finish();
        assert!(
            request.starts_with("POST /api/chat HTTP/1.1\r\n"),
            "{request}"
        );
        assert!(request.ends_with("{\"model\":\"m\"}"), "{request}");
    }

    #[test]
    fn a_cancel_cuts_the_connection_and_the_daemon_sees_it() {
        let (closed_tx, closed_rx) = mpsc::channel();
        let server = TestServer::start(move |mut conn| {
            conn.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n")
                .unwrap();
            // The daemon's side: the next read ends when the app hangs up.
            let mut buf = [0; 16];
            let n = std::io::Read::read(&mut conn, &mut buf).unwrap_or(0);
            closed_tx.send(n).unwrap();
        });
        let bridge = Bridge::new(server.path().to_path_buf());
        let (tx, rx) = mpsc::channel();
        let message = r#"{"op":"fetch","id":9,"method":"POST","path":"/api/chat","body":"e30="}"#;
        bridge.handle(message, move |e| tx.send(e).unwrap());
        let next = || rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(matches!(next(), Event::Head { id: 9, .. }));
        assert_eq!(
            next(),
            Event::Chunk {
                id: 9,
                data: b"hi".to_vec()
            }
        );
        bridge.handle(r#"{"op":"cancel","id":9}"#, |_| {});
        assert_eq!(closed_rx.recv_timeout(Duration::from_secs(10)).unwrap(), 0);
        assert!(matches!(next(), Event::Fail { id: 9, .. }));
        assert!(bridge.inflight.lock().unwrap().is_empty());
    }

    #[test]
    fn an_error_status_and_its_body_reach_the_page() {
        let server = TestServer::start(|mut conn| {
            conn.write_all(
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 17\r\n\r\n{\"error\":\"nope\"}\n",
            )
            .unwrap();
        });
        let bridge = Bridge::new(server.path().to_path_buf());
        let (tx, rx) = mpsc::channel();
        bridge.fetch(fetch("/api/show", Some("{}")), &move |e| {
            tx.send(e).unwrap()
        });
        let events: Vec<Event> = rx.try_iter().collect();
        assert!(
            matches!(&events[0], Event::Head { status: 404, .. }),
            "{events:?}"
        );
        assert_eq!(
            events[1],
            Event::Chunk {
                id: 7,
                data: b"{\"error\":\"nope\"}\n".to_vec()
            }
        );
        assert_eq!(events[2], Event::End { id: 7 });
    }

    #[test]
    fn a_pull_that_succeeds_is_reported_once() {
        let server = TestServer::start(|mut conn| {
            let body = "{\"status\":\"pulling\"}\n{\"status\":\"succ";
            let rest = "ess\"}\n";
            write!(
                conn,
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n{:x}\r\n{rest}\r\n0\r\n\r\n",
                body.len(),
                rest.len()
            )
            .unwrap();
        });
        let bridge = Bridge::new(server.path().to_path_buf());
        let (tx, rx) = mpsc::channel();
        bridge.fetch(
            fetch("/api/pull", Some("{\"model\":\"smollm2\"}")),
            &move |e| tx.send(e).unwrap(),
        );
        let pulls: Vec<Event> = rx
            .try_iter()
            .filter(|e| matches!(e, Event::PullFinished { .. }))
            .collect();
        assert_eq!(
            pulls,
            vec![Event::PullFinished {
                model: "smollm2".into()
            }]
        );
    }

    #[test]
    fn events_become_calls_of_the_shim() {
        let head = Event::Head {
            id: 3,
            status: 200,
            status_text: "O\"K".into(),
            headers: vec![("a".into(), "b".into())],
        };
        assert_eq!(
            head.script().unwrap(),
            r#"window.__mlxrBridge.head(3,200,"O\"K",[["a","b"]])"#
        );
        let chunk = Event::Chunk {
            id: 3,
            data: b"hi".to_vec(),
        };
        assert_eq!(
            chunk.script().unwrap(),
            r#"window.__mlxrBridge.chunk(3,"aGk=")"#
        );
        assert_eq!(Event::PullFinished { model: "m".into() }.script(), None);
    }

    #[test]
    fn messages_parse() {
        let m: Message = serde_json::from_str(
            r#"{"op":"fetch","id":1,"method":"GET","path":"/api/ps","headers":[["Accept","application/json"]]}"#,
        )
        .unwrap();
        assert!(matches!(m, Message::Fetch(FetchRequest { id: 1, .. })));
        let m: Message = serde_json::from_str(r#"{"op":"cancel","id":1}"#).unwrap();
        assert_eq!(m, Message::Cancel { id: 1 });
    }
}
