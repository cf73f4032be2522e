//! The JSON API under `/v1/`: one module per resource, each a `routes()` of handlers annotated
//! with `#[utoipa::path]`, so `/openapi.json` is generated from the code that answers.
//!
//! Conventions every module follows:
//! - the first extractor is [`Caller`](crate::auth::Caller): every store call is scoped by its
//!   tenant, and a resource of another tenant is a 404, never a 403;
//! - bodies are read with [`ApiJson`](crate::problem::ApiJson) into structs that
//!   `deny_unknown_fields`, so a misspelt field is a 422, not silently ignored;
//! - every error is a [`Problem`](crate::problem::Problem); each handler's `responses(...)`
//!   lists the statuses it can answer, with [`ProblemBody`](crate::problem::ProblemBody).

use std::sync::Arc;

use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;

use crate::state::AppState;

pub mod cache;
pub mod compaction;
pub mod context;
pub mod history;
pub mod ops;
pub mod reports;
pub mod runs;
pub mod summaries;
pub mod working;

#[cfg(test)]
mod tests;

/// The API's routes, with their OpenAPI description.
pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(runs::routes())
        .merge(history::routes())
        .merge(context::routes())
        .merge(compaction::routes())
        .merge(summaries::routes())
        .merge(working::routes())
        .merge(ops::routes())
        .merge(cache::routes())
        .merge(reports::routes())
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "baton",
        description = "Durable, bounded context for LLM agents: append-only history, summaries installed by compare-and-swap, recall, the idempotency ledger, the response cache and the duplicate-work report. Every route is scoped to the tenant of the bearer key (`baton keys create --tenant T`). Errors are RFC 9457 problem details.",
        license(name = "MIT OR Apache-2.0")
    ),
    modifiers(&BearerKey),
    security(("bearer" = [])),
    components(schemas(crate::problem::ProblemBody))
)]
struct ApiDoc;

struct BearerKey;

impl Modify for BearerKey {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        let mut http = Http::new(HttpAuthScheme::Bearer);
        http.bearer_format = Some("bk_<id>_<secret>".to_owned());
        http.description = Some("A tenant's API key (`baton keys create --tenant T`)".to_owned());
        components.add_security_scheme("bearer", SecurityScheme::Http(http));
    }
}
