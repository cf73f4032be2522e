//! The OpenAI Responses API (`POST /v1/responses`): requests ([`parse_request`]), responses
//! ([`parse_response`], [`render_response`]) and their streamed events ([`Stream`],
//! [`render_stream`]); errors have the Chat Completions shape ([`crate::openai::render_error`]).
//!
//! A request is `{"model", "instructions", "input": "text" | [items], "tools": [{"type":
//! "function", "name", "description", "parameters"}], "max_output_tokens", "temperature",
//! "stream", "previous_response_id", "store", …}`. Its input items are messages (`{"role",
//! "content": "text" | [{"type": "input_text" | "output_text", "text"}]}`, `"type": "message"`
//! optional), `function_call` (`call_id`, `name`, `arguments`) and `function_call_output`
//! (`call_id`, `output`) items and `reasoning` items (each `summary` and `content` text a
//! thinking block, `encrypted_content` a redacted-thinking block, in the assistant message
//! they belong to, as the Codex importer reads a rollout's reasoning); `item_reference` items,
//! and content parts that are not text (images, files), carry nothing baton's reader needs and
//! are skipped, as are tools other than functions (the hosted ones).
//!
//! A response is `{"id", "object": "response", "created_at", "status": "completed" |
//! "incomplete" | "failed", "model", "output": [items], "error", "incomplete_details", "usage":
//! {"input_tokens", "input_tokens_details": {"cached_tokens"}, "output_tokens",
//! "output_tokens_details": {"reasoning_tokens"}, "total_tokens"}}`. Its stop reason, in
//! [`Reply::stop_reason`], is the status, or `incomplete:<reason>`.
//!
//! A stream is named events: `response.created`, `response.in_progress`, then per output item
//! `response.output_item.added`, its parts (`response.content_part.added`,
//! `response.output_text.delta`…, `response.output_text.done`, `response.content_part.done`,
//! or `response.function_call_arguments.delta`…, `.done`) and `response.output_item.done`; last
//! `response.completed` (or `response.incomplete`) carrying the whole response with its usage.
//! `response.failed` and `error` end it with the vendor's error. Every event's data has its
//! `type` and a `sequence_number`.
//!
//! ```
//! use baton_wire::StreamDelta;
//! use baton_wire::responses::Stream;
//!
//! let mut stream = Stream::default();
//! let deltas = stream.feed(concat!(
//!     "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"model\":\"gpt-x\",\"output\":[]}}\n\n",
//!     "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hi\"}\n\n",
//!     "event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":2,\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"model\":\"gpt-x\",",
//!     "\"output\":[{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"Hi\"}]}],",
//!     "\"usage\":{\"input_tokens\":20,\"input_tokens_details\":{\"cached_tokens\":16},\"output_tokens\":3,\"output_tokens_details\":{\"reasoning_tokens\":1}}}}\n\n",
//! ).as_bytes())?;
//! assert_eq!(deltas, [StreamDelta::Text("Hi".into())]);
//! assert!(stream.is_done());
//! let reply = stream.finish()?;
//! assert_eq!(reply.message.plain_text(), "Hi");
//! let u = reply.usage;
//! assert_eq!((u.input_tokens, u.cache_read_tokens, u.output_tokens, u.reasoning_tokens), (4, 16, 3, 1));
//! # Ok::<(), baton_wire::Error>(())
//! ```

use baton_core::{ContentBlock, MediaSource, Message, Role};
use serde_json::{Value, json};

use crate::exchange::chunks;
use crate::openai::response::{api_error, created, read_usage};
use crate::openai::{data_url, media_from_url, parse_arguments};
use crate::sse::{self, Decoder, Event};
use crate::{Error, Reply, RequestBody, StreamDelta, ToolDef, Usage};

#[cfg(test)]
mod tests;

