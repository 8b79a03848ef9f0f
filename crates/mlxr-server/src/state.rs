//! What every handler can reach.

use std::sync::Arc;

use mlxr_registry::Registry;

use crate::models::ModelManager;
use crate::server::ServerConfig;

#[derive(Clone)]
pub struct AppState {
    pub models: Arc<ModelManager>,
    pub registry: Arc<Registry>,
    /// How the server was started (`/api/mlxr/config`, the log buffer).
    pub server: Arc<ServerConfig>,
    /// Quantize and convert jobs (`/api/mlxr/jobs`).
    pub jobs: Arc<crate::jobs::Jobs>,
}
