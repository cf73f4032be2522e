//! The scripted provider: [`ScriptedServer`], a real HTTP server on `127.0.0.1` that speaks the
//! Anthropic Messages API (`POST /v1/messages`), OpenAI Chat Completions
//! (`POST /v1/chat/completions`) and the OpenAI Responses API (`POST /v1/responses`, its
//! streamed events included), answers from a [`Script`], and refuses malformed requests as
//! the real APIs do. Tests and `baton demo` point the real clients at it.
//!
//! Beside the model calls, without consuming turns: `POST /v1/embeddings` (a deterministic
//! vector per input), `GET /v1/models` (the Anthropic list when the request has
//! `anthropic-version`, else the OpenAI one) and `POST /v1/messages/count_tokens`. Every answer
//! carries the vendor's request-id header (`x-request-id`, or `request-id` for Anthropic) and a
//! rate-limit header; an error with `retry_after` also `x-should-retry: true`.
//!
//! # What it checks
//!
//! Every request is recorded first ([`ScriptedServer::requests`]: method, path, query, body,
//! non-secret headers, and whether an auth header was present — never its value). Then, in order:
//!
//! 1. The body must be a request of the path's format (`baton_wire`'s `parse_request`), else
//!    HTTP 400.
//! 2. The conversation must be valid as the real API judges it (`check_messages`), else HTTP
//!    400 in the vendor's error shape, with the vendor's wording and the offending index:
//!    a conversation that starts with an assistant message; a `tool_result` (Anthropic) or
//!    `tool` message (OpenAI) that answers no tool call of the assistant message just before;
//!    a tool call that the next user message's `tool_result`s (Anthropic) or the next `tool`
//!    messages (OpenAI) do not answer.
//!    Anthropic: `{"type": "error", "error": {"type": "invalid_request_error", "message":
//!    "messages.3: `tool_result` block(s) provided when previous message does not have
//!    `tool_use` blocks"}}`; OpenAI: `{"error": {"message": "messages.[3]: Invalid parameter:
//!    messages with role 'tool' must be a response to a preceding message with 'tool_calls'.",
//!    "type": "invalid_request_error", "param": "messages.[3]", "code": null}}`.
//! 3. The request consumes the first unconsumed turn whose `when` matches. When none does:
//!    HTTP 500, saying the script is exhausted and, for each unconsumed turn, which condition
//!    failed. (The clients retry 500s; a test of exhaustion sets `max_retries` to 0.)
//! 4. The turn's `expect` must hold on the raw body, else HTTP 400 naming the expectation
//!    (the turn stays consumed).
//!
//! # The script
//!
//! ```json
//! {"turns": [
//!   {"reply": {"text": "I'll read it.", "tool_calls": [{"name": "read_file", "input": {"path": "a.txt"}}]}},
//!   {"when": {"tools": false}, "reply": {"text": "[{\"kind\":\"goal\",\"text\":\"x\",\"source_seq\":1}]"}},
//!   {"expect": {"contains": "read-only"}, "reply": {"text": "Done."}},
//!   {"reply": {"error": {"status": 429, "retry_after": 0}}},
//!   {"reply": {"raw": "this is not json"}},
//!   {"reply": {"text": "cut off", "truncate": true}},
//!   {"reply": {"delay_ms": 2000, "text": "late"}}
//! ]}
//! ```
//!
//! - `when` (optional; all given conditions must hold): `tools` — whether the request offers
//!   tools; `system_contains` — a substring of the system text; `last_user_contains` — a
//!   substring of the text of the messages after the last assistant message (the latest user
//!   input, or the tool results).
//! - `expect` (optional): `contains` / `not_contains` — substrings the raw request body must
//!   (not) contain.
//! - `reply`: `text`; `tool_calls` (`name`, `input`; the server makes the ids, `toolu_…` for
//!   Anthropic and `call_…` for OpenAI, unique across servers); `stop` (`end_turn`, `tool_use`,
//!   `max_tokens`, translated per format; default `tool_use` when there are tool calls, else
//!   `end_turn`); `error` (`status`, optional `retry_after` seconds and `message`, sent in the
//!   vendor's error shape); `raw` (this exact body, status 200); `truncate` (the stream ends
//!   before its final event); `delay_ms` (wait before answering).
//!   `close_delay_ms` (keep a stream's body open that long after its final event); `usage`
//!   (`cache_read`, `cache_write_5m`, `cache_write_1h`, `reasoning`: reported in the vendor's
//!   own usage fields).
//!   `error` wins over `raw`, which wins over the rest.
//! - `message` (in a reply): the assistant message to answer with, in the request's vendor
//!   shape, its tool-call ids kept (instead of `text` and `tool_calls`): to replay a recorded
//!   conversation. On the Responses API it may also be a list of output items (`reasoning`,
//!   `message`, `function_call`), which carries reasoning.
//! - `"prompt_cache": true` (beside `turns`) models Anthropic's prompt cache: each request's
//!   blocks (tools, system blocks, each message's content blocks) make a chain of prefixes;
//!   a request reads from the cache the longest prefix, through its last `cache_control`
//!   block, that an earlier request marked, and writes its own marked prefixes; the usage
//!   reports them as `cache_read_input_tokens` and `cache_creation_input_tokens` (bytes / 4),
//!   the rest as `input_tokens`. No expiry, and no 20-block limit on the look-back.
//!
//! The reply streams as server-sent events when the request says `"stream": true`, and is one
//! JSON body otherwise. Its usage says input tokens ≈ request bytes / 4 and output tokens ≈
//! reply bytes / 4; its model is the request's.
//!
//! ```
//! use baton_provider::scripted::{Script, ScriptedServer};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let script = Script::from_json(r#"{"turns": [{"reply": {"text": "Hi."}}]}"#)?;
//! let server = ScriptedServer::start(script)?;
//! assert!(server.anthropic_url().starts_with("http://127.0.0.1:"));
//! assert!(server.openai_url().ends_with("/v1"));
//! assert!(server.requests().is_empty());
//! # Ok(()) }
//! ```

