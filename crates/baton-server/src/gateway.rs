//! The OpenAI/Anthropic-compatible gateway: `POST /v1/chat/completions` and `POST /v1/messages`,
//! forwarded to the configured upstream through the tenant's exact cache.
//!
//! # What a request goes through
//!
//! 1. **The tenant.** `x-baton-key: bk_…` names it ([`crate::auth::authenticate`]); without
//!    the header, `baton serve --gateway-tenant` names it, and the answers of that tenant are
//!    shared only by callers holding the same provider credential (a SHA-256 fingerprint of it
//!    goes into the key's versions); without either, 401.
//! 2. **The upstream.** `--upstream-openai` (a base URL with `/v1`, `/chat/completions` is
//!    appended) or `--upstream-anthropic` (a base URL without `/v1`, `/v1/messages` is
//!    appended); when the flag was not given, 503 naming it.
//! 3. **The body**, which must be a JSON object sent as `application/json` (415, 400), is
//!    forwarded byte for byte with the caller's own credential (`Authorization` for OpenAI;
//!    `x-api-key`, `Authorization`, `anthropic-version` and `anthropic-beta` for Anthropic).
//!    The credential is never logged, stored or counted.
//! 4. **The cache** ([`baton_cache::Cache::call`], operation `openai.chat_completions` or
//!    `anthropic.messages`): the whole body is the key's body; its versions are the upstream
//!    endpoint, the delivery (`json` or `sse`, with `stream_options`, since the key ignores
//!    `stream`), the `anthropic-version`/`anthropic-beta` headers and, for the gateway tenant,
//!    the credential's fingerprint. So: exact hits, in-flight deduplication of identical
//!    concurrent requests in this process and across processes, and a call-log record per
//!    request with the model and the tokens of the upstream's `usage`.
//!
//! The cached value is the upstream's status, content type and body of a successful (2xx)
//! complete response: a JSON body as it came (its surrounding whitespace aside), or a whole
//! event stream, stored only when it ended properly (`message_stop`, `[DONE]`). A streamed
//! request's leader streams the upstream's bytes to its caller as they come while accumulating
//! them; later hits and coalesced followers get the stored stream replayed. If a stream breaks
//! off after its head was sent, the leader's caller gets the vendor's own error event
//! (`event: error` for Anthropic, a `data: {"error": …}` chunk for OpenAI) before the end;
//! everyone else gets a problem.
//!
//! Upstream errors (non-2xx) reach the caller as the upstream sent them (status, content type,
//! body, `retry-after`) and are never cached. An upstream that does not answer within
//! `--upstream-timeout` (for its head, and between chunks) is a 504 problem; one that cannot be
//! reached, answers a 2xx that is not JSON (or not an event stream), or breaks a stream off is
//! a 502 problem.
//!
//! # Headers
//!
//! - `x-baton-cache: hit | miss | coalesced | bypass` on every answer (`bypass`: the caller
//!   asked for fresh processing), counted in `baton_cache_requests_total`; hits and coalesced
//!   answers add their input tokens to `baton_tokens_saved_total{source="cache"}`.
//! - `Cache-Control: no-cache` skips the cache read and in-flight sharing (the answer is still
//!   stored), `no-store` keeps the answer out of the cache.
//! - `Idempotency-Key` (after the IETF `Idempotency-Key` draft) goes through the idempotency
//!   ledger ([`baton_store::ledger`]), under the ledger key `gateway:<operation>:<key>`, pinned
//!   to the request's cache key: the same key with the same request returns the recorded
//!   response (`idempotent-replayed: true`) even after the cache entry expired or when the
//!   first call was `no-store`; with another request, 422; while the first is still running,
//!   409. The ledger rather than the cache, because only the ledger tells "running" from "never
//!   seen" and pins a key to one request. A failed call is recorded as a retryable failure, so
//!   the same key may be tried again.
//!
//! Every call runs on a task of its own, so a caller that hangs up neither cancels the upstream
//! call its followers wait for nor loses an answer that the cache can keep.

mod idempotency;
mod upstream;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use baton_cache::{Answered, Cache, CallError, CallPolicy, CallRequest};
use baton_core::TenantId;
use baton_store::CallOutcome;
use baton_wire::Format;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, oneshot};

use crate::auth;
use crate::problem::{self, Problem};
use crate::state::AppState;

use self::idempotency::{Begun, Idempotency};
use self::upstream::{Held, Live, Recorded, UpstreamError};

/// The response header saying how the cache answered: `hit`, `miss`, `coalesced`, `bypass`.
pub const CACHE_HEADER: HeaderName = HeaderName::from_static("x-baton-cache");

