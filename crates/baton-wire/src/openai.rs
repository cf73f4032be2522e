//! The OpenAI Chat Completions shape: `{"role": "assistant", "content": …, "tool_calls": […]}`.
//!
//! [`parse_message`] reads one message object, as found in a request's `messages`, a response's
//! `choices[].message`, or a transcript such as SWE-agent's `history`.
//! [`render_message`] writes one core message as one or more Chat Completions messages, and
//! [`render_request_messages`] writes a whole history in the form the API requires.
//!
//! Around the messages: [`request`] renders and parses whole request bodies and checks a
//! conversation as the API does, [`response`] reads and writes response and error bodies, and
//! [`stream`] reads and writes the chunks of a streamed reply.
//!
//! # Roles
//!
//! `system` and `developer` read as [`Role::System`] (and `system` is written), `user` as
//! [`Role::User`], `assistant` as [`Role::Assistant`], and `tool` as [`Role::Tool`] holding one
//! [`ContentBlock::ToolResult`] whose id is the message's `tool_call_id`.
//! So every Chat Completions message reads as exactly one core message.
//! The reverse does not hold: the tool results of a core user message (the Anthropic habit)
//! render as one `tool` message each, followed by a `user` message for the remaining blocks.
//!
//! # Content
//!
//! `content` may be a string, `null`, absent, or a list of parts:
//!
//! - `text` (and the Responses API's `input_text` and `output_text`) and `refusal` parts read as
//!   text; a non-null top-level `refusal` reads as a text block after the content;
//! - `image_url` reads as an image: a `data:<type>;base64,<data>` URL as
//!   [`MediaSource::Base64`], any other URL as [`MediaSource::Url`];
//! - `file` (`file_id`, or `file_data` as a base64 data URL, with `filename` as the title) reads
//!   as a document.
//!
//! Chat Completions has no form for two of baton's media sources, so baton writes, and reads
//! back, the nearest OpenAI shapes, which the Chat Completions API rejects: an image held as a
//! provider file becomes an Assistants-style `image_file` part, and a document at a URL becomes a
//! `file` part with `file_url`.
//!
//! Tool calls are `{"id", "type": "function", "function": {"name", "arguments"}}`, where
//! `arguments` is a JSON string.
//! Arguments that are not valid JSON (models do emit them) are kept as they were, as a JSON
//! string in the call's `input`, because history records what happened; they render back
//! unchanged.
//! Arguments that are valid JSON but a JSON string literal are also kept as the raw text, so the
//! two cases cannot be confused.
//! The one input that does not survive the trip is a JSON string whose text is itself valid,
//! non-string JSON (such as `"{}"`): it renders as `{}` and reads back as an object.
//!
//! # What is dropped
//!
//! - Thinking and redacted thinking blocks: Chat Completions has no form for them. A message
//!   holding only thinking renders as no messages at all.
//! - `is_error` on tool results: a `tool` message has no such flag.
//! - Images and documents inside tool results: a `tool` message holds text only, so they move to
//!   the `user` message that follows the tool messages.
//! - `detail` on `image_url` parts, `annotations` and `logprobs` on `output_text` parts.
//! - Top-level fields other than `role`, `content`, `refusal`, `tool_calls` and `tool_call_id`,
//!   such as `name`, or SWE-agent's `agent`, `thought` and `action`.
//!   The legacy `function_call` and the `audio` reference are errors instead, because dropping
//!   them would lose what the model did.
//!
//! Any other field on a part or tool call is an error naming it, and so is an unknown part type
//! (for example `input_audio`).
//!
//! # Normalization
//!
//! - Content that is exactly one text block renders as a string; `"content": "hi"` and
//!   `[{"type": "text", "text": "hi"}]` read the same.
//! - The empty string, `null` and an absent `content` all read as no blocks. Empty content
//!   renders as `null` on an assistant message with tool calls and as `""` elsewhere.
//! - `developer` renders as `system`.
//! - `arguments` render compactly with object keys sorted, so whitespace and key order may
//!   differ from what the model emitted.
//!
//! ```
//! use baton_core::{ContentBlock, Role};
//! use serde_json::json;
//!
//! let wire = json!({"role": "tool", "tool_call_id": "call_1", "content": "3 files"});
//! let message = baton_wire::openai::parse_message(&wire)?;
//! assert_eq!(message.role, Role::Tool);
//! assert_eq!(message.tool_result_ids().collect::<Vec<_>>(), ["call_1"]);
//! assert_eq!(baton_wire::openai::render_message(&message), [wire]);
//! # Ok::<(), baton_wire::Error>(())
//! ```