use std::collections::{BTreeMap, HashSet};
use std::hash::{BuildHasher, Hasher};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use baton_core::{ContentBlock, Message, Role};
use baton_wire::{Format, RequestBody, Usage};
use serde_json::Value;
use tokio::sync::oneshot;

mod script;

pub use script::{ErrorReply, Expect, Reply, Script, ScriptUsage, ToolCall, Turn, When};

#[cfg(test)]
mod tests;

/// One request the server received.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedRequest {
    /// Its method, such as `POST`.
    pub method: String,
    /// Its path, such as `/v1/messages`.
    pub path: String,
    /// Its query string (without the `?`), when it had one.
    pub query: Option<String>,
    /// Its body as JSON, or as a JSON string holding the raw text when it was not JSON.
    pub body: Value,
    /// Its body as sent, byte for byte (lossily UTF-8), for tests of what a proxy changed.
    pub text: String,
    /// Its headers, names lowercase, except those that may hold a secret (`authorization`,
    /// `x-api-key`, cookies, and any whose name mentions a key, token or secret).
    pub headers: BTreeMap<String, String>,
    /// Whether it carried `authorization`, `x-api-key` or `api-key`. Their values are never
    /// kept.
    pub auth: bool,
}

/// A scripted Anthropic and OpenAI server on loopback; see the module documentation.
///
/// It runs on a thread of its own, so it serves whether or not the caller runs an async
/// runtime. Dropping it stops it; [`ScriptedServer::shutdown`] also waits until it has stopped.
#[derive(Debug)]
pub struct ScriptedServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    stopped: Option<oneshot::Receiver<()>>,
}

#[derive(Debug)]
struct Shared {
    turns: Mutex<Vec<(Turn, bool)>>,
    requests: Mutex<Vec<RecordedRequest>>,
    counter: AtomicU64,
    /// Random hex that makes this server's ids unlike another's.
    nonce: String,
    /// Whether the prompt cache is modelled ([`Script::prompt_cache`]).
    prompt_cache: bool,
    /// The prompt cache: the digests of the prefixes requests marked with `cache_control`.
    cached: Mutex<HashSet<[u8; 32]>>,
}

