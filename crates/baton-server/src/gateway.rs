//! The OpenAI/Anthropic-compatible gateway, forwarded to the configured upstream through the
//! tenant's exact cache:
//!
//! | route | upstream | operation | cached, deduplicated, logged, `Idempotency-Key` |
//! |---|---|---|---|
//! | `POST /v1/chat/completions` | `--upstream-openai` + `/chat/completions` | `openai.chat_completions` | yes |
//! | `POST /v1/responses` | `--upstream-openai` + `/responses` | `openai.responses` | yes |
//! | `POST /v1/embeddings` | `--upstream-openai` + `/embeddings` | `openai.embeddings` | yes |
//! | `POST /v1/messages` | `--upstream-anthropic` + `/v1/messages` | `anthropic.messages` | yes |
//! | `POST /v1/messages/count_tokens` | `--upstream-anthropic` + the same path | — | relayed only |
//! | `GET /v1/models` | Anthropic's when the request has `anthropic-version` or `x-api-key`, else OpenAI's | — | relayed only |
//! | `/v1/responses/{id}…` (any method) | `--upstream-openai` + the same path | — | relayed only |
//!
//! Relayed-only routes are what a client asks about the upstream's state (its models, a stored
//! response) or a free count: answering them from a cache could serve stale state, and logging
//! them as model calls would count calls nobody paid for. They still need the tenant.
//!
//! # What a request goes through
//!
//! 1. **The tenant.** `x-baton-key: bk_…` names it ([`crate::auth::authenticate`]); without
//!    the header, `baton serve --gateway-tenant` names it, and the answers of that tenant are
//!    shared only by callers holding the same provider credential (a SHA-256 fingerprint of it
//!    goes into the key's versions); without either, 401.
//! 2. **The upstream.** The route's base URL and path, with the request's query string kept
//!    (`?beta=true`); when the flag was not given, 503 naming it.
//! 3. **The request** is forwarded faithfully ([`relay`]): the body byte for byte, every header
//!    but the hop-by-hop ones and baton's own, so the caller's credential, `OpenAI-Organization`,
//!    `OpenAI-Project`, `anthropic-version`, `anthropic-beta` and the SDK's own headers arrive
//!    as sent. The credential is never logged, stored or counted. A model call's body must be a
//!    JSON object sent as `application/json` (415, 400).
//! 4. **The cache** ([`baton_cache::Cache::call`]): the whole body is the key's body; its
//!    versions are the upstream URL (query included), the delivery (`json` or `sse`, with
//!    `stream_options`, since the key ignores `stream`), the `anthropic-version`,
//!    `anthropic-beta` and `openai-beta` headers and, for the gateway tenant, the credential's
//!    fingerprint. So: exact hits, in-flight deduplication of identical concurrent requests in
//!    this process and across processes, and a call-log record per request with the model and
//!    the reply's whole usage (fresh input, output, cache writes of 5 minutes and of an hour,
//!    cache reads, read from the vendor's own fields whole or streamed), priced part by part with
//!    the price table, so a reply that read 1.2M tokens from the prompt cache is costed at the
//!    cache-read price. The log's `input_tokens` is every input token of the prompt.
//!
//! The cached value is the upstream's status, content type, relayed headers and body of a
//! successful (2xx) complete response: a JSON body as it came (its surrounding whitespace
//! aside), or a whole event stream, stored only when it ended properly (`message_stop`,
//! `[DONE]`, `response.completed`). A streamed request's leader streams the upstream's bytes to
//! its caller as they come while accumulating them — all but the chunk holding the final event,
//! which is sent once the answer is stored, so a caller that repeats a request after it has seen
//! the whole stream gets a `hit`, never `coalesced`, whatever the upstream does before closing
//! its connection (only a request that overlaps one in flight is coalesced). Later hits and
//! coalesced followers get the stored stream replayed. If a stream breaks off after its head
//! was sent, the leader's caller gets the vendor's own error event (`event: error` for Anthropic
//! and the Responses API, a `data: {"error": …}` chunk for Chat Completions) before the end;
//! everyone else gets an error.
//!
//! # The Responses API and upstream state
//!
//! A Responses request may depend on what the upstream stores: `previous_response_id` names a
//! stored response to continue from, and `store` (true unless sent `false`) makes the upstream
//! keep the new one under its `id`. Such requests are cached all the same, with the key over the
//! whole body (so `previous_response_id`, `store` and every other field are in it): a response
//! id names a stored response that never changes, so the same body means the same input; and a
//! hit answers with the response (and `id`) the first call stored upstream, which a client can
//! continue from with `previous_response_id` as long as the upstream keeps it (30 days at
//! OpenAI, against the cache's one day). What a hit cannot do is follow a stored response that
//! was deleted upstream since; a caller that needs the upstream's word sends
//! `Cache-Control: no-cache`. Only final responses (`completed`, `incomplete`) are stored: a
//! `background` request's `queued` answer is relayed, never cached.
//!
//! # Errors
//!
//! Upstream errors (non-2xx) reach the caller as the upstream sent them (status, headers, body)
//! and are never cached. An error baton raises itself on a gateway route (no tenant, a bad
//! body, no upstream configured, an upstream that does not answer within `--upstream-timeout`
//! (504), one that cannot be reached, answers a 2xx that is not JSON (or not an event stream),
//! or breaks a stream off (502), …) comes in the vendor's error shape, so SDKs show it:
//! OpenAI's `{"error": {"message", "type", "param", "code"}}` with baton's problem kind as
//! `code`, Anthropic's `{"type": "error", "error": {"type", "message"}}`; the message is the
//! problem's detail, prefixed `baton: `, and `x-baton-error` names the kind ([`relay`]).
//!
//! # Headers
//!
//! - The upstream's response headers come back (rate limits, `retry-after`, `x-should-retry`,
//!   its request id in `x-request-id` or `request-id`…), except hop-by-hop ones, `date`,
//!   `server` and `set-cookie`, on a miss, a bypass and a coalesced answer; a hit and an
//!   idempotent replay, which did not reach the upstream, carry none of them. baton's own
//!   request id is `x-baton-request-id` on every gateway answer (and `x-request-id` when the
//!   upstream sent none).
//! - `x-baton-cache: hit | miss | coalesced | bypass` on every answer of a model call
//!   (`bypass`: the caller asked for fresh processing), counted in
//!   `baton_cache_requests_total`; hits and coalesced answers add their input tokens to
//!   `baton_tokens_saved_total{source="cache"}`.
//! - `Cache-Control: no-cache` skips the cache read and in-flight sharing (the answer is still
//!   stored), `no-store` keeps the answer out of the cache.
//! - `Idempotency-Key` (after the IETF `Idempotency-Key` draft, 1 to 128 visible characters)
//!   goes through the idempotency ledger ([`baton_store::ledger`]) in the gateway's own
//!   namespace (`baton.gateway/<operation>/<scope>/<key>`, a prefix `/v1/operations` refuses
//!   and does not list), scoped to the `x-baton-key` tenant, or under `--gateway-tenant` to the
//!   caller's credential (the first 128 bits of its fingerprint, never the credential), so
//!   no other key of the tenant can pre-complete a record and no other caller of the shared
//!   tenant can squat one; pinned to the request's cache key: the same key with the same request
//!   returns the recorded response (`idempotent-replayed: true`) even after the cache entry
//!   expired or when the first call was `no-store`; with another request, 422; while the first
//!   is still running, 409. The ledger rather than the cache, because only the ledger tells
//!   "running" from "never seen" and pins a key to one request. A failed call is recorded as a
//!   retryable failure, so the same key may be tried again.
//!
//! Every call runs on a task of its own, so a caller that hangs up neither cancels the upstream
//! call its followers wait for nor loses an answer that the cache can keep.
//!
//! # Seams
//!
//! Capturing a conversation as a run ([`capture`]) starts in `run` once the answer is
//! complete, from the client's own request (`Call::original` when the call was rewritten).
//! Managed context ([`managed`]) runs before the call: `gateway` asks it for the call to send
//! (another `Call`, with another body and so another cache key) and falls back to the client's
//! own when the upstream refuses the rewrite.

