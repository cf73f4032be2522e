//! What one model call carries, in vendor-neutral form: the request body ([`RequestBody`],
//! [`ToolDef`]), the reply ([`Reply`], [`Usage`]), what a stream yields on the way
//! ([`StreamDelta`]), a vendor's error ([`ApiError`]), and [`Stream`], the accumulator that
//! reads either vendor's server-sent events into a [`Reply`].
//!
//! Each vendor module renders and parses these in its own shape: `anthropic::render_request`,
//! `openai::parse_response`, `anthropic::render_stream` and so on.
//! [`crate::Format`] chooses between the two at run time, for code (an HTTP client, the scripted
//! server) that serves both.

use baton_core::Message;
use serde_json::Value;

use crate::{Error, Format, anthropic, openai, responses};

#[cfg(test)]
mod tests;

/// A tool offered to the model.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolDef {
    /// Its name.
    pub name: String,
    /// What it does, for the model (empty when the request gave none).
    pub description: String,
    /// Its input, as a JSON Schema object.
    pub input_schema: Value,
}

/// The body of one model call.
///
/// Rendering puts `system` first; a vendor that carries system text inside `messages` (OpenAI)
/// gets it as a leading system message, and system messages inside `messages` (core
/// [`baton_core::Role::System`]) are kept where the vendor keeps them (Anthropic: appended to the
/// top-level `system`).
/// Parsing keeps the vendor's messages one for one, so `messages[i]` is the request's
/// `messages.i`, and puts the system text (Anthropic's `system` field, OpenAI's system and
/// developer messages joined by blank lines) in `system` as well.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestBody {
    /// The model.
    pub model: String,
    /// System instructions, when any.
    pub system: Option<String>,
    /// The conversation.
    pub messages: Vec<Message>,
    /// The tools the model may call; an empty list renders as no `tools` field.
    pub tools: Vec<ToolDef>,
    /// The most tokens the reply may have (Anthropic requires it).
    pub max_tokens: Option<u32>,
    /// Sampling temperature, when set.
    pub temperature: Option<f32>,
    /// Whether the reply is to be streamed as server-sent events.
    pub stream: bool,
}

/// Tokens a call used, as the vendor reported them.
///
/// `input_tokens` counts input billed at the full rate: Anthropic's `input_tokens` as is, and
/// OpenAI's `prompt_tokens` (Responses: `input_tokens`) less
/// `prompt_tokens_details.cached_tokens` (Responses: `input_tokens_details.cached_tokens`),
/// which OpenAI includes in the prompt's count. Cache writes are Anthropic's
/// `cache_creation_input_tokens`, of which `cache_creation.ephemeral_1h_input_tokens` were
/// written with the 1-hour lifetime (the rest with the 5-minute one). Reasoning tokens
/// (`completion_tokens_details.reasoning_tokens`, `output_tokens_details.reasoning_tokens`) are
/// part of `output_tokens`, as the vendors count and bill them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Input tokens billed at the full rate.
    pub input_tokens: u64,
    /// Output tokens, reasoning included.
    pub output_tokens: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read_tokens: u64,
    /// Input tokens written to the prompt cache (Anthropic only), of both lifetimes.
    pub cache_write_tokens: u64,
    /// Of `cache_write_tokens`, those written with the 1-hour lifetime.
    pub cache_write_1h_tokens: u64,
    /// Of `output_tokens`, those the model spent reasoning.
    pub reasoning_tokens: u64,
}

impl Usage {
    /// The same counts split as baton prices them ([`baton_core::usage::Usage`]).
    pub fn priced(&self) -> baton_core::usage::Usage {
        let one_hour = self.cache_write_1h_tokens.min(self.cache_write_tokens);
        baton_core::usage::Usage {
            input: self.input_tokens,
            output: self.output_tokens,
            cache_write_5m: self.cache_write_tokens - one_hour,
            cache_write_1h: one_hour,
            cache_read: self.cache_read_tokens,
        }
    }
}

