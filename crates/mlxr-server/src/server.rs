//! The router with its middleware, and the listeners.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use mlxr_registry::Registry;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::error::ApiError;
use crate::logs::LogBuffer;
use crate::models::ModelManager;
use crate::state::AppState;
use crate::{admin, ollama, openai, ops, ui};

#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// `host:port` to listen on.
    pub host: String,
    /// Also listen on this Unix domain socket.
    pub socket: Option<PathBuf>,
    /// Require `Authorization: Bearer <key>` (except on `/` and `/health`).
    pub api_key: Option<String>,
    /// Browser origins allowed besides localhost ones.
    pub cors_origins: Vec<String>,
    /// Largest request body accepted, in bytes (blob uploads excepted).
    pub body_limit: usize,
    /// Largest blob upload (`POST /api/blobs`), in bytes.
    pub max_blob_size: u64,
    /// Where the registry lives (reported by `/api/mlxr/config`).
    pub home: Option<PathBuf>,
    /// CPU threads of the engines (reported; `None` = all cores).
    pub threads: Option<usize>,
    /// The recent log lines `/api/mlxr/logs` serves; the caller feeds it
    /// with [`LogBuffer::layer`]. Closed when the server shuts down.
    pub logs: LogBuffer,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            host: DEFAULT_HOST.to_string(),
            socket: None,
            api_key: None,
            cors_origins: Vec::new(),
            body_limit: 32 << 20,
            max_blob_size: ollama::blobs::default_max_blob_size(),
            home: None,
            threads: None,
            logs: LogBuffer::default(),
        }
    }
}

/// Ollama's port is 11434; ours sits next to it so both can run at once.
pub const DEFAULT_HOST: &str = "127.0.0.1:11435";

#[derive(Clone)]
struct AuthKey(Option<Arc<str>>);

pub fn router(models: Arc<ModelManager>, registry: Arc<Registry>, config: &ServerConfig) -> Router {
    let state = AppState {
        models,
        registry,
        server: Arc::new(config.clone()),
    };
    Router::new()
        // Browsers get the web UI at `/`; other clients Ollama's liveness text.
        .route("/", get(ui::root).head(ops::root))
        .merge(ui::routes())
        .route("/health", get(ops::health))
        .route("/metrics", get(ops::metrics))
        .route("/api/version", get(ops::version).head(ops::version))
        .merge(openai::routes())
        .merge(ollama::routes())
        .merge(admin::routes())
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(
            AuthKey(config.api_key.as_deref().map(Arc::from)),
            require_api_key,
        ))
        .layer(DefaultBodyLimit::max(config.body_limit))
        .layer(middleware::from_fn(log_request))
        .layer(cors(&config.cors_origins))
        .layer(CatchPanicLayer::custom(|_| {
            error_response(
                "/",
                ApiError::internal("internal error: the request handler panicked"),
            )
        }))
        .with_state(state)
}

async fn not_found(req: Request) -> Response {
    let path = req.uri().path().to_string();
    error_response(
        &path,
        ApiError::not_found(format!("no route for {} {path}", req.method())),
    )
}

/// An error in the shape of the API the path belongs to.
fn error_response(path: &str, e: ApiError) -> Response {
    let body = if path.starts_with("/api/") {
        e.ollama_body()
    } else {
        e.openai_body()
    };
    (e.status, Json(body)).into_response()
}

/// One structured log line per request: method, path, status, duration
/// (until the response head; streams go on after it).
async fn log_request(req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let started = std::time::Instant::now();
    let response = next.run(req).await;
    tracing::info!(
        %method,
        path,
        status = response.status().as_u16(),
        ms = %format_args!("{:.3}", started.elapsed().as_secs_f64() * 1000.0),
        "request"
    );
    response
}

async fn require_api_key(State(key): State<AuthKey>, req: Request, next: Next) -> Response {
    let Some(key) = key.0 else {
        return next.run(req).await;
    };
    let path = req.uri().path();
    // Static UI files are public: a browser cannot add a Bearer token to a
    // <script> request. The UI sends the key on its API calls.
    if path == "/" || path == "/health" || ui::is_ui_path(path) || req.method() == Method::OPTIONS {
        return next.run(req).await;
    }
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if given == Some(&*key) {
        return next.run(req).await;
    }
    let path = path.to_string();
    error_response(
        &path,
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "invalid or missing API key (Authorization: Bearer <key>)",
        ),
    )
}

/// Localhost origins on any port, plus the configured ones.
fn cors(extra: &[String]) -> CorsLayer {
    let extra: Vec<String> = extra.to_vec();
    CorsLayer::new()
        .allow_origin(AllowOrigin::predicate(move |origin: &HeaderValue, _| {
            let Ok(origin) = origin.to_str() else {
                return false;
            };
            extra.iter().any(|o| o == "*" || o == origin) || is_local_origin(origin)
        }))
        .allow_methods([
            Method::GET,
            Method::POST,
            Method::PATCH,
            Method::DELETE,
            Method::HEAD,
            Method::OPTIONS,
        ])
        .allow_headers(tower_http::cors::Any)
}

fn is_local_origin(origin: &str) -> bool {
    let Some(rest) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    let host = match rest.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => rest.split(':').next().unwrap_or(""),
    };
    matches!(host, "localhost" | "127.0.0.1" | "0.0.0.0" | "::1")
}

/// Serves until Ctrl-C or SIGTERM; streams in flight end cleanly.
pub async fn serve(
    models: Arc<ModelManager>,
    registry: Arc<Registry>,
    config: ServerConfig,
) -> std::io::Result<()> {
    let app = router(models.clone(), registry, &config);
    let expiry = tokio::spawn({
        let models = models.clone();
        async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                models.unload_expired().await;
            }
        }
    });
    let tcp = tokio::net::TcpListener::bind(&config.host)
        .await
        .map_err(|e| {
            std::io::Error::new(e.kind(), format!("cannot listen on {}: {e}", config.host))
        })?;
    tracing::info!("listening on http://{}", tcp.local_addr()?);
    let tcp_server =
        axum::serve(tcp, app.clone()).with_graceful_shutdown(shutdown_signal(config.logs.clone()));
    let result = match &config.socket {
        Some(path) => {
            let _ = std::fs::remove_file(path);
            let uds = tokio::net::UnixListener::bind(path).map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!("cannot listen on {}: {e}", path.display()),
                )
            })?;
            tracing::info!("listening on unix:{}", path.display());
            let uds_server =
                axum::serve(uds, app).with_graceful_shutdown(shutdown_signal(config.logs.clone()));
            let (a, b) = tokio::join!(tcp_server, uds_server);
            let _ = std::fs::remove_file(path);
            a.and(b)
        }
        None => tcp_server.await,
    };
    expiry.abort();
    result
}

/// Ctrl-C or SIGTERM; then ends the log followers' streams, which would
/// otherwise keep their connections (and the graceful shutdown) open.
async fn shutdown_signal(logs: LogBuffer) {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = terminate => {},
    }
    tracing::info!("shutting down");
    logs.close();
}

#[cfg(test)]
mod tests {
    #[test]
    fn local_origins() {
        for ok in [
            "http://localhost:3000",
            "http://127.0.0.1",
            "https://[::1]:8080",
            "http://0.0.0.0:1",
        ] {
            assert!(super::is_local_origin(ok), "{ok}");
        }
        for bad in [
            "http://evil.com",
            "http://localhost.evil.com",
            "null",
            "file://x",
        ] {
            assert!(!super::is_local_origin(bad), "{bad}");
        }
    }
}
