//! A request whose handler panics answers 500 in the API's error shape and
//! the server goes on serving: the real router over real TCP, with a route
//! that panics added under its middleware (`router_with`; only this test
//! has that route).

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use mlxr_server::ServerConfig;
use serde_json::Value;

/// Serves the router on 127.0.0.1:0 in a thread of its own (for the rest
/// of the test process) and answers its address.
fn start_server() -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        async fn panic() -> &'static str {
            panic!("fault injection: GET /api/mlxr/debug/panic")
        }
        let panicking =
            axum::Router::new().route("/api/mlxr/debug/panic", axum::routing::get(panic));
        let (app, _home) = common::app_with(&ServerConfig::default(), panicking);
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    rx.recv().unwrap()
}

/// `GET path` over a new connection: the status and the JSON body.
fn get(addr: SocketAddr, path: &str) -> (u16, Value) {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let body = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {response}"));
    (status, body)
}

#[test]
fn a_panicking_request_answers_500_and_the_server_keeps_serving() {
    let addr = start_server();
    for _ in 0..3 {
        let (status, body) = get(addr, "/api/mlxr/debug/panic");
        assert_eq!(status, 500, "{body}");
        // Ollama's error shape, as every /api/ route answers.
        let message = body["error"].as_str().unwrap_or_else(|| panic!("{body}"));
        assert!(message.contains("panicked"), "{message}");

        let (status, body) = get(addr, "/api/version");
        assert_eq!(status, 200, "{body}");
        assert!(body["version"].is_string(), "{body}");
    }
}
