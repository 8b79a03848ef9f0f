//! The router with its middleware, and the listeners.

mod guard;
mod socket;

use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::get;
use axum::serve::ListenerExt;
use axum::{Extension, Router};
use futures_util::FutureExt;
use mlxr_registry::Registry;
use tower_http::cors::{AllowOrigin, CorsLayer};

use self::guard::{Guard, Listener};

use crate::error::ApiError;
use crate::logs::LogBuffer;
use crate::models::ModelManager;
use crate::state::AppState;
use crate::{admin, grpc, ollama, openai, ops, ui};

#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// `host:port` to listen on.
    pub host: String,
    /// Listen on `host` (false: on `socket` only; `serve` refuses a
    /// config with neither).
    pub tcp: bool,
    /// Also listen on this Unix domain socket (mode 0600).
    pub socket: Option<PathBuf>,
    /// Give the socket to this group (a name or id) with mode 0660.
    pub socket_group: Option<String>,
    /// Also listen on this port of `host`'s address (for gRPC clients;
    /// REST answers there too).
    pub grpc_port: Option<u16>,
    /// Require `Authorization: Bearer <key>` (except on `/` and `/health`).
    pub api_key: Option<String>,
    /// Browser origins allowed besides loopback ones and the server's
    /// own (`*`: all).
    pub cors_origins: Vec<String>,
    /// `Host` names a loopback listener answers besides loopback ones,
    /// the `host` name and the machine's hostname (`*`: any).
    pub allowed_hosts: Vec<String>,
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
            tcp: true,
            socket: None,
            socket_group: None,
            grpc_port: None,
            api_key: None,
            cors_origins: Vec::new(),
            allowed_hosts: Vec::new(),
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
    router_with(models, registry, config, Router::new())
}

/// The router with `extra` routes under the same middleware (tests add a
/// panicking handler this way; the daemon adds none).
pub fn router_with(
    models: Arc<ModelManager>,
    registry: Arc<Registry>,
    config: &ServerConfig,
    extra: Router<AppState>,
) -> Router {
    let state = AppState {
        models,
        registry,
        server: Arc::new(config.clone()),
        jobs: Arc::default(),
    };
    let api_key = config.api_key.as_deref().map(Arc::from);
    let routes = Router::new()
        // Browsers get the web UI at `/`; other clients Ollama's liveness text.
        .route("/", get(ui::root).head(ops::root))
        .merge(ui::routes())
        .route("/health", get(ops::health))
        .route("/metrics", get(ops::metrics))
        .route("/api/version", get(ops::version).head(ops::version))
        .merge(openai::routes())
        .merge(ollama::routes())
        .merge(admin::routes())
        .merge(crate::jobs::routes())
        .merge(grpc::routes(state.clone(), api_key.clone()))
        .merge(extra);
    // The last layer runs first: panics are caught around everything, and
    // the guard refuses a foreign origin before CORS answers its preflight.
    routes
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(
            AuthKey(api_key),
            require_api_key,
        ))
        .layer(DefaultBodyLimit::max(config.body_limit))
        .layer(cors())
        .layer(middleware::from_fn_with_state(
            Arc::new(Guard::new(config)),
            guard::guard,
        ))
        .layer(middleware::from_fn(log_request))
        .layer(middleware::from_fn(catch_panic))
        .with_state(state)
}

async fn not_found(req: Request) -> Response {
    let path = req.uri().path();
    ApiError::not_found(format!("no route for {} {path}", req.method())).for_path(path)
}

/// A handler that panics answers 500 in its API's shape; the server and
/// the other requests go on.
async fn catch_panic(req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    match AssertUnwindSafe(next.run(req)).catch_unwind().await {
        Ok(response) => response,
        Err(_) => {
            tracing::error!(path, "the request handler panicked");
            ApiError::internal("internal error: the request handler panicked (see the server log)")
                .for_path(&path)
        }
    }
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
    // <script> request. The UI sends the key on its API calls. gRPC checks
    // the key itself, to answer with a gRPC status.
    if path == "/"
        || path == "/health"
        || ui::is_ui_path(path)
        || grpc::is_grpc_path(path)
        || req.method() == Method::OPTIONS
    {
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
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "invalid or missing API key (Authorization: Bearer <key>)",
    )
    .for_path(path)
}

