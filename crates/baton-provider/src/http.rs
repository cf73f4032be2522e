//! What both HTTP clients share: one call with retries, backoff and a timeout per attempt,
//! reading a streamed reply through `baton-wire`, and turning failures into [`Error`]s that
//! never hold the key.
//!
//! Nothing here logs a header: the one tracing event per attempt names the provider, the URL,
//! the attempt and the status, and the key is scrubbed from every message that could echo it
//! (a key shorter than [`SCRUB_MIN_KEY_LEN`] is a placeholder, not a secret, and is left
//! alone).

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use baton_wire::{Format, Reply, Stream, StreamDelta};
use reqwest::StatusCode;
use reqwest::header::{self, HeaderMap};

use crate::{Delta, Error, Secret};

/// How one call is made.
pub(crate) struct Call<'a> {
    pub(crate) provider: &'static str,
    pub(crate) env_var: &'static str,
    pub(crate) format: Format,
    pub(crate) url: String,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Vec<u8>,
    pub(crate) timeout: Duration,
    pub(crate) max_retries: u32,
    pub(crate) key: Option<&'a Secret>,
}

/// The longest wait a `retry-after` header can ask for.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Why one attempt failed, and whether another may follow.
enum Failure {
    Retry {
        error: Error,
        retry_after: Option<Duration>,
    },
    Fail(Error),
}

/// Makes the call: up to `1 + max_retries` attempts, each bounded by `timeout`.
pub(crate) async fn send(
    http: &reqwest::Client,
    call: &Call<'_>,
    on_delta: &mut (dyn FnMut(Delta) + Send),
) -> Result<Reply, Error> {
    let mut attempt: u32 = 0;
    loop {
        tracing::debug!(provider = call.provider, url = %call.url, attempt, "model call");
        let failure = match tokio::time::timeout(call.timeout, once(http, call, on_delta)).await {
            Err(_) => {
                return Err(Error::Timeout {
                    provider: call.provider,
                    seconds: call.timeout.as_millis().div_ceil(1000) as u64,
                });
            }
            Ok(Ok(reply)) => return Ok(reply),
            Ok(Err(failure)) => failure,
        };
        match failure {
            Failure::Retry { error, retry_after } if attempt < call.max_retries => {
                let delay = retry_after
                    .map(|d| d.min(MAX_RETRY_AFTER))
                    .unwrap_or_else(|| backoff(attempt));
                tracing::warn!(
                    provider = call.provider,
                    attempt,
                    delay_ms = delay.as_millis() as u64,
                    error = %error,
                    "model call failed; retrying"
                );
                tokio::time::sleep(delay).await;
                attempt += 1;
            }
            Failure::Retry { error, .. } | Failure::Fail(error) => return Err(error),
        }
    }
}

/// 0.5 s, 1 s, 2 s… for attempts 0, 1, 2…, with up to 10% jitter, at most a minute.
fn backoff(attempt: u32) -> Duration {
    let base = 0.5 * f64::from(2u32.saturating_pow(attempt.min(16)));
    let jitter = (std::hash::RandomState::new().build_hasher().finish() % 1000) as f64 / 10_000.0;
    Duration::from_secs_f64((base * (1.0 + jitter)).min(MAX_RETRY_AFTER.as_secs_f64()))
}

async fn once(
    http: &reqwest::Client,
    call: &Call<'_>,
    on_delta: &mut (dyn FnMut(Delta) + Send),
) -> Result<Reply, Failure> {
    let sent = http
        .post(&call.url)
        .headers(call.headers.clone())
        .body(call.body.clone())
        .send()
        .await;
    let mut response = match sent {
        Ok(response) => response,
        // No byte of an answer came, so nothing was shown: try again.
        Err(err) => {
            return Err(Failure::Retry {
                error: transport(call, &err),
                retry_after: None,
            });
        }
    };
    let status = response.status();
    if !status.is_success() {
        return Err(refusal(call, response).await);
    }
    let streamed = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !streamed {
        // A server that ignored `"stream": true` sends the whole reply at once.
        let body = response.bytes().await.map_err(|err| Failure::Retry {
            error: transport(call, &err),
            retry_after: None,
        })?;
        let reply = call
            .format
            .parse_response(&body)
            .map_err(|err| Failure::Fail(wire_error(call, err)))?;
        for delta in deltas_of(&reply) {
            on_delta(delta);
        }
        return Ok(reply);
    }
    let mut stream = Stream::new(call.format);
    let mut shown = false;
    let mut received = false;
    loop {
        let bytes = match response.chunk().await {
            Ok(Some(bytes)) => bytes,
            Ok(None) => break,
            Err(err) if !received => {
                return Err(Failure::Retry {
                    error: transport(call, &err),
                    retry_after: None,
                });
            }
            // The connection broke mid-reply: the stream decides whether that lost anything.
            Err(err) => {
                tracing::warn!(provider = call.provider, error = %err, "stream broke");
                break;
            }
        };
        received = true;
        let deltas = stream.feed(&bytes).map_err(|err| {
            let error = wire_error(call, err);
            match (&error, shown) {
                (Error::Status { status, .. }, false) if retryable(*status) => Failure::Retry {
                    error,
                    retry_after: None,
                },
                _ => Failure::Fail(error),
            }
        })?;
        for delta in deltas {
            shown = true;
            on_delta(match delta {
                StreamDelta::Text(text) => Delta::Text(text),
                StreamDelta::ToolCall { id, name } => Delta::ToolCall { id, name },
            });
        }
    }
    stream
        .finish()
        .map_err(|err| Failure::Fail(wire_error(call, err)))
}