use baton_core::{ContentBlock, MediaSource, Message, Role};
use serde_json::{Map, Value, json};

use crate::Error;
use crate::json::{Obj, Path, wrong_type};

pub mod request;
pub mod response;
pub mod stream;

pub use request::{check_messages, parse_request, render_request, system_text};
pub use response::{parse_embeddings, parse_error, parse_response, render_error, render_response};
pub use stream::{Stream, render_stream};

#[cfg(test)]
mod tests;

/// The roles [`parse_message`] accepts, for error messages.
pub(crate) const ROLES: &str = "system, developer, user, assistant, tool";

/// Reads one Chat Completions message object.
///
/// Unknown top-level fields are ignored; see the module documentation for what is dropped.
pub fn parse_message(value: &Value) -> Result<Message, Error> {
    let obj = Obj::new(value, Path::root())?;
    let role = match obj.str("role")? {
        "system" | "developer" => Role::System,
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "tool" => Role::Tool,
        other => {
            return Err(Error::UnknownRole {
                at: obj.at.to_string(),
                role: other.to_owned(),
                expected: ROLES,
            });
        }
    };
    for (field, reason) in [
        (
            "function_call",
            "the legacy function-calling shape has no call id; use tool_calls",
        ),
        (
            "audio",
            "audio responses are referenced by id and baton's model holds no audio",
        ),
    ] {
        if obj.get(field).is_some() {
            return Err(Error::Unsupported {
                at: obj.at.to_string(),
                field,
                reason,
            });
        }
    }
    let mut content = match obj.get("content") {
        None => Vec::new(),
        Some(value) => parse_content(value, &obj.at.field("content"))?,
    };
    if let Some(refusal) = obj.opt_str("refusal")? {
        content.extend(text_content(refusal));
    }
    if role == Role::Tool {
        let tool_use_id = obj.str("tool_call_id")?.to_owned();
        return Ok(Message {
            role,
            content: vec![ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error: false,
            }],
        });
    }
    if let Some(calls) = obj.get("tool_calls") {
        let at = obj.at.field("tool_calls");
        let Value::Array(calls) = calls else {
            return Err(wrong_type(&at, "array", calls));
        };
        for (i, call) in calls.iter().enumerate() {
            content.push(parse_tool_call(call, at.index(i))?);
        }
    }
    Ok(Message { role, content })
}

/// Writes one core message as Chat Completions messages, in order.
///
/// - An assistant message becomes one `assistant` message: its text, images and documents as
///   `content`, its tool uses as `tool_calls`.
/// - Tool results, in any role, become one `tool` message each. In an assistant message they
///   follow it; otherwise they come first, and the remaining blocks (with any images or
///   documents the results held) follow as one `user` (or `system`) message, when there are any.
/// - Thinking is dropped, and so are blocks only Anthropic can read ([`ContentBlock::Opaque`]); a
///   message of thinking alone renders as nothing.
///
/// A message with no blocks renders as one message with empty content, so nothing disappears.
pub fn render_message(message: &Message) -> Vec<Value> {
    let mut tool_messages: Vec<Value> = Vec::new();
    let mut moved: Vec<&ContentBlock> = Vec::new();
    let mut parts: Vec<&ContentBlock> = Vec::new();
    let mut calls: Vec<Value> = Vec::new();
    let mut only_thinking = !message.content.is_empty();
    for block in &message.content {
        match block {
            ContentBlock::Thinking { .. }
            | ContentBlock::RedactedThinking { .. }
            | ContentBlock::Opaque { .. } => continue,
            ContentBlock::Text { .. }
            | ContentBlock::Image { .. }
            | ContentBlock::ToolReference { .. }
            | ContentBlock::Document { .. } => parts.push(block),
            ContentBlock::ToolUse { id, name, input } => {
                calls.push(render_tool_call(id, name, input))
            }
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error: _,
            } => {
                let text: Vec<&ContentBlock> = content
                    .iter()
                    .filter(|b| {
                        matches!(
                            b,
                            ContentBlock::Text { .. } | ContentBlock::ToolReference { .. }
                        )
                    })
                    .collect();
                moved.extend(content.iter().filter(|b| {
                    matches!(
                        b,
                        ContentBlock::Image { .. } | ContentBlock::Document { .. }
                    )
                }));
                tool_messages.push(json!({
                    "role": "tool",
                    "tool_call_id": tool_use_id,
                    "content": render_content(&text, json!("")),
                }));
            }
        }
        only_thinking = false;
    }
    if only_thinking {
        return Vec::new();
    }
    let mut out = Vec::new();
    if message.role == Role::Assistant {
        let empty = match calls.is_empty() {
            true => json!(""),
            false => Value::Null,
        };
        let mut map = Map::new();
        map.insert("role".to_owned(), json!("assistant"));
        map.insert("content".to_owned(), render_content(&parts, empty));
        if !calls.is_empty() {
            map.insert("tool_calls".to_owned(), Value::Array(calls));
        }
        out.push(Value::Object(map));
        out.extend(tool_messages);
        if !moved.is_empty() {
            out.push(json!({"role": "user", "content": render_content(&moved, json!(""))}));
        }
        return out;
    }
    let had_results = !tool_messages.is_empty();
    out.extend(tool_messages);
    moved.extend(parts);
    if moved.is_empty() && calls.is_empty() && had_results {
        return out;
    }
    let role = match message.role {
        Role::System => "system",
        _ => "user",
    };
    let mut map = Map::new();
    map.insert("role".to_owned(), json!(role));
    map.insert("content".to_owned(), render_content(&moved, json!("")));
    if !calls.is_empty() {
        map.insert("tool_calls".to_owned(), Value::Array(calls));
    }
    out.push(Value::Object(map));
    out
}