pub(crate) mod capture;
mod idempotency;
pub(crate) mod managed;
pub(crate) mod relay;
mod upstream;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
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

/// The longest `Idempotency-Key` the gateway takes.
pub const MAX_IDEMPOTENCY_KEY: usize = 128;

/// The gateway's routes.
pub fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/responses", post(responses))
        .route("/v1/embeddings", post(embeddings))
        .route("/v1/messages", post(messages))
        .route("/v1/messages/count_tokens", post(relay::count_tokens))
        .route("/v1/models", get(relay::models))
        .route("/v1/responses/{*rest}", any(relay::responses_state))
}

async fn chat_completions(
    State(state): State<Arc<AppState>>,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    gateway(state, Endpoint::Chat, uri, headers, body).await
}

async fn responses(
    State(state): State<Arc<AppState>>,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    gateway(state, Endpoint::Responses, uri, headers, body).await
}

async fn embeddings(
    State(state): State<Arc<AppState>>,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    gateway(state, Endpoint::Embeddings, uri, headers, body).await
}

async fn messages(
    State(state): State<Arc<AppState>>,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    gateway(state, Endpoint::Messages, uri, headers, body).await
}

/// A model-call route of the gateway.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Endpoint {
    Chat,
    Responses,
    Embeddings,
    Messages,
}