/// The request header naming the tenant's baton key.
pub const KEY_HEADER: HeaderName = HeaderName::from_static("x-baton-key");

/// The request header of the IETF `Idempotency-Key` draft.
pub const IDEMPOTENCY_HEADER: HeaderName = HeaderName::from_static("idempotency-key");

/// The response header on an answer replayed from the idempotency ledger.
pub const REPLAYED_HEADER: HeaderName = HeaderName::from_static("idempotent-replayed");

/// The gateway's routes.
pub fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/messages", post(messages))
}

async fn chat_completions(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    gateway(state, Format::OpenAi, headers, body).await
}

async fn messages(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    gateway(state, Format::Anthropic, headers, body).await
}

/// One vendor's part of the gateway.
struct Vendor {
    operation: &'static str,
    /// The headers passed upstream as they came; `credentials` are those that hold a secret.
    passed: &'static [&'static str],
    credentials: &'static [&'static str],
}

fn vendor(format: Format) -> Vendor {
    match format {
        Format::OpenAi => Vendor {
            operation: "openai.chat_completions",
            passed: &["authorization"],
            credentials: &["authorization"],
        },
        Format::Anthropic => Vendor {
            operation: "anthropic.messages",
            passed: &[
                "x-api-key",
                "authorization",
                "anthropic-version",
                "anthropic-beta",
            ],
            credentials: &["x-api-key", "authorization"],
        },
    }
}

/// Everything one call needs, owned, so it can run on a task of its own.
pub(crate) struct Call {
    state: Arc<AppState>,
    cache: Arc<Cache>,
    format: Format,
    operation: &'static str,
    url: String,
    headers: HeaderMap,
    body: Bytes,
    value: Value,
    model: String,
    versions: BTreeMap<String, String>,
    policy: CallPolicy,
}

impl Call {
    fn request(&self) -> CallRequest<'_> {
        CallRequest {
            operation: self.operation,
            body: &self.value,
            model: &self.model,
            versions: &self.versions,
            documents: &[],
        }
    }
}

async fn gateway(
    state: Arc<AppState>,
    format: Format,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let (call, key) = match prepare(state, format, &headers, body).await {
        Ok(prepared) => prepared,
        Err(problem) => return problem.into_response(),
    };
    let idempotency = match key {
        Some(key) => match Idempotency::begin(&call, &key).await {
            Ok(Begun::Lease(lease)) => Some(lease),
            Ok(Begun::Replay(response)) => return response,
            Err(problem) => return problem.into_response(),
        },
        None => None,
    };
    answer(call, idempotency).await
}

/// Checks the request and builds its call (tenant, upstream, body, key versions, policy); also
/// returns its idempotency key.
async fn prepare(
    state: Arc<AppState>,
    format: Format,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<(Arc<Call>, Option<String>), Problem> {
    let vendor = vendor(format);
    let (tenant, shared_tenant) = tenant(&state, headers).await?;
    tracing::Span::current().record("tenant", tenant.as_str());
    let (base, flag, path) = match format {
        Format::OpenAi => (
            state.config.upstream_openai.as_deref(),
            "--upstream-openai",
            "/chat/completions",
        ),
        Format::Anthropic => (
            state.config.upstream_anthropic.as_deref(),
            "--upstream-anthropic",
            "/v1/messages",
        ),
    };
    let Some(base) = base else {
        return Err(Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "upstream-not-configured",
            "Upstream not configured",
            format!(
                "this server has no {} upstream: start `baton serve` with {flag} URL",
                format.name()
            ),
        ));
    };
    let url = format!("{}{path}", base.trim_end_matches('/'));
    if !is_json(headers) {
        return Err(Problem::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported-media-type",
            "Unsupported media type",
            "the body must be JSON, sent with `Content-Type: application/json`",
        ));
    }
    let body = body.map_err(|rejection| match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => problem::too_large(),
        status => Problem::new(status, "bad-body", "Unreadable body", rejection.body_text()),
    })?;
    let value: Value = serde_json::from_slice(&body).map_err(|e| {
        Problem::new(
            StatusCode::BAD_REQUEST,
            "invalid-json",
            "Invalid JSON",
            format!("the body is not JSON: {e}"),
        )
    })?;
    let Some(object) = value.as_object() else {
        return Err(Problem::new(
            StatusCode::BAD_REQUEST,
            "invalid-json",
            "Invalid JSON",
            "the body must be a JSON object",
        ));
    };
    let model = object
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let stream = object.get("stream").and_then(Value::as_bool) == Some(true);

    let mut forwarded = HeaderMap::with_capacity(vendor.passed.len() + 1);
    forwarded.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    for name in vendor.passed {
        for value in headers.get_all(*name) {
            forwarded.append(*name, value.clone());
        }
    }

    let mut versions = BTreeMap::new();
    versions.insert("endpoint".to_owned(), url.clone());
    let delivery = match (stream, object.get("stream_options")) {
        (false, _) => "json".to_owned(),
        (true, None) => "sse".to_owned(),
        (true, Some(options)) => format!("sse {options}"),
    };
    versions.insert("delivery".to_owned(), delivery);
    for name in ["anthropic-version", "anthropic-beta"] {
        if vendor.passed.contains(&name) {
            let values: Vec<&str> = headers
                .get_all(name)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .collect();
            if !values.is_empty() {
                versions.insert(name.to_owned(), values.join(","));
            }
        }
    }
    if shared_tenant {
        versions.insert(
            "credential".to_owned(),
            fingerprint(headers, vendor.credentials),
        );
    }

    let policy = cache_policy(headers);
    let call = Arc::new(Call {
        cache: state.cache(&tenant),
        state,
        format,
        operation: vendor.operation,
        url,
        headers: forwarded,
        body,
        value,
        model,
        versions,
        policy,
    });
    let key = match headers.get(IDEMPOTENCY_HEADER) {
        Some(key) => Some(
            key.to_str()
                .map_err(|_| {
                    Problem::bad_request("Idempotency-Key: must be visible ASCII characters")
                })?
                .to_owned(),
        ),
        None => None,
    };
    Ok((call, key))
}

