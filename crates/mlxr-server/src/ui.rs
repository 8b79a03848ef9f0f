//! The web GUI (`app/ui`), embedded in the binary at build time by
//! `build.rs` when `app/ui/dist` exists.
//!
//! - `GET /ui`, `/ui/`, `/ui/{*path}`: the file at `path` in `dist`, or —
//!   for client routes (no file extension, not under `assets/`) —
//!   `index.html` (single-page app fallback). A missing asset is a 404.
//! - `GET /`: `index.html` when the `Accept` header contains `text/html` (a
//!   browser), else the plain "MLXR is running" of Ollama clients.
//! - Hashed files under `assets/` are cached for a year; everything else is
//!   revalidated (`no-cache`).
//! - Without built assets, the UI routes answer a page that says why and
//!   how to build them.

use axum::body::Body;
use axum::extract::Path;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/ui_assets.rs"));
}

/// `(path relative to dist, bytes)`, sorted by path.
type Assets = [(&'static str, &'static [u8])];

/// The UI files of one build, or why there are none.
struct Build {
    assets: &'static Assets,
    not_built_reason: &'static str,
}

const EMBEDDED: Build = Build {
    assets: embedded::ASSETS,
    not_built_reason: embedded::NOT_BUILT_REASON,
};

/// Whether the UI's assets were embedded in this build.
pub fn is_built() -> bool {
    !EMBEDDED.assets.is_empty()
}

/// The `/ui` routes. Merge into the router; they need no state.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/ui", get(index))
        .route("/ui/", get(index))
        .route("/ui/{*path}", get(file))
}

/// Paths the UI's static files live under: they carry no data, so an API
/// key must not guard them (a browser cannot send one for `<script>` tags).
pub fn is_ui_path(path: &str) -> bool {
    path == "/ui" || path.starts_with("/ui/")
}

/// `GET /`: the UI for browsers, "MLXR is running" for everyone else.
pub async fn root(headers: HeaderMap) -> Response {
    if wants_html(&headers) {
        respond(&EMBEDDED, "")
    } else {
        crate::ops::root().await.into_response()
    }
}

async fn index() -> Response {
    respond(&EMBEDDED, "")
}

async fn file(Path(path): Path<String>) -> Response {
    respond(&EMBEDDED, &path)
}

fn wants_html(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/html"))
}

/// The response for `path` (relative to `/ui/`) given the embedded files.
fn respond(build: &Build, path: &str) -> Response {
    let path = path.trim_start_matches('/');
    if let Some(bytes) = lookup(build.assets, path) {
        let cache = if path.starts_with("assets/") {
            "public, max-age=31536000, immutable"
        } else {
            "no-cache"
        };
        return asset_response(StatusCode::OK, content_type(path), cache, bytes);
    }
    if path.starts_with("assets/") || last_segment_has_extension(path) {
        return asset_response(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "no-cache",
            format!("no UI file {path}\n").into_bytes(),
        );
    }
    match lookup(build.assets, "index.html") {
        Some(index) => asset_response(
            StatusCode::OK,
            "text/html; charset=utf-8",
            "no-cache",
            index,
        ),
        None => asset_response(
            StatusCode::OK,
            "text/html; charset=utf-8",
            "no-cache",
            not_built_page(build.not_built_reason),
        ),
    }
}

fn lookup(assets: &Assets, path: &str) -> Option<&'static [u8]> {
    assets
        .binary_search_by(|(p, _)| (*p).cmp(path))
        .ok()
        .map(|i| assets[i].1)
}

fn last_segment_has_extension(path: &str) -> bool {
    path.rsplit('/').next().is_some_and(|s| s.contains('.'))
}

fn asset_response(
    status: StatusCode,
    content_type: &'static str,
    cache: &'static str,
    body: impl Into<Body>,
) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, cache),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body.into(),
    )
        .into_response()
}

fn content_type(path: &str) -> &'static str {
    let ext = path.rsplit_once('.').map_or("", |(_, e)| e);
    match ext.to_ascii_lowercase().as_str() {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json",
        "webmanifest" => "application/manifest+json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "ico" => "image/x-icon",
        "woff2" => "font/woff2",
        "woff" => "font/woff",
        "ttf" => "font/ttf",
        "txt" => "text/plain; charset=utf-8",
        "wasm" => "application/wasm",
        _ => "application/octet-stream",
    }
}

/// The page the UI routes answer when the build embedded no UI: why, and
/// how to build it (build.rs does it itself when npm is on the PATH).
fn not_built_page(reason: &str) -> String {
    let reason = if reason.is_empty() {
        "app/ui/dist did not exist when this binary was built".to_string()
    } else {
        html_escape(reason)
    };
    format!(
        r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>MLXR — web UI not built</title>
<style>
  :root {{ color-scheme: light dark; font-family: system-ui, sans-serif; }}
  body {{ max-width: 42rem; margin: 3rem auto; padding: 0 1rem; line-height: 1.5; }}
  pre {{ padding: 0.75rem 1rem; border-radius: 6px; background: rgba(127, 127, 127, 0.15); overflow-x: auto; }}
</style>
</head>
<body>
<main>
<h1>MLXR is running — the web UI was not built into this binary</h1>
<p>Why: {reason}.</p>
<p><code>cargo build</code> builds the web UI itself when <code>npm</code> is on the
PATH (unless <code>MLXR_SKIP_UI_BUILD=1</code>). Install Node.js 20.19 or newer with npm,
then build the UI and rebuild mlxr from the repository's root:</p>
<pre><code>scripts/build-ui.sh   # or: cd app/ui &amp;&amp; npm ci &amp;&amp; npm run build
cargo build --release -p mlxr</code></pre>
<p>The APIs work without it: OpenAI under <code>/v1</code>, Ollama under <code>/api</code>,
Prometheus metrics at <code>/metrics</code>.</p>
</main>
</body>
</html>
"#
    )
}

fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUILT: &Build = &Build {
        assets: &[
            ("assets/index-abc123.js", b"console.log(1)"),
            ("favicon.svg", b"<svg/>"),
            ("index.html", b"<!doctype html><div id=root></div>"),
        ],
        not_built_reason: "",
    };

    async fn body(r: Response) -> String {
        let bytes = axum::body::to_bytes(r.into_body(), usize::MAX)
            .await
            .unwrap();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    fn header_of(r: &Response, name: header::HeaderName) -> &str {
        r.headers().get(name).unwrap().to_str().unwrap()
    }

    #[test]
    fn content_types() {
        for (path, want) in [
            ("index.html", "text/html; charset=utf-8"),
            ("assets/a-1.js", "text/javascript; charset=utf-8"),
            ("assets/a-1.CSS", "text/css; charset=utf-8"),
            ("favicon.svg", "image/svg+xml"),
            ("x.woff2", "font/woff2"),
            ("x.map", "application/json"),
            ("noext", "application/octet-stream"),
        ] {
            assert_eq!(content_type(path), want, "{path}");
        }
    }

    #[tokio::test]
    async fn serves_files_with_cache_headers() {
        let r = respond(BUILT, "assets/index-abc123.js");
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(
            header_of(&r, header::CONTENT_TYPE),
            "text/javascript; charset=utf-8"
        );
        assert_eq!(
            header_of(&r, header::CACHE_CONTROL),
            "public, max-age=31536000, immutable"
        );
        assert_eq!(body(r).await, "console.log(1)");

        let r = respond(BUILT, "favicon.svg");
        assert_eq!(header_of(&r, header::CONTENT_TYPE), "image/svg+xml");
        assert_eq!(header_of(&r, header::CACHE_CONTROL), "no-cache");
    }

    #[tokio::test]
    async fn client_routes_fall_back_to_index() {
        for path in ["", "/", "chat", "models/details", "metrics/"] {
            let r = respond(BUILT, path);
            assert_eq!(r.status(), StatusCode::OK, "{path}");
            assert_eq!(
                header_of(&r, header::CONTENT_TYPE),
                "text/html; charset=utf-8"
            );
            assert_eq!(header_of(&r, header::CACHE_CONTROL), "no-cache");
            assert!(body(r).await.contains("id=root"), "{path}");
        }
    }

    #[tokio::test]
    async fn missing_assets_are_404() {
        for path in ["assets/gone-123.js", "robots.txt", "assets/sub"] {
            let r = respond(BUILT, path);
            assert_eq!(r.status(), StatusCode::NOT_FOUND, "{path}");
            assert!(body(r).await.contains(path));
        }
    }

    #[tokio::test]
    async fn without_assets_routes_explain_why_and_how_to_build() {
        let not_built = Build {
            assets: &[],
            not_built_reason: "app/ui/dist does not exist and npm was not found <&>",
        };
        for path in ["", "chat", "models"] {
            let r = respond(&not_built, path);
            assert_eq!(r.status(), StatusCode::OK);
            assert_eq!(
                header_of(&r, header::CONTENT_TYPE),
                "text/html; charset=utf-8"
            );
            let page = body(r).await;
            assert!(
                page.contains(
                    "Why: app/ui/dist does not exist and npm was not found &lt;&amp;&gt;."
                ),
                "{page}"
            );
            assert!(page.contains("scripts/build-ui.sh"), "{page}");
            assert!(page.contains("npm ci &amp;&amp; npm run build"), "{page}");
            assert!(page.contains("cargo build --release -p mlxr"));
        }
    }

    #[tokio::test]
    async fn root_serves_html_only_to_browsers() {
        let mut browser = HeaderMap::new();
        browser.insert(
            header::ACCEPT,
            "text/html,application/xhtml+xml,*/*;q=0.8".parse().unwrap(),
        );
        let r = root(browser).await;
        assert_eq!(
            header_of(&r, header::CONTENT_TYPE),
            "text/html; charset=utf-8"
        );

        for accept in [None, Some("*/*"), Some("application/json")] {
            let mut headers = HeaderMap::new();
            if let Some(a) = accept {
                headers.insert(header::ACCEPT, a.parse().unwrap());
            }
            let r = root(headers).await;
            assert_eq!(r.status(), StatusCode::OK);
            assert_eq!(body(r).await, "MLXR is running", "{accept:?}");
        }
    }

    #[test]
    fn ui_paths() {
        assert!(is_ui_path("/ui"));
        assert!(is_ui_path("/ui/assets/x.js"));
        assert!(!is_ui_path("/uix"));
        assert!(!is_ui_path("/api/tags"));
    }
}
