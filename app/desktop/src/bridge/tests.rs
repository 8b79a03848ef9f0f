//! The bridge against a test daemon on a Unix socket: streaming both ways,
//! cancellation and the refusals.

use std::io::{Read, Write};
use std::sync::mpsc;
use std::time::Duration;

use super::*;
use crate::test_server::{read_head, read_request, Received, TestServer};

const WAIT: Duration = Duration::from_secs(10);

fn fetch_message(id: u64, path: &str, length: Option<u64>) -> String {
    serde_json::json!({
        "op": "fetch",
        "id": id,
        "method": "POST",
        "path": path,
        "headers": [["Content-Type", "application/json"]],
        "length": length,
    })
    .to_string()
}

fn piece_message(id: u64, seq: u64, data: &[u8], last: bool) -> String {
    serde_json::json!({
        "op": "body",
        "id": id,
        "seq": seq,
        "data": base64::engine::general_purpose::STANDARD.encode(data),
        "last": last,
    })
    .to_string()
}

/// Starts request `id`, as the shim does: the fetch message; its events
/// come through the receiver.
fn open(bridge: &Bridge, id: u64, path: &str, length: Option<u64>) -> Receiver<Event> {
    let (tx, rx) = mpsc::channel();
    bridge.handle(&fetch_message(id, path, length), move |e| {
        let _ = tx.send(e);
    });
    rx
}

/// Posts `body` as pieces of `size` bytes from number `first` on, then
/// the last (empty) piece.
fn post_pieces(bridge: &Bridge, id: u64, first: u64, body: &[u8], size: usize) -> u64 {
    let mut seq = first;
    for piece in body.chunks(size) {
        bridge.handle(&piece_message(id, seq, piece, false), |_| {});
        seq += 1;
    }
    bridge.handle(&piece_message(id, seq, b"", true), |_| {});
    seq + 1
}

/// A whole request with `body`, its length told or not.
fn send(bridge: &Bridge, path: &str, body: &[u8], known: bool) -> Receiver<Event> {
    let rx = open(bridge, 7, path, known.then_some(body.len() as u64));
    post_pieces(bridge, 7, 0, body, 64 * 1024);
    rx
}

/// The events up to the request's end or failure.
fn events(rx: &Receiver<Event>) -> Vec<Event> {
    let mut all = Vec::new();
    loop {
        let e = rx.recv_timeout(WAIT).expect("the request to end");
        let done = matches!(e, Event::End { .. } | Event::Fail { .. });
        all.push(e);
        if done {
            return all;
        }
    }
}

