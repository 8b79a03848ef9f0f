//! What every handler can reach.

use std::sync::Arc;

use crate::models::ModelManager;

#[derive(Clone)]
pub struct AppState {
    pub models: Arc<ModelManager>,
}
