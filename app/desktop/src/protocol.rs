//! The `mlxr://` scheme the window loads the web UI from: `GET /ui/…` is
//! fetched from the daemon over its socket (the daemon embeds the UI, so
//! the UI always matches the daemon). Whole bodies are fine here — static
//! files; the API goes through the streaming bridge (`bridge.rs`), and this
//! scheme answers nothing else.

use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use wry::http::{header, Request, Response, StatusCode};

use crate::uds_http;

/// The page the window opens.
pub const START_URL: &str = "mlxr://localhost/ui/";

/// Whether the scheme serves `path`.
pub fn is_ui_path(path: &str) -> bool {
    path == "/ui" || path.starts_with("/ui/")
}

/// Answers one request of the page for `mlxr://localhost/…`; waits up to
/// `wait` for a daemon to listen on `socket` (the window opens while the
/// app's daemon is still starting).
pub fn respond(socket: &Path, req: &Request<Vec<u8>>, wait: Duration) -> Response<Vec<u8>> {
    let path = req.uri().path();
    let target = req
        .uri()
        .path_and_query()
        .map_or(path, |pq| pq.as_str())
        .to_string();
    if path == "/" {
        return Response::builder()
            .status(StatusCode::FOUND)
            .header(header::LOCATION, START_URL)
            .body(Vec::new())
            .expect("a valid response");
    }
    if req.method() != "GET" || !is_ui_path(path) {
        return text(
            StatusCode::NOT_FOUND,
            format!("mlxr-desktop serves only the UI (/ui/) here, not {path}"),
        );
    }
    let request = uds_http::Request {
        method: "GET",
        target: &target,
        headers: vec![("Accept".into(), "text/html,*/*".into())],
        body: Vec::new(),
    };
    let answer = connect_within(socket, wait).and_then(|conn| {
        uds_http::send_on(conn, &request, Some(Duration::from_secs(30)))?.read_all()
    });
    match answer {
        Ok((head, body)) => {
            let mut builder = Response::builder().status(head.status);
            for name in ["content-type", "cache-control", "etag"] {
                if let Some(v) = head.header(name) {
                    builder = builder.header(name, v);
                }
            }
            builder
                .body(body)
                .unwrap_or_else(|e| text(StatusCode::BAD_GATEWAY, e.to_string()))
        }
        Err(e) => not_running(&e.to_string()),
    }
}

fn connect_within(socket: &Path, wait: Duration) -> Result<UnixStream, uds_http::HttpError> {
    let end = Instant::now() + wait;
    loop {
        match uds_http::connect(socket) {
            Err(_) if Instant::now() < end => std::thread::sleep(Duration::from_millis(100)),
            result => return result,
        }
    }
}

/// A page that says so and tries again every 2 s (the tray's Start brings
/// the UI back by itself).
fn not_running(why: &str) -> Response<Vec<u8>> {
    let why = why.replace('&', "&amp;").replace('<', "&lt;");
    let page = format!(
        "<!doctype html><meta charset=utf-8><meta http-equiv=refresh content=2>\
         <title>MLXR</title><body style=\"font-family:sans-serif;margin:3em\">\
         <h1>The MLXR engine is not running</h1>\
         <p>Start it from the tray menu (Start the engine); this page reloads by itself.</p>\
         <p style=\"color:#868e96\">{why}</p>"
    );
    Response::builder()
        .status(StatusCode::BAD_GATEWAY)
        .header(header::CONTENT_TYPE, "text/html; charset=utf-8")
        .body(page.into_bytes())
        .expect("a valid response")
}

fn text(status: StatusCode, message: String) -> Response<Vec<u8>> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(message.into_bytes())
        .expect("a valid response")
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::test_server::TestServer;

    fn get(uri: &str) -> Request<Vec<u8>> {
        Request::builder().uri(uri).body(Vec::new()).unwrap()
    }

    #[test]
    fn serves_the_ui_from_the_socket() {
        let server = TestServer::start(|mut conn| {
            conn.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 6\r\n\r\n<html>",
            )
            .unwrap();
        });
        let resp = respond(
            server.path(),
            &get("mlxr://localhost/ui/chat?x=1"),
            Duration::ZERO,
        );
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "text/html");
        assert_eq!(resp.body(), b"<html>");
        assert!(server.finish().starts_with("GET /ui/chat?x=1 HTTP/1.1\r\n"));
    }

    #[test]
    fn refuses_the_api_and_redirects_the_root() {
        let nowhere = Path::new("/nonexistent/mlxr.sock");
        let at_once = |uri| respond(nowhere, &get(uri), Duration::ZERO);
        assert_eq!(at_once("mlxr://localhost/api/ps").status(), 404);
        assert_eq!(at_once("mlxr://localhost/metrics").status(), 404);
        let root = at_once("mlxr://localhost/");
        assert_eq!(root.status(), 302);
        assert_eq!(root.headers()["location"], START_URL);
        let down = at_once("mlxr://localhost/ui/");
        assert_eq!(down.status(), 502);
        let page = String::from_utf8(down.body().clone()).unwrap();
        assert!(
            page.contains("http-equiv=refresh") && page.contains("not running"),
            "{page}"
        );
    }

    #[test]
    fn waits_for_a_daemon_that_is_starting() {
        let dir = crate::test_server::temp_dir("late");
        let path = dir.join("late.sock");
        let late = path.clone();
        let daemon = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(400));
            let listener = std::os::unix::net::UnixListener::bind(&late).unwrap();
            let (mut conn, _) = listener.accept().unwrap();
            let mut buf = [0; 1024];
            let _ = std::io::Read::read(&mut conn, &mut buf).unwrap();
            conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .unwrap();
        });
        let resp = respond(&path, &get("mlxr://localhost/ui/"), Duration::from_secs(10));
        assert_eq!(
            (resp.status().as_u16(), resp.body().as_slice()),
            (200, &b"ok"[..])
        );
        daemon.join().unwrap();
        std::fs::remove_dir_all(dir).unwrap();
    }
}
