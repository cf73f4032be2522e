//! The script a [`super::ScriptedServer`] answers from: its serde form is the JSON format the
//! module documentation describes.

use baton_core::{ContentBlock, Role};
use baton_wire::RequestBody;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The turns the server answers with, consumed in order of matching.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// The turns.
    pub turns: Vec<Turn>,
    /// Model Anthropic's prompt cache: a request reads from the cache the longest prefix an
    /// earlier request marked with `cache_control`, and writes its own marked prefixes (see
    /// the module documentation). Off: the usage reports what each reply's `usage` says.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prompt_cache: bool,
}

impl Script {
    /// Reads a script from its JSON form; the error names the offending field.
    pub fn from_json(text: &str) -> Result<Script, serde_json::Error> {
        serde_json::from_str(text)
    }
}

/// One answer the server may give, and the request it answers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// Which requests it answers; absent: any.
    #[serde(default, skip_serializing_if = "When::is_any")]
    pub when: When,
    /// What the request it answers must hold; checked after matching.
    #[serde(default, skip_serializing_if = "Expect::is_none")]
    pub expect: Expect,
    /// The answer.
    pub reply: Reply,
}

/// Conditions on the request a turn answers; every one given must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct When {
    /// Whether the request offers tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<bool>,
    /// A substring of the system text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_contains: Option<String>,
    /// A substring of the text of the messages after the last assistant message: the latest
    /// user input, or tool results (their text included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_user_contains: Option<String>,
}

impl When {
    fn is_any(&self) -> bool {
        *self == When::default()
    }

    /// Whether `request` meets every condition, or the first one it fails.
    pub(crate) fn check(&self, request: &RequestBody) -> Result<(), String> {
        if let Some(want) = self.tools {
            let offered = request.tools.len();
            if want != (offered > 0) {
                return Err(format!(
                    "when.tools is {want}, but the request offers {offered} tools"
                ));
            }
        }
        if let Some(needle) = &self.system_contains
            && !request
                .system
                .as_deref()
                .unwrap_or("")
                .contains(needle.as_str())
        {
            return Err(format!(
                "when.system_contains {needle:?} is not in the system text"
            ));
        }
        if let Some(needle) = &self.last_user_contains
            && !last_user_text(request).contains(needle.as_str())
        {
            return Err(format!(
                "when.last_user_contains {needle:?} is not in the messages after the last assistant message"
            ));
        }
        Ok(())
    }
}

/// The text of the messages after the last assistant message, tool results included.
fn last_user_text(request: &RequestBody) -> String {
    let start = request
        .messages
        .iter()
        .rposition(|m| m.role == Role::Assistant)
        .map_or(0, |i| i + 1);
    let mut out = Vec::new();
    for message in &request.messages[start..] {
        for block in &message.content {
            match block {
                ContentBlock::Text { text } => out.push(text.as_str()),
                ContentBlock::ToolResult { content, .. } => {
                    out.extend(content.iter().filter_map(|b| match b {
                        ContentBlock::Text { text } => Some(text.as_str()),
                        _ => None,
                    }));
                }
                _ => {}
            }
        }
    }
    out.join("\n")
}

/// What the request a turn answers must hold, checked on its raw body; a failure is answered
/// with HTTP 400 naming the expectation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// A substring the body must contain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contains: Option<String>,
    /// A substring the body must not contain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_contains: Option<String>,
}

impl Expect {
    fn is_none(&self) -> bool {
        *self == Expect::default()
    }

    /// Whether `body` meets the expectations, or the first one it fails.
    pub(crate) fn check(&self, body: &str) -> Result<(), String> {
        if let Some(needle) = &self.contains
            && !body.contains(needle.as_str())
        {
            return Err(format!(
                "expect.contains: the request does not contain {needle:?}"
            ));
        }
        if let Some(needle) = &self.not_contains
            && body.contains(needle.as_str())
        {
            return Err(format!(
                "expect.not_contains: the request contains {needle:?}"
            ));
        }
        Ok(())
    }
}

/// The answer of a turn. `error` wins over `raw`, which wins over the rest.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reply {
    /// The assistant's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The tools the assistant calls, after its text; the server makes their ids.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The stop reason: `end_turn`, `tool_use` or `max_tokens` (or OpenAI's `stop`,
    /// `tool_calls`, `length`), translated to the request's format; anything else is sent as
    /// it is. Default: `tool_use` when there are tool calls, else `end_turn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<String>,
    /// Answer with an error status instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorReply>,
    /// Answer with exactly this body, status 200, `content-type: application/json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    /// Answer with this assistant message, in the vendor shape of the request that consumes
    /// the turn (Anthropic `{"role": "assistant", "content": [...]}`, OpenAI's message with its
    /// `tool_calls`), its ids kept; instead of `text` and `tool_calls`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Value>,
    /// End the reply before its final event (`message_stop`, `[DONE]`); a non-streaming reply
    /// is cut in half.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncate: bool,
    /// Wait this long before answering.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub delay_ms: u64,
    /// Keep a streamed reply's body open this long after its final event, as real servers
    /// sometimes do before they close it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub close_delay_ms: u64,
    /// The prompt-cache and reasoning tokens the reply's usage reports (beside the input and
    /// output counts the server estimates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<ScriptUsage>,
}

/// Prompt-cache and reasoning tokens a scripted reply reports, each in the vendor's own field:
/// Anthropic's `cache_read_input_tokens`, `cache_creation_input_tokens` and
/// `cache_creation.ephemeral_5m_input_tokens`/`ephemeral_1h_input_tokens`; OpenAI's
/// `prompt_tokens_details.cached_tokens` (Responses: `input_tokens_details.cached_tokens`)
/// and `completion_tokens_details.reasoning_tokens` (`output_tokens_details`), counted into
/// the prompt and completion totals as OpenAI counts them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptUsage {
    /// Input tokens read from the prompt cache.
    #[serde(default)]
    pub cache_read: u64,
    /// Input tokens written to the prompt cache for 5 minutes.
    #[serde(default)]
    pub cache_write_5m: u64,
    /// Input tokens written to the prompt cache for an hour.
    #[serde(default)]
    pub cache_write_1h: u64,
    /// Output tokens spent reasoning (added to the output count).
    #[serde(default)]
    pub reasoning: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A tool call in a scripted reply.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// The tool.
    pub name: String,
    /// Its input (default `{}`).
    #[serde(default = "empty_object")]
    pub input: Value,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// An error answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorReply {
    /// The HTTP status.
    pub status: u16,
    /// The `retry-after` header, in seconds, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<u64>,
    /// The message in the vendor's error body (default `scripted error (HTTP <status>)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}