impl ScriptedServer {
    /// Binds `127.0.0.1:0` and starts serving `script`.
    pub fn start(script: Script) -> std::io::Result<ScriptedServer> {
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let listener = {
            let _context = runtime.enter();
            tokio::net::TcpListener::from_std(listener)?
        };
        let shared = Arc::new(Shared {
            turns: Mutex::new(script.turns.into_iter().map(|t| (t, false)).collect()),
            requests: Mutex::new(Vec::new()),
            counter: AtomicU64::new(0),
            nonce: format!("{:08x}", random() & 0xffff_ffff),
            prompt_cache: script.prompt_cache,
            cached: Mutex::new(HashSet::new()),
        });
        let app = Router::new()
            .route("/v1/messages", post(anthropic))
            .route("/v1/chat/completions", post(openai))
            .route("/v1/responses", post(responses))
            .route("/v1/embeddings", post(embeddings))
            .route("/v1/models", axum::routing::get(models))
            .route("/v1/messages/count_tokens", post(count_tokens))
            .fallback(not_found)
            .with_state(shared.clone());
        let (stop, stop_rx) = oneshot::channel::<()>();
        let (stopped_tx, stopped) = oneshot::channel::<()>();
        std::thread::Builder::new()
            .name(format!("baton-scripted-{}", addr.port()))
            .spawn(move || {
                let served = runtime.block_on(
                    axum::serve(listener, app)
                        .with_graceful_shutdown(async {
                            let _ = stop_rx.await;
                        })
                        .into_future(),
                );
                if let Err(err) = served {
                    tracing::warn!(error = %err, "scripted server stopped");
                }
                let _ = stopped_tx.send(());
            })?;
        tracing::debug!(%addr, "scripted server started");
        Ok(ScriptedServer {
            addr,
            shared,
            stop: Some(stop),
            stopped: Some(stopped),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL the Anthropic client takes: `http://127.0.0.1:PORT` (no `/v1`).
    pub fn anthropic_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The base URL the OpenAI client takes: `http://127.0.0.1:PORT/v1`.
    pub fn openai_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every request received so far, in order, whatever was answered.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// How many turns are not consumed yet.
    pub fn remaining_turns(&self) -> usize {
        lock(&self.shared.turns)
            .iter()
            .filter(|(_, used)| !used)
            .count()
    }

    /// Stops serving, and waits until the server has finished the requests in flight.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(stopped) = self.stopped.take() {
            let _ = stopped.await;
        }
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn random() -> u64 {
    let mut hasher = std::hash::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.write_u32(std::process::id());
    hasher.finish()
}

/// One of the model-call APIs the server speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Api {
    Messages,
    Chat,
    Responses,
}

impl Api {
    /// The vendor: its error shape and its ids.
    fn format(self) -> Format {
        match self {
            Api::Messages => Format::Anthropic,
            Api::Chat | Api::Responses => Format::OpenAi,
        }
    }

    fn path(self) -> &'static str {
        match self {
            Api::Messages => "/v1/messages",
            Api::Chat => "/v1/chat/completions",
            Api::Responses => "/v1/responses",
        }
    }

    fn parse_request(self, value: &Value) -> Result<RequestBody, baton_wire::Error> {
        match self {
            Api::Responses => baton_wire::responses::parse_request(value),
            _ => self.format().parse_request(value),
        }
    }

    fn id_prefix(self) -> &'static str {
        match self {
            Api::Messages => "msg_01",
            Api::Chat => "chatcmpl-",
            Api::Responses => "resp_",
        }
    }

    fn render_response(self, reply: &baton_wire::Reply, id: &str) -> Value {
        match self {
            Api::Responses => baton_wire::responses::render_response(reply, id),
            _ => self.format().render_response(reply, id),
        }
    }

    fn render_stream(self, reply: &baton_wire::Reply, id: &str) -> Vec<String> {
        match self {
            Api::Responses => baton_wire::responses::render_stream(reply, id),
            _ => self.format().render_stream(reply, id),
        }
    }
}

async fn anthropic(
    State(shared): State<Arc<Shared>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    answer(&shared, Api::Messages, &uri, &headers, &body).await
}

async fn openai(
    State(shared): State<Arc<Shared>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    answer(&shared, Api::Chat, &uri, &headers, &body).await
}

async fn responses(
    State(shared): State<Arc<Shared>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    answer(&shared, Api::Responses, &uri, &headers, &body).await
}

