//! OpenAI Chat Completions request bodies: [`render_request`] writes what a client sends to
//! `POST /v1/chat/completions`, [`parse_request`] reads one back (as the scripted server does),
//! and [`check_messages`] refuses a conversation the way the API does.
//!
//! ```
//! use baton_core::{Message, Role};
//! use baton_wire::{MaxTokensField, RequestBody};
//! use serde_json::json;
//!
//! let body = RequestBody {
//!     model: "gpt-4.1".into(),
//!     system: Some("Be brief.".into()),
//!     messages: vec![Message::text(Role::User, "hi")],
//!     tools: vec![],
//!     max_tokens: Some(1024),
//!     temperature: None,
//!     stream: true,
//! };
//! let wire = baton_wire::openai::render_request(&body, MaxTokensField::MaxTokens);
//! assert_eq!(wire, json!({
//!     "model": "gpt-4.1",
//!     "messages": [
//!         {"role": "system", "content": "Be brief."},
//!         {"role": "user", "content": "hi"},
//!     ],
//!     "max_tokens": 1024,
//!     "stream": true,
//!     "stream_options": {"include_usage": true},
//! }));
//! let parsed = baton_wire::openai::parse_request(&wire)?;
//! assert_eq!(parsed.messages.len(), 2); // one for one: the system message stays
//! assert_eq!(parsed.system.as_deref(), Some("Be brief."));
//! # Ok::<(), baton_wire::Error>(())
//! ```

use baton_core::{ContentBlock, Message, Role};
use serde_json::{Map, Value, json};

use super::{parse_message, render_request_messages};
use crate::exchange::f32_json;
use crate::{Error, MaxTokensField, RequestBody, ToolDef};

#[cfg(test)]
mod tests;

/// Writes a Chat Completions request body.
///
/// `system` becomes a leading `system` message; `messages` render as
/// [`render_request_messages`] does; `tools` become `{"type": "function", "function": {"name",
/// "description", "parameters"}}` objects and are left out when empty (the API refuses an
/// empty list); `max_tokens` goes in the field `max_tokens_field` names; a streamed request
/// asks for the final usage chunk with `"stream_options": {"include_usage": true}`.
pub fn render_request(body: &RequestBody, max_tokens_field: MaxTokensField) -> Value {
    let mut messages = Vec::new();
    if let Some(system) = body.system.as_deref().filter(|s| !s.is_empty()) {
        messages.push(json!({"role": "system", "content": system}));
    }
    messages.extend(render_request_messages(&body.messages));
    let mut map = Map::new();
    map.insert("model".to_owned(), json!(body.model));
    map.insert("messages".to_owned(), Value::Array(messages));
    if !body.tools.is_empty() {
        let tools = body
            .tools
            .iter()
            .map(|tool| {
                json!({"type": "function", "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.input_schema,
                }})
            })
            .collect();
        map.insert("tools".to_owned(), Value::Array(tools));
    }
    if let Some(max_tokens) = body.max_tokens {
        let field = match max_tokens_field {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
        };
        map.insert(field.to_owned(), json!(max_tokens));
    }
    if let Some(temperature) = body.temperature {
        map.insert("temperature".to_owned(), f32_json(temperature));
    }
    map.insert("stream".to_owned(), json!(body.stream));
    if body.stream {
        map.insert("stream_options".to_owned(), json!({"include_usage": true}));
    }
    Value::Object(map)
}

