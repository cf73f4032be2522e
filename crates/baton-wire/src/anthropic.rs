//! The Anthropic Messages shape: `{"role": "user", "content": [blocks…]}`.
//!
//! [`parse_message`] reads one message object, as found in a request's `messages`, a response,
//! or a transcript line such as Claude Code's `message` field.
//! [`render_message`] writes one back, and [`render_request_messages`] writes a whole history in
//! the form the Messages API requires.
//!
//! Around the messages: [`request`] renders and parses whole request bodies and checks a
//! conversation as the API does, [`response`] reads and writes response and error bodies, and
//! [`stream`] reads and writes the server-sent events of a streamed reply.
//!
//! # Roles
//!
//! The API has two message roles, `user` and `assistant`; system text sits in the request's
//! top-level `system` field.
//! [`parse_message`] also accepts `system`, which is what [`render_message`] writes for a core
//! [`Role::System`] message, so that one message can be stored and read back.
//! A core [`Role::Tool`] message renders as a `user` message, where the API carries tool results,
//! and so reads back as [`Role::User`].
//! An Anthropic user message holding `tool_result` blocks stays one core message with role user.
//!
//! # What is read, and what is dropped
//!
//! Blocks: `text`, `thinking` (with its `signature`), `redacted_thinking` (`data`), `tool_use`
//! (`id`, `name`, `input`), `tool_result` (`tool_use_id`, `content` as a string or a list of
//! blocks, `is_error`), `image` (`source`), `document` (`source`, `title`) and, in a tool
//! result, `tool_reference` (`tool_name`: a tool made available, as Claude Code's `ToolSearch`
//! answers).
//! Sources: `base64` (`media_type`, `data`), `url` (`url`) and `file` (`file_id`).
//!
//! These fields are dropped because they steer the API but do not change what a message says:
//!
//! - `cache_control` on any block (a prompt-caching breakpoint; the provider places its own);
//! - `citations` on `text` blocks (the API's pointers into a cited document) and on `document`
//!   blocks (the switch that asks for them);
//! - `caller` on `tool_use` blocks (Claude Code's `{"type": "direct"}` and the like);
//! - every top-level field other than `role` and `content`, such as `id`, `type`, `model`,
//!   `stop_reason`, `stop_sequence`, `usage` and `container` in responses.
//!
//! Any other field on a block or source is an error naming it, and so is an unknown block or
//! source type (for example `video`, or a `text` document source): silently dropping something
//! of unknown meaning would change history. The blocks of the API's server tools are the
//! exception (`server_tool_use`, `mcp_tool_use` and any `*_tool_use`, `web_search_tool_result`
//! and any `*_tool_result`, `container_upload`, `search_result`: see `is_server_block`): they
//! are neither dropped nor refused but kept whole as [`ContentBlock::Opaque`] (less
//! `cache_control`) and rendered back as they came, so a conversation that used a server tool
//! is stored, relayed and sent again unchanged; other vendors' renderings leave them out.
//!
//! # Normalization
//!
//! - String content is one text block: `"content": "hi"` reads as `[{"type": "text", "text":
//!   "hi"}]`. The empty string reads as no blocks, because the API rejects empty text blocks.
//! - Message content always renders as a list of blocks, so that a block can carry
//!   `cache_control`.
//! - Tool-result content renders as a string when it is exactly one text block (the common form,
//!   and the API rejects empty text blocks but accepts `""`), as `""` when empty, and as a list
//!   otherwise. A missing `content` reads as empty.
//! - `is_error` renders only when true; `"is_error": false` reads the same as its absence.
//!
//! ```
//! use baton_core::{ContentBlock, Role};
//! use serde_json::json;
//!
//! let wire = json!({"role": "user", "content": [
//!     {"type": "tool_result", "tool_use_id": "t1", "content": "ok", "cache_control": {"type": "ephemeral"}},
//! ]});
//! let message = baton_wire::anthropic::parse_message(&wire)?;
//! assert_eq!(message.role, Role::User);
//! assert!(matches!(&message.content[0], ContentBlock::ToolResult { tool_use_id, .. } if tool_use_id == "t1"));
//! assert_eq!(
//!     baton_wire::anthropic::render_message(&message),
//!     json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}),
//! );
//! # Ok::<(), baton_wire::Error>(())
//! ```

use baton_core::{ContentBlock, MediaSource, Message, Role};
use serde_json::{Map, Value, json};

use crate::Error;
use crate::json::{Obj, Path, wrong_type};

pub mod request;
pub mod response;
pub mod stream;

pub use request::{check_messages, parse_request, render_request};
pub use response::{parse_error, parse_response, render_error, render_response};
pub use stream::{Stream, render_stream};

#[cfg(test)]
mod tests;

/// The roles [`parse_message`] accepts, for error messages.
pub(crate) const ROLES: &str = "user, assistant, system";

