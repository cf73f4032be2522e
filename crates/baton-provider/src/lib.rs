//! Model providers: one trait, three implementations, all over real HTTP.
//!
//! Roles:
//! - [`Provider`]: sends one model call ([`Request`]: system text, baton messages, tools) and
//!   returns the assistant's [`Response`] (a baton [`Message`], the stop reason, token usage),
//!   streaming text deltas to a callback as they arrive. Dropping the future cancels the call.
//! - [`anthropic`]: the Anthropic Messages API (`/v1/messages`, SSE streaming, `x-api-key`).
//! - [`openai`]: OpenAI Chat Completions (`/v1/chat/completions`, SSE streaming, bearer key),
//!   with a base URL so any OpenAI-compatible server works (llama.cpp, vLLM, Ollama).
//! - [`scripted`]: a real HTTP server on loopback that speaks both wire formats, answers from a
//!   script, and rejects malformed requests the way the real APIs do (HTTP 400 for a
//!   conversation starting with an assistant message, a `tool_result` without its `tool_use`,
//!   a `tool_use` without its result): tests and `baton demo` run the real clients against it.
//! - [`Secret`]: an API key that never prints.
//!
//! Vendor JSON is `baton-wire`'s: this crate only moves it over HTTP.
//! Both clients retry 429, 5xx and failed connections (up to `max_retries`, default 3) with
//! exponential backoff from 0.5 s or after the `retry-after` the server asked for (at most
//! 60 s), and never retry another 4xx.
//!
//! ```
//! use baton_core::{Message, Role};
//! use baton_provider::scripted::{Script, ScriptedServer};
//! use baton_provider::{Delta, Provider, Request, Secret, StopReason, anthropic};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
//! let script = Script::from_json(r#"{"turns": [{"reply": {"text": "Hello."}}]}"#)?;
//! let server = ScriptedServer::start(script)?;
//! let mut config = anthropic::Config::new("claude-sonnet-4-5");
//! config.api_key = Some(Secret::new("test-key"));
//! config.base_url = server.anthropic_url();
//! let client = anthropic::Client::new(config)?;
//!
//! let request = Request {
//!     model: String::new(),
//!     system: None,
//!     messages: vec![Message::text(Role::User, "Hi.")],
//!     tools: vec![],
//!     max_tokens: 0,
//!     temperature: None,
//! };
//! let mut streamed = String::new();
//! let response = client
//!     .send(&request, &mut |delta| {
//!         if let Delta::Text(text) = delta {
//!             streamed.push_str(&text);
//!         }
//!     })
//!     .await?;
//! assert_eq!(streamed, "Hello.");
//! assert_eq!(response.stop_reason, StopReason::EndTurn);
//! assert_eq!(server.requests().len(), 1);
//! # Ok(()) })
//! # }
//! ```

use async_trait::async_trait;
use baton_core::Message;
use serde::{Deserialize, Serialize};

pub mod anthropic;
mod http;
pub mod openai;
pub mod scripted;

/// A tool the model may call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Its name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// Its input, as a JSON Schema object.
    pub input_schema: serde_json::Value,
}

/// One model call.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// The model.
    pub model: String,
    /// System instructions (rules, working state, summary), when any.
    pub system: Option<String>,
    /// The conversation: user, assistant and tool messages in baton's model. Never starts with
    /// an assistant message; every tool call is answered before the next assistant turn.
    pub messages: Vec<Message>,
    /// The tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// The most tokens the reply may have.
    pub max_tokens: u32,
    /// Sampling temperature, when set.
    pub temperature: Option<f32>,
}

/// Why the model stopped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The turn is complete.
    EndTurn,
    /// The model called tools and waits for their results.
    ToolUse,
    /// The reply hit `max_tokens`.
    MaxTokens,
    /// Anything else the provider said, as it said it.
    Other(String),
}

/// Tokens a call used, as the provider reported them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens billed at the full rate.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read_tokens: u64,
    /// Input tokens written to the prompt cache.
    pub cache_write_tokens: u64,
}

/// What a call returned. Its serde form is what the response cache stores.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// The assistant message: text, thinking and tool_use blocks.
    pub message: Message,
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// Tokens used.
    pub usage: Usage,
    /// The model that answered, as the provider named it.
    pub model: String,
}

/// What a call streams while it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delta {
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