impl Endpoint {
    /// The vendor: its upstream, its error shapes.
    pub(crate) fn format(self) -> Format {
        match self {
            Endpoint::Messages => Format::Anthropic,
            _ => Format::OpenAi,
        }
    }

    fn operation(self) -> &'static str {
        match self {
            Endpoint::Chat => "openai.chat_completions",
            Endpoint::Responses => "openai.responses",
            Endpoint::Embeddings => "openai.embeddings",
            Endpoint::Messages => "anthropic.messages",
        }
    }

    /// The path appended to the vendor's base URL.
    fn path(self) -> &'static str {
        match self {
            Endpoint::Chat => "/chat/completions",
            Endpoint::Responses => "/responses",
            Endpoint::Embeddings => "/embeddings",
            Endpoint::Messages => "/v1/messages",
        }
    }

    /// The reader of a streamed answer; `None` for an endpoint that never streams.
    fn stream(self) -> Option<baton_wire::Stream> {
        match self {
            Endpoint::Chat => Some(baton_wire::Stream::new(Format::OpenAi)),
            Endpoint::Messages => Some(baton_wire::Stream::new(Format::Anthropic)),
            Endpoint::Responses => Some(baton_wire::Stream::Responses(Default::default())),
            Endpoint::Embeddings => None,
        }
    }

    /// The model, usage and whether a whole (non-streamed) answer is final and may be stored.
    fn read_answer(
        self,
        body: &[u8],
    ) -> Result<(String, baton_wire::Usage, bool), baton_wire::Error> {
        match self {
            Endpoint::Embeddings => baton_wire::openai::parse_embeddings(body)
                .map(|(model, usage)| (model, usage, true)),
            Endpoint::Responses => baton_wire::responses::parse_response(body).map(|reply| {
                let last =
                    reply.stop_reason == "completed" || reply.stop_reason.starts_with("incomplete");
                (reply.model, reply.usage, last)
            }),
            _ => self
                .format()
                .parse_response(body)
                .map(|reply| (reply.model, reply.usage, true)),
        }
    }
}

