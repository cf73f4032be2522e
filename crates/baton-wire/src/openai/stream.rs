//! OpenAI Chat Completions streaming: [`Stream`] reads the chunks of a streamed reply, and
//! [`render_stream`] writes them.
//!
//! Each event's data is a `chat.completion.chunk` whose `choices[0].delta` carries a piece of
//! `content`, pieces of `tool_calls` (each with its `index`; the first piece of a call has its
//! `id`, `type` and `function.name`, later ones more `function.arguments`), or nothing; the
//! chunk that ends the reply has `finish_reason`. With `stream_options.include_usage` a last
//! chunk with no choices carries `usage`; then comes `data: [DONE]`.
//! `reasoning_content` (or `reasoning`) pieces, which DeepSeek, vLLM and llama.cpp stream, are
//! kept as a thinking block. A chunk holding an `error` object ends the stream with it.
//! Only the first choice is read.
//!
//! Arguments that are not valid JSON are kept as raw text, as [`super::parse_message`] keeps
//! them; a call that streamed no arguments at all has input `{}`.
//!
//! ```
//! use baton_wire::StreamDelta;
//! use baton_wire::openai::Stream;
//!
//! let mut stream = Stream::default();
//! let deltas = stream.feed(concat!(
//!     "data: {\"model\":\"gpt-x\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"ls\",\"arguments\":\"\"}}]}}]}\n\n",
//!     "data: {\"model\":\"gpt-x\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"path\\\":\\\".\\\"}\"}}]}}]}\n\n",
//!     "data: {\"model\":\"gpt-x\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
//!     "data: {\"model\":\"gpt-x\",\"choices\":[],\"usage\":{\"prompt_tokens\":20,\"completion_tokens\":7}}\n\n",
//!     "data: [DONE]\n\n",
//! ).as_bytes())?;
//! assert_eq!(deltas, [StreamDelta::ToolCall { id: "call_1".into(), name: "ls".into() }]);
//! let reply = stream.finish()?;
//! assert_eq!(reply.message.tool_use_ids().collect::<Vec<_>>(), ["call_1"]);
//! assert_eq!((reply.stop_reason.as_str(), reply.usage.output_tokens), ("tool_calls", 7));
//! # Ok::<(), baton_wire::Error>(())
//! ```

use std::collections::BTreeMap;

use baton_core::{ContentBlock, Message, Role};
use serde_json::{Value, json};

use super::parse_arguments;
use super::response::{api_error, created, read_usage, render_usage};
use crate::exchange::chunks;
use crate::sse::{self, Decoder, Event};
use crate::{Error, Reply, StreamDelta, Usage};

#[cfg(test)]
mod tests;

/// Reads the chunks of one streamed Chat Completions reply; see the module documentation.
#[derive(Debug, Default)]
pub struct Stream {
    sse: Decoder,
    chunks: usize,
    done: bool,
    model: String,
    text: String,
    reasoning: String,
    calls: BTreeMap<u64, Call>,
    finish_reason: Option<String>,
    usage: Usage,
}

#[derive(Debug, Default)]
struct Call {
    id: String,
    name: String,
    arguments: String,
    announced: bool,
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

