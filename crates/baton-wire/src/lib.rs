//! Vendor message JSON to and from baton's message model: the only crate that knows vendor shapes.
//!
//! - [`anthropic`] reads and writes the Anthropic Messages shape.
//! - [`openai`] reads and writes the OpenAI Chat Completions shape.
//! - [`responses`] reads and writes the OpenAI Responses API's requests, responses and events.
//! - [`parse_message`] reads one message of either shape, telling them apart by their markers
//!   (see [`detect`]).
//! - [`Error`] says what was wrong with a message and where, such as
//!   `message: content[2]: unknown field "color" in text block`.
//!
//! Around the messages, for clients and test servers that speak the APIs:
//!
//! - [`RequestBody`] and [`ToolDef`] are a model call's body, rendered and parsed per vendor
//!   (`anthropic::render_request`, `openai::parse_request`), and checked as the real APIs check
//!   them (`anthropic::check_messages`: a `tool_result` without its `tool_use`, a `tool_use`
//!   without its result, an assistant message first).
//! - [`Reply`] and [`Usage`] are what comes back: parsed from a response body
//!   (`anthropic::parse_response`) or accumulated from server-sent events by [`Stream`], which
//!   yields [`StreamDelta`]s on the way and reports a truncated stream or a malformed event.
//!   The render functions write the same bodies and event sequences, for a server.
//! - [`ApiError`] is a vendor's error body, read and written per vendor.
//! - [`sse`] splits a byte stream into server-sent events.
//! - [`Format`] chooses between the two vendors at run time.
//!
//! Both directions go through [`baton_core::Message`].
//! Reading is strict about meaning and lenient about bookkeeping: unknown block types and unknown
//! fields inside blocks are errors, except the blocks of Anthropic's server tools, kept whole and
//! never interpreted ([`baton_core::ContentBlock::Opaque`]); unknown top-level fields (a
//! response's `id`, `model` and `usage`, a harness's own keys) are ignored.
//! Each module lists the fields it drops and the forms it treats as equal.
//!
//! ```
//! use baton_core::Role;
//! use serde_json::json;
//!
//! // An OpenAI assistant message that calls a tool…
//! let wire = json!({
//!     "role": "assistant",
//!     "content": null,
//!     "tool_calls": [{"id": "call_1", "type": "function",
//!                     "function": {"name": "ls", "arguments": "{\"path\":\".\"}"}}],
//! });
//! let message = baton_wire::parse_message(&wire)?;
//! assert_eq!(message.role, Role::Assistant);
//!
//! // …sent to Anthropic instead.
//! assert_eq!(
//!     baton_wire::anthropic::render_message(&message),
//!     json!({"role": "assistant", "content": [
//!         {"type": "tool_use", "id": "call_1", "name": "ls", "input": {"path": "."}},
//!     ]}),
//! );
//! # Ok::<(), baton_wire::Error>(())
//! ```

use baton_core::Message;
use serde_json::Value;

pub mod anthropic;
mod error;
mod exchange;
mod json;
pub mod openai;
pub mod responses;
pub mod sse;

pub use error::Error;
pub use exchange::{
    ApiError, MaxTokensField, Reply, RequestBody, Stream, StreamDelta, ToolDef, Usage,
};

#[cfg(test)]
mod tests;

/// A vendor message shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// The Anthropic Messages shape ([`anthropic`]).
    Anthropic,
    /// The OpenAI Chat Completions shape ([`openai`]).
    OpenAi,
}

/// The shape one message object is in, judged by its markers; `None` when it has none, or
/// markers of both.
///
/// OpenAI markers: a `tool_calls`, `tool_call_id`, `function_call` or `refusal` field, role `tool`
/// or `developer`, `"content": null`, or a content part of type `image_url`, `image_file`,
/// `file`, `input_text`, `output_text` or `refusal`.
/// Anthropic markers: a content block of type `tool_use`, `tool_result`, `thinking`,
/// `redacted_thinking`, `image` or `document`.
///
/// A message with no markers (a role and text content) reads the same in both shapes.
pub fn detect(value: &Value) -> Option<Format> {
    match Markers::of(value) {
        Markers {
            anthropic: Some(_),
            openai: None,
        } => Some(Format::Anthropic),
        Markers {
            anthropic: None,
            openai: Some(_),
        } => Some(Format::OpenAi),
        _ => None,
    }
}

