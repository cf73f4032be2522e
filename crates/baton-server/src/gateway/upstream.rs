//! The upstream call: forward the body, read the answer whole (JSON) or stream it through to
//! the leader's caller while accumulating it (server-sent events), and say what may be cached.
//!
//! A stream is complete when its final event has been read (`message_stop`, `[DONE]`,
//! `response.completed`): the call ends there, whether or not the upstream has closed its body
//! yet, and the chunk that held the final event waits in [`Held`] until the answer is stored.

use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use baton_cache::Answer;
use baton_wire::Format;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot};
use tokio::time::timeout;

use super::{Call, Endpoint, relay};
use crate::problem::Problem;

/// A stream's leader going live: the head (with the upstream's relayed headers), and the
/// upstream's chunks as they come.
///
/// The sending half ends up in the call's [`Held`] when the stream ends, with the chunk that
/// held the final event, so the caller sees the end of the stream only once the call has
/// stored its answer: a caller that repeats a request right after its stream ended gets a hit.
pub(crate) struct Live {
    pub(crate) status: StatusCode,
    pub(crate) content_type: HeaderValue,
    pub(crate) headers: HeaderMap,
    pub(crate) chunks: mpsc::Receiver<Bytes>,
}

/// Where a stream's sending half and its withheld last chunk wait until the call is done.
pub(crate) type Held = std::sync::Mutex<Option<(mpsc::Sender<Bytes>, Bytes)>>;

/// Sends a stream's withheld last chunk to its caller and ends its body.
pub(crate) async fn release(held: &Held) {
    let taken = held
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    if let Some((tx, tail)) = taken
        && !tail.is_empty()
    {
        let _ = tx.send(tail).await;
    }
}

/// What the cache keeps of a successful, complete upstream response.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Recorded {
    status: u16,
    content_type: String,
    /// The upstream's headers relayed to the caller (entries stored before they were kept have
    /// none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    headers: Vec<(String, String)>,
    body: Payload,
}

/// The body: JSON kept as its text (decoding it is a validation pass, not a tree), or a whole
/// event stream.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Payload {
    Json(Box<RawValue>),
    Sse(String),
}

impl Recorded {
    /// The status, the content type, the upstream's relayed headers and the body bytes.
    pub(crate) fn into_parts(self) -> (u16, String, HeaderMap, Bytes) {
        let body = match self.body {
            Payload::Json(raw) => Bytes::from(String::from(Box::<str>::from(raw))),
            Payload::Sse(text) => Bytes::from(text),
        };
        let mut headers = HeaderMap::with_capacity(self.headers.len());
        for (name, value) in &self.headers {
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                headers.append(name, value);
            }
        }
        (self.status, self.content_type, headers, body)
    }

    /// The status.
    pub(crate) fn status(&self) -> u16 {
        self.status
    }

    /// The content type.
    pub(crate) fn content_type(&self) -> &str {
        &self.content_type
    }

    /// The body as text.
    pub(crate) fn body_text(&self) -> &str {
        match &self.body {
            Payload::Json(raw) => raw.get(),
            Payload::Sse(text) => text,
        }
    }
}

/// Why the upstream call gave nothing to cache.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UpstreamError {
    /// The upstream's own error (or a 2xx carrying an error body): passed on as it came, with
    /// its relayed headers (content type, `retry-after`, `x-should-retry`, rate limits…).
    #[error("the upstream answered HTTP {status}")]
    Status {
        status: StatusCode,
        headers: Box<HeaderMap>,
        body: Bytes,
    },
    #[error("the upstream did not answer within {0:?} (`baton serve --upstream-timeout`)")]
    Timeout(Duration),
    #[error("the upstream cannot be reached: {0}")]
    Unreachable(String),
    #[error("the upstream's answer is not what its API sends: {0}")]
    Malformed(String),
    #[error("the upstream's stream broke off: {0}")]
    Broken(String),
    #[error("the upstream reported an error in its stream: {0}")]
    Api(String),
}

