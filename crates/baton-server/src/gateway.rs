//! The OpenAI/Anthropic-compatible gateway.

use std::sync::Arc;

use axum::Router;

use crate::state::AppState;

/// The gateway's routes.
pub fn routes() -> Router<Arc<AppState>> {
    Router::new()
}