/// Everything one call needs, owned, so it can run on a task of its own.
pub(crate) struct Call {
    state: Arc<AppState>,
    cache: Arc<Cache>,
    endpoint: Endpoint,
    operation: &'static str,
    url: String,
    headers: HeaderMap,
    body: Bytes,
    value: Arc<Value>,
    model: String,
    versions: BTreeMap<String, String>,
    policy: CallPolicy,
    /// Whose idempotency keys these are: the tenant's, or a credential's in the gateway tenant.
    scope: String,
    /// The tenant.
    tenant: TenantId,
    /// Whether the call is captured as a run, and the run `x-baton-run` named
    /// ([`capture`]).
    capture: Option<Option<baton_core::RunId>>,
    /// The managed-context policy the client asked for ([`managed`]).
    context: Option<managed::Policy>,
    /// The client's own request, when this call sends a managed context instead: the one
    /// captured, since the run keeps the conversation as the client holds it.
    original: Option<Arc<Value>>,
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
    endpoint: Endpoint,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let (call, key) = match prepare(state, endpoint, &uri, &headers, body).await {
        Ok(prepared) => prepared,
        Err(problem) => return problem.into_response(),
    };
    let (sent, mut report) = match &call.context {
        Some(policy) => {
            let (rewritten, report) = managed::apply(&call, policy).await;
            (rewritten.unwrap_or_else(|| call.clone()), Some(report))
        }
        None => (call.clone(), None),
    };
    let idempotency = match key {
        Some(key) => match Idempotency::begin(&sent, &key).await {
            Ok(Begun::Lease(lease)) => Some(lease),
            Ok(Begun::Replay(response)) => return response,
            Err(problem) => return problem.into_response(),
        },
        None => None,
    };
    let mut response = answer(sent, idempotency).await;
    if let Some(report) = &mut report {
        let status = response.status();
        if report.rewritten() && refused_the_body(status, response.headers()) {
            // Fail open: the client's own request, once.
            tracing::warn!(policy = call.context.as_ref().map(|p| p.name), %status, "the upstream refused a managed context; sending the client's request");
            report.fell_back(status);
            response = answer(call, None).await;
        }
        report.write(response.headers_mut());
    }
    response
}

/// Whether an answer is the upstream's refusal of a request's body: a client error from the
/// upstream (baton's own errors are problem documents until the vendor-shape layer turns them
/// into the vendor's) other than the ones about the caller's credential, timing or rate.
fn refused_the_body(status: StatusCode, headers: &HeaderMap) -> bool {
    let problem = headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/problem+json"));
    status.is_client_error() && !problem && ![401, 403, 408, 409, 429].contains(&status.as_u16())
}