/// The failure an error status is: 401 and 403 are [`Error::Unauthorized`], 429 and 5xx may be
/// retried (after `retry-after-ms` or `retry-after` when given), anything else is final.
async fn refusal(call: &Call<'_>, response: reqwest::Response) -> Failure {
    let status = response.status();
    let retry_after = retry_after(response.headers());
    let body = response.bytes().await.unwrap_or_default();
    tracing::debug!(
        provider = call.provider,
        status = status.as_u16(),
        "model call refused"
    );
    if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
        return Failure::Fail(Error::Unauthorized {
            provider: call.provider,
            status: status.as_u16(),
            env_var: call.env_var,
        });
    }
    let message = match call.format.parse_error(&body) {
        Some(error) => error.message,
        None => {
            let text = String::from_utf8_lossy(&body);
            let text = text.trim();
            match text.is_empty() {
                true => status.canonical_reason().unwrap_or("no message").to_owned(),
                false => text.chars().take(500).collect(),
            }
        }
    };
    let error = Error::Status {
        provider: call.provider,
        status: status.as_u16(),
        message: scrub(&message, call.key),
    };
    match retryable(status.as_u16()) {
        true => Failure::Retry { error, retry_after },
        false => Failure::Fail(error),
    }
}

fn retryable(status: u16) -> bool {
    status == 429 || (500..600).contains(&status)
}

/// `retry-after-ms` (OpenAI) or `retry-after` in seconds; the HTTP-date form is ignored.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let number = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|n| n.is_finite() && *n >= 0.0)
    };
    if let Some(ms) = number("retry-after-ms") {
        return Some(Duration::from_secs_f64((ms / 1000.0).min(60.0)));
    }
    number("retry-after").map(|s| Duration::from_secs_f64(s.min(60.0)))
}

/// The deltas a whole reply would have streamed, for a server that did not stream.
fn deltas_of(reply: &Reply) -> Vec<Delta> {
    reply
        .message
        .content
        .iter()
        .filter_map(|block| match block {
            baton_core::ContentBlock::Text { text } => Some(Delta::Text(text.clone())),
            baton_core::ContentBlock::ToolUse { id, name, .. } => Some(Delta::ToolCall {
                id: id.clone(),
                name: name.clone(),
            }),
            _ => None,
        })
        .collect()
}

/// What a wire error means for the caller: a stream that stopped early is
/// [`Error::Truncated`]; an error the vendor sent mid-stream is [`Error::Status`] with the
/// status its type stands for; anything else is [`Error::Malformed`].
fn wire_error(call: &Call<'_>, err: baton_wire::Error) -> Error {
    match err {
        baton_wire::Error::Truncated { .. } => Error::Truncated {
            provider: call.provider,
        },
        baton_wire::Error::Api { kind, message } => {
            let status = match kind.as_str() {
                "invalid_request_error" => 400,
                "authentication_error" => 401,
                "permission_error" => 403,
                "not_found_error" => 404,
                "request_too_large" => 413,
                "rate_limit_error" => 429,
                "overloaded_error" => 529,
                _ => 500,
            };
            Error::Status {
                provider: call.provider,
                status,
                message: scrub(&format!("{kind}: {message}"), call.key),
            }
        }
        other => Error::Malformed {
            provider: call.provider,
            detail: scrub(&other.to_string(), call.key),
        },
    }
}

/// A transport error, with its causes, and never the key.
fn transport(call: &Call<'_>, err: &reqwest::Error) -> Error {
    let mut detail = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        detail.push_str(": ");
        detail.push_str(&cause.to_string());
        source = cause.source();
    }
    Error::Transport {
        provider: call.provider,
        detail: scrub(&detail, call.key),
    }
}

/// Keys shorter than this are not scrubbed: a placeholder key (`ollama`, `k`, `none`) is no
/// secret, and replacing it everywhere would garble the message (`"model": "llama3"` with the
/// key `llama`).
pub(crate) const SCRUB_MIN_KEY_LEN: usize = 8;

/// Replaces every occurrence of the key in `text` with `***`, when the key is at least
/// [`SCRUB_MIN_KEY_LEN`] characters long.
pub(crate) fn scrub(text: &str, key: Option<&Secret>) -> String {
    match key.map(Secret::expose) {
        Some(key) if key.chars().count() >= SCRUB_MIN_KEY_LEN => text.replace(key, "***"),
        _ => text.to_owned(),
    }
}

#[cfg(test)]
mod tests;