/// `POST /v1/embeddings`: a vector of 8 numbers per input, made from a hash of its text, so
/// the same input always gets the same vector; usage counts input bytes / 4. No turn is
/// consumed.
async fn embeddings(
    State(shared): State<Arc<Shared>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let value = shared.record("POST", &uri, &headers, &body);
    let format = Format::OpenAi;
    let error = |message: &str, param: &str| {
        with_vendor_headers(
            &shared,
            format,
            json_response(
                StatusCode::BAD_REQUEST,
                &format.render_error(400, message, Some(param)),
            ),
        )
    };
    let Some(value) = value else {
        return error("the request body is not valid JSON", "body");
    };
    let Some(model) = value.get("model").and_then(Value::as_str) else {
        return error("you must provide a model parameter", "model");
    };
    let inputs: Vec<String> = match value.get("input") {
        Some(Value::String(text)) => vec![text.clone()],
        Some(Value::Array(items)) => items.iter().map(Value::to_string).collect(),
        _ => return error("'input' must be a string or an array", "input"),
    };
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(index, text)| {
            let mut hasher = std::hash::DefaultHasher::new();
            hasher.write(text.as_bytes());
            let mut seed = hasher.finish();
            let vector: Vec<f64> = (0..8)
                .map(|_| {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((seed >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
                })
                .collect();
            serde_json::json!({"object": "embedding", "index": index, "embedding": vector})
        })
        .collect();
    let tokens = (inputs.iter().map(String::len).sum::<usize>() as u64 / 4).max(1);
    let body = serde_json::json!({
        "object": "list", "data": data, "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    });
    with_vendor_headers(&shared, format, json_response(StatusCode::OK, &body))
}

/// `GET /v1/models`: the Anthropic list when the request carries `anthropic-version`, else
/// the OpenAI one.
async fn models(
    State(shared): State<Arc<Shared>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
) -> Response {
    shared.record("GET", &uri, &headers, b"");
    let (format, body) = match headers.contains_key("anthropic-version") {
        true => (
            Format::Anthropic,
            serde_json::json!({
                "data": [{"type": "model", "id": "claude-sonnet-4-5", "display_name": "Claude Sonnet 4.5",
                          "created_at": "2025-09-29T00:00:00Z"}],
                "has_more": false, "first_id": "claude-sonnet-4-5", "last_id": "claude-sonnet-4-5",
            }),
        ),
        false => (
            Format::OpenAi,
            serde_json::json!({"object": "list", "data": [
                {"id": "gpt-4o-mini", "object": "model", "created": 1721172741, "owned_by": "system"},
                {"id": "gpt-5", "object": "model", "created": 1754425777, "owned_by": "system"},
            ]}),
        ),
    };
    with_vendor_headers(&shared, format, json_response(StatusCode::OK, &body))
}

/// `POST /v1/messages/count_tokens`: `{"input_tokens": request bytes / 4}` for a valid
/// Messages request (without `max_tokens`, as the real endpoint takes it). No turn is consumed.
async fn count_tokens(
    State(shared): State<Arc<Shared>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let value = shared.record("POST", &uri, &headers, &body);
    let format = Format::Anthropic;
    let checked = match value {
        Some(mut value) => {
            if let Some(map) = value.as_object_mut() {
                map.entry("max_tokens").or_insert(Value::from(1));
            }
            format
                .parse_request(&value)
                .and_then(|r| format.check_messages(&r.messages))
                .map_err(|e| e.to_string())
        }
        None => Err("the request body is not valid JSON".to_owned()),
    };
    let response = match checked {
        Ok(()) => json_response(
            StatusCode::OK,
            &serde_json::json!({"input_tokens": (body.len() as u64 / 4).max(1)}),
        ),
        Err(message) => json_response(
            StatusCode::BAD_REQUEST,
            &format.render_error(400, &message, None),
        ),
    };
    with_vendor_headers(&shared, format, response)
}

/// Adds what the vendor's real responses carry besides the body: the request id
/// (`x-request-id` for OpenAI, `request-id` for Anthropic) and a rate-limit header.
fn with_vendor_headers(shared: &Shared, format: Format, mut response: Response) -> Response {
    let id = shared.id("req_");
    let headers = response.headers_mut();
    let (id_header, limit_header) = match format {
        Format::OpenAi => ("x-request-id", "x-ratelimit-remaining-requests"),
        Format::Anthropic => ("request-id", "anthropic-ratelimit-requests-remaining"),
    };
    if let Ok(value) = HeaderValue::from_str(&id) {
        headers.insert(id_header, value);
    }
    headers.insert(limit_header, HeaderValue::from_static("4999"));
    response
}

async fn not_found(
    State(shared): State<Arc<Shared>>,
    method: axum::http::Method,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    shared.record(method.as_str(), &uri, &headers, &body);
    let message = format!(
        "scripted server: no route {}; it serves POST /v1/messages, /v1/chat/completions, \
         /v1/responses, /v1/embeddings, /v1/messages/count_tokens and GET /v1/models",
        uri.path()
    );
    json_response(
        StatusCode::NOT_FOUND,
        &Format::Anthropic.render_error(404, &message, None),
    )
}

async fn answer(
    shared: &Shared,
    api: Api,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let format = api.format();
    let response = answer_inner(shared, api, uri, headers, body).await;
    with_vendor_headers(shared, format, response)
}

async fn answer_inner(
    shared: &Shared,
    api: Api,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let format = api.format();
    debug_assert_eq!(uri.path(), api.path());
    let value = shared.record("POST", uri, headers, body);
    let error = |status: u16, message: &str, param: Option<&str>| {
        let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        json_response(code, &format.render_error(status, message, param))
    };
    let Some(value) = value else {
        return error(400, "the request body is not valid JSON", None);
    };
    // A Responses request continuing a stored response carries only the new items: their tool
    // calls are in the stored response, so the pairing is not checked.
    let continued = api == Api::Responses && value.get("previous_response_id").is_some();
    let checked = api.parse_request(&value).and_then(|request| {
        match continued {
            true => Ok(()),
            false => format.check_messages(&request.messages),
        }
        .map(|()| request)
    });
    let request = match checked {
        Ok(request) => request,
        Err(err) => {
            let param = match &err {
                baton_wire::Error::Invalid { at, .. } => Some(at.clone()),
                _ => None,
            };
            tracing::debug!(error = %err, "scripted server refused a request");
            return error(400, &err.to_string(), param.as_deref());
        }
    };
    let (index, turn) = match shared.take_turn(&request) {
        Ok(found) => found,
        Err(message) => return error(500, &message, None),
    };
    if let Err(failed) = turn.expect.check(&String::from_utf8_lossy(body)) {
        return error(
            400,
            &format!("scripted server: turns[{index}]: {failed}"),
            None,
        );
    }
    let reply = turn.reply;
    if reply.delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(reply.delay_ms)).await;
    }
    if let Some(failure) = &reply.error {
        let message = failure
            .message
            .clone()
            .unwrap_or_else(|| format!("scripted error (HTTP {})", failure.status));
        let mut response = error(failure.status, &message, None);
        if let Some(seconds) = failure.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
            response
                .headers_mut()
                .insert("x-should-retry", HeaderValue::from_static("true"));
        }
        return response;
    }
    if let Some(raw) = reply.raw {
        return (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            raw,
        )
            .into_response();
    }
    let scripted = match &reply.message {
        None => None,
        Some(message) => {
            let parsed = match (format, message) {
                // On the Responses API, the reply's output items (reasoning included).
                (_, Value::Array(items)) if api == Api::Responses => {
                    Ok(baton_wire::responses::parse_output(items))
                }
                (Format::Anthropic, _) => baton_wire::anthropic::parse_message(message),
                (Format::OpenAi, _) => baton_wire::openai::parse_message(message),
            };
            match parsed {
                Ok(message) => Some(message),
                Err(e) => {
                    let message = format!("scripted server: turns[{index}].reply.message: {e}");
                    return error(500, &message, None);
                }
            }
        }
    };
    let cache = match (shared.prompt_cache, format) {
        (true, Format::Anthropic) => Some(shared.prompt_cache(&value)),
        _ => None,
    };
    let wire = shared.reply(format, &request, body.len(), &reply, scripted, cache);
    let id = shared.id(api.id_prefix());
    if request.stream {
        let mut events = api.render_stream(&wire, &id);
        if reply.truncate {
            events.pop();
        }
        let close_delay = Duration::from_millis(reply.close_delay_ms);
        // The events, then (after the close delay) the end of the body.
        let pieces = futures_util::stream::unfold(
            (Some(events.concat()), close_delay),
            |(text, delay)| async move {
                match text {
                    Some(text) => Some((Ok::<_, std::convert::Infallible>(text), (None, delay))),
                    None => {
                        if !delay.is_zero() {
                            tokio::time::sleep(delay).await;
                        }
                        None
                    }
                }
            },
        );
        let mut response = Response::new(axum::body::Body::from_stream(pieces));
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        return response;
    }
    let mut text = api.render_response(&wire, &id).to_string();
    if reply.truncate {
        let mut half = text.len() / 2;
        while !text.is_char_boundary(half) {
            half += 1;
        }
        text.truncate(half);
    }
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        text,
    )
        .into_response()
}

