//! The router over an empty model catalogue and a registry in a temporary
//! home, for the tests that drive it whole.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use mlxr_engine::{EngineConfig, KvBudget};
use mlxr_registry::Registry;
use mlxr_server::catalog::FileCatalog;
use mlxr_server::state::AppState;
use mlxr_server::{KeepAlive, ModelManager, ServerConfig};

/// The router with `extra` routes under its middleware; the registry lives
/// as long as the returned folder.
pub fn app_with(config: &ServerConfig, extra: Router<AppState>) -> (Router, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    let registry = Arc::new(Registry::open(home.path()).unwrap());
    let engine = EngineConfig {
        kv_budget: KvBudget::Bytes(256 << 20),
        max_num_seqs: 4,
        ..EngineConfig::default()
    };
    let models = ModelManager::new(
        Arc::new(FileCatalog::new(Vec::new())),
        engine,
        Some(2048),
        KeepAlive::For(Duration::from_secs(600)),
        3,
    )
    .with_max_memory(Some(1 << 30));
    (
        mlxr_server::router_with(Arc::new(models), registry, config, extra),
        home,
    )
}
