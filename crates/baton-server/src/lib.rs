//! `baton serve`: baton over HTTP.
//!
//! - `api`: the JSON API under `/v1/` (runs, history, context, compaction, summaries, working
//!   state, the ledger, the cache, reports), every route scoped to the tenant of the caller's
//!   key (`auth`) and described by the OpenAPI 3.1 document at `/openapi.json`;
//! - `gateway`: `POST /v1/chat/completions`, `/v1/responses`, `/v1/embeddings` and
//!   `/v1/messages`, forwarded to the configured upstream through the exact cache, in-flight
//!   dedup and the call log, with `Idempotency-Key` support; `GET /v1/models`,
//!   `POST /v1/messages/count_tokens` and `/v1/responses/{id}…` relayed; the vendor's error
//!   shape for baton's own errors on those routes;
//! - `/ui`: the dashboard (`baton-ui`), unless `Config::ui` is off;
//! - `/healthz` (the process answers), `/readyz` (the store answers and the server is not
//!   draining), `/metrics` (`metrics`).
//!
//! Around every route: a request id (`x-request-id`, kept from the caller when given, cut to
//! 128 safe characters, else a UUIDv7, echoed on the response and in every log line of the
//! request), a body limit (413 at once on a declared length over it) and a body deadline (408)
//! (`limits`), a timeout for API routes, and problem+json for every error (`problem`), also
//! for a route or method that does not exist and for what hyper rejects before any route.
//! Connections have a header-read and an idle timeout and a cap (`conn`). Logs never carry
//! headers, so no key reaches them.
//!
//! The public API is [`app`] (the router, for embedding), [`serve`] (the router on a listener
//! until shutdown), [`Config`] and [`AppState`]; everything else is the service's own. The
//! bodies it answers with are `baton-view`'s types, the same the command line prints with
//! `--json`.

mod api;
mod auth;
mod conn;
mod gateway;
mod limits;
mod metrics;
mod problem;
mod state;

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderName, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use baton_store::keys::KeyHash;
use serde_json::json;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::{DefaultOnRequest, TraceLayer};

pub use gateway::managed::TenantContext;
pub use state::{AppState, Config};

use crate::problem::{ApiJson, Problem};

pub(crate) const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The whole service: API, gateway, health, metrics and the OpenAPI document.
pub fn app(state: Arc<AppState>) -> Router {
    let (api, openapi) = api::routes().split_for_parts();
    // Serialized once: the document only changes with the code.
    let openapi: Arc<str> = openapi.to_json().unwrap_or_default().into();
    let api = api.layer(middleware::from_fn_with_state(state.clone(), api_timeout));
    let mut router = Router::new();
    if state.config.ui {
        router = router.nest_service(
            baton_ui::BASE,
            baton_ui::router(baton_ui::Ui::new(
                state.store.clone(),
                state.config.ui_open_tenant.clone(),
                state.config.prices.clone(),
            )),
        );
    }
    router
        .merge(api)
        .merge(gateway::routes())
        .route_service(
            "/mcp",
            tower::ServiceBuilder::new()
                .layer(middleware::from_fn_with_state(state.clone(), mcp_auth))
                .service(baton_mcp::http_service(state.store.clone())),
        )
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics::scrape))
        .route(
            "/openapi.json",
            get(move || {
                let openapi = openapi.clone();
                async move {
                    (
                        [(axum::http::header::CONTENT_TYPE, "application/json")],
                        openapi.to_string(),
                    )
                }
            }),
        )
        .fallback(problem::no_route)
        .method_not_allowed_fallback(problem::wrong_method)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            metrics::track,
        ))
        .layer(middleware::from_fn_with_state(state.clone(), limits::body))
        .layer(middleware::from_fn(gateway::relay::vendor_errors))
        .layer(DefaultBodyLimit::max(state.config.body_limit))
        .layer(PropagateRequestIdLayer::new(REQUEST_ID))
        .layer(
            TraceLayer::new_for_http()
                .on_request(DefaultOnRequest::new().level(tracing::Level::DEBUG))
                .on_response(
                    |response: &Response, latency: std::time::Duration, _: &tracing::Span| {
                        // Latency as a number, so a JSON log is queried without parsing units.
                        tracing::info!(
                            status = response.status().as_u16(),
                            latency_ms = latency.as_secs_f64() * 1000.0,
                            "finished processing request"
                        );
                    },
                )
                .make_span_with(|request: &Request| {
                    let id = request
                        .headers()
                        .get(REQUEST_ID)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("-");
                    // `route`, `tenant`, `cache` and `model` are recorded once known.
                    tracing::info_span!(
                        "request",
                        request_id = %id,
                        method = %request.method(),
                        path = %request.uri().path(),
                        route = tracing::field::Empty,
                        tenant = tracing::field::Empty,
                        cache = tracing::field::Empty,
                        model = tracing::field::Empty,
                    )
                }),
        )
        .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
        .layer(middleware::from_fn(limits::request_id))
        .with_state(state)
}

/// Serves `state` on `listener` until `shutdown` resolves, then stops taking connections and
/// lets the requests in flight finish (each one's store writes are whole or absent). Each
/// connection lives by the configured timeouts and cap (see `conn`). The tokenizer
/// vocabularies start loading in the background, so the first request that counts with one
/// does not wait for it.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    baton_reports::preload();
    let served = conn::serve(listener, state.clone(), app(state.clone()), shutdown).await;
    // The requests have finished; their call-log lines may still be queued.
    state.flush_logs().await;
    served
}

async fn api_timeout(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let limit = state.config.request_timeout;
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "timeout",
            "Request timed out",
            format!(
                "the request took longer than {limit:?}; nothing it had not committed was kept"
            ),
        )
        .retry_after(1)
        .into_response(),
    }
}

/// `/mcp` (`baton mcp` over streamable HTTP) takes the API's keys: each request acts for its
/// key's tenant, which the MCP service reads from the request's extensions. A request without
/// a valid key is answered 401 before it reaches the MCP layer.
async fn mcp_auth(caller: auth::Caller, mut request: Request, next: Next) -> Response {
    request.extensions_mut().insert(caller.tenant);
    next.run(request).await
}

async fn healthz() -> ApiJson<serde_json::Value> {
    ApiJson(json!({"status": "ok"}))
}

async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    if state.draining() {
        return Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "draining",
            "Shutting down",
            "the server is finishing its requests and takes no new work",
        )
        .into_response();
    }
    // A primary-key read: the store answers, and its schema has the keys table.
    match state.store.authenticate(&KeyHash([0; 32])).await {
        Ok(_) => ApiJson(json!({"status": "ready"})).into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "not ready: the store does not answer");
            Problem::from(baton_store::Error::Unavailable {
                what: "store".to_owned(),
            })
            .into_response()
        }
    }
}