/// A whole reply: the assistant message, why it stopped, what it cost, who answered.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    /// The assistant message.
    pub message: Message,
    /// The stop reason in the vendor's words: `end_turn`, `tool_use`, `max_tokens` (Anthropic);
    /// `stop`, `tool_calls`, `length` (OpenAI).
    pub stop_reason: String,
    /// Tokens used.
    pub usage: Usage,
    /// The model that answered.
    pub model: String,
}

/// What a stream yields before the reply is complete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamDelta {
    /// More assistant text.
    Text(String),
    /// The model started a tool call.
    ToolCall {
        /// The call's id.
        id: String,
        /// The tool.
        name: String,
    },
}

/// An error as a vendor reports it in an error body or stream event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    /// The vendor's error type, such as `rate_limit_error` or `invalid_request_error`.
    pub kind: String,
    /// The vendor's message.
    pub message: String,
}

/// Which `max_tokens` field an OpenAI request carries.
///
/// OpenAI's reasoning models refuse `max_tokens` and want `max_completion_tokens`; some
/// OpenAI-compatible servers (older Ollama and llama.cpp builds) know only `max_tokens`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MaxTokensField {
    /// `max_tokens`, which every compatible server reads.
    #[default]
    MaxTokens,
    /// `max_completion_tokens`, which OpenAI's own API prefers.
    MaxCompletionTokens,
}

/// Reads a reply streamed as server-sent events, in either vendor's shape, bytes in.
///
/// Feed it the body as it arrives ([`Stream::feed`]), passing on the deltas it returns, then
/// call [`Stream::finish`] for the whole reply, or the reason there is none: the stream ended
/// before its final event ([`Error::Truncated`]), an event was not what the format says
/// ([`Error::Malformed`]), or the vendor reported an error mid-stream ([`Error::Api`]).
///
/// ```
/// use baton_wire::{Format, Stream, StreamDelta};
///
/// let mut stream = Stream::new(Format::OpenAi);
/// let deltas = stream.feed(concat!(
///     "data: {\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n",
///     "data: {\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
///     "data: [DONE]\n\n",
/// ).as_bytes())?;
/// assert_eq!(deltas, [StreamDelta::Text("Hi".into())]);
/// let reply = stream.finish()?;
/// assert_eq!(reply.stop_reason, "stop");
/// # Ok::<(), baton_wire::Error>(())
/// ```
#[derive(Debug)]
pub enum Stream {
    /// Anthropic Messages events.
    Anthropic(anthropic::Stream),
    /// OpenAI Chat Completions chunks.
    OpenAi(openai::Stream),
    /// OpenAI Responses API events.
    Responses(responses::Stream),
}

impl Stream {
    /// An empty accumulator for `format`.
    pub fn new(format: Format) -> Stream {
        match format {
            Format::Anthropic => Stream::Anthropic(anthropic::Stream::default()),
            Format::OpenAi => Stream::OpenAi(openai::Stream::default()),
        }
    }

    /// Reads the next bytes of the body; returns what they streamed.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<StreamDelta>, Error> {
        match self {
            Stream::Anthropic(stream) => stream.feed(bytes),
            Stream::OpenAi(stream) => stream.feed(bytes),
            Stream::Responses(stream) => stream.feed(bytes),
        }
    }

    /// Whether the final event has arrived.
    pub fn is_done(&self) -> bool {
        match self {
            Stream::Anthropic(stream) => stream.is_done(),
            Stream::OpenAi(stream) => stream.is_done(),
            Stream::Responses(stream) => stream.is_done(),
        }
    }

    /// The whole reply, once the body has ended.
    pub fn finish(self) -> Result<Reply, Error> {
        match self {
            Stream::Anthropic(stream) => stream.finish(),
            Stream::OpenAi(stream) => stream.finish(),
            Stream::Responses(stream) => stream.finish(),
        }
    }
}

