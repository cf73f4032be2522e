//! Anthropic Messages streaming: [`Stream`] reads the server-sent events of a reply, and
//! [`render_stream`] writes them.
//!
//! The events, in order: `message_start` (the model, input usage), then for each content block
//! `content_block_start` (`text`, `thinking`, `redacted_thinking` or `tool_use`), its
//! `content_block_delta`s (`text_delta`, `thinking_delta`, `signature_delta`,
//! `input_json_delta`) and `content_block_stop`; then `message_delta` (the stop reason, output
//! usage) and `message_stop`. `ping` may come anywhere, and `error` ends the stream with the
//! vendor's error.
//! Event types the API may add later are ignored, and so is `citations_delta`; a server tool's
//! block (`server_tool_use`, `web_search_tool_result`…, as the Messages reader tells them) is
//! kept whole as [`ContentBlock::Opaque`], its `input_json_delta`s, when it streams any,
//! replacing its `input`; any other unknown block type is an error, because dropping it would
//! change what the model said.
//!
//! ```
//! use baton_wire::StreamDelta;
//! use baton_wire::anthropic::Stream;
//!
//! let mut stream = Stream::default();
//! let deltas = stream.feed(concat!(
//!     "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-x\",\"usage\":{\"input_tokens\":9}}}\n\n",
//!     "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
//!     "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
//!     "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
//!     "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n",
//! ).as_bytes())?;
//! assert_eq!(deltas, [StreamDelta::Text("Hi".into())]);
//! assert!(!stream.is_done());
//! stream.feed(b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")?;
//! let reply = stream.finish()?;
//! assert_eq!((reply.usage.input_tokens, reply.usage.output_tokens), (9, 2));
//! # Ok::<(), baton_wire::Error>(())
//! ```

use std::collections::BTreeMap;

use baton_core::{ContentBlock, Message, Role};
use serde_json::{Value, json};

use super::response::{api_error, not_json, read_usage, str_field};
use crate::exchange::chunks;
use crate::sse::{self, Decoder, Event};
use crate::{Error, Reply, StreamDelta, Usage};

#[cfg(test)]
mod tests;

/// Reads the events of one streamed Messages reply; see the module documentation.
#[derive(Debug, Default)]
pub struct Stream {
    sse: Decoder,
    events: usize,
    started: bool,
    stopped: bool,
    model: String,
    usage: Usage,
    stop_reason: Option<String>,
    blocks: BTreeMap<u64, Block>,
}

#[derive(Debug)]
enum Block {
    Text(String),
    Thinking {
        thinking: String,
        signature: String,
    },
    Redacted(String),
    ToolUse {
        id: String,
        name: String,
        /// The `input` of `content_block_start` (`{}`), used when no `input_json_delta` came.
        start: Value,
        json: String,
    },
    /// A block of a type baton's model has no variant for: `content_block_start`'s block, whose
    /// `input` the `input_json_delta`s (a server tool's call streams them) replace.
    Opaque {
        start: Value,
        json: String,
    },
}

impl Block {
    fn kind(&self) -> &'static str {
        match self {
            Block::Text(_) => "text",
            Block::Thinking { .. } => "thinking",
            Block::Redacted(_) => "redacted_thinking",
            Block::ToolUse { .. } => "tool_use",
            Block::Opaque { .. } => "opaque",
        }
    }
}

