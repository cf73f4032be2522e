//! OpenAI Chat Completions responses: the non-streaming body ([`parse_response`],
//! [`render_response`]) and the error body ([`parse_error`], [`render_error`]).
//!
//! A response is `{"id", "object": "chat.completion", "created", "model", "choices": [{"index":
//! 0, "message": {…}, "finish_reason"}], "usage": {"prompt_tokens", "completion_tokens",
//! "total_tokens", "prompt_tokens_details": {"cached_tokens"}}}`; an error is `{"error":
//! {"message", "type", "param", "code"}}`.
//! Only the first choice is read: baton never asks for more than one.
//!
//! ```
//! let body = br#"{"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-x",
//!     "choices": [{"index": 0, "finish_reason": "stop",
//!                  "message": {"role": "assistant", "content": "Hi.", "refusal": null}}],
//!     "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15,
//!               "prompt_tokens_details": {"cached_tokens": 8}}}"#;
//! let reply = baton_wire::openai::parse_response(body)?;
//! assert_eq!(reply.message.plain_text(), "Hi.");
//! assert_eq!((reply.usage.input_tokens, reply.usage.cache_read_tokens), (4, 8));
//! # Ok::<(), baton_wire::Error>(())
//! ```

use baton_core::Role;
use serde_json::{Value, json};

use super::{parse_message, render_message};
use crate::{ApiError, Error, Reply, Usage};

#[cfg(test)]
mod tests;

/// Reads a non-streaming Chat Completions response body.
///
/// A body with an `error` object is [`Error::Api`]; a body that is not JSON, has no choice, no
/// assistant message or no `finish_reason` is [`Error::Malformed`].
pub fn parse_response(body: &[u8]) -> Result<Reply, Error> {
    let value: Value =
        serde_json::from_slice(body).map_err(|err| malformed(format!("not JSON ({err})")))?;
    if let Some(error) = value.get("error").filter(|e| e.is_object()) {
        return Err(api_error(error));
    }
    let Some(choice) = value
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
    else {
        return Err(malformed("no choices".to_owned()));
    };
    let Some(message) = choice.get("message") else {
        return Err(malformed("choices[0] has no message".to_owned()));
    };
    let message = parse_message(message)?;
    if message.role != Role::Assistant {
        return Err(malformed(format!(
            "choices[0].message has role {:?}, not \"assistant\"",
            message.role.as_str()
        )));
    }
    let Some(finish_reason) = choice.get("finish_reason").and_then(Value::as_str) else {
        return Err(malformed("choices[0] has no finish_reason".to_owned()));
    };
    let mut usage = Usage::default();
    if let Some(u) = value.get("usage") {
        read_usage(u, &mut usage);
    }
    Ok(Reply {
        message,
        stop_reason: finish_reason.to_owned(),
        usage,
        model: value
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
    })
}

/// Reads the model and usage of an embeddings response (`{"object": "list", "data": [...],
/// "model", "usage": {"prompt_tokens", "total_tokens"}}`): every token is input.
/// An error body is [`Error::Api`]; a body with no `data` list is [`Error::Malformed`].
pub fn parse_embeddings(body: &[u8]) -> Result<(String, Usage), Error> {
    let value: Value =
        serde_json::from_slice(body).map_err(|err| malformed(format!("not JSON ({err})")))?;
    if let Some(error) = value.get("error").filter(|e| e.is_object()) {
        return Err(api_error(error));
    }
    if value.get("data").and_then(Value::as_array).is_none() {
        return Err(malformed("no \"data\" list".to_owned()));
    }
    let mut usage = Usage::default();
    if let Some(u) = value.get("usage").filter(|u| u.is_object()) {
        read_usage(u, &mut usage);
    }
    let model = value
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    Ok((model, usage))
}