/// Why a call failed. No variant ever holds an API key.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No API key was given.
    #[error("{provider}: no API key: set {env_var}")]
    MissingKey {
        /// The provider.
        provider: &'static str,
        /// The environment variable that holds it.
        env_var: &'static str,
    },
    /// The provider refused the key (HTTP 401/403).
    #[error("{provider}: the API key was refused (HTTP {status}); check {env_var}")]
    Unauthorized {
        /// The provider.
        provider: &'static str,
        /// The HTTP status.
        status: u16,
        /// The environment variable that holds the key.
        env_var: &'static str,
    },
    /// The provider answered with an error status (after retries, for 429 and 5xx).
    #[error("{provider}: HTTP {status}: {message}")]
    Status {
        /// The provider.
        provider: &'static str,
        /// The HTTP status.
        status: u16,
        /// The provider's error message.
        message: String,
    },
    /// The answer is not what the wire format says it is.
    #[error("{provider}: malformed response: {detail}")]
    Malformed {
        /// The provider.
        provider: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// The stream ended before the reply was complete.
    #[error("{provider}: the stream ended before the reply was complete")]
    Truncated {
        /// The provider.
        provider: &'static str,
    },
    /// No answer within the timeout.
    #[error("{provider}: no answer within {seconds} s")]
    Timeout {
        /// The provider.
        provider: &'static str,
        /// The timeout.
        seconds: u64,
    },
    /// The connection failed.
    #[error("{provider}: {detail}")]
    Transport {
        /// The provider.
        provider: &'static str,
        /// What failed (never the key).
        detail: String,
    },
}

/// A model provider.
///
/// Contract: `send` makes one model call (retrying 429 and 5xx answers with backoff, honouring
/// `retry-after`), calls `on_delta` with text as it streams, and returns the whole assistant
/// message. It never compacts, never appends to a store and never calls itself: the agent
/// loop does those around it. Dropping the returned future cancels the call.
#[async_trait]
pub trait Provider: Send + Sync {
    /// The provider's name (`anthropic`, `openai`, `scripted`).
    fn name(&self) -> &str;

    /// The model it calls.
    fn model(&self) -> &str;

    /// What a call is, for the call log and the cache key (`anthropic.messages`,
    /// `openai.chat_completions`).
    fn operation(&self) -> &str;

    /// Where calls go (the base URL), so two servers serving one model name never share a
    /// cached answer; empty when it says nothing about the answer.
    fn endpoint(&self) -> &str {
        ""
    }

    /// The body [`send`](Provider::send) posts for `request`, as JSON: every field the
    /// provider receives, which is what a request key is derived from.
    fn request_body(&self, request: &Request) -> serde_json::Value;

    /// Sends `request`.
    async fn send(
        &self,
        request: &Request,
        on_delta: &mut (dyn FnMut(Delta) + Send),
    ) -> Result<Response, Error>;
}

/// An API key (or any secret) whose `Debug` and `Display` print `***`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

/// The wire body of `request`: its model, or `model` when it names none; its `max_tokens`, or
/// `max_tokens` when it says 0; always streamed.
fn wire_body(request: &Request, model: &str, max_tokens: u32) -> baton_wire::RequestBody {
    baton_wire::RequestBody {
        model: match request.model.is_empty() {
            true => model.to_owned(),
            false => request.model.clone(),
        },
        system: request.system.clone(),
        messages: request.messages.clone(),
        tools: request
            .tools
            .iter()
            .map(|tool| baton_wire::ToolDef {
                name: tool.name.clone(),
                description: tool.description.clone(),
                input_schema: tool.input_schema.clone(),
            })
            .collect(),
        max_tokens: Some(match request.max_tokens {
            0 => max_tokens,
            n => n,
        }),
        temperature: request.temperature,
        stream: true,
    }
}

/// A [`Response`] of a wire reply; `model` names the model when the reply does not.
fn response(reply: baton_wire::Reply, stop_reason: StopReason, model: &str) -> Response {
    Response {
        message: reply.message,
        stop_reason,
        usage: Usage {
            input_tokens: reply.usage.input_tokens,
            output_tokens: reply.usage.output_tokens,
            cache_read_tokens: reply.usage.cache_read_tokens,
            cache_write_tokens: reply.usage.cache_write_tokens,
        },
        model: match reply.model.is_empty() {
            true => model.to_owned(),
            false => reply.model,
        },
    }
}

#[cfg(test)]
mod tests;
