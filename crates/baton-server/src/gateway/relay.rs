//! The faithful relay: which headers go upstream and which come back, the routes that are only
//! relayed (`GET /v1/models`, `POST /v1/messages/count_tokens`, `/v1/responses/{id}…`), and
//! baton's own errors on gateway routes in the vendor's error shape ([`vendor_errors`]).
//!
//! # Headers
//!
//! Every request header goes upstream except:
//! - the hop-by-hop ones (`connection`, `keep-alive`, `proxy-*`, `te`, `trailer`,
//!   `transfer-encoding`, `upgrade`, and any the `connection` header names), `host`,
//!   `content-length` and `expect`, which belong to one connection;
//! - `accept-encoding`: the gateway reads the upstream's answer (its usage, its end) and
//!   compresses nothing itself, so it asks for it plain;
//! - baton's own: `x-baton-*`, `idempotency-key` (the gateway's ledger answers it),
//!   `cache-control` (the gateway's cache answers it) and `x-request-id` (baton's request id).
//!
//! Every upstream response header comes back except the hop-by-hop ones, `content-length`
//! (recomputed), `date` and `server` (the gateway's own), and `set-cookie` (a cookie of the
//! upstream's domain means nothing on the gateway's).

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use baton_wire::Format;
use serde_json::{Value, json};

use super::upstream::UpstreamError;
use crate::problem::{self, PROBLEM_JSON, Problem};
use crate::state::AppState;

/// The headers that carry a caller's provider credential.
pub(crate) const CREDENTIALS: &[&str] = &["authorization", "x-api-key", "api-key"];

/// baton's request id on every gateway answer (`x-request-id` is the upstream's when it sent
/// one).
pub const BATON_REQUEST_ID: HeaderName = HeaderName::from_static("x-baton-request-id");

/// The kind of an error baton raised itself on a gateway route.
pub const ERROR_HEADER: HeaderName = HeaderName::from_static("x-baton-error");

const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "trailers",
    "transfer-encoding",
    "upgrade",
];

fn named_by_connection(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .filter(|name| !name.is_empty())
        .collect()
}