/// The tenant of the request, and whether it is the shared gateway tenant (no `x-baton-key`).
async fn tenant(state: &AppState, headers: &HeaderMap) -> Result<(TenantId, bool), Problem> {
    if let Some(key) = headers.get(KEY_HEADER) {
        let Ok(key) = key.to_str() else {
            return Err(Problem::unauthorized(
                "the baton key is not valid (unknown or revoked)",
            ));
        };
        let caller = auth::authenticate(state, Some(key.trim())).await?;
        return Ok((caller.tenant, false));
    }
    match &state.config.gateway_tenant {
        Some(tenant) => Ok((tenant.clone(), true)),
        None => Err(Problem::unauthorized(
            "no baton key: send `x-baton-key: <key>` (make one with `baton keys create --tenant T`), \
             or start the server with --gateway-tenant",
        )),
    }
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"))
}

/// `Cache-Control: no-cache` and `no-store`, in any case, among other directives.
fn cache_policy(headers: &HeaderMap) -> CallPolicy {
    let mut policy = CallPolicy::default();
    for value in headers.get_all(header::CACHE_CONTROL) {
        let Ok(value) = value.to_str() else { continue };
        for directive in value.split(',') {
            let directive = directive.trim();
            if directive.eq_ignore_ascii_case("no-cache") {
                policy.no_cache = true;
            } else if directive.eq_ignore_ascii_case("no-store") {
                policy.no_store = true;
            }
        }
    }
    policy
}

/// The SHA-256 of the credential headers' values (`none` without any), so callers of the
/// shared gateway tenant share answers only with callers holding the same credential.
fn fingerprint(headers: &HeaderMap, credentials: &[&str]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(b"baton.gateway.credential.v1");
    let mut any = false;
    for name in credentials {
        for value in headers.get_all(*name) {
            any = true;
            hasher.update(b"\0");
            hasher.update(name.as_bytes());
            hasher.update(b"\0");
            hasher.update(value.as_bytes());
        }
    }
    if !any {
        return "none".to_owned();
    }
    let digest: [u8; 32] = hasher.finalize().into();
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs the call on a task of its own and answers: live when this caller leads a stream,
/// otherwise with the recorded response, the upstream's error or a problem.
async fn answer(call: Arc<Call>, idempotency: Option<Idempotency>) -> Response {
    let span = tracing::Span::current();
    span.record("model", call.model.as_str());
    let response = answer_inner(call, idempotency).await;
    if let Some(outcome) = response
        .headers()
        .get(CACHE_HEADER)
        .and_then(|v| v.to_str().ok())
    {
        span.record("cache", outcome);
    }
    response
}

async fn answer_inner(call: Arc<Call>, idempotency: Option<Idempotency>) -> Response {
    let (live_tx, live_rx) = oneshot::channel::<Live>();
    let led = Arc::new(AtomicBool::new(false));
    let task = tokio::spawn(run(call.clone(), live_tx, idempotency, led.clone()));
    if let Ok(live) = live_rx.await {
        let outcome = executed(&call.policy);
        call.state.metrics.cache(outcome);
        return stream_response(live, outcome);
    }
    match task.await {
        Ok(Ok(answered)) => {
            let outcome = match answered.outcome {
                CallOutcome::CacheHit => "hit",
                CallOutcome::Coalesced => "coalesced",
                _ => executed(&call.policy),
            };
            let metrics = &call.state.metrics;
            metrics.cache(outcome);
            if matches!(outcome, "hit" | "coalesced") {
                metrics.tokens_saved("cache", answered.input_tokens);
            }
            recorded_response(answered.value, outcome)
        }
        Ok(Err(err)) => {
            // A caller that never ran the upstream call shared a leader's failure.
            let outcome = match led.load(Ordering::Relaxed) {
                true => "miss",
                false => "coalesced",
            };
            error_response(&err, outcome)
        }
        Err(join) => Problem::internal(&join).into_response(),
    }
}

fn executed(policy: &CallPolicy) -> &'static str {
    match policy.no_cache {
        true => "bypass",
        false => "miss",
    }
}