/// Reads a Responses request body into baton's model, keeping one message per input message
/// (consecutive `function_call` and `reasoning` items join the assistant message before them,
/// an assistant message joins the reasoning before it, and each `function_call_output` is one
/// tool message).
pub fn parse_request(value: &Value) -> Result<RequestBody, Error> {
    let Value::Object(map) = value else {
        return Err(invalid(
            "body",
            "We could not parse the JSON body of your request.",
        ));
    };
    let Some(model) = map.get("model").and_then(Value::as_str) else {
        return Err(invalid("model", "Missing required parameter: 'model'."));
    };
    let mut system: Vec<String> = map
        .get("instructions")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .map(|t| vec![t.to_owned()])
        .unwrap_or_default();
    let mut messages: Vec<Message> = Vec::new();
    match map.get("input") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => messages.push(Message {
            role: Role::User,
            content: vec![ContentBlock::Text { text: text.clone() }],
        }),
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                read_item(item, i, &mut messages, &mut system)?;
            }
        }
        Some(_) => {
            return Err(invalid(
                "input",
                "Invalid type for 'input': expected a string or an array of input items.",
            ));
        }
    }
    let tools = match map.get("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(tools)) => tools
            .iter()
            .filter(|t| t.get("type").and_then(Value::as_str) == Some("function"))
            .map(|t| ToolDef {
                name: str_of(t, "name"),
                description: str_of(t, "description"),
                input_schema: t.get("parameters").cloned().unwrap_or(json!({})),
            })
            .collect(),
        Some(_) => {
            return Err(invalid(
                "tools",
                "Invalid type for 'tools': expected an array.",
            ));
        }
    };
    let max_tokens = match map.get("max_output_tokens") {
        None | Some(Value::Null) => None,
        Some(n) => match n.as_u64().and_then(|n| u32::try_from(n).ok()) {
            Some(n) => Some(n),
            None => {
                return Err(invalid(
                    "max_output_tokens",
                    "Invalid type for 'max_output_tokens': expected an integer.",
                ));
            }
        },
    };
    Ok(RequestBody {
        model: model.to_owned(),
        system: (!system.is_empty()).then(|| system.join("\n\n")),
        messages,
        tools,
        max_tokens,
        temperature: map
            .get("temperature")
            .and_then(Value::as_f64)
            .map(|t| t as f32),
        stream: map.get("stream").and_then(Value::as_bool) == Some(true),
    })
}

/// For each item of a request's `input` list, the index of the message of [`parse_request`]'s
/// `messages` it is read into (`None` for an item that carries none, such as an
/// `item_reference` or an empty `reasoning`), so
/// a caller can map messages back to the items that made them; empty when `input` is not a
/// list.
pub fn input_messages(value: &Value) -> Result<Vec<Option<usize>>, Error> {
    let Some(Value::Array(items)) = value.get("input") else {
        return Ok(Vec::new());
    };
    let (mut messages, mut system) = (Vec::new(), Vec::new());
    let shape = |m: &Vec<Message>| (m.len(), m.last().map_or(0, |m| m.content.len()));
    let mut owners = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let before = shape(&messages);
        read_item(item, i, &mut messages, &mut system)?;
        owners.push((shape(&messages) != before).then(|| messages.len() - 1));
    }
    Ok(owners)
}

