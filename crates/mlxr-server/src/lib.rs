//! The mlxr daemon: OpenAI- (`/v1/...`, SSE) and Ollama-compatible
//! (`/api/...`, NDJSON) HTTP APIs over the engine.
//!
//! - [`catalog`]: model names to files; [`models`]: load on first use,
//!   keep-alive, least-recently-used unloading.
//! - [`openai`], [`ollama`]: the two REST APIs; [`grpc`]: the gRPC API on
//!   the same listeners; [`ops`]: health, version, metrics.
//! - [`admin`]: the daemon's configuration and live log for the web UI
//!   ([`logs`] keeps the lines).
//! - [`limits`]: every bound on the work one request may ask for.
//! - [`server`]: the router, middleware (origin and host guard, auth, CORS,
//!   limits, panics) and listeners (TCP, Unix socket), graceful shutdown;
//!   [`extract`]: JSON request bodies; [`wire`]: JSON lines of streamed answers.

pub mod admin;
pub mod catalog;
pub mod embedding;
pub mod error;
pub mod extract;
pub mod generation;
pub mod grpc;
pub mod jobs;
pub mod limits;
pub mod logs;
pub mod models;
pub mod ollama;
pub mod openai;
pub mod ops;
pub mod server;
pub mod state;
pub mod structured;
pub mod tools;
pub mod ui;
pub mod wire;

pub use catalog::{FileCatalog, ModelCatalog, ModelSpec};
pub use logs::LogBuffer;
pub use mlxr_engine::ByteSize;
pub use models::{KeepAlive, ModelManager};
pub use server::{router, router_with, serve, ServerConfig};

/// `system_fingerprint` of OpenAI responses.
pub const SYSTEM_FINGERPRINT: &str = concat!("mlxr-", env!("CARGO_PKG_VERSION"));