impl Stream {
    /// Reads the next bytes of the body; returns the text and tool-call starts they stream.
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
        let value: Value = serde_json::from_str(&event.data).map_err(|err| Error::Malformed {
            at: format!("stream event {n}"),
            detail: not_json(&err),
        })?;
        let kind = match (value.get("type").and_then(Value::as_str), &event.event) {
            (Some(kind), _) => kind.to_owned(),
            (None, Some(kind)) => kind.clone(),
            (None, None) => {
                return Err(Error::Malformed {
                    at: format!("stream event {n}"),
                    detail: "no event type".to_owned(),
                });
            }
        };
        let at = format!("stream event {n} ({kind})");
        let malformed = |detail: String| Error::Malformed {
            at: at.clone(),
            detail,
        };
        if self.stopped && kind != "ping" {
            return Err(malformed("an event after message_stop".to_owned()));
        }
        match kind.as_str() {
            "ping" => return Ok(None),
            "error" => return Err(api_error(&value)),
            "message_start" => {
                if self.started {
                    return Err(malformed("a second message_start".to_owned()));
                }
                let Some(message) = value.get("message") else {
                    return Err(malformed("no \"message\"".to_owned()));
                };
                self.started = true;
                self.model = str_field(message, "model");
                if let Some(usage) = message.get("usage") {
                    read_usage(usage, &mut self.usage);
                }
                return Ok(None);
            }
            _ if !self.started => {
                return Err(malformed("an event before message_start".to_owned()));
            }
            _ => {}
        }
        let index = || {
            value
                .get("index")
                .and_then(Value::as_u64)
                .ok_or_else(|| malformed("no \"index\"".to_owned()))
        };
        match kind.as_str() {
            "content_block_start" => {
                let index = index()?;
                let Some(block) = value.get("content_block") else {
                    return Err(malformed("no \"content_block\"".to_owned()));
                };
                let text = |name: &str| str_field(block, name);
                let (block, delta) = match block.get("type").and_then(Value::as_str) {
                    Some("text") => (Block::Text(text("text")), None),
                    Some("thinking") => (
                        Block::Thinking {
                            thinking: text("thinking"),
                            signature: text("signature"),
                        },
                        None,
                    ),
                    Some("redacted_thinking") => (Block::Redacted(text("data")), None),
                    Some("tool_use") => {
                        let (id, name) = (text("id"), text("name"));
                        if id.is_empty() || name.is_empty() {
                            return Err(malformed(format!(
                                "tool_use block {index} has no id or name"
                            )));
                        }
                        let delta = StreamDelta::ToolCall {
                            id: id.clone(),
                            name: name.clone(),
                        };
                        let start = block.get("input").cloned().unwrap_or(json!({}));
                        let block = Block::ToolUse {
                            id,
                            name,
                            start,
                            json: String::new(),
                        };
                        (block, Some(delta))
                    }
                    Some(kind) if super::is_server_block(kind) => (
                        Block::Opaque {
                            start: block.clone(),
                            json: String::new(),
                        },
                        None,
                    ),
                    Some(other) => {
                        return Err(malformed(format!("unknown block type {other:?}")));
                    }
                    None => return Err(malformed("a content block without a type".to_owned())),
                };
                if self.blocks.insert(index, block).is_some() {
                    return Err(malformed(format!("block {index} started twice")));
                }
                Ok(delta)
            }
            "content_block_delta" => {
                let index = index()?;
                let Some(block) = self.blocks.get_mut(&index) else {
                    return Err(malformed(format!("block {index} was never started")));
                };
                let delta = value.get("delta");
                let piece = |name: &str| {
                    delta
                        .and_then(|d| d.get(name))
                        .and_then(Value::as_str)
                        .ok_or_else(|| malformed(format!("no \"{name}\" in the delta")))
                };
                let delta_type = delta
                    .and_then(|d| d.get("type"))
                    .and_then(Value::as_str)
                    .unwrap_or("(none)");
                match (block, delta_type) {
                    (Block::Text(text), "text_delta") => {
                        let piece = piece("text")?;
                        text.push_str(piece);
                        Ok(Some(StreamDelta::Text(piece.to_owned())))
                    }
                    (Block::Thinking { thinking, .. }, "thinking_delta") => {
                        thinking.push_str(piece("thinking")?);
                        Ok(None)
                    }
                    (Block::Thinking { signature, .. }, "signature_delta") => {
                        signature.push_str(piece("signature")?);
                        Ok(None)
                    }
                    (
                        Block::ToolUse { json, .. } | Block::Opaque { json, .. },
                        "input_json_delta",
                    ) => {
                        json.push_str(piece("partial_json")?);
                        Ok(None)
                    }
                    (_, "citations_delta") => Ok(None),
                    (block, other) => Err(malformed(format!(
                        "a {other} delta for {} block {index}",
                        block.kind()
                    ))),
                }
            }
            "content_block_stop" => {
                let index = index()?;
                match self.blocks.get(&index) {
                    Some(_) => Ok(None),
                    None => Err(malformed(format!("block {index} was never started"))),
                }
            }
            "message_delta" => {
                if let Some(reason) = value
                    .get("delta")
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    self.stop_reason = Some(reason.to_owned());
                }
                if let Some(usage) = value.get("usage") {
                    read_usage(usage, &mut self.usage);
                }
                Ok(None)
            }
            "message_stop" => {
                self.stopped = true;
                Ok(None)
            }
            _ => Ok(None),
        }
    }

    /// Whether `message_stop` has arrived.
    pub fn is_done(&self) -> bool {
        self.stopped
    }

    /// The whole reply, once the body has ended: [`Error::Truncated`] when `message_stop`
    /// never came.
    pub fn finish(mut self) -> Result<Reply, Error> {
        if let Some(event) = self.sse.finish() {
            self.push(&event)?;
        }
        if !self.started {
            return Err(Error::Truncated {
                missing: "message_start",
            });
        }
        if !self.stopped {
            return Err(Error::Truncated {
                missing: "message_stop",
            });
        }
        let Some(stop_reason) = self.stop_reason else {
            return Err(Error::Malformed {
                at: "stream".to_owned(),
                detail: "message_stop came without a stop_reason".to_owned(),
            });
        };
        let mut content = Vec::new();
        for (index, block) in self.blocks {
            let block = match block {
                Block::Text(text) if text.is_empty() => continue,
                Block::Text(text) => ContentBlock::Text { text },
                Block::Thinking {
                    thinking,
                    signature,
                } => ContentBlock::Thinking {
                    thinking,
                    signature: Some(signature).filter(|s| !s.is_empty()),
                },
                Block::Redacted(data) => ContentBlock::RedactedThinking { data },
                Block::ToolUse {
                    id,
                    name,
                    start,
                    json,
                } => {
                    let input = match json.trim().is_empty() {
                        true => start,
                        false => serde_json::from_str(&json).map_err(|err| Error::Malformed {
                            at: format!("stream block {index} (tool_use {name})"),
                            detail: format!("its input is not JSON ({err}): {json:?}"),
                        })?,
                    };
                    ContentBlock::ToolUse { id, name, input }
                }
                Block::Opaque { mut start, json } => {
                    if !json.trim().is_empty() {
                        let input: Value =
                            serde_json::from_str(&json).map_err(|err| Error::Malformed {
                                at: format!("stream block {index}"),
                                detail: format!("its input is not JSON ({err}): {json:?}"),
                            })?;
                        if let Some(map) = start.as_object_mut() {
                            map.insert("input".to_owned(), input);
                        }
                    }
                    ContentBlock::Opaque { block: start }
                }
            };
            content.push(block);
        }
        Ok(Reply {
            message: Message {
                role: Role::Assistant,
                content,
            },
            stop_reason,
            usage: self.usage,
            model: self.model,
        })
    }
}

