//! A request whose handler panics answers 500 in the API's error shape and
//! the server goes on serving: the real router over real TCP, with a route
//! that panics added under its middleware (`router_with`; only this test
//! has that route).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use mlxr_engine::{EngineConfig, KvBudget};
use mlxr_registry::Registry;
use mlxr_server::catalog::FileCatalog;
use mlxr_server::{KeepAlive, ModelManager, ServerConfig};
use serde_json::Value;

/// Serves the router on 127.0.0.1:0 in a thread of its own (for the rest
/// of the test process) and answers its address.
fn start_server() -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let home = tempfile::tempdir().unwrap();
        let registry = Arc::new(Registry::open(home.path()).unwrap());
        let engine = EngineConfig {
            kv_budget: KvBudget::Bytes(64 << 20),
            ..EngineConfig::default()
        };
        let models = ModelManager::new(
            Arc::new(FileCatalog::new(Vec::new())),
            engine,
            Some(512),
            KeepAlive::For(Duration::from_secs(60)),
            1,
        );
        async fn panic() -> &'static str {
            panic!("fault injection: GET /api/mlxr/debug/panic")
        }
        let panicking =
            axum::Router::new().route("/api/mlxr/debug/panic", axum::routing::get(panic));
        let app = mlxr_server::router_with(
            Arc::new(models),
            registry,
            &ServerConfig::default(),
            panicking,
        );
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