/// The request headers passed upstream (see the module docs).
pub(crate) fn forwarded(headers: &HeaderMap) -> HeaderMap {
    let named = named_by_connection(headers);
    let mut out = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        let n = name.as_str();
        let dropped = HOP_BY_HOP.contains(&n)
            || named.iter().any(|c| c == n)
            || matches!(
                n,
                "host"
                    | "content-length"
                    | "expect"
                    | "accept-encoding"
                    | "idempotency-key"
                    | "cache-control"
                    | "x-request-id"
            )
            || n.starts_with("x-baton-");
        if !dropped {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

/// The upstream response headers passed back (see the module docs); the content type among
/// them.
pub(crate) fn returned(headers: &HeaderMap) -> HeaderMap {
    let named = named_by_connection(headers);
    let mut out = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        let n = name.as_str();
        let dropped = HOP_BY_HOP.contains(&n)
            || named.iter().any(|c| c == n)
            || matches!(n, "content-length" | "date" | "server" | "set-cookie")
            || n.starts_with("x-baton-");
        if !dropped {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

/// Adds the relayed upstream headers to an answer's.
pub(crate) fn copy_back(relayed: &HeaderMap, into: &mut HeaderMap) {
    for (name, value) in relayed {
        into.append(name.clone(), value.clone());
    }
}

/// `POST /v1/messages/count_tokens`, relayed to the Anthropic upstream.
pub(crate) async fn count_tokens(
    State(state): State<Arc<AppState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    relay(&state, Format::Anthropic, method, &uri, &headers, body)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

/// `GET /v1/models`, relayed to the Anthropic upstream when the request carries
/// `anthropic-version` or `x-api-key` (the Anthropic SDK sends both), else to the OpenAI one.
pub(crate) async fn models(
    State(state): State<Arc<AppState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    relay(
        &state,
        models_format(&headers),
        method,
        &uri,
        &headers,
        Ok(Bytes::new()),
    )
    .await
    .unwrap_or_else(IntoResponse::into_response)
}

fn models_format(headers: &HeaderMap) -> Format {
    match headers.contains_key("anthropic-version") || headers.contains_key("x-api-key") {
        true => Format::Anthropic,
        false => Format::OpenAi,
    }
}

/// `/v1/responses/{id}…` (retrieve, delete, cancel, input items), relayed to the OpenAI
/// upstream: the upstream's stored state, never cached.
pub(crate) async fn responses_state(
    State(state): State<Arc<AppState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    relay(&state, Format::OpenAi, method, &uri, &headers, body)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

/// Relays one request as it came (method, path under the vendor's base, query, headers, body)
/// and its answer as it came: for the caller's tenant, not cached, not logged.
async fn relay(
    state: &AppState,
    format: Format,
    method: Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    let (tenant, _) = super::tenant(state, headers).await?;
    tracing::Span::current().record("tenant", tenant.as_str());
    // The OpenAI base URL ends with `/v1`; the Anthropic one does not.
    let path = match format {
        Format::OpenAi => uri.path().strip_prefix("/v1").unwrap_or(uri.path()),
        Format::Anthropic => uri.path(),
    };
    let url = super::upstream_url(state, format, path, uri)?;
    let body = body.map_err(|rejection| match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => problem::too_large(),
        status => Problem::new(status, "bad-body", "Unreadable body", rejection.body_text()),
    })?;
    let limit = state.config.upstream_timeout;
    let sent = state
        .http
        .request(method, &url)
        .headers(forwarded(headers))
        .body(body)
        .send();
    let response = match tokio::time::timeout(limit, sent).await {
        Err(_) => return Err(UpstreamError::Timeout(limit).problem()),
        Ok(Err(e)) => return Err(UpstreamError::from_transport(&e, limit, "sending").problem()),
        Ok(Ok(response)) => response,
    };
    let status = response.status();
    let relayed = returned(response.headers());
    let body = match tokio::time::timeout(limit, response.bytes()).await {
        Err(_) => return Err(UpstreamError::Timeout(limit).problem()),
        Ok(Err(e)) => return Err(UpstreamError::from_transport(&e, limit, "reading").problem()),
        Ok(Ok(body)) => body,
    };
    let mut answer = Response::new(Body::from(body));
    *answer.status_mut() = status;
    copy_back(&relayed, answer.headers_mut());
    Ok(answer)
}

/// Which vendor a gateway path speaks, for its error shape; `None` off the gateway.
fn vendor_of(path: &str, headers: &HeaderMap) -> Option<Format> {
    match path {
        "/v1/messages" | "/v1/messages/count_tokens" => Some(Format::Anthropic),
        "/v1/chat/completions" | "/v1/responses" | "/v1/embeddings" => Some(Format::OpenAi),
        "/v1/models" => Some(models_format(headers)),
        _ if path.starts_with("/v1/responses/") => Some(Format::OpenAi),
        _ => None,
    }
}

/// Middleware around every route: on a gateway route, adds `x-baton-request-id`, and turns a
/// problem baton raised (in the handler or before it: a body over the limit, a wrong method)
/// into the vendor's error shape, with the problem's detail as the message and its kind in
/// `x-baton-error` (and, for OpenAI, as `code`), so an SDK shows what went wrong.
pub async fn vendor_errors(request: Request, next: Next) -> Response {
    let Some(format) = vendor_of(request.uri().path(), request.headers()) else {
        return next.run(request).await;
    };
    let id = request.headers().get(crate::REQUEST_ID).cloned();
    let mut response = next.run(request).await;
    if let Some(id) = id {
        response.headers_mut().insert(BATON_REQUEST_ID, id);
    }
    let is_problem = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(PROBLEM_JSON.as_bytes()));
    if !is_problem {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    // A problem body is small and whole: reading it cannot wait on anyone.
    let bytes = axum::body::to_bytes(body, 1024 * 1024)
        .await
        .unwrap_or_default();
    let problem: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let kind = problem["type"]
        .as_str()
        .and_then(|t| t.strip_prefix(problem::TYPE_PREFIX))
        .unwrap_or("internal")
        .to_owned();
    let detail = problem["detail"]
        .as_str()
        .or(problem["title"].as_str())
        .unwrap_or("the gateway failed to answer");
    let message = format!("baton: {detail}");
    let status = parts.status.as_u16();
    let body = match format {
        Format::OpenAi => {
            let mut body = Format::OpenAi.render_error(status, &message, None);
            body["error"]["code"] = json!(kind);
            body
        }
        Format::Anthropic => Format::Anthropic.render_error(status, &message, None),
    };
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    if let Ok(value) = HeaderValue::from_str(&kind) {
        parts.headers.insert(ERROR_HEADER, value);
    }
    Response::from_parts(parts, Body::from(body.to_string()))
}