/// CORS headers for the origins the guard (which runs first) let through.
fn cors() -> CorsLayer {
    CorsLayer::new()
        .allow_origin(AllowOrigin::mirror_request())
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

/// Serves until Ctrl-C or SIGTERM; streams in flight end cleanly.
pub async fn serve(
    models: Arc<ModelManager>,
    registry: Arc<Registry>,
    config: ServerConfig,
) -> std::io::Result<()> {
    let app = router(models.clone(), registry, &config);
    let socket = match &config.socket {
        Some(path) => {
            let (listener, owned) = socket::bind(path, config.socket_group.as_deref())
                .and_then(|(l, owned)| {
                    l.set_nonblocking(true)?;
                    Ok((tokio::net::UnixListener::from_std(l)?, owned))
                })
                .map_err(|e| {
                    std::io::Error::new(
                        e.kind(),
                        format!("cannot listen on {}: {e}", path.display()),
                    )
                })?;
            tracing::info!("listening on unix:{}", path.display());
            Some((listener, owned))
        }
        None => None,
    };
    if !config.tcp && socket.is_none() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "no TCP listener and no socket: nothing to listen on",
        ));
    }
    let tcp = if config.tcp {
        let listener = tokio::net::TcpListener::bind(&config.host)
            .await
            .map_err(|e| {
                std::io::Error::new(e.kind(), format!("cannot listen on {}: {e}", config.host))
            })?;
        Some(listener)
    } else {
        None
    };
    // Bound before the main listener is announced: a client that waits for
    // that line finds this one too.
    let grpc = match (config.grpc_port, &tcp) {
        (Some(port), Some(tcp)) => {
            let addr = std::net::SocketAddr::new(tcp.local_addr()?.ip(), port);
            let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!("cannot listen on {addr} (--grpc-port): {e}"),
                )
            })?;
            tracing::info!("listening for gRPC on {}", listener.local_addr()?);
            Some(listener)
        }
        (Some(_), None) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a gRPC port needs the TCP listener",
            ))
        }
        (None, _) => None,
    };
    match &tcp {
        Some(listener) => tracing::info!("listening on http://{}", listener.local_addr()?),
        None => tracing::info!("no TCP listener (--no-tcp)"),
    }
    let expiry = tokio::spawn({
        let models = models.clone();
        async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                models.unload_expired().await;
            }
        }
    });
    let grpc = match grpc {
        Some(listener) => {
            let grpc_app = app
                .clone()
                .layer(Extension(Listener::Tcp(listener.local_addr()?)));
            let shutdown = shutdown_signal(config.logs.clone());
            Some(tokio::spawn(async move {
                axum::serve(listener.tap_io(no_delay), grpc_app)
                    .with_graceful_shutdown(shutdown)
                    .await
            }))
        }
        None => None,
    };
    let tcp_server = match tcp {
        Some(listener) => {
            let tcp_app = app
                .clone()
                .layer(Extension(Listener::Tcp(listener.local_addr()?)));
            let shutdown = shutdown_signal(config.logs.clone());
            Some(async move {
                axum::serve(listener.tap_io(no_delay), tcp_app)
                    .with_graceful_shutdown(shutdown)
                    .await
            })
        }
        None => None,
    };
    let uds_server = socket.map(|(uds, owned)| {
        let uds_app = app.layer(Extension(Listener::Unix));
        let shutdown = shutdown_signal(config.logs.clone());
        async move {
            // `owned` removes the socket file when it drops, after serving.
            let _owned = owned;
            axum::serve(uds, uds_app)
                .with_graceful_shutdown(shutdown)
                .await
        }
    });
    let result = match (tcp_server, uds_server) {
        (Some(t), Some(u)) => {
            let (a, b) = tokio::join!(t, u);
            a.and(b)
        }
        (Some(t), None) => t.await,
        (None, Some(u)) => u.await,
        (None, None) => unreachable!("checked above: one listener at least"),
    };
    if let Some(grpc) = grpc {
        let _ = grpc.await;
    }
    expiry.abort();
    models.unload_all().await;
    result
}

/// Ctrl-C or SIGTERM; then ends the log followers' streams, which would
/// otherwise keep their connections (and the graceful shutdown) open.
/// Token streams write a few bytes at a time: each goes out at once rather
/// than waiting for the peer's acknowledgement of the last (Nagle's
/// algorithm), which held gRPC's tokens, 16 streams on one HTTP/2
/// connection, up to a delayed ACK (bench/results/grpc-vs-sse-2026-12-06-nodelay.md).
fn no_delay(tcp: &mut tokio::net::TcpStream) {
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!("TCP_NODELAY on an accepted connection: {e}");
    }
}

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