fn json_response(status: StatusCode, value: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

/// One block of an Anthropic request's prompt, in the order the prompt cache reads them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PromptBlock {
    /// `tool`, `system`, or the role of the message it is in.
    pub role: String,
    /// Its JSON text, without its `cache_control`.
    pub text: String,
    /// Whether it carries `cache_control` (a cache breakpoint).
    pub marked: bool,
}

/// The blocks of an Anthropic Messages request, in order: each tool, each system block (a
/// system string is one block), each message's content blocks (a string content is one).
pub fn prompt_blocks(value: &Value) -> Vec<PromptBlock> {
    let mut blocks = Vec::new();
    let mut push = |role: &str, block: &Value| {
        let mut plain = block.clone();
        if let Some(object) = plain.as_object_mut() {
            object.remove("cache_control");
        }
        blocks.push(PromptBlock {
            role: role.to_owned(),
            text: plain.to_string(),
            marked: block.get("cache_control").is_some(),
        });
    };
    for tool in items(&value["tools"]) {
        push("tool", tool);
    }
    for block in items(&value["system"]) {
        push("system", block);
    }
    for message in items(&value["messages"]) {
        let role = message["role"].as_str().unwrap_or("");
        for block in items(&message["content"]) {
            push(role, block);
        }
    }
    blocks
}

