//! The `mlxr://` scheme the window loads the web UI from: `GET /ui/…` is
//! fetched from the daemon over its socket (the daemon embeds the UI, so
//! the UI always matches the daemon). Whole bodies are fine here — static
//! files; the API goes through the streaming bridge (`bridge.rs`), and this
//! scheme answers nothing else.

use std::path::Path;
use std::time::Duration;

use wry::http::{header, Request, Response, StatusCode};

use crate::uds_http;

/// The page the window opens.
pub const START_URL: &str = "mlxr://localhost/ui/";

/// Whether the scheme serves `path`.
pub fn is_ui_path(path: &str) -> bool {
    path == "/ui" || path.starts_with("/ui/")
}

/// Answers one request of the page for `mlxr://localhost/…`.
pub fn respond(socket: &Path, req: &Request<Vec<u8>>) -> Response<Vec<u8>> {
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
    let answer =
        uds_http::send(socket, &request, Some(Duration::from_secs(30))).and_then(|r| r.read_all());
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
        Err(e) => text(
            StatusCode::BAD_GATEWAY,
            format!("The MLXR engine is not running ({e}). Start it from the tray menu."),
        ),
    }
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
        let resp = respond(server.path(), &get("mlxr://localhost/ui/chat?x=1"));
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "text/html");
        assert_eq!(resp.body(), b"<html>");
        assert!(server.finish().starts_with("GET /ui/chat?x=1 HTTP/1.1\r\n"));
    }

    #[test]
    fn refuses_the_api_and_redirects_the_root() {
        let nowhere = Path::new("/nonexistent/mlxr.sock");
        assert_eq!(
            respond(nowhere, &get("mlxr://localhost/api/ps")).status(),
            404
        );
        assert_eq!(
            respond(nowhere, &get("mlxr://localhost/metrics")).status(),
            404
        );
        let root = respond(nowhere, &get("mlxr://localhost/"));
        assert_eq!(root.status(), 302);
        assert_eq!(root.headers()["location"], START_URL);
        assert_eq!(respond(nowhere, &get("mlxr://localhost/ui/")).status(), 502);
    }
}