/// The call itself: through the cache, holding the idempotency lease when there is one.
async fn run(
    call: Arc<Call>,
    live: oneshot::Sender<Live>,
    idempotency: Option<Idempotency>,
    led: Arc<AtomicBool>,
) -> Result<Answered<Recorded>, CallError> {
    let held = Held::default();
    let request = call.request();
    let through_cache = call.cache.call(&request, &call.policy, || {
        led.store(true, Ordering::Relaxed);
        upstream::fetch(&call, Some(live), &held)
    });
    let Some(idempotency) = idempotency else {
        return through_cache.await;
    };
    let result = tokio::select! {
        biased;
        result = through_cache => result,
        () = idempotency.keep_alive(&call) => Err(CallError::Invalid("the idempotency heartbeat stopped".into())),
    };
    idempotency.publish(&call, &result).await;
    // `held` (a streamed answer's sending half) is dropped last: the leader's caller sees its
    // stream end once the answer is stored and published.
    result
}

/// The live answer of a stream's leader.
fn stream_response(live: Live, outcome: &'static str) -> Response {
    let Live {
        status,
        content_type,
        chunks,
    } = live;
    let body = futures_util::stream::unfold(chunks, |mut chunks: mpsc::Receiver<Bytes>| async {
        let chunk = chunks.recv().await?;
        Some((Ok::<_, std::convert::Infallible>(chunk), chunks))
    });
    let mut response = Response::new(Body::from_stream(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, content_type);
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(CACHE_HEADER, HeaderValue::from_static(outcome));
    response
}

/// A recorded response, as the upstream sent it.
fn recorded_response(recorded: Recorded, outcome: &'static str) -> Response {
    let (status, content_type, body) = recorded.into_parts();
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&content_type) {
        headers.insert(header::CONTENT_TYPE, value);
    }
    headers.insert(CACHE_HEADER, HeaderValue::from_static(outcome));
    response
}

/// A failed call: the upstream's own error response, or a problem; `outcome` is `miss` for
/// the caller that made the call, `coalesced` for one that shared its failure.
fn error_response(err: &CallError, outcome: &'static str) -> Response {
    let problem = match err {
        CallError::Upstream(cause) => match cause.downcast_ref::<UpstreamError>() {
            Some(UpstreamError::Status {
                status,
                content_type,
                retry_after,
                body,
            }) => {
                let mut response = Response::new(Body::from(body.clone()));
                *response.status_mut() = *status;
                let headers = response.headers_mut();
                if let Some(value) = content_type {
                    headers.insert(header::CONTENT_TYPE, value.clone());
                }
                if let Some(value) = retry_after {
                    headers.insert(header::RETRY_AFTER, value.clone());
                }
                headers.insert(CACHE_HEADER, HeaderValue::from_static(outcome));
                return response;
            }
            Some(upstream) => upstream.problem(),
            None => Problem::internal(cause),
        },
        CallError::Store(e) => match **e {
            baton_store::Error::Unavailable { .. } => Problem::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "store-unavailable",
                "Store unavailable",
                "the store cannot be reached; try again",
            )
            .retry_after(1),
            _ => Problem::internal(e),
        },
        CallError::Denied(denied) => Problem::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "Forbidden",
            denied.to_string(),
        ),
        CallError::Key(e) => Problem::bad_request(e.to_string()),
        CallError::WaitedTooLong(_) => Problem::new(
            StatusCode::GATEWAY_TIMEOUT,
            "upstream-timeout",
            "Upstream timed out",
            err.to_string(),
        ),
        _ => Problem::internal(err),
    };
    let mut response = problem.into_response();
    response
        .headers_mut()
        .insert(CACHE_HEADER, HeaderValue::from_static(outcome));
    response
}