/// Writes a history as the `messages` of a Chat Completions request.
///
/// Consecutive assistant messages merge into one before rendering, because each `tool` message
/// must follow the one assistant message that made the call, while some harnesses (Claude Code
/// among them) record one assistant message per block.
/// Each message then renders as [`render_message`] does.
pub fn render_request_messages(messages: &[Message]) -> Vec<Value> {
    let mut merged: Vec<Message> = Vec::new();
    for message in messages {
        match merged.last_mut() {
            Some(last) if last.role == Role::Assistant && message.role == Role::Assistant => {
                last.content.extend(message.content.iter().cloned());
            }
            _ => merged.push(message.clone()),
        }
    }
    merged.iter().flat_map(render_message).collect()
}

fn parse_content(value: &Value, at: &Path) -> Result<Vec<ContentBlock>, Error> {
    match value {
        Value::String(text) => Ok(text_content(text)),
        Value::Array(parts) => parts
            .iter()
            .enumerate()
            .map(|(i, part)| parse_part(part, at.index(i)))
            .collect(),
        other => Err(wrong_type(at, "string, array or null", other)),
    }
}

fn text_content(text: &str) -> Vec<ContentBlock> {
    match text.is_empty() {
        true => Vec::new(),
        false => vec![ContentBlock::Text {
            text: text.to_owned(),
        }],
    }
}

/// Whether `type_name` is an OpenAI content part's type (Chat Completions' or the Responses
/// API's), read here or not: a type the Anthropic reader must not take for one of its own.
pub(crate) fn is_part_type(type_name: &str) -> bool {
    matches!(
        type_name,
        "text"
            | "input_text"
            | "output_text"
            | "refusal"
            | "image_url"
            | "image_file"
            | "file"
            | "input_audio"
            | "input_image"
            | "input_file"
    )
}

fn parse_part(value: &Value, at: Path) -> Result<ContentBlock, Error> {
    let obj = Obj::new(value, at)?;
    let type_name = obj.str("type")?;
    let kind = format!("{type_name} part");
    let block = match type_name {
        "text" | "input_text" | "output_text" => {
            obj.only(&["type", "text"], &["annotations", "logprobs"], &kind)?;
            ContentBlock::Text {
                text: obj.str("text")?.to_owned(),
            }
        }
        "refusal" => {
            obj.only(&["type", "refusal"], &[], &kind)?;
            ContentBlock::Text {
                text: obj.str("refusal")?.to_owned(),
            }
        }
        "image_url" => {
            obj.only(&["type", "image_url"], &[], &kind)?;
            let image = Obj::new(obj.required("image_url")?, obj.at.field("image_url"))?;
            image.only(&["url"], &["detail"], "image_url")?;
            ContentBlock::Image {
                source: media_from_url(image.str("url")?),
            }
        }
        "image_file" => {
            obj.only(&["type", "image_file"], &[], &kind)?;
            let image = Obj::new(obj.required("image_file")?, obj.at.field("image_file"))?;
            image.only(&["file_id"], &["detail"], "image_file")?;
            ContentBlock::Image {
                source: MediaSource::File {
                    file_id: image.str("file_id")?.to_owned(),
                },
            }
        }
        "file" => {
            obj.only(&["type", "file"], &[], &kind)?;
            let file = Obj::new(obj.required("file")?, obj.at.field("file"))?;
            file.only(
                &["file_id", "file_data", "file_url", "filename"],
                &[],
                "file",
            )?;
            let source = match (
                file.opt_str("file_id")?,
                file.opt_str("file_data")?,
                file.opt_str("file_url")?,
            ) {
                (Some(file_id), _, _) => MediaSource::File {
                    file_id: file_id.to_owned(),
                },
                (None, Some(data), _) => media_from_url(data),
                (None, None, Some(url)) => MediaSource::Url {
                    url: url.to_owned(),
                },
                (None, None, None) => {
                    return Err(Error::MissingField {
                        at: file.at.to_string(),
                        field: "file_id",
                    });
                }
            };
            ContentBlock::Document {
                source,
                title: file.opt_str("filename")?.map(str::to_owned),
            }
        }
        other => {
            return Err(Error::UnknownType {
                at: obj.at.to_string(),
                kind: "block",
                type_name: other.to_owned(),
            });
        }
    };
    Ok(block)
}

