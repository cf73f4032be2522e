//! Anthropic Messages request bodies: [`render_request`] writes what a client sends to
//! `POST /v1/messages`, [`parse_request`] reads one back (as the scripted server does), and
//! [`check_messages`] refuses a conversation the way the API does.
//!
//! ```
//! use baton_core::{Message, Role};
//! use baton_wire::RequestBody;
//! use serde_json::json;
//!
//! let body = RequestBody {
//!     model: "claude-sonnet-4-5".into(),
//!     system: Some("Be brief.".into()),
//!     messages: vec![Message::text(Role::User, "hi")],
//!     tools: vec![],
//!     max_tokens: Some(1024),
//!     temperature: None,
//!     stream: true,
//! };
//! let wire = baton_wire::anthropic::render_request(&body);
//! assert_eq!(wire, json!({
//!     "model": "claude-sonnet-4-5",
//!     "max_tokens": 1024,
//!     "system": "Be brief.",
//!     "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
//!     "stream": true,
//! }));
//! assert_eq!(baton_wire::anthropic::parse_request(&wire)?.system.as_deref(), Some("Be brief."));
//! # Ok::<(), baton_wire::Error>(())
//! ```

use baton_core::{ContentBlock, Message, Role};
use serde_json::{Map, Value, json};

use super::{parse_message, render_request_messages};
use crate::exchange::f32_json;
use crate::{Error, RequestBody, ToolDef};

#[cfg(test)]
mod tests;

/// Writes a Messages API request body.
///
/// `system` and the text of any system messages in `messages` join (in that order, by blank
/// lines) into the top-level `system` string; `tools` become `{"name", "description",
/// "input_schema"}` objects, and are left out when empty, as are `max_tokens` and `temperature`
/// when unset.
pub fn render_request(body: &RequestBody) -> Value {
    let (inline_system, messages) = render_request_messages(&body.messages);
    let system: Vec<&str> = body
        .system
        .iter()
        .chain(inline_system.iter())
        .map(String::as_str)
        .filter(|s| !s.is_empty())
        .collect();
    let mut map = Map::new();
    map.insert("model".to_owned(), json!(body.model));
    if let Some(max_tokens) = body.max_tokens {
        map.insert("max_tokens".to_owned(), json!(max_tokens));
    }
    if !system.is_empty() {
        map.insert("system".to_owned(), json!(system.join("\n\n")));
    }
    map.insert("messages".to_owned(), Value::Array(messages));
    if !body.tools.is_empty() {
        let tools = body
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.input_schema,
                })
            })
            .collect();
        map.insert("tools".to_owned(), Value::Array(tools));
    }
    if let Some(temperature) = body.temperature {
        map.insert("temperature".to_owned(), f32_json(temperature));
    }
    map.insert("stream".to_owned(), json!(body.stream));
    Value::Object(map)
}

/// Reads a Messages API request body, as the API would: `model`, `max_tokens` and `messages`
/// are required; `system` may be a string or a list of text blocks; each message is read by
/// [`parse_message`], and its error is reported at `messages.i`.
///
/// The messages are not checked against each other here: see [`check_messages`].
pub fn parse_request(value: &Value) -> Result<RequestBody, Error> {
    let Value::Object(map) = value else {
        return Err(invalid("body", "expected a JSON object"));
    };
    let model = match map.get("model") {
        Some(Value::String(model)) => model.clone(),
        _ => return Err(invalid("model", "Field required")),
    };
    let max_tokens = match map.get("max_tokens") {
        Some(value) => match value.as_u64().and_then(|n| u32::try_from(n).ok()) {
            Some(n) => Some(n),
            None => return Err(invalid("max_tokens", "Input should be a valid integer")),
        },
        None => return Err(invalid("max_tokens", "Field required")),
    };
    let system = match map.get("system") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text.clone()),
        Some(Value::Array(blocks)) => {
            let mut texts = Vec::new();
            for (i, block) in blocks.iter().enumerate() {
                match block.get("text").and_then(Value::as_str) {
                    Some(text) => texts.push(text),
                    None => {
                        return Err(invalid(
                            &format!("system.{i}"),
                            "Input should be a text block",
                        ));
                    }
                }
            }
            Some(texts.join("\n\n"))
        }
        Some(_) => return Err(invalid("system", "Input should be a valid string")),
    };
    let Some(Value::Array(items)) = map.get("messages") else {
        return Err(invalid("messages", "Field required"));
    };
    let messages = items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            parse_message(item).map_err(|err| invalid(&format!("messages.{i}"), &err.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let tools = match map.get("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(tools)) => tools
            .iter()
            .enumerate()
            .map(|(i, tool)| parse_tool(tool, i))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(invalid("tools", "Input should be a valid list")),
    };
    let temperature = match map.get("temperature") {
        None | Some(Value::Null) => None,
        Some(value) => match value.as_f64() {
            Some(t) => Some(t as f32),
            None => return Err(invalid("temperature", "Input should be a valid number")),
        },
    };
    let stream = match map.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(stream)) => *stream,
        Some(_) => return Err(invalid("stream", "Input should be a valid boolean")),
    };
    Ok(RequestBody {
        model,
        system,
        messages,
        tools,
        max_tokens,
        temperature,
        stream,
    })
}