    /// Reads one event (one chunk, or `[DONE]`).
    pub fn push(&mut self, event: &Event) -> Result<Vec<StreamDelta>, Error> {
        self.chunks += 1;
        let at = format!("stream chunk {}", self.chunks);
        let malformed = |detail: String| Error::Malformed {
            at: at.clone(),
            detail,
        };
        if self.done {
            return Err(malformed("data after [DONE]".to_owned()));
        }
        if event.data.trim() == "[DONE]" {
            self.done = true;
            return Ok(Vec::new());
        }
        let value: Value = serde_json::from_str(&event.data)
            .map_err(|err| malformed(format!("not JSON ({err})")))?;
        if let Some(error) = value.get("error").filter(|e| e.is_object()) {
            return Err(api_error(error));
        }
        if let Some(model) = value.get("model").and_then(Value::as_str) {
            self.model = model.to_owned();
        }
        if let Some(usage) = value.get("usage").filter(|u| u.is_object()) {
            read_usage(usage, &mut self.usage);
        }
        let choices = match value.get("choices") {
            None | Some(Value::Null) => &[][..],
            Some(Value::Array(choices)) => choices.as_slice(),
            Some(_) => return Err(malformed("\"choices\" is not a list".to_owned())),
        };
        let mut out = Vec::new();
        let first = choices
            .iter()
            .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0);
        let Some(choice) = first else {
            return Ok(out);
        };
        let delta = choice.get("delta");
        let field = |name: &str| delta.and_then(|d| d.get(name));
        if let Some(text) = field("content").and_then(Value::as_str)
            && !text.is_empty()
        {
            self.text.push_str(text);
            out.push(StreamDelta::Text(text.to_owned()));
        }
        for name in ["reasoning_content", "reasoning"] {
            if let Some(text) = field(name).and_then(Value::as_str) {
                self.reasoning.push_str(text);
            }
        }
        match field("tool_calls") {
            None | Some(Value::Null) => {}
            Some(Value::Array(pieces)) => {
                for (position, piece) in pieces.iter().enumerate() {
                    out.extend(self.tool_call_piece(piece, position, &malformed)?);
                }
            }
            Some(_) => return Err(malformed("delta.tool_calls is not a list".to_owned())),
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_owned());
        }
        Ok(out)
    }

    fn tool_call_piece(
        &mut self,
        piece: &Value,
        position: usize,
        malformed: &dyn Fn(String) -> Error,
    ) -> Result<Option<StreamDelta>, Error> {
        fn text(value: Option<&Value>) -> &str {
            value.and_then(Value::as_str).unwrap_or_default()
        }
        let id = text(piece.get("id"));
        let function = piece.get("function");
        let name = text(function.and_then(|f| f.get("name")));
        let arguments = text(function.and_then(|f| f.get("arguments")));
        // Servers that omit `index` send each call whole, in one piece.
        let index = match piece.get("index").and_then(Value::as_u64) {
            Some(index) => index,
            None if !id.is_empty() => match self.calls.iter().find(|(_, c)| c.id == id) {
                Some((index, _)) => *index,
                None => self
                    .calls
                    .keys()
                    .next_back()
                    .map_or(position as u64, |k| k + 1),
            },
            None => match self.calls.keys().next_back() {
                Some(index) => *index,
                None => {
                    return Err(malformed(
                        "a tool call piece with neither index nor id".to_owned(),
                    ));
                }
            },
        };
        let call = self.calls.entry(index).or_default();
        if call.id.is_empty() {
            call.id = id.to_owned();
        }
        call.name.push_str(name);
        call.arguments.push_str(arguments);
        if call.announced || call.id.is_empty() || call.name.is_empty() {
            return Ok(None);
        }
        call.announced = true;
        Ok(Some(StreamDelta::ToolCall {
            id: call.id.clone(),
            name: call.name.clone(),
        }))
    }

    /// Whether `[DONE]` has arrived.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The whole reply, once the body has ended: [`Error::Truncated`] when `[DONE]` never
    /// came.
    pub fn finish(mut self) -> Result<Reply, Error> {
        if let Some(event) = self.sse.finish() {
            self.push(&event)?;
        }
        if !self.done {
            return Err(Error::Truncated { missing: "[DONE]" });
        }
        let Some(stop_reason) = self.finish_reason else {
            return Err(Error::Malformed {
                at: "stream".to_owned(),
                detail: "[DONE] came without a finish_reason".to_owned(),
            });
        };
        let mut content = Vec::new();
        if !self.reasoning.is_empty() {
            content.push(ContentBlock::Thinking {
                thinking: self.reasoning,
                signature: None,
            });
        }
        if !self.text.is_empty() {
            content.push(ContentBlock::Text { text: self.text });
        }
        for (index, call) in self.calls {
            if call.id.is_empty() || call.name.is_empty() {
                return Err(Error::Malformed {
                    at: format!("stream tool call {index}"),
                    detail: "no id or no function name".to_owned(),
                });
            }
            let input = match call.arguments.trim().is_empty() {
                true => json!({}),
                false => parse_arguments(&call.arguments),
            };
            content.push(ContentBlock::ToolUse {
                id: call.id,
                name: call.name,
                input,
            });
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

/// Writes `reply` as the events of a streamed Chat Completions reply, one complete event per
/// item: a first chunk with the role, text in small pieces, each tool call's first piece and
/// its arguments in pieces, the chunk with `finish_reason`, the usage chunk, and last
/// `data: [DONE]`.
pub fn render_stream(reply: &Reply, id: &str) -> Vec<String> {
    let created = created();
    let chunk = |delta: Value, finish: Value| {
        let value = json!({
            "id": id, "object": "chat.completion.chunk", "created": created, "model": reply.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        });
        sse::render(None, &value.to_string())
    };
    let mut out = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    let mut calls = 0;
    for block in &reply.message.content {
        match block {
            ContentBlock::Text { text } => {
                for piece in chunks(text, 12) {
                    out.push(chunk(json!({"content": piece}), Value::Null));
                }
            }
            ContentBlock::ToolUse { id, name, input } => {
                out.push(chunk(
                    json!({"tool_calls": [{"index": calls, "id": id, "type": "function",
                                           "function": {"name": name, "arguments": ""}}]}),
                    Value::Null,
                ));
                let arguments = match input {
                    Value::String(raw) => raw.clone(),
                    other => other.to_string(),
                };
                for piece in chunks(&arguments, 10) {
                    out.push(chunk(
                        json!({"tool_calls": [{"index": calls, "function": {"arguments": piece}}]}),
                        Value::Null,
                    ));
                }
                calls += 1;
            }
            _ => {}
        }
    }
    out.push(chunk(json!({}), json!(reply.stop_reason)));
    let usage = json!({
        "id": id, "object": "chat.completion.chunk", "created": created, "model": reply.model,
        "choices": [], "usage": render_usage(&reply.usage),
    });
    out.push(sse::render(None, &usage.to_string()));
    out.push(sse::render(None, "[DONE]"));
    out
}