fn read_item(
    item: &Value,
    i: usize,
    messages: &mut Vec<Message>,
    system: &mut Vec<String>,
) -> Result<(), Error> {
    let at = format!("input[{i}]");
    let kind = item
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("message");
    match kind {
        "message" => {
            let role = match item.get("role").and_then(Value::as_str) {
                Some("user") => Role::User,
                Some("assistant") => Role::Assistant,
                Some("system" | "developer") => Role::System,
                Some(other) => {
                    return Err(invalid(
                        &format!("{at}.role"),
                        &format!(
                            "Invalid value: '{other}'. Supported values are: 'assistant', 'system', 'developer', and 'user'."
                        ),
                    ));
                }
                None => {
                    return Err(invalid(
                        &format!("{at}.role"),
                        "Missing required parameter.",
                    ));
                }
            };
            let content = match item.get("content") {
                Some(Value::String(text)) => vec![ContentBlock::Text { text: text.clone() }],
                Some(Value::Array(parts)) => parts
                    .iter()
                    .filter_map(|p| match p.get("type").and_then(Value::as_str) {
                        Some("input_text" | "output_text" | "text") => Some(ContentBlock::Text {
                            text: str_of(p, "text"),
                        }),
                        Some("input_image") => {
                            let source = match (p.get("image_url"), p.get("file_id")) {
                                (Some(Value::String(url)), _) => media_from_url(url),
                                (_, Some(Value::String(file_id))) => MediaSource::File {
                                    file_id: file_id.clone(),
                                },
                                _ => return None,
                            };
                            Some(ContentBlock::Image { source })
                        }
                        _ => None,
                    })
                    .collect(),
                _ => {
                    return Err(invalid(
                        &format!("{at}.content"),
                        "Invalid type: expected a string or an array of content parts.",
                    ));
                }
            };
            if role == Role::System {
                let text = Message {
                    role,
                    content: content.clone(),
                }
                .plain_text();
                if !text.is_empty() {
                    system.push(text);
                }
            }
            // An assistant message after its reasoning is one message with it.
            match messages.last_mut() {
                Some(last)
                    if role == Role::Assistant
                        && last.role == Role::Assistant
                        && !last.content.is_empty()
                        && last.content.iter().all(is_reasoning) =>
                {
                    last.content.extend(content);
                }
                _ => messages.push(Message { role, content }),
            }
        }
        "reasoning" => {
            let blocks = reasoning_blocks(item);
            if !blocks.is_empty() {
                assistant_side(messages, blocks);
            }
        }
        "function_call" => {
            let call = ContentBlock::ToolUse {
                id: str_of(item, "call_id"),
                name: str_of(item, "name"),
                input: parse_arguments(item.get("arguments").and_then(Value::as_str).unwrap_or("")),
            };
            assistant_side(messages, vec![call]);
        }
        "function_call_output" => {
            let output = match item.get("output") {
                Some(Value::String(text)) => text.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            messages.push(Message {
                role: Role::Tool,
                content: vec![ContentBlock::ToolResult {
                    tool_use_id: str_of(item, "call_id"),
                    content: vec![ContentBlock::Text { text: output }],
                    is_error: false,
                }],
            });
        }
        // Items that carry no conversation text for baton's reader.
        _ => {}
    }
    Ok(())
}

/// Adds `blocks` (calls, reasoning) to the assistant message they follow, or to a new one.
fn assistant_side(messages: &mut Vec<Message>, blocks: Vec<ContentBlock>) {
    match messages.last_mut() {
        Some(last)
            if last.role == Role::Assistant
                && last
                    .content
                    .iter()
                    .all(|b| !matches!(b, ContentBlock::ToolResult { .. })) =>
        {
            last.content.extend(blocks);
        }
        _ => messages.push(Message {
            role: Role::Assistant,
            content: blocks,
        }),
    }
}

/// Whether `block` is reasoning (a thinking or redacted-thinking block).
fn is_reasoning(block: &ContentBlock) -> bool {
    matches!(
        block,
        ContentBlock::Thinking { .. } | ContentBlock::RedactedThinking { .. }
    )
}

/// A `reasoning` item's blocks: a thinking block per `summary` and `content` text, then a
/// redacted-thinking block for its `encrypted_content`.
fn reasoning_blocks(item: &Value) -> Vec<ContentBlock> {
    let mut blocks = Vec::new();
    for key in ["summary", "content"] {
        for part in item
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(text) = part.get("text").and_then(Value::as_str) {
                blocks.push(ContentBlock::Thinking {
                    thinking: text.to_owned(),
                    signature: None,
                });
            }
        }
    }
    if let Some(data) = item.get("encrypted_content").and_then(Value::as_str) {
        blocks.push(ContentBlock::RedactedThinking {
            data: data.to_owned(),
        });
    }
    blocks
}

