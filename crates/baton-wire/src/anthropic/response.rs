//! Anthropic Messages responses: the non-streaming body ([`parse_response`],
//! [`render_response`]) and the error body ([`parse_error`], [`render_error`]).
//!
//! A response is `{"id", "type": "message", "role": "assistant", "model", "content": [blocks],
//! "stop_reason", "stop_sequence", "usage": {"input_tokens", "output_tokens",
//! "cache_read_input_tokens", "cache_creation_input_tokens"}}`; an error is
//! `{"type": "error", "error": {"type": "invalid_request_error", "message": "…"}}`.
//!
//! ```
//! let body = br#"{"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
//!     "content": [{"type": "text", "text": "Hi."}], "stop_reason": "end_turn",
//!     "stop_sequence": null, "usage": {"input_tokens": 12, "output_tokens": 3}}"#;
//! let reply = baton_wire::anthropic::parse_response(body)?;
//! assert_eq!(reply.message.plain_text(), "Hi.");
//! assert_eq!((reply.stop_reason.as_str(), reply.usage.input_tokens), ("end_turn", 12));
//! # Ok::<(), baton_wire::Error>(())
//! ```

use baton_core::Role;
use serde_json::{Value, json};

use super::{parse_message, render_message};
use crate::{ApiError, Error, Reply, Usage};

#[cfg(test)]
mod tests;

/// Reads a non-streaming Messages response body.
///
/// A body of type `error` is [`Error::Api`]; a body that is not JSON, not an assistant
/// message, or has no `stop_reason` is [`Error::Malformed`].
pub fn parse_response(body: &[u8]) -> Result<Reply, Error> {
    let value: Value = serde_json::from_slice(body).map_err(|err| malformed(not_json(&err)))?;
    if value.get("type").and_then(Value::as_str) == Some("error") {
        return Err(api_error(&value));
    }
    let message = parse_message(&value)?;
    if message.role != Role::Assistant {
        return Err(malformed(format!(
            "role is {:?}, not \"assistant\"",
            message.role.as_str()
        )));
    }
    let Some(stop_reason) = value.get("stop_reason").and_then(Value::as_str) else {
        return Err(malformed("no stop_reason".to_owned()));
    };
    let mut usage = Usage::default();
    if let Some(u) = value.get("usage") {
        read_usage(u, &mut usage);
    }
    Ok(Reply {
        message,
        stop_reason: stop_reason.to_owned(),
        usage,
        model: str_field(&value, "model"),
    })
}

/// Writes a non-streaming Messages response body for `reply`, with `id` as its id.
pub fn render_response(reply: &Reply, id: &str) -> Value {
    let content = render_message(&reply.message)
        .get("content")
        .cloned()
        .unwrap_or(json!([]));
    json!({
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": reply.model,
        "content": content,
        "stop_reason": reply.stop_reason,
        "stop_sequence": null,
        "usage": render_usage(&reply.usage),
    })
}

/// Reads the error of an error body, when it has the Anthropic shape.
pub fn parse_error(body: &[u8]) -> Option<ApiError> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let error = value.get("error")?;
    Some(ApiError {
        kind: error.get("type")?.as_str()?.to_owned(),
        message: error.get("message")?.as_str()?.to_owned(),
    })
}

/// Writes the error body the API sends with HTTP `status`: its error type follows the status
/// (`invalid_request_error` for 400, `authentication_error` for 401, `rate_limit_error` for
/// 429, `overloaded_error` for 529, `api_error` for other 5xx…).
pub fn render_error(status: u16, message: &str) -> Value {
    let kind = match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ if status >= 500 => "api_error",
        _ => "invalid_request_error",
    };
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

/// Overrides `usage` with the fields `value` has (a stream's `message_delta` carries only
/// some), the 1-hour share of the cache writes from `cache_creation`.
pub(crate) fn read_usage(value: &Value, usage: &mut Usage) {
    let fields: [(&str, &mut u64); 4] = [
        ("input_tokens", &mut usage.input_tokens),
        ("output_tokens", &mut usage.output_tokens),
        ("cache_read_input_tokens", &mut usage.cache_read_tokens),
        ("cache_creation_input_tokens", &mut usage.cache_write_tokens),
    ];
    for (name, slot) in fields {
        if let Some(n) = value.get(name).and_then(Value::as_u64) {
            *slot = n;
        }
    }
    if let Some(creation) = value.get("cache_creation").filter(|c| c.is_object()) {
        let field = |name: &str| creation.get(name).and_then(Value::as_u64);
        let (five, hour) = (
            field("ephemeral_5m_input_tokens"),
            field("ephemeral_1h_input_tokens"),
        );
        if let Some(hour) = hour {
            usage.cache_write_1h_tokens = hour;
        }
        // A body with the breakdown but not the total: the total is the sum.
        if value.get("cache_creation_input_tokens").is_none() && (five.is_some() || hour.is_some())
        {
            usage.cache_write_tokens = five.unwrap_or(0) + hour.unwrap_or(0);
        }
    }
}

pub(crate) fn render_usage(usage: &Usage) -> Value {
    let one_hour = usage.cache_write_1h_tokens.min(usage.cache_write_tokens);
    json!({
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_creation": {
            "ephemeral_5m_input_tokens": usage.cache_write_tokens - one_hour,
            "ephemeral_1h_input_tokens": one_hour,
        },
    })
}

/// The [`Error::Api`] of an `{"type": "error", "error": {…}}` body or event.
pub(crate) fn api_error(value: &Value) -> Error {
    let error = value.get("error");
    let field = |name: &str| {
        error
            .and_then(|e| e.get(name))
            .and_then(Value::as_str)
            .unwrap_or("(none)")
            .to_owned()
    };
    Error::Api {
        kind: field("type"),
        message: field("message"),
    }
}

pub(crate) fn str_field(value: &Value, name: &str) -> String {
    value
        .get(name)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

pub(crate) fn not_json(err: &serde_json::Error) -> String {
    format!("not JSON ({err})")
}

fn malformed(detail: String) -> Error {
    Error::Malformed {
        at: "response".to_owned(),
        detail,
    }
}