/// A field that is a list or one item: its items.
fn items(v: &Value) -> Vec<&Value> {
    match v {
        Value::Array(items) => items.iter().collect(),
        Value::Null => vec![],
        other => vec![other],
    }
}

impl Shared {
    /// The modelled prompt cache's answer to an Anthropic request: the tokens (bytes / 4) it
    /// reads and writes. The request is a sequence of blocks (each tool, each system block,
    /// each message's content blocks with the message's role), each prefix of which has a
    /// digest (`cache_control` itself not included). It reads the longest prefix, ending at or
    /// before its last `cache_control` block, that an earlier request wrote; it writes the
    /// prefix through each of its `cache_control` blocks. (Anthropic looks back at most 20
    /// blocks from a breakpoint and expires entries after 5 minutes; the model does neither.)
    fn prompt_cache(&self, value: &Value) -> (u64, u64) {
        use sha2::Digest as _;
        let mut hasher = sha2::Sha256::new();
        let mut bytes = 0;
        let mut prefixes = Vec::new();
        for block in prompt_blocks(value) {
            hasher.update(block.role.as_bytes());
            hasher.update((block.text.len() as u64).to_be_bytes());
            hasher.update(block.text.as_bytes());
            bytes += block.text.len() as u64;
            let digest: [u8; 32] = hasher.clone().finalize().into();
            prefixes.push((digest, bytes, block.marked));
        }
        let Some(last) = prefixes.iter().rposition(|p| p.2) else {
            return (0, 0);
        };
        let mut cached = lock(&self.cached);
        let read = prefixes[..=last]
            .iter()
            .rev()
            .find(|p| cached.contains(&p.0))
            .map_or(0, |p| p.1);
        for (digest, _, marked) in &prefixes {
            if *marked {
                cached.insert(*digest);
            }
        }
        (read / 4, (prefixes[last].1 - read) / 4)
    }