impl Format {
    /// The format's name: `anthropic` or `openai`.
    pub fn name(self) -> &'static str {
        match self {
            Format::Anthropic => "anthropic",
            Format::OpenAi => "openai",
        }
    }

    /// Renders a request body; see [`anthropic::render_request`] and
    /// [`openai::render_request`].
    pub fn render_request(self, body: &RequestBody, max_tokens: MaxTokensField) -> Value {
        match self {
            Format::Anthropic => anthropic::render_request(body),
            Format::OpenAi => openai::render_request(body, max_tokens),
        }
    }

    /// Parses a request body, keeping its messages one for one.
    pub fn parse_request(self, value: &Value) -> Result<RequestBody, Error> {
        match self {
            Format::Anthropic => anthropic::parse_request(value),
            Format::OpenAi => openai::parse_request(value),
        }
    }

    /// Parses one message of a request's `messages` list.
    pub fn parse_message(self, value: &Value) -> Result<Message, Error> {
        match self {
            Format::Anthropic => anthropic::parse_message(value),
            Format::OpenAi => openai::parse_message(value),
        }
    }

    /// Checks a request's messages the way the vendor's API does (see
    /// [`anthropic::check_messages`] and [`openai::check_messages`]).
    pub fn check_messages(self, messages: &[Message]) -> Result<(), Error> {
        match self {
            Format::Anthropic => anthropic::check_messages(messages),
            Format::OpenAi => openai::check_messages(messages),
        }
    }

    /// Parses a non-streaming response body.
    pub fn parse_response(self, body: &[u8]) -> Result<Reply, Error> {
        match self {
            Format::Anthropic => anthropic::parse_response(body),
            Format::OpenAi => openai::parse_response(body),
        }
    }

    /// Renders a non-streaming response body; `id` is the response's id.
    pub fn render_response(self, reply: &Reply, id: &str) -> Value {
        match self {
            Format::Anthropic => anthropic::render_response(reply, id),
            Format::OpenAi => openai::render_response(reply, id),
        }
    }

    /// Renders a reply as the server-sent events that stream it, one complete event per item;
    /// the last item is the final event (`message_stop`, `[DONE]`).
    pub fn render_stream(self, reply: &Reply, id: &str) -> Vec<String> {
        match self {
            Format::Anthropic => anthropic::render_stream(reply, id),
            Format::OpenAi => openai::render_stream(reply, id),
        }
    }

    /// Reads the vendor's error from an error body, when it has the vendor's shape.
    pub fn parse_error(self, body: &[u8]) -> Option<ApiError> {
        match self {
            Format::Anthropic => anthropic::parse_error(body),
            Format::OpenAi => openai::parse_error(body),
        }
    }

    /// Renders an error body in the vendor's shape for an HTTP `status`; `param` is the request
    /// field at fault, when there is one (OpenAI carries it; Anthropic puts it in the message).
    pub fn render_error(self, status: u16, message: &str, param: Option<&str>) -> Value {
        match self {
            Format::Anthropic => anthropic::render_error(status, message),
            Format::OpenAi => openai::render_error(status, message, param),
        }
    }
}

/// Splits `text` into pieces of about `size` bytes, at character boundaries, as a stream sends
/// it.
pub(crate) fn chunks(text: &str, size: usize) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut end = size.max(1).min(rest.len());
        while !rest.is_char_boundary(end) {
            end += 1;
        }
        let (head, tail) = rest.split_at(end);
        rest = tail;
        Some(head)
    })
}

/// A temperature as JSON, by its shortest decimal form: `0.7f32` is `0.7`, not the
/// `0.699999988079071` a widening to `f64` would give.
pub(crate) fn f32_json(value: f32) -> Value {
    let wide: f64 = value.to_string().parse().unwrap_or(f64::from(value));
    serde_json::json!(wide)
}