/// Reads one Anthropic message object.
///
/// Top-level fields other than `role` and `content` are ignored; see the module documentation
/// for the fields dropped inside blocks.
pub fn parse_message(value: &Value) -> Result<Message, Error> {
    let obj = Obj::new(value, Path::root())?;
    let role = match obj.str("role")? {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "system" => Role::System,
        other => {
            return Err(Error::UnknownRole {
                at: obj.at.to_string(),
                role: other.to_owned(),
                expected: ROLES,
            });
        }
    };
    let content = parse_content(obj.required("content")?, &obj.at.field("content"))?;
    Ok(Message { role, content })
}

/// Writes one message in the Anthropic shape.
///
/// A [`Role::Tool`] message is written as `user`, and a [`Role::System`] message as `system`,
/// which the Messages API does not accept inside `messages`: use [`render_request_messages`] to
/// build a request.
pub fn render_message(message: &Message) -> Value {
    let content: Vec<Value> = message.content.iter().map(render_block).collect();
    json!({"role": role_name(message.role), "content": content})
}

/// Writes a history as a Messages API request: the top-level `system` text and the `messages`.
///
/// - The text of every system message, wherever it stands, goes into the system string, one
///   message per paragraph (joined with a blank line). Non-text blocks of system messages are
///   dropped, because the API's system field holds text only.
/// - A [`Role::Tool`] message becomes a `user` message of `tool_result` blocks.
/// - Consecutive messages that hold only tool results (the answers to parallel calls) merge into
///   one user message, as the API requires.
pub fn render_request_messages(messages: &[Message]) -> (Option<String>, Vec<Value>) {
    let mut system: Vec<String> = Vec::new();
    let mut out: Vec<(&'static str, Vec<Value>)> = Vec::new();
    let mut last_is_results = false;
    for message in messages {
        if message.role == Role::System {
            let text = message.plain_text();
            if !text.is_empty() {
                system.push(text);
            }
            continue;
        }
        let is_results = message.role != Role::Assistant
            && !message.content.is_empty()
            && message
                .content
                .iter()
                .all(|b| matches!(b, ContentBlock::ToolResult { .. }));
        let blocks = message.content.iter().map(render_block);
        match (last_is_results && is_results, out.last_mut()) {
            (true, Some((_, previous))) => previous.extend(blocks),
            _ => out.push((role_name(message.role), blocks.collect())),
        }
        last_is_results = is_results;
    }
    let system = match system.is_empty() {
        true => None,
        false => Some(system.join("\n\n")),
    };
    let messages = out
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    (system, messages)
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User | Role::Tool => "user",
        Role::Assistant => "assistant",
    }
}