impl UpstreamError {
    /// The problem a caller gets for it (never for [`UpstreamError::Status`], which is passed
    /// on as it came).
    pub(crate) fn problem(&self) -> Problem {
        let detail = self.to_string();
        match self {
            UpstreamError::Timeout(_) => Problem::new(
                StatusCode::GATEWAY_TIMEOUT,
                "upstream-timeout",
                "Upstream timed out",
                detail,
            ),
            UpstreamError::Unreachable(_) => Problem::new(
                StatusCode::BAD_GATEWAY,
                "upstream-unreachable",
                "Upstream unreachable",
                detail,
            ),
            UpstreamError::Malformed(_) | UpstreamError::Status { .. } => Problem::new(
                StatusCode::BAD_GATEWAY,
                "upstream-malformed",
                "Upstream answered garbage",
                detail,
            ),
            UpstreamError::Broken(_) => Problem::new(
                StatusCode::BAD_GATEWAY,
                "upstream-truncated",
                "Upstream stream broke off",
                detail,
            ),
            UpstreamError::Api(_) => Problem::new(
                StatusCode::BAD_GATEWAY,
                "upstream-error",
                "Upstream reported an error",
                detail,
            ),
        }
    }

    pub(crate) fn from_transport(err: &reqwest::Error, limit: Duration, what: &str) -> Self {
        if err.is_timeout() {
            return UpstreamError::Timeout(limit);
        }
        // Without the URL: a base URL may carry credentials.
        let err = format!("{what}: {}", error_chain(err));
        match what {
            "sending" => UpstreamError::Unreachable(err),
            _ => UpstreamError::Broken(err),
        }
    }
}

fn error_chain(err: &reqwest::Error) -> String {
    let mut text = String::new();
    let mut source: Option<&dyn std::error::Error> = Some(err);
    while let Some(e) = source {
        if !text.is_empty() {
            text.push_str(": ");
        }
        let shown = e.to_string();
        // reqwest's own line names the URL; its causes say what went wrong.
        if !shown.contains("://") {
            text.push_str(&shown);
        } else {
            text.push_str("request failed");
        }
        source = e.source();
    }
    text
}

/// Calls the upstream once. A JSON answer is read whole; an event stream goes live to `live`
/// (once its first event has been read, so a body that is no event stream at all is still a
/// clean 502) and is accumulated for the cache.
pub(crate) async fn fetch(
    call: &Call,
    live: Option<oneshot::Sender<Live>>,
    held: &Held,
) -> Result<Answer<Recorded>, UpstreamError> {
    let limit = call.state.config.upstream_timeout;
    let sent = call
        .state
        .http
        .post(&call.url)
        .headers(call.headers.clone())
        .body(call.body.clone())
        .send();
    let response = match timeout(limit, sent).await {
        Err(_) => return Err(UpstreamError::Timeout(limit)),
        Ok(Err(e)) => return Err(UpstreamError::from_transport(&e, limit, "sending")),
        Ok(Ok(response)) => response,
    };
    let status = response.status();
    let content_type = response.headers().get(header::CONTENT_TYPE).cloned();
    let relayed = relay::returned(response.headers());
    if !status.is_success() {
        let body = read_all(response, limit).await?;
        return Err(UpstreamError::Status {
            status,
            headers: Box::new(relayed),
            body,
        });
    }
    let mime = content_type
        .as_ref()
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .unwrap_or_default();
    if mime == "text/event-stream" {
        let content_type =
            content_type.unwrap_or_else(|| HeaderValue::from_static("text/event-stream"));
        let Some(reader) = call.endpoint.stream() else {
            return Err(UpstreamError::Malformed(
                "an event stream from an endpoint that answers JSON".to_owned(),
            ));
        };
        return stream(
            call,
            response,
            status,
            content_type,
            relayed,
            reader,
            live,
            held,
        )
        .await;
    }
    // Not a stream: the caller learns it when `live` is dropped, and waits for the answer.
    drop(live);
    let body = read_all(response, limit).await?;
    let raw: Box<RawValue> = serde_json::from_slice(&body)
        .map_err(|e| UpstreamError::Malformed(format!("a {status} body that is not JSON ({e})")))?;
    let (model, usage, storable) = match call.endpoint.read_answer(&body) {
        Ok(read) => read,
        Err(baton_wire::Error::Api { .. }) => {
            // An error in a 2xx body: passed on, never cached.
            return Err(UpstreamError::Status {
                status,
                headers: Box::new(relayed),
                body,
            });
        }
        Err(e) => {
            // A reply baton's reader does not know every part of: still the upstream's
            // answer, served and cached as it came; only its usage is unknown.
            tracing::debug!(error = %e, "the upstream's reply was not read for its usage");
            (String::new(), baton_wire::Usage::default(), true)
        }
    };
    Ok(Answer {
        value: Recorded {
            status: status.as_u16(),
            content_type: content_type
                .as_ref()
                .and_then(|v| v.to_str().ok())
                .unwrap_or("application/json")
                .to_owned(),
            headers: header_pairs(&relayed),
            body: Payload::Json(raw),
        },
        model: if model.is_empty() {
            call.model.clone()
        } else {
            model
        },
        usage: usage.priced(),
        storable,
    })
}