/// Writes a non-streaming Chat Completions response body for `reply`, with `id` as its id.
pub fn render_response(reply: &Reply, id: &str) -> Value {
    let mut message = render_message(&reply.message)
        .into_iter()
        .next()
        .unwrap_or(json!({"role": "assistant", "content": ""}));
    message["refusal"] = Value::Null;
    json!({
        "id": id,
        "object": "chat.completion",
        "created": created(),
        "model": reply.model,
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": reply.stop_reason}],
        "usage": render_usage(&reply.usage),
    })
}

/// Reads the error of an error body, when it has the OpenAI shape: its `type` (or, when that
/// is null, its `code`) and its `message`.
pub fn parse_error(body: &[u8]) -> Option<ApiError> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let error = value.get("error")?;
    let kind = ["type", "code"]
        .iter()
        .find_map(|f| error.get(*f).and_then(Value::as_str))
        .unwrap_or("error");
    Some(ApiError {
        kind: kind.to_owned(),
        message: error.get("message")?.as_str()?.to_owned(),
    })
}

/// Writes the error body the API sends with HTTP `status`: `invalid_request_error` for 4xx
/// (with code `invalid_api_key` for 401, `rate_limit_exceeded` for 429), `server_error` for
/// 5xx; `param` names the request field at fault.
pub fn render_error(status: u16, message: &str, param: Option<&str>) -> Value {
    let (kind, code) = match status {
        401 => ("invalid_request_error", json!("invalid_api_key")),
        403 => (
            "invalid_request_error",
            json!("unsupported_country_region_territory"),
        ),
        404 => ("invalid_request_error", json!("model_not_found")),
        429 => ("requests", json!("rate_limit_exceeded")),
        _ if status >= 500 => ("server_error", Value::Null),
        _ => ("invalid_request_error", Value::Null),
    };
    json!({"error": {"message": message, "type": kind, "param": param, "code": code}})
}

/// Overrides `usage` with what an OpenAI `usage` object says: Chat Completions'
/// `prompt_tokens`, `completion_tokens` and their `*_details`, or the Responses API's
/// `input_tokens`, `output_tokens` and theirs.
pub(crate) fn read_usage(value: &Value, usage: &mut Usage) {
    let number = |v: Option<&Value>| v.and_then(Value::as_u64);
    let (prompt, completion, prompt_details, completion_details) =
        match value.get("prompt_tokens").is_some() || value.get("completion_tokens").is_some() {
            true => (
                "prompt_tokens",
                "completion_tokens",
                "prompt_tokens_details",
                "completion_tokens_details",
            ),
            false => (
                "input_tokens",
                "output_tokens",
                "input_tokens_details",
                "output_tokens_details",
            ),
        };
    let cached = number(
        value
            .get(prompt_details)
            .and_then(|d| d.get("cached_tokens")),
    )
    .unwrap_or(0);
    if let Some(prompt) = number(value.get(prompt)) {
        usage.input_tokens = prompt.saturating_sub(cached);
        usage.cache_read_tokens = cached.min(prompt);
    }
    if let Some(completion) = number(value.get(completion)) {
        usage.output_tokens = completion;
    }
    if let Some(reasoning) = number(
        value
            .get(completion_details)
            .and_then(|d| d.get("reasoning_tokens")),
    ) {
        usage.reasoning_tokens = reasoning;
    }
}

pub(crate) fn render_usage(usage: &Usage) -> Value {
    let prompt = usage.input_tokens + usage.cache_read_tokens;
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": usage.output_tokens,
        "total_tokens": prompt + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    })
}

/// The [`Error::Api`] of an `error` object.
pub(crate) fn api_error(error: &Value) -> Error {
    let field = |name: &str| error.get(name).and_then(Value::as_str);
    Error::Api {
        kind: field("type")
            .or(field("code"))
            .unwrap_or("error")
            .to_owned(),
        message: field("message").unwrap_or("(none)").to_owned(),
    }
}

/// Seconds since the Unix epoch, for `created`.
pub(crate) fn created() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn malformed(detail: String) -> Error {
    Error::Malformed {
        at: "response".to_owned(),
        detail,
    }
}