/// Reads one vendor message of either shape.
///
/// Every vendor message maps to exactly one core message, so this returns one [`Message`]: an
/// Anthropic user message holding tool results stays one user message, and an OpenAI `tool`
/// message becomes one [`baton_core::Role::Tool`] message.
/// (Rendering is where counts change: see [`openai::render_message`].)
///
/// A message with no markers of either shape is read as Anthropic; the two agree on it.
/// A message with markers of both is an [`Error::MixedFormats`], except baton's own stored
/// form of a tool message — role `tool` whose content is `tool_result` blocks, as `baton
/// history --json` prints a Codex or OpenAI run's results — which is read as stored, so a
/// run's history appends again.
pub fn parse_message(value: &Value) -> Result<Message, Error> {
    match Markers::of(value) {
        Markers {
            anthropic: Some(anthropic),
            openai: Some(openai),
        } => {
            let stored_tool_message = openai == "role \"tool\""
                && value
                    .get("content")
                    .and_then(Value::as_array)
                    .is_some_and(|blocks| {
                        !blocks.is_empty()
                            && blocks.iter().all(|b| {
                                b.get("type").and_then(Value::as_str) == Some("tool_result")
                            })
                    });
            match stored_tool_message {
                true => serde_json::from_value::<Message>(value.clone())
                    .map_err(|_| Error::MixedFormats { anthropic, openai }),
                false => Err(Error::MixedFormats { anthropic, openai }),
            }
        }
        Markers {
            openai: Some(_), ..
        } => openai::parse_message(value),
        Markers {
            anthropic: Some(_), ..
        } => anthropic::parse_message(value),
        Markers { .. } => {
            // Name every role either shape knows, not just the Anthropic ones.
            if let Some(role) = value.get("role").and_then(Value::as_str)
                && !matches!(role, "system" | "user" | "assistant")
            {
                return Err(Error::UnknownRole {
                    at: "message".to_owned(),
                    role: role.to_owned(),
                    expected: openai::ROLES,
                });
            }
            anthropic::parse_message(value)
        }
    }
}

/// The first marker of each shape found in a message, described for error messages.
struct Markers {
    anthropic: Option<String>,
    openai: Option<String>,
}

impl Markers {
    fn of(value: &Value) -> Markers {
        let mut markers = Markers {
            anthropic: None,
            openai: None,
        };
        let Value::Object(map) = value else {
            return markers;
        };
        markers.openai = ["tool_calls", "tool_call_id", "function_call", "refusal"]
            .into_iter()
            .find(|field| map.contains_key(*field))
            .map(|field| format!("field \"{field}\""));
        if markers.openai.is_none() {
            markers.openai = match map.get("role").and_then(Value::as_str) {
                Some(role @ ("tool" | "developer")) => Some(format!("role \"{role}\"")),
                _ => None,
            };
        }
        if markers.openai.is_none() && map.get("content").is_some_and(Value::is_null) {
            markers.openai = Some("\"content\": null".to_owned());
        }
        let Some(Value::Array(blocks)) = map.get("content") else {
            return markers;
        };
        for (i, block) in blocks.iter().enumerate() {
            let Some(type_name) = block.get("type").and_then(Value::as_str) else {
                continue;
            };
            let found = format!("content[{i}] of type \"{type_name}\"");
            match type_name {
                "tool_use" | "tool_result" | "thinking" | "redacted_thinking" | "image"
                | "document" | "tool_reference" => {
                    markers.anthropic.get_or_insert(found);
                }
                t if anthropic::is_server_block(t) => {
                    markers.anthropic.get_or_insert(found);
                }
                t if t != "text" && openai::is_part_type(t) => {
                    markers.openai.get_or_insert(found);
                }
                _ => {}
            }
        }
        markers
    }
}