fn header_pairs(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter_map(|(name, value)| {
            Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
        })
        .collect()
}

async fn read_all(
    mut response: reqwest::Response,
    limit: Duration,
) -> Result<Bytes, UpstreamError> {
    let mut body = Vec::new();
    loop {
        match timeout(limit, response.chunk()).await {
            Err(_) => return Err(UpstreamError::Timeout(limit)),
            Ok(Err(e)) => return Err(UpstreamError::from_transport(&e, limit, "reading")),
            Ok(Ok(None)) => return Ok(Bytes::from(body)),
            Ok(Ok(Some(chunk))) => {
                if body.is_empty() {
                    body.reserve(chunk.len());
                }
                body.extend_from_slice(&chunk);
            }
        }
    }
}

/// Streams an event-stream answer through to the leader's caller and accumulates it; the
/// whole stream is the answer only when it ended properly. The chunk holding the final event
/// is not sent: it waits in `held` with the sending half (see [`release`]).
#[allow(clippy::too_many_arguments)]
async fn stream(
    call: &Call,
    mut response: reqwest::Response,
    status: StatusCode,
    content_type: HeaderValue,
    relayed: HeaderMap,
    mut reader: baton_wire::Stream,
    mut live: Option<oneshot::Sender<Live>>,
    held: &Held,
) -> Result<Answer<Recorded>, UpstreamError> {
    let limit = call.state.config.upstream_timeout;
    let mut text: Vec<u8> = Vec::new();
    let mut unreadable: Option<baton_wire::Error> = None;
    let mut sink: Option<mpsc::Sender<Bytes>> = None;
    // Where the withheld last chunk starts.
    let mut tail = None;
    let ended = loop {
        let chunk = match timeout(limit, response.chunk()).await {
            Err(_) => break Err(UpstreamError::Timeout(limit)),
            Ok(Err(e)) => break Err(UpstreamError::from_transport(&e, limit, "reading")),
            Ok(Ok(None)) => break Ok(()),
            Ok(Ok(Some(chunk))) => chunk,
        };
        let from = text.len();
        text.extend_from_slice(&chunk);
        if unreadable.is_none()
            && let Err(e) = reader.feed(&chunk)
        {
            unreadable = Some(e);
        }
        let done = unreadable.is_none() && reader.is_done();
        let send_to = if done { from } else { text.len() };
        if live.is_some() && unreadable.is_none() && (done || has_event(&text)) {
            // The first whole event read well: go live with everything so far.
            if let Some(live) = live.take() {
                let (tx, rx) = mpsc::channel(64);
                let head = Live {
                    status,
                    content_type: content_type.clone(),
                    headers: relayed.clone(),
                    chunks: rx,
                };
                if live.send(head).is_ok()
                    && (send_to == 0
                        || tx
                            .send(Bytes::copy_from_slice(&text[..send_to]))
                            .await
                            .is_ok())
                {
                    sink = Some(tx);
                }
            }
        } else if send_to > from {
            let gone = match &sink {
                Some(tx) => tx
                    .send(Bytes::copy_from_slice(&text[from..send_to]))
                    .await
                    .is_err(),
                None => false,
            };
            if gone {
                // The caller hung up: the stream is still read, for the cache and the followers.
                sink = None;
            }
        }
        if done {
            // Complete: the upstream's closing of its body is not waited for.
            tail = Some(from);
            break Ok(());
        }
    };
    let finished = ended.and_then(|()| {
        match unreadable {
            Some(e) => Err(e),
            None => reader.finish(),
        }
        .map_err(|e| match e {
            baton_wire::Error::Truncated { .. } => UpstreamError::Broken(e.to_string()),
            baton_wire::Error::Api { .. } => UpstreamError::Api(e.to_string()),
            e => UpstreamError::Malformed(e.to_string()),
        })
    });
    let reply = match finished {
        Ok(reply) => reply,
        Err(err) => {
            if let Some(tx) = &sink
                && !matches!(err, UpstreamError::Api(_))
            {
                // The head is sent: the caller learns of the failure from the vendor's own
                // error event (the upstream already sent one for `Api`).
                let _ = tx.send(error_event(call.endpoint, &err)).await;
            }
            hold(held, sink, Bytes::new());
            return Err(err);
        }
    };
    let last = tail.map_or_else(Bytes::new, |from| Bytes::copy_from_slice(&text[from..]));
    hold(held, sink, last);
    let storable = match call.endpoint {
        // A streamed Responses answer that ends `incomplete` is final too.
        Endpoint::Responses => {
            reply.stop_reason == "completed" || reply.stop_reason.starts_with("incomplete")
        }
        _ => true,
    };
    let text = String::from_utf8(text)
        .map_err(|_| UpstreamError::Malformed("the event stream is not UTF-8".to_owned()))?;
    Ok(Answer {
        value: Recorded {
            status: status.as_u16(),
            content_type: content_type
                .to_str()
                .unwrap_or("text/event-stream")
                .to_owned(),
            headers: header_pairs(&relayed),
            body: Payload::Sse(text),
        },
        model: if reply.model.is_empty() {
            call.model.clone()
        } else {
            reply.model
        },
        usage: reply.usage.priced(),
        storable,
    })
}

fn hold(held: &Held, sink: Option<mpsc::Sender<Bytes>>, tail: Bytes) {
    *held
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = sink.map(|tx| (tx, tail));
}

/// Whether `text` holds a whole event (a blank line ends one).
fn has_event(text: &[u8]) -> bool {
    text.windows(2)
        .any(|w| w == b"\n\n" || w == b"\r\r" || w == b"\n\r")
}

/// The vendor's own error event for a stream the gateway has to end.
fn error_event(endpoint: Endpoint, err: &UpstreamError) -> Bytes {
    let message = format!("baton: {err}");
    let event = match endpoint {
        Endpoint::Messages => {
            let data = Format::Anthropic
                .render_error(502, &message, None)
                .to_string();
            baton_wire::sse::render(Some("error"), &data)
        }
        Endpoint::Responses => {
            let data = serde_json::json!({"type": "error", "code": "server_error",
                                          "message": message, "param": null});
            baton_wire::sse::render(Some("error"), &data.to_string())
        }
        Endpoint::Chat | Endpoint::Embeddings => {
            let data = Format::OpenAi.render_error(502, &message, None).to_string();
            baton_wire::sse::render(None, &data)
        }
    };
    Bytes::from(event)
}