fn parse_tool(tool: &Value, i: usize) -> Result<ToolDef, Error> {
    let Some(name) = tool.get("name").and_then(Value::as_str) else {
        return Err(invalid(&format!("tools.{i}.name"), "Field required"));
    };
    Ok(ToolDef {
        name: name.to_owned(),
        description: tool
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        input_schema: tool.get("input_schema").cloned().unwrap_or(json!({})),
    })
}

/// Checks a conversation the way the Messages API does, and words the first problem as it
/// does, naming the message's index (`messages.3: …`):
///
/// - a message whose role is not `user` or `assistant` (system text belongs in `system`);
/// - a conversation whose first message is the assistant's;
/// - `tool_result` blocks in a message whose previous message has no `tool_use` blocks, or
///   whose `tool_use_id` is not among them;
/// - `tool_use` blocks not all answered by `tool_result` blocks in the very next message.
///
/// `messages` are the request's messages one for one, as [`parse_request`] reads them.
pub fn check_messages(messages: &[Message]) -> Result<(), Error> {
    for (i, message) in messages.iter().enumerate() {
        let at = format!("messages.{i}");
        match message.role {
            Role::User | Role::Tool => {}
            Role::Assistant if i == 0 => {
                return Err(invalid(&at, "the first message must use the \"user\" role"));
            }
            Role::Assistant => {}
            Role::System => {
                return Err(invalid(
                    &format!("{at}.role"),
                    "Input should be 'user' or 'assistant'",
                ));
            }
        }
        if message.tool_result_ids().next().is_some() {
            let previous = match i {
                0 => None,
                _ => messages
                    .get(i - 1)
                    .filter(|m| m.role == Role::Assistant && m.tool_use_ids().next().is_some()),
            };
            let Some(previous) = previous else {
                return Err(invalid(
                    &at,
                    "`tool_result` block(s) provided when previous message does not have `tool_use` blocks",
                ));
            };
            for (j, block) in message.content.iter().enumerate() {
                if let ContentBlock::ToolResult { tool_use_id, .. } = block
                    && !previous.tool_use_ids().any(|id| id == tool_use_id)
                {
                    return Err(invalid(
                        &format!("{at}.content.{j}"),
                        &format!(
                            "unexpected `tool_use_id` found in `tool_result` blocks: {tool_use_id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                        ),
                    ));
                }
            }
        }
        if message.role == Role::Assistant {
            let next = messages.get(i + 1);
            let missing: Vec<&str> = message
                .tool_use_ids()
                .filter(|id| !next.is_some_and(|n| n.tool_result_ids().any(|r| r == *id)))
                .collect();
            if !missing.is_empty() {
                return Err(invalid(
                    &at,
                    &format!(
                        "`tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                        missing.join(", ")
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn invalid(at: &str, message: &str) -> Error {
    Error::Invalid {
        at: at.to_owned(),
        message: message.to_owned(),
    }
}