/// Writes `reply` as the events of a streamed Messages reply, one complete event per item:
/// `message_start`, `ping`, each block's start, deltas (text in small pieces, tool input as
/// JSON in pieces) and stop, `message_delta`, and last `message_stop`.
pub fn render_stream(reply: &Reply, id: &str) -> Vec<String> {
    let event = |value: Value| {
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        sse::render(Some(&kind), &value.to_string())
    };
    let mut start_usage = super::response::render_usage(&reply.usage);
    start_usage["output_tokens"] = json!(1);
    let mut out = vec![
        event(json!({"type": "message_start", "message": {
            "id": id, "type": "message", "role": "assistant", "model": reply.model,
            "content": [], "stop_reason": null, "stop_sequence": null, "usage": start_usage,
        }})),
        event(json!({"type": "ping"})),
    ];
    let mut index = 0;
    for block in &reply.message.content {
        let (start, deltas) = match block {
            ContentBlock::Text { text } if text.is_empty() => continue,
            ContentBlock::Text { text } => (
                json!({"type": "text", "text": ""}),
                chunks(text, 12)
                    .map(|t| json!({"type": "text_delta", "text": t}))
                    .collect::<Vec<_>>(),
            ),
            ContentBlock::Thinking {
                thinking,
                signature,
            } => {
                let mut deltas: Vec<Value> = chunks(thinking, 24)
                    .map(|t| json!({"type": "thinking_delta", "thinking": t}))
                    .collect();
                if let Some(signature) = signature {
                    deltas.push(json!({"type": "signature_delta", "signature": signature}));
                }
                (json!({"type": "thinking", "thinking": ""}), deltas)
            }
            ContentBlock::RedactedThinking { data } => {
                (json!({"type": "redacted_thinking", "data": data}), vec![])
            }
            ContentBlock::ToolUse { id, name, input } => {
                let json = input.to_string();
                (
                    json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                    chunks(&json, 10)
                        .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                        .collect(),
                )
            }
            // As the API streams a server tool's call: `input` empty at the start, then in pieces.
            ContentBlock::Opaque { block } => match block.get("input") {
                Some(input) => {
                    let mut start = block.clone();
                    start["input"] = json!({});
                    let json = input.to_string();
                    let deltas = chunks(&json, 10)
                        .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                        .collect();
                    (start, deltas)
                }
                None => (block.clone(), vec![]),
            },
            ContentBlock::ToolResult { .. }
            | ContentBlock::Image { .. }
            | ContentBlock::ToolReference { .. }
            | ContentBlock::Document { .. } => continue,
        };
        out.push(event(
            json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        for delta in deltas {
            out.push(event(
                json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
        }
        out.push(event(json!({"type": "content_block_stop", "index": index})));
        index += 1;
    }
    out.push(event(json!({
        "type": "message_delta",
        "delta": {"stop_reason": reply.stop_reason, "stop_sequence": null},
        "usage": {"output_tokens": reply.usage.output_tokens},
    })));
    out.push(event(json!({"type": "message_stop"})));
    out
}