/// Reads a Chat Completions request body: `model` and `messages` are required; each message is
/// read by [`parse_message`], and its error is reported at `messages.[i]`; `max_tokens` or
/// `max_completion_tokens`; tools of type `function`.
///
/// The messages are kept one for one, system messages included, and their text is also joined
/// into `system`. They are not checked against each other here: see [`check_messages`].
pub fn parse_request(value: &Value) -> Result<RequestBody, Error> {
    let Value::Object(map) = value else {
        return Err(invalid(
            "body",
            "We could not parse the JSON body of your request.",
        ));
    };
    let model = match map.get("model") {
        Some(Value::String(model)) => model.clone(),
        _ => return Err(invalid("model", "you must provide a model parameter")),
    };
    let Some(Value::Array(items)) = map.get("messages") else {
        return Err(invalid(
            "messages",
            "Missing required parameter: 'messages'.",
        ));
    };
    let messages = items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            parse_message(item).map_err(|err| invalid(&format!("messages.[{i}]"), &err.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let system = system_text(&messages);
    let tools = match map.get("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(tools)) => tools
            .iter()
            .enumerate()
            .map(|(i, tool)| parse_tool(tool, i))
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(invalid(
                "tools",
                "Invalid type for 'tools': expected an array.",
            ));
        }
    };
    let max_tokens = ["max_completion_tokens", "max_tokens"]
        .iter()
        .find_map(|field| {
            map.get(*field)
                .filter(|v| !v.is_null())
                .map(|v| (*field, v))
        });
    let max_tokens = match max_tokens {
        None => None,
        Some((field, value)) => match value.as_u64().and_then(|n| u32::try_from(n).ok()) {
            Some(n) => Some(n),
            None => {
                return Err(invalid(
                    field,
                    &format!("Invalid type for '{field}': expected an integer."),
                ));
            }
        },
    };
    let temperature = match map.get("temperature") {
        None | Some(Value::Null) => None,
        Some(value) => match value.as_f64() {
            Some(t) => Some(t as f32),
            None => {
                return Err(invalid(
                    "temperature",
                    "Invalid type for 'temperature': expected a number.",
                ));
            }
        },
    };
    let stream = match map.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(stream)) => *stream,
        Some(_) => {
            return Err(invalid(
                "stream",
                "Invalid type for 'stream': expected a boolean.",
            ));
        }
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

/// The text of `messages`' system and developer messages, joined by blank lines (`None` when
/// they have none): a Chat Completions request's system prompt.
pub fn system_text(messages: &[Message]) -> Option<String> {
    let texts: Vec<String> = messages
        .iter()
        .filter(|m| m.role == Role::System)
        .map(Message::plain_text)
        .filter(|t| !t.is_empty())
        .collect();
    (!texts.is_empty()).then(|| texts.join("\n\n"))
}

fn parse_tool(tool: &Value, i: usize) -> Result<ToolDef, Error> {
    let function = tool.get("function");
    let Some(name) = function.and_then(|f| f.get("name")).and_then(Value::as_str) else {
        return Err(invalid(
            &format!("tools.[{i}].function.name"),
            &format!("Missing required parameter: 'tools[{i}].function.name'."),
        ));
    };
    let field = |name: &str| function.and_then(|f| f.get(name));
    Ok(ToolDef {
        name: name.to_owned(),
        description: field("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        input_schema: field("parameters").cloned().unwrap_or(json!({})),
    })
}

/// Checks a conversation the way the Chat Completions API does, and words the first problem
/// as it does, naming the message's index (`messages.[3]: …`):
///
/// - an assistant message before any user message (system messages may come first);
/// - a `tool` message that does not follow an assistant message with `tool_calls` (directly,
///   or after other `tool` messages), or whose `tool_call_id` is not among its calls;
/// - an assistant message whose `tool_calls` are not all answered by the `tool` messages right
///   after it.
///
/// `messages` are the request's messages one for one, as [`parse_request`] reads them.
pub fn check_messages(messages: &[Message]) -> Result<(), Error> {
    let mut seen_user = false;
    for (i, message) in messages.iter().enumerate() {
        let at = format!("messages.[{i}]");
        match message.role {
            Role::System => {}
            Role::User => seen_user = true,
            Role::Assistant if !seen_user => {
                return Err(invalid(
                    &at,
                    "Invalid parameter: the conversation must start with a 'user' message (after any 'system' messages), not an 'assistant' message.",
                ));
            }
            Role::Assistant => {
                let answered: Vec<&str> = messages[i + 1..]
                    .iter()
                    .take_while(|m| m.role == Role::Tool)
                    .flat_map(Message::tool_result_ids)
                    .collect();
                let missing: Vec<&str> = message
                    .tool_use_ids()
                    .filter(|id| !answered.contains(id))
                    .collect();
                if !missing.is_empty() {
                    return Err(invalid(
                        &at,
                        &format!(
                            "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
                            missing.join(", ")
                        ),
                    ));
                }
            }
            Role::Tool => {
                let caller = messages[..i]
                    .iter()
                    .rev()
                    .find(|m| m.role != Role::Tool)
                    .filter(|m| m.role == Role::Assistant && m.tool_use_ids().next().is_some());
                let Some(caller) = caller else {
                    return Err(invalid(
                        &at,
                        "Invalid parameter: messages with role 'tool' must be a response to a preceding message with 'tool_calls'.",
                    ));
                };
                for block in &message.content {
                    if let ContentBlock::ToolResult { tool_use_id, .. } = block
                        && !caller.tool_use_ids().any(|id| id == tool_use_id)
                    {
                        return Err(invalid(
                            &at,
                            &format!(
                                "Invalid parameter: 'tool_call_id' of '{tool_use_id}' not found in 'tool_calls' of previous message."
                            ),
                        ));
                    }
                }
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