fn parse_tool_call(value: &Value, at: Path) -> Result<ContentBlock, Error> {
    let obj = Obj::new(value, at)?;
    let type_name = obj.str("type")?;
    if type_name != "function" {
        return Err(Error::UnknownType {
            at: obj.at.to_string(),
            kind: "tool call",
            type_name: type_name.to_owned(),
        });
    }
    obj.only(&["id", "type", "function"], &[], "tool call")?;
    let function = Obj::new(obj.required("function")?, obj.at.field("function"))?;
    function.only(&["name", "arguments"], &[], "function")?;
    let input = parse_arguments(function.str("arguments")?);
    Ok(ContentBlock::ToolUse {
        id: obj.str("id")?.to_owned(),
        name: function.str("name")?.to_owned(),
        input,
    })
}

/// Reads a tool call's `arguments`: valid JSON that is not a string literal as that value, and
/// anything else as the raw text (see the module documentation).
pub(crate) fn parse_arguments(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(value) if !value.is_string() => value,
        _ => Value::String(arguments.to_owned()),
    }
}

/// Reads a `data:<type>;base64,<data>` URL as inline bytes, and any other URL as a URL.
pub(crate) fn media_from_url(url: &str) -> MediaSource {
    let base64 = url
        .strip_prefix("data:")
        .and_then(|rest| rest.split_once(','))
        .and_then(|(meta, data)| Some((meta.strip_suffix(";base64")?, data)));
    match base64 {
        Some((media_type, data)) => MediaSource::Base64 {
            media_type: media_type.to_owned(),
            data: data.to_owned(),
        },
        None => MediaSource::Url {
            url: url.to_owned(),
        },
    }
}

pub(crate) fn data_url(media_type: &str, data: &str) -> String {
    format!("data:{media_type};base64,{data}")
}

fn render_tool_call(id: &str, name: &str, input: &Value) -> Value {
    let arguments = match input {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    };
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
}

/// Renders text, images and documents as `content`: `empty` when there are none, a string for
/// exactly one text block, and a list of parts otherwise.
fn render_content(blocks: &[&ContentBlock], empty: Value) -> Value {
    match blocks {
        [] => empty,
        [ContentBlock::Text { text }] => json!(text),
        blocks => Value::Array(blocks.iter().filter_map(|b| render_part(b)).collect()),
    }
}

fn render_part(block: &ContentBlock) -> Option<Value> {
    let part = match block {
        ContentBlock::Text { text } => json!({"type": "text", "text": text}),
        // Chat Completions has no such part: the tool's name, as the text the model reads.
        ContentBlock::ToolReference { tool_name } => json!({"type": "text", "text": tool_name}),
        ContentBlock::Image { source } => match source {
            MediaSource::Url { url } => json!({"type": "image_url", "image_url": {"url": url}}),
            MediaSource::Base64 { media_type, data } => {
                json!({"type": "image_url", "image_url": {"url": data_url(media_type, data)}})
            }
            MediaSource::File { file_id } => {
                json!({"type": "image_file", "image_file": {"file_id": file_id}})
            }
        },
        ContentBlock::Document { source, title } => {
            let mut file = Map::new();
            match source {
                MediaSource::File { file_id } => file.insert("file_id".to_owned(), json!(file_id)),
                MediaSource::Base64 { media_type, data } => {
                    file.insert("file_data".to_owned(), json!(data_url(media_type, data)))
                }
                MediaSource::Url { url } => file.insert("file_url".to_owned(), json!(url)),
            };
            if let Some(title) = title {
                file.insert("filename".to_owned(), json!(title));
            }
            json!({"type": "file", "file": file})
        }
        ContentBlock::Thinking { .. }
        | ContentBlock::RedactedThinking { .. }
        | ContentBlock::Opaque { .. }
        | ContentBlock::ToolUse { .. }
        | ContentBlock::ToolResult { .. } => return None,
    };
    Some(part)
}