/// Bytes that differ from piece to piece (a reordering shows).
fn noise(len: usize) -> Vec<u8> {
    let mut x: u32 = 0x9e37_79b9;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

fn ok_server() -> TestServer {
    TestServer::start(|mut conn| {
        conn.write_all(b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n")
            .unwrap();
    })
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
    let rx = send(&bridge, "/ui/index.html", b"{}", true);
    assert_eq!(
        events(&rx),
        vec![Event::Fail {
            id: 7,
            message: Refusal::NotApi("/ui/index.html".into()).to_string()
        }]
    );
    // Its body's pieces went nowhere, and nothing is left in flight.
    assert!(bridge.inflight.lock().unwrap().is_empty());
}

#[test]
fn many_pieces_reach_the_daemon_in_order_byte_exact() {
    let body = noise(3 * 1024 * 1024 + 123);
    for known in [true, false] {
        let server = ok_server();
        let bridge = Bridge::new(server.path().to_path_buf());
        let all = events(&send(&bridge, "/api/blobs/sha256:x", &body, known));
        let got = server.received();
        assert_eq!(got.body.len(), body.len(), "known length: {known}");
        assert!(got.body == body, "the bytes differ (known length: {known})");
        let framing = if known {
            format!("Content-Length: {}\r\n", body.len())
        } else {
            "Transfer-Encoding: chunked\r\n".to_string()
        };
        assert!(got.head.contains(&framing), "{}", got.head);
        // Each piece's arrival is reported, the last at the whole size.
        let sent: Vec<u64> = all
            .iter()
            .filter_map(|e| match e {
                Event::Sent { bytes, .. } => Some(*bytes),
                _ => None,
            })
            .collect();
        assert_eq!(sent.len(), body.len().div_ceil(64 * 1024));
        assert!(sent.windows(2).all(|w| w[0] < w[1]), "{sent:?}");
        assert_eq!(sent.last(), Some(&(body.len() as u64)));
        assert!(matches!(
            all[all.len() - 2],
            Event::Head { status: 201, .. }
        ));
        assert_eq!(all.last(), Some(&Event::End { id: 7 }));
    }
}

#[test]
fn the_body_reaches_the_daemon_before_its_last_piece_is_sent() {
    let body = noise(256 * 1024);
    let (first_tx, first_rx) = mpsc::channel();
    let len = body.len();
    let server = TestServer::accept(move |mut conn| {
        let head = read_head(&mut conn);
        let mut first = vec![0; 1000];
        conn.read_exact(&mut first).unwrap();
        first_tx.send(first.clone()).unwrap();
        let mut rest = vec![0; len - first.len()];
        conn.read_exact(&mut rest).unwrap();
        conn.write_all(b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n")
            .unwrap();
        first.extend(rest);
        Received { head, body: first }
    });
    let bridge = Bridge::new(server.path().to_path_buf());
    let rx = open(&bridge, 7, "/api/blobs/sha256:x", Some(len as u64));
    bridge.handle(&piece_message(7, 0, &body[..1000], false), |_| {});
    // The daemon has the first piece while the page still holds the rest.
    let first = first_rx.recv_timeout(WAIT).expect("the first piece");
    assert_eq!(first, body[..1000]);
    post_pieces(&bridge, 7, 1, &body[1000..], 100 * 1024);
    assert_eq!(events(&rx).last(), Some(&Event::End { id: 7 }));
    assert!(server.received().body == body);
}

#[test]
fn an_abort_mid_upload_cuts_the_connection_and_the_daemon_sees_it() {
    let (got_tx, got_rx) = mpsc::channel();
    let server = TestServer::accept(move |mut conn| {
        let head = read_head(&mut conn);
        // The daemon's side: reads until the app hangs up.
        let mut body = Vec::new();
        let mut buf = [0; 64 * 1024];
        while let Ok(n @ 1..) = conn.read(&mut buf) {
            body.extend_from_slice(&buf[..n]);
            got_tx.send(body.len()).unwrap();
        }
        got_tx.send(usize::MAX).unwrap();
        Received { head, body }
    });
    let bridge = Bridge::new(server.path().to_path_buf());
    let rx = open(&bridge, 9, "/api/blobs/sha256:x", Some(10 << 20));
    let piece = noise(64 * 1024);
    bridge.handle(&piece_message(9, 0, &piece, false), |_| {});
    while got_rx.recv_timeout(WAIT).unwrap() < piece.len() {}
    assert_eq!(
        rx.recv_timeout(WAIT).unwrap(),
        Event::Sent {
            id: 9,
            bytes: 65536
        }
    );
    bridge.handle(r#"{"op":"cancel","id":9}"#, |_| {});
    assert_eq!(got_rx.recv_timeout(WAIT).unwrap(), usize::MAX, "a hang-up");
    assert!(matches!(events(&rx)[..], [Event::Fail { id: 9, .. }]));
    // Pieces after the cancel go nowhere.
    bridge.handle(&piece_message(9, 1, &piece, true), |_| {});
    assert!(bridge.inflight.lock().unwrap().is_empty());
    assert_eq!(server.received().body, piece);
}

#[test]
fn bad_pieces_are_refused_and_the_upload_cut() {
    let cases = [
        (
            piece_message(5, 2, b"x", false),
            "piece 2 came where piece 1 was due",
        ),
        (
            r#"{"op":"body","id":5,"seq":1,"data":"not base64!","last":true}"#.to_string(),
            "bad request body",
        ),
    ];
    for (bad, message) in cases {
        let (done_tx, done_rx) = mpsc::channel();
        let server = TestServer::accept(move |mut conn| {
            let head = read_head(&mut conn);
            let mut body = Vec::new();
            let _ = conn.read_to_end(&mut body);
            done_tx.send(()).unwrap();
            Received { head, body }
        });
        let bridge = Bridge::new(server.path().to_path_buf());
        let rx = open(&bridge, 5, "/api/chat", Some(100));
        bridge.handle(&piece_message(5, 0, b"{", false), |_| {});
        bridge.handle(&bad, |_| {});
        let all = events(&rx);
        let Some(Event::Fail { message: got, .. }) = all.last() else {
            panic!("{all:?}")
        };
        assert!(got.contains(message), "{got}");
        // The daemon saw the connection end after the good piece.
        done_rx.recv_timeout(WAIT).unwrap();
        assert_eq!(server.received().body, b"{");
    }
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
    let rx = send(&bridge, "/api/chat", b"{\"model\":\"m\"}", true);
    let next = || rx.recv_timeout(WAIT).unwrap();
    assert_eq!(next(), Event::Sent { id: 7, bytes: 13 });
    let Event::Head {
        status, headers, ..
    } = next()
    else {
        panic!("the head comes next")
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
    let server = TestServer::accept(move |mut conn| {
        let got = read_request(&mut conn);
        conn.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n")
            .unwrap();
        // The daemon's side: the next read ends when the app hangs up.
        let mut buf = [0; 16];
        let n = conn.read(&mut buf).unwrap_or(0);
        closed_tx.send(n).unwrap();
        got
    });
    let bridge = Bridge::new(server.path().to_path_buf());
    let (tx, rx) = mpsc::channel();
    let message = r#"{"op":"fetch","id":9,"method":"POST","path":"/api/chat","length":2}"#;
    bridge.handle(message, move |e| tx.send(e).unwrap());
    bridge.handle(
        r#"{"op":"body","id":9,"seq":0,"data":"e30=","last":true}"#,
        |_| {},
    );
    let next = || rx.recv_timeout(WAIT).unwrap();
    assert_eq!(next(), Event::Sent { id: 9, bytes: 2 });
    assert!(matches!(next(), Event::Head { id: 9, .. }));
    assert_eq!(
        next(),
        Event::Chunk {
            id: 9,
            data: b"hi".to_vec()
        }
    );
    bridge.handle(r#"{"op":"cancel","id":9}"#, |_| {});
    assert_eq!(closed_rx.recv_timeout(WAIT).unwrap(), 0);
    assert!(matches!(next(), Event::Fail { id: 9, .. }));
    assert!(bridge.inflight.lock().unwrap().is_empty());
    assert_eq!(server.received().body, b"{}");
}

#[test]
fn a_refusal_before_the_whole_body_reaches_the_page() {
    // The daemon answers, and hangs up, after the head: the body's
    // write fails, and the page gets the daemon's answer.
    let server = TestServer::accept(|mut conn| {
        let head = read_head(&mut conn);
        conn.write_all(
            b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 16\r\n\r\n{\"error\":\"big\"}\n",
        )
        .unwrap();
        Received {
            head,
            body: Vec::new(),
        }
    });
    let bridge = Bridge::new(server.path().to_path_buf());
    let len = 64 << 20;
    let rx = open(&bridge, 7, "/api/blobs/sha256:x", Some(len));
    let _ = server.received();
    let piece = noise(1 << 20);
    for seq in 0..64 {
        bridge.handle(&piece_message(7, seq, &piece, false), |_| {});
    }
    let all = events(&rx);
    assert!(
        all.iter()
            .any(|e| matches!(e, Event::Head { status: 413, .. })),
        "{all:?}"
    );
    assert_eq!(all.last(), Some(&Event::End { id: 7 }));
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
    let all = events(&send(&bridge, "/api/show", b"{}", true));
    assert!(
        matches!(&all[1], Event::Head { status: 404, .. }),
        "{all:?}"
    );
    assert_eq!(
        all[2],
        Event::Chunk {
            id: 7,
            data: b"{\"error\":\"nope\"}\n".to_vec()
        }
    );
    assert_eq!(all[3], Event::End { id: 7 });
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
    let all = events(&send(
        &bridge,
        "/api/pull",
        b"{\"model\":\"smollm2\"}",
        true,
    ));
    let pulls: Vec<Event> = all
        .into_iter()
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
    let sent = Event::Sent { id: 3, bytes: 42 };
    assert_eq!(sent.script().unwrap(), "window.__mlxrBridge.sent(3,42)");
    assert_eq!(Event::PullFinished { model: "m".into() }.script(), None);
}

#[test]
fn messages_parse() {
    let m: Message = serde_json::from_str(
        r#"{"op":"fetch","id":1,"method":"GET","path":"/api/ps","headers":[["Accept","application/json"]],"length":0}"#,
    )
    .unwrap();
    assert!(matches!(
        m,
        Message::Fetch(FetchRequest {
            id: 1,
            length: Some(0),
            ..
        })
    ));
    let m: Message = serde_json::from_str(r#"{"op":"body","id":1,"seq":0,"last":true}"#).unwrap();
    assert_eq!(
        m,
        Message::Body(Piece {
            id: 1,
            seq: 0,
            data: String::new(),
            last: true
        })
    );
    let m: Message = serde_json::from_str(r#"{"op":"cancel","id":1}"#).unwrap();
    assert_eq!(m, Message::Cancel { id: 1 });
}