/// The upstream URL of `path` for `format`, with the request's query string; 503 naming the
/// flag when that upstream is not configured.
pub(crate) fn upstream_url(
    state: &AppState,
    format: Format,
    path: &str,
    uri: &Uri,
) -> Result<String, Problem> {
    let (base, flag) = match format {
        Format::OpenAi => (state.config.upstream_openai.as_deref(), "--upstream-openai"),
        Format::Anthropic => (
            state.config.upstream_anthropic.as_deref(),
            "--upstream-anthropic",
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
    let mut url = format!("{}{path}", base.trim_end_matches('/'));
    if let Some(query) = uri.query() {
        url.push('?');
        url.push_str(query);
    }
    Ok(url)
}

/// Checks the request and builds its call (tenant, upstream, body, key versions, policy); also
/// returns its idempotency key.
async fn prepare(
    state: Arc<AppState>,
    endpoint: Endpoint,
    uri: &Uri,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<(Arc<Call>, Option<String>), Problem> {
    let format = endpoint.format();
    let (tenant, shared_tenant) = tenant(&state, headers).await?;
    tracing::Span::current().record("tenant", tenant.as_str());
    let url = upstream_url(&state, format, endpoint.path(), uri)?;
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

    let mut forwarded = relay::forwarded(headers);
    forwarded.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );

    let mut versions = BTreeMap::new();
    versions.insert("endpoint".to_owned(), url.clone());
    let delivery = match (stream, object.get("stream_options")) {
        (false, _) => "json".to_owned(),
        (true, None) => "sse".to_owned(),
        (true, Some(options)) => format!("sse {options}"),
    };
    versions.insert("delivery".to_owned(), delivery);
    for name in ["anthropic-version", "anthropic-beta", "openai-beta"] {
        let values: Vec<&str> = headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        if !values.is_empty() {
            versions.insert(name.to_owned(), values.join(","));
        }
    }
    let scope = match shared_tenant {
        true => {
            let credential = fingerprint(headers, relay::CREDENTIALS);
            versions.insert("credential".to_owned(), credential.clone());
            format!("credential:{}", credential.get(..32).unwrap_or(&credential))
        }
        false => "tenant".to_owned(),
    };

    let capture = match state.config.capture && endpoint != Endpoint::Embeddings {
        true => Some(capture::named_run(headers).map_err(|detail| {
            Problem::new(
                StatusCode::BAD_REQUEST,
                "invalid-run-name",
                "Invalid run name",
                detail,
            )
        })?),
        false => None,
    };
    let default = state.config.managed_context.get(&tenant);
    let context = managed::requested(headers, endpoint, capture.is_some(), default)?;
    let policy = cache_policy(headers);
    let call = Arc::new(Call {
        context,
        original: None,
        tenant: tenant.clone(),
        capture,
        cache: state.cache(&tenant),
        state,
        endpoint,
        operation: endpoint.operation(),
        url,
        headers: forwarded,
        body,
        value: Arc::new(value),
        model,
        versions,
        policy,
        scope,
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
pub(crate) async fn tenant(
    state: &AppState,
    headers: &HeaderMap,
) -> Result<(TenantId, bool), Problem> {
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
    let result = match idempotency {
        None => through_cache.await,
        Some(idempotency) => {
            let result = tokio::select! {
                biased;
                result = through_cache => result,
                () = idempotency.keep_alive(&call) => Err(CallError::Invalid("the idempotency heartbeat stopped".into())),
            };
            idempotency.publish(&call, &result).await;
            result
        }
    };
    // A streamed answer's last chunk (the one with its final event) goes to the leader's
    // caller only now that the answer is stored and published, and its stream ends with it:
    // a caller that repeats the request once it has seen the whole stream finds it stored.
    upstream::release(&held).await;
    if let (Ok(answered), Some(run)) = (&result, &call.capture) {
        // A managed call's captured request is the client's, not these bytes: captured in full.
        let fingerprint = call.original.is_none().then(|| {
            let answer = answered.value.body_text();
            capture::fingerprint(
                &call.tenant,
                run.as_ref(),
                call.endpoint,
                &answered.key.0,
                answer,
            )
        });
        match fingerprint {
            Some(seen) if call.state.captured.contains(&seen) => {
                call.state.metrics.capture("unchanged", None);
            }
            _ => {
                tokio::spawn(capture::capture(
                    call.state.clone(),
                    call.tenant.clone(),
                    call.endpoint,
                    run.clone(),
                    match &call.original {
                        Some(original) => (original.clone(), None),
                        None => (call.value.clone(), Some(call.body.clone())),
                    },
                    capture::Answer::of(&answered.value),
                    fingerprint,
                ));
            }
        }
    }
    result
}

/// The live answer of a stream's leader.
fn stream_response(live: Live, outcome: &'static str) -> Response {
    let Live {
        status,
        content_type,
        headers: relayed,
        chunks,
    } = live;
    let body = futures_util::stream::unfold(chunks, |mut chunks: mpsc::Receiver<Bytes>| async {
        let chunk = chunks.recv().await?;
        Some((Ok::<_, std::convert::Infallible>(chunk), chunks))
    });
    let mut response = Response::new(Body::from_stream(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    relay::copy_back(&relayed, headers);
    headers.insert(header::CONTENT_TYPE, content_type);
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(CACHE_HEADER, HeaderValue::from_static(outcome));
    response
}

/// A recorded response, as the upstream sent it; with the upstream's headers unless it is a
/// hit (which did not reach the upstream: its rate limits and request id would be another
/// call's).
fn recorded_response(recorded: Recorded, outcome: &'static str) -> Response {
    let (status, content_type, relayed, body) = recorded.into_parts();
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    let headers = response.headers_mut();
    if outcome != "hit" {
        relay::copy_back(&relayed, headers);
    }
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
                headers: relayed,
                body,
            }) => {
                let mut response = Response::new(Body::from(body.clone()));
                *response.status_mut() = *status;
                let headers = response.headers_mut();
                relay::copy_back(relayed, headers);
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