fn parse_content(value: &Value, at: &Path) -> Result<Vec<ContentBlock>, Error> {
    match value {
        Value::String(text) => Ok(text_content(text)),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| parse_block(item, at.index(i)))
            .collect(),
        other => Err(wrong_type(at, "string or array", other)),
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

fn parse_block(value: &Value, at: Path) -> Result<ContentBlock, Error> {
    let obj = Obj::new(value, at)?;
    let type_name = obj.str("type")?;
    let kind = format!("{type_name} block");
    let block = match type_name {
        "text" => {
            obj.only(&["type", "text"], &["cache_control", "citations"], &kind)?;
            ContentBlock::Text {
                text: obj.str("text")?.to_owned(),
            }
        }
        "thinking" => {
            obj.only(
                &["type", "thinking", "signature"],
                &["cache_control"],
                &kind,
            )?;
            ContentBlock::Thinking {
                thinking: obj.str("thinking")?.to_owned(),
                signature: obj.opt_str("signature")?.map(str::to_owned),
            }
        }
        "redacted_thinking" => {
            obj.only(&["type", "data"], &["cache_control"], &kind)?;
            ContentBlock::RedactedThinking {
                data: obj.str("data")?.to_owned(),
            }
        }
        "tool_use" => {
            obj.only(
                &["type", "id", "name", "input"],
                &["cache_control", "caller"],
                &kind,
            )?;
            ContentBlock::ToolUse {
                id: obj.str("id")?.to_owned(),
                name: obj.str("name")?.to_owned(),
                input: obj.required("input")?.clone(),
            }
        }
        "tool_result" => {
            obj.only(
                &["type", "tool_use_id", "content", "is_error"],
                &["cache_control"],
                &kind,
            )?;
            let content = match obj.get("content") {
                None => Vec::new(),
                Some(value) => parse_content(value, &obj.at.field("content"))?,
            };
            ContentBlock::ToolResult {
                tool_use_id: obj.str("tool_use_id")?.to_owned(),
                content,
                is_error: obj.opt_bool("is_error")?.unwrap_or(false),
            }
        }
        "image" => {
            obj.only(&["type", "source"], &["cache_control"], &kind)?;
            ContentBlock::Image {
                source: parse_source(obj.required("source")?, obj.at.field("source"))?,
            }
        }
        "tool_reference" => {
            obj.only(&["type", "tool_name"], &["cache_control"], &kind)?;
            ContentBlock::ToolReference {
                tool_name: obj.str("tool_name")?.to_owned(),
            }
        }
        "document" => {
            obj.only(
                &["type", "source", "title"],
                &["cache_control", "citations"],
                &kind,
            )?;
            ContentBlock::Document {
                source: parse_source(obj.required("source")?, obj.at.field("source"))?,
                title: obj.opt_str("title")?.map(str::to_owned),
            }
        }
        // A server tool's call or result: kept whole, since dropping it would change what was
        // said and refusing it would lose the rest of the conversation.
        other if is_server_block(other) => {
            let mut block = value.clone();
            if let Some(map) = block.as_object_mut() {
                map.remove("cache_control");
            }
            ContentBlock::Opaque { block }
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

/// Whether `type_name` is a block the API's server tools write, which baton keeps whole
/// ([`ContentBlock::Opaque`]): a call (`server_tool_use`, `mcp_tool_use`, any `*_tool_use`), a
/// result (`web_search_tool_result`, `code_execution_tool_result`, any `*_tool_result`), and
/// `container_upload` and `search_result`. Any other unknown type is an error, so a mistyped
/// block is named rather than stored.
pub(crate) fn is_server_block(type_name: &str) -> bool {
    type_name != "tool_use"
        && type_name != "tool_result"
        && (type_name.ends_with("_tool_use")
            || type_name.ends_with("_tool_result")
            || matches!(type_name, "container_upload" | "search_result"))
}

fn parse_source(value: &Value, at: Path) -> Result<MediaSource, Error> {
    let obj = Obj::new(value, at)?;
    let type_name = obj.str("type")?;
    let kind = format!("{type_name} source");
    let source = match type_name {
        "base64" => {
            obj.only(&["type", "media_type", "data"], &[], &kind)?;
            MediaSource::Base64 {
                media_type: obj.str("media_type")?.to_owned(),
                data: obj.str("data")?.to_owned(),
            }
        }
        "url" => {
            obj.only(&["type", "url"], &[], &kind)?;
            MediaSource::Url {
                url: obj.str("url")?.to_owned(),
            }
        }
        "file" => {
            obj.only(&["type", "file_id"], &[], &kind)?;
            MediaSource::File {
                file_id: obj.str("file_id")?.to_owned(),
            }
        }
        other => {
            return Err(Error::UnknownType {
                at: obj.at.to_string(),
                kind: "source",
                type_name: other.to_owned(),
            });
        }
    };
    Ok(source)
}

fn render_block(block: &ContentBlock) -> Value {
    match block {
        ContentBlock::Text { text } => json!({"type": "text", "text": text}),
        ContentBlock::Thinking {
            thinking,
            signature,
        } => {
            let mut out = json!({"type": "thinking", "thinking": thinking});
            if let (Some(signature), Value::Object(map)) = (signature, &mut out) {
                map.insert("signature".to_owned(), json!(signature));
            }
            out
        }
        ContentBlock::RedactedThinking { data } => {
            json!({"type": "redacted_thinking", "data": data})
        }
        ContentBlock::ToolUse { id, name, input } => {
            json!({"type": "tool_use", "id": id, "name": name, "input": input})
        }
        ContentBlock::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => {
            let content = match content.as_slice() {
                [] => json!(""),
                [ContentBlock::Text { text }] => json!(text),
                blocks => Value::Array(blocks.iter().map(render_block).collect()),
            };
            let mut map = Map::new();
            map.insert("type".to_owned(), json!("tool_result"));
            map.insert("tool_use_id".to_owned(), json!(tool_use_id));
            map.insert("content".to_owned(), content);
            if *is_error {
                map.insert("is_error".to_owned(), json!(true));
            }
            Value::Object(map)
        }
        ContentBlock::Image { source } => json!({"type": "image", "source": render_source(source)}),
        ContentBlock::ToolReference { tool_name } => {
            json!({"type": "tool_reference", "tool_name": tool_name})
        }
        ContentBlock::Opaque { block } => block.clone(),
        ContentBlock::Document { source, title } => {
            let mut out = json!({"type": "document", "source": render_source(source)});
            if let (Some(title), Value::Object(map)) = (title, &mut out) {
                map.insert("title".to_owned(), json!(title));
            }
            out
        }
    }
}

fn render_source(source: &MediaSource) -> Value {
    match source {
        MediaSource::Url { url } => json!({"type": "url", "url": url}),
        MediaSource::File { file_id } => json!({"type": "file", "file_id": file_id}),
        MediaSource::Base64 { media_type, data } => {
            json!({"type": "base64", "media_type": media_type, "data": data})
        }
    }
}