/// Reads a non-streaming Responses body: its message text and function calls, its status and
/// its usage. A body with an `error` object (an error body, or a `failed` response) is
/// [`Error::Api`]; one that is not JSON or has no `output` list is [`Error::Malformed`].
/// Reasoning items are read as in a request; output items other than messages, reasoning and
/// function calls (hosted tools' calls) are not part of [`Reply::message`].
pub fn parse_response(body: &[u8]) -> Result<Reply, Error> {
    let value: Value =
        serde_json::from_slice(body).map_err(|err| malformed(format!("not JSON ({err})")))?;
    reply_of(&value)
}

fn reply_of(value: &Value) -> Result<Reply, Error> {
    if let Some(error) = value.get("error").filter(|e| e.is_object()) {
        return Err(api_error(error));
    }
    let Some(output) = value.get("output").and_then(Value::as_array) else {
        return Err(malformed("no \"output\" list".to_owned()));
    };
    let status = value
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or("completed");
    let stop_reason = match value
        .get("incomplete_details")
        .and_then(|d| d.get("reason"))
        .and_then(Value::as_str)
    {
        Some(reason) if status == "incomplete" => format!("incomplete:{reason}"),
        _ => status.to_owned(),
    };
    let mut usage = Usage::default();
    if let Some(u) = value.get("usage").filter(|u| u.is_object()) {
        read_usage(u, &mut usage);
    }
    Ok(Reply {
        message: parse_output(output),
        stop_reason,
        usage,
        model: str_of(value, "model"),
    })
}

/// The assistant message of a response's `output` items: its messages' text, its reasoning
/// and its function calls, in their order.
pub fn parse_output(output: &[Value]) -> Message {
    let mut content = Vec::new();
    for item in output {
        match item.get("type").and_then(Value::as_str) {
            Some("message") => {
                for part in item
                    .get("content")
                    .and_then(Value::as_array)
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                {
                    if part.get("type").and_then(Value::as_str) == Some("output_text") {
                        content.push(ContentBlock::Text {
                            text: str_of(part, "text"),
                        });
                    }
                }
            }
            Some("function_call") => content.push(ContentBlock::ToolUse {
                id: str_of(item, "call_id"),
                name: str_of(item, "name"),
                input: parse_arguments(item.get("arguments").and_then(Value::as_str).unwrap_or("")),
            }),
            Some("reasoning") => content.extend(reasoning_blocks(item)),
            _ => {}
        }
    }
    Message {
        role: Role::Assistant,
        content,
    }
}

/// Writes a non-streaming Responses body for `reply`, with `id` as its id. A stop reason of
/// `max_tokens`, `length` or `incomplete:<reason>` makes an `incomplete` response.
pub fn render_response(reply: &Reply, id: &str) -> Value {
    response_object(reply, id, &status_of(reply), output_items(reply, id))
}

fn status_of(reply: &Reply) -> (String, Value) {
    match reply.stop_reason.as_str() {
        "max_tokens" | "length" => (
            "incomplete".to_owned(),
            json!({"reason": "max_output_tokens"}),
        ),
        other => match other.strip_prefix("incomplete:") {
            Some(reason) => ("incomplete".to_owned(), json!({"reason": reason})),
            None => ("completed".to_owned(), Value::Null),
        },
    }
}