    /// Records a request; returns its body as JSON, when it is.
    fn record(
        &self,
        method: &str,
        uri: &axum::http::Uri,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Option<Value> {
        let value: Option<Value> = serde_json::from_slice(body).ok();
        let mut kept = BTreeMap::new();
        let mut auth = false;
        for (name, value) in headers {
            let name = name.as_str().to_ascii_lowercase();
            if matches!(name.as_str(), "authorization" | "x-api-key" | "api-key") {
                auth = true;
                continue;
            }
            let secret = ["key", "token", "secret", "cookie", "authorization"]
                .iter()
                .any(|word| name.contains(word));
            if secret {
                continue;
            }
            if let Ok(value) = value.to_str() {
                kept.insert(name, value.to_owned());
            }
        }
        lock(&self.requests).push(RecordedRequest {
            method: method.to_owned(),
            path: uri.path().to_owned(),
            query: uri.query().map(str::to_owned),
            body: value
                .clone()
                .unwrap_or_else(|| Value::String(String::from_utf8_lossy(body).into_owned())),
            text: String::from_utf8_lossy(body).into_owned(),
            headers: kept,
            auth,
        });
        value
    }

    /// Consumes the first unconsumed turn whose `when` matches, or says why none does.
    fn take_turn(&self, request: &RequestBody) -> Result<(usize, Turn), String> {
        let mut turns = lock(&self.turns);
        let mut failed = Vec::new();
        for (index, (turn, used)) in turns.iter_mut().enumerate() {
            if *used {
                continue;
            }
            match turn.when.check(request) {
                Ok(()) => {
                    *used = true;
                    return Ok((index, turn.clone()));
                }
                Err(why) => failed.push(format!("turns[{index}]: {why}")),
            }
        }
        Err(match failed.is_empty() {
            true => format!(
                "scripted server: the script is exhausted: all {} turns were consumed",
                turns.len()
            ),
            false => format!(
                "scripted server: the script is exhausted for this request: no unconsumed turn matches ({})",
                failed.join("; ")
            ),
        })
    }

    /// A new id: `prefix`, this server's nonce, and a counter.
    fn id(&self, prefix: &str) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed) + 1;
        format!("{prefix}{}{n:04}", self.nonce)
    }

    /// The wire reply a scripted reply stands for.
    fn reply(
        &self,
        format: Format,
        request: &RequestBody,
        request_bytes: usize,
        reply: &Reply,
        scripted: Option<Message>,
        cache: Option<(u64, u64)>,
    ) -> baton_wire::Reply {
        let mut content = Vec::new();
        let mut output_bytes = 0;
        if let Some(message) = scripted {
            output_bytes += serde_json::to_string(&message.content).map_or(0, |t| t.len());
            content = message.content;
        }
        if let Some(text) = reply.text.as_deref().filter(|t| !t.is_empty()) {
            output_bytes += text.len();
            content.push(ContentBlock::Text {
                text: text.to_owned(),
            });
        }
        for call in &reply.tool_calls {
            let id = self.id(match format {
                Format::Anthropic => "toolu_01",
                Format::OpenAi => "call_",
            });
            output_bytes += call.name.len() + call.input.to_string().len();
            content.push(ContentBlock::ToolUse {
                id,
                name: call.name.clone(),
                input: call.input.clone(),
            });
        }
        let stop = match reply.stop.as_deref() {
            Some(stop) => stop,
            None if reply.tool_calls.is_empty() => "end_turn",
            None => "tool_use",
        };
        let stop = match (format, stop) {
            (Format::Anthropic, "stop") => "end_turn",
            (Format::Anthropic, "tool_calls") => "tool_use",
            (Format::Anthropic, "length") => "max_tokens",
            (Format::OpenAi, "end_turn") => "stop",
            (Format::OpenAi, "tool_use") => "tool_calls",
            (Format::OpenAi, "max_tokens") => "length",
            (_, other) => other,
        };
        baton_wire::Reply {
            message: Message {
                role: Role::Assistant,
                content,
            },
            stop_reason: stop.to_owned(),
            usage: {
                let mut extra = reply.usage.clone().unwrap_or_default();
                let mut input = request_bytes as u64 / 4;
                if let Some((read, written)) = cache {
                    (extra.cache_read, extra.cache_write_5m) = (read, written);
                    input = input.saturating_sub(read + written);
                }
                Usage {
                    input_tokens: input.max(1),
                    output_tokens: (output_bytes as u64 / 4).max(1) + extra.reasoning,
                    cache_read_tokens: extra.cache_read,
                    cache_write_tokens: extra.cache_write_5m + extra.cache_write_1h,
                    cache_write_1h_tokens: extra.cache_write_1h,
                    reasoning_tokens: extra.reasoning,
                }
            },
            model: request.model.clone(),
        }
    }
}
