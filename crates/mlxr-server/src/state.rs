//! What every handler can reach.

use std::sync::Arc;

use mlxr_registry::Registry;

use crate::models::ModelManager;

#[derive(Clone)]
pub struct AppState {
    pub models: Arc<ModelManager>,
    pub registry: Arc<Registry>,
}