fn output_items(reply: &Reply, id: &str) -> Vec<Value> {
    let mut items = reasoning_items(&reply.message.content, id);
    let text: String = reply
        .message
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    if !text.is_empty() {
        items.push(json!({
            "type": "message", "id": format!("msg_{id}"), "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }));
    }
    for block in &reply.message.content {
        if let ContentBlock::ToolUse {
            id: call,
            name,
            input,
        } = block
        {
            let arguments = match input {
                Value::String(raw) => raw.clone(),
                other => other.to_string(),
            };
            items.push(json!({
                "type": "function_call", "id": format!("fc_{call}"), "call_id": call,
                "name": name, "arguments": arguments, "status": "completed",
            }));
        }
    }
    items
}

/// Writes `messages` as a request's `input` items, which [`parse_request`] reads back into the
/// same messages: system messages as `developer` messages, user text as `input_text`, an
/// assistant message as its items in order (each run of reasoning blocks as `reasoning` items,
/// each run of text as one `message` of `output_text` parts, each call a `function_call`), and
/// each tool result a `function_call_output`.
pub fn render_input(messages: &[Message]) -> Vec<Value> {
    let mut items = Vec::new();
    for (m, message) in messages.iter().enumerate() {
        let role = match message.role {
            Role::System => "developer",
            Role::User => "user",
            Role::Assistant | Role::Tool => "assistant",
        };
        if message.role != Role::Assistant {
            let parts: Vec<Value> = message
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Text { text } => {
                        Some(json!({"type": "input_text", "text": text}))
                    }
                    ContentBlock::Image { source } => Some(match source {
                        MediaSource::Base64 { media_type, data } => {
                            json!({"type": "input_image", "image_url": data_url(media_type, data)})
                        }
                        MediaSource::Url { url } => {
                            json!({"type": "input_image", "image_url": url})
                        }
                        MediaSource::File { file_id } => {
                            json!({"type": "input_image", "file_id": file_id})
                        }
                    }),
                    _ => None,
                })
                .collect();
            if !parts.is_empty() {
                items.push(json!({"type": "message", "role": role, "content": parts}));
            }
            for block in &message.content {
                if let ContentBlock::ToolResult {
                    tool_use_id,
                    content,
                    ..
                } = block
                {
                    // Its text, with a tool reference's name as text, as Chat Completions has it.
                    let output: Vec<&str> = content
                        .iter()
                        .filter_map(|b| match b {
                            ContentBlock::Text { text }
                            | ContentBlock::ToolReference { tool_name: text } => {
                                Some(text.as_str())
                            }
                            _ => None,
                        })
                        .collect();
                    let output = output.join("\n");
                    items.push(json!({"type": "function_call_output", "call_id": tool_use_id, "output": output}));
                }
            }
            continue;
        }
        let mut at = 0;
        let blocks = &message.content;
        while at < blocks.len() {
            let run = blocks[at..]
                .iter()
                .take_while(|b| std::mem::discriminant(*b) == std::mem::discriminant(&blocks[at]))
                .count();
            let same = &blocks[at..at + run];
            match &blocks[at] {
                ContentBlock::Thinking { .. } | ContentBlock::RedactedThinking { .. } => {
                    let end = at + blocks[at..].iter().take_while(|b| is_reasoning(b)).count();
                    items.extend(reasoning_items(&blocks[at..end], &format!("{m}_{at}")));
                    at = end;
                    continue;
                }
                ContentBlock::Text { .. } => {
                    let parts: Vec<Value> = same
                        .iter()
                        .filter_map(|b| match b {
                            ContentBlock::Text { text } => {
                                Some(json!({"type": "output_text", "text": text}))
                            }
                            _ => None,
                        })
                        .collect();
                    items.push(json!({"type": "message", "role": "assistant", "content": parts}));
                }
                _ => {
                    for block in same {
                        if let ContentBlock::ToolUse { id, name, input } = block {
                            let arguments = match input {
                                Value::String(raw) => raw.clone(),
                                other => other.to_string(),
                            };
                            items.push(json!({"type": "function_call", "call_id": id, "name": name, "arguments": arguments}));
                        }
                    }
                }
            }
            at += run;
        }
    }
    items
}

/// The reasoning items of `blocks`: each run of thinking blocks, closed by a redacted-thinking
/// block when one follows, is one item (its texts the summary, the redacted data its
/// `encrypted_content`), which [`reasoning_blocks`] reads back into the same blocks.
fn reasoning_items(blocks: &[ContentBlock], id: &str) -> Vec<Value> {
    let mut items = Vec::new();
    let mut summary: Vec<Value> = Vec::new();
    let close = |summary: &mut Vec<Value>, encrypted: Option<&str>, items: &mut Vec<Value>| {
        if summary.is_empty() && encrypted.is_none() {
            return;
        }
        let mut item = json!({"type": "reasoning", "id": format!("rs_{id}_{}", items.len()),
                              "summary": std::mem::take(summary)});
        if let Some(data) = encrypted {
            item["encrypted_content"] = json!(data);
        }
        items.push(item);
    };
    for block in blocks {
        match block {
            ContentBlock::Thinking { thinking, .. } => {
                summary.push(json!({"type": "summary_text", "text": thinking}));
            }
            ContentBlock::RedactedThinking { data } => close(&mut summary, Some(data), &mut items),
            _ => {}
        }
    }
    close(&mut summary, None, &mut items);
    items
}

fn response_object(reply: &Reply, id: &str, status: &(String, Value), output: Vec<Value>) -> Value {
    let u = &reply.usage;
    let input = u.input_tokens + u.cache_read_tokens;
    json!({
        "id": id,
        "object": "response",
        "created_at": created(),
        "status": status.0,
        "error": null,
        "incomplete_details": status.1,
        "model": reply.model,
        "output": output,
        "parallel_tool_calls": true,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": input,
            "input_tokens_details": {"cached_tokens": u.cache_read_tokens},
            "output_tokens": u.output_tokens,
            "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
            "total_tokens": input + u.output_tokens,
        },
    })
}

/// Writes `reply` as the events of a streamed Responses reply, one complete event per item;
/// the last is `response.completed` (or `response.incomplete`) with the whole response.
pub fn render_stream(reply: &Reply, id: &str) -> Vec<String> {
    let mut seq = 0u64;
    let mut event = |mut data: Value| {
        data["sequence_number"] = json!(seq);
        seq += 1;
        let kind = data["type"].as_str().unwrap_or_default().to_owned();
        sse::render(Some(&kind), &data.to_string())
    };
    let status = status_of(reply);
    let items = output_items(reply, id);
    let mut pending = response_object(reply, id, &("in_progress".to_owned(), Value::Null), vec![]);
    pending["usage"] = Value::Null;
    let mut out = vec![
        event(json!({"type": "response.created", "response": pending.clone()})),
        event(json!({"type": "response.in_progress", "response": pending})),
    ];
    for (index, item) in items.iter().enumerate() {
        let item_id = item["id"].clone();
        let mut started = item.clone();
        started["status"] = json!("in_progress");
        match item["type"].as_str() {
            Some("message") => {
                started["content"] = json!([]);
                out.push(event(json!({"type": "response.output_item.added", "output_index": index, "item": started})));
                out.push(event(json!({"type": "response.content_part.added", "item_id": item_id, "output_index": index,
                    "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}})));
                let text = item["content"][0]["text"].as_str().unwrap_or_default();
                for piece in chunks(text, 12) {
                    out.push(event(
                        json!({"type": "response.output_text.delta", "item_id": item_id,
                        "output_index": index, "content_index": 0, "delta": piece, "logprobs": []}),
                    ));
                }
                out.push(event(
                    json!({"type": "response.output_text.done", "item_id": item_id,
                    "output_index": index, "content_index": 0, "text": text, "logprobs": []}),
                ));
                out.push(event(json!({"type": "response.content_part.done", "item_id": item_id, "output_index": index,
                    "content_index": 0, "part": item["content"][0].clone()})));
            }
            Some("reasoning") => {
                started["summary"] = json!([]);
                out.push(event(json!({"type": "response.output_item.added", "output_index": index, "item": started})));
            }
            _ => {
                started["arguments"] = json!("");
                out.push(event(json!({"type": "response.output_item.added", "output_index": index, "item": started})));
                let arguments = item["arguments"].as_str().unwrap_or_default();
                for piece in chunks(arguments, 10) {
                    out.push(event(
                        json!({"type": "response.function_call_arguments.delta",
                        "item_id": item_id, "output_index": index, "delta": piece}),
                    ));
                }
                out.push(event(
                    json!({"type": "response.function_call_arguments.done",
                    "item_id": item_id, "output_index": index, "arguments": arguments}),
                ));
            }
        }
        out.push(event(
            json!({"type": "response.output_item.done", "output_index": index, "item": item}),
        ));
    }
    let last = match status.0.as_str() {
        "incomplete" => "response.incomplete",
        _ => "response.completed",
    };
    let whole = response_object(reply, id, &status, items);
    out.push(event(json!({"type": last, "response": whole})));
    out
}

/// Reads the events of one streamed Responses reply; see the module documentation. The reply
/// is the response that `response.completed` (or `response.incomplete`) carries whole.
#[derive(Debug, Default)]
pub struct Stream {
    sse: Decoder,
    events: usize,
    model: String,
    last: Option<Value>,
    failed: Option<Error>,
}

impl Stream {
    /// Reads the next bytes of the body; returns the text and function-call starts they stream.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<StreamDelta>, Error> {
        let mut out = Vec::new();
        for event in self.sse.push(bytes)? {
            out.extend(self.push(&event)?);
        }
        Ok(out)
    }

    /// Reads one event.
    pub fn push(&mut self, event: &Event) -> Result<Option<StreamDelta>, Error> {
        self.events += 1;
        let n = self.events;
        if let Some(err) = &self.failed {
            return Err(err.clone());
        }
        let value: Value = serde_json::from_str(&event.data).map_err(|err| Error::Malformed {
            at: format!("stream event {n}"),
            detail: format!("not JSON ({err})"),
        })?;
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .or(event.event.as_deref())
            .unwrap_or_default()
            .to_owned();
        if self.last.is_some() {
            return Err(Error::Malformed {
                at: format!("stream event {n} ({kind})"),
                detail: "an event after the response was complete".to_owned(),
            });
        }
        match kind.as_str() {
            "error" => {
                let err = api_error(value.get("error").unwrap_or(&value));
                self.failed = Some(err.clone());
                Err(err)
            }
            "response.failed" => {
                let error = value
                    .get("response")
                    .and_then(|r| r.get("error"))
                    .cloned()
                    .unwrap_or(json!({"message": "the response failed"}));
                let err = api_error(&error);
                self.failed = Some(err.clone());
                Err(err)
            }
            "response.created" | "response.in_progress" => {
                if let Some(model) = value.pointer("/response/model").and_then(Value::as_str) {
                    self.model = model.to_owned();
                }
                Ok(None)
            }
            "response.output_text.delta" => Ok(value
                .get("delta")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .map(|t| StreamDelta::Text(t.to_owned()))),
            "response.output_item.added" => {
                let item = value.get("item");
                match item.and_then(|i| i.get("type")).and_then(Value::as_str) {
                    Some("function_call") => Ok(item.map(|i| StreamDelta::ToolCall {
                        id: str_of(i, "call_id"),
                        name: str_of(i, "name"),
                    })),
                    _ => Ok(None),
                }
            }
            "response.completed" | "response.incomplete" => {
                let Some(response) = value.get("response").filter(|r| r.is_object()) else {
                    return Err(Error::Malformed {
                        at: format!("stream event {n} ({kind})"),
                        detail: "no \"response\" object".to_owned(),
                    });
                };
                self.last = Some(response.clone());
                Ok(None)
            }
            _ => Ok(None),
        }
    }

    /// Whether the final event (`response.completed` or `response.incomplete`) has arrived.
    pub fn is_done(&self) -> bool {
        self.last.is_some()
    }

    /// The whole reply, once the body has ended: [`Error::Truncated`] when no final event came.
    pub fn finish(mut self) -> Result<Reply, Error> {
        if let Some(event) = self.sse.finish() {
            self.push(&event)?;
        }
        let Some(response) = self.last else {
            return Err(Error::Truncated {
                missing: "response.completed",
            });
        };
        let mut reply = reply_of(&response)?;
        if reply.model.is_empty() {
            reply.model = self.model;
        }
        Ok(reply)
    }
}

fn str_of(value: &Value, name: &str) -> String {
    value
        .get(name)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn invalid(at: &str, message: &str) -> Error {
    Error::Invalid {
        at: at.to_owned(),
        message: message.to_owned(),
    }
}

fn malformed(detail: String) -> Error {
    Error::Malformed {
        at: "response".to_owned(),
        detail,
    }
}
