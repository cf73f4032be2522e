//! Codex CLI rollout JSONL (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`): lines of
//! `{"timestamp", "type", "payload"}`, with `type` one of `session_meta`, `turn_context`,
//! `response_item`, `event_msg` and `compacted`.
//!
//! What is read:
//! - `response_item` payloads, in order:
//!   - `message`: role `user` → user, `developer` and `system` → system, `assistant` → the
//!     current assistant message; parts `input_text`/`output_text` become text, `input_image`
//!     an image (a `data:` URL becomes inline base64, anything else a URL).
//!   - `reasoning`: each `summary` (and `content`) text becomes a thinking block, and
//!     `encrypted_content` a redacted-thinking block kept byte for byte.
//!   - `function_call` (input = the parsed `arguments`, or the raw string when they are not
//!     JSON), `custom_tool_call` (input = the raw `input` string) and `local_shell_call`
//!     (name `local_shell`, input = its `action`): tool-use blocks.
//!   - `function_call_output`, `custom_tool_call_output`, `local_shell_call_output`: one
//!     [`Role::Tool`] message each, holding a tool result for its `call_id`.
//!
//!   Assistant-side items in a row (reasoning, assistant text, calls) form one assistant
//!   message; any other message or tool output ends it, and so does the end of the model
//!   response that wrote them: a `token_count` event, a `turn_context` line, a `compacted` line,
//!   a `task_complete` or `turn_aborted` event, or an assistant message of `phase`
//!   `final_answer`. Other payload types (`ghost_snapshot`, `web_search_call`…) are passed over
//!   and counted.
//! - `compacted` lines become [`CompactionEvent`]s (summary = `payload.message`).
//! - `session_meta.payload.id` is the session id; `turn_context.payload.model` names the model
//!   of the assistant messages that follow.
//! - `event_msg` lines repeat what the response items say and are passed over and counted, with
//!   one exception: a `user_message` event whose text appears in no user `message` item written
//!   since the previous such event becomes a user message (Codex Desktop records user input only
//!   as events; Codex CLI writes the item first, then the event).
//! - **Usage.** A `token_count` event with `info` reports the response that just ended:
//!   `info.last_token_usage` (else the growth of `info.total_token_usage`), with
//!   `input_tokens` counting `cached_input_tokens` (baton's `input` is the rest, `cache_read` the
//!   cached part) and `output_tokens` counting reasoning. An event repeating the previous
//!   totals (written again when only rate limits changed) is no record. Its
//!   [`baton_core::usage::UsageRecord::id`] is `codex:<session id>:<cumulative total tokens>`,
//!   its model the turn's, its message the last assistant message.
//! - **Metadata.** `project` is `session_meta.payload.cwd` (else the first `turn_context`'s,
//!   else the `<cwd>` of the `<environment_context>` block),
//!   `agent_version` its `cli_version`, `title` the first user message that is not the
//!   environment or instruction block Codex sends first (`<environment_context>`,
//!   `# AGENTS.md …`; Codex Desktop's `# Files mentioned by the user:` preamble is cut at
//!   `## My request for Codex:`).
//!
//! **The last complete unit** ([`crate::Transcript::settled`]): a line is read once its JSON
//! object is whole; every message is settled except an assistant message still taking items
//! (no end of its response written yet), which is held back until something ends it. Tool
//! outputs come after the call they answer, so a call without its output is settled.
//!
//! Counted in [`Skipped::non_message_lines`]: every line that adds nothing to a message
//! (metadata, turn context, events, compactions, unknown payloads).
//! A line that is not a JSON object is an error naming the line, except a last line with no
//! terminating newline (a line still being written), which is dropped and counted.
//! A file without messages yields no transcript.
//!
//! The output of `codex exec --json` (events, not a rollout) is read by its own module,
//! `exec`.
//!
//! # Rollouts written before the envelope
//!
//! Codex CLI of mid 2025 wrote the same items without the `{timestamp, type, payload}`
//! envelope, and such files stay in `~/.codex/sessions` for as long as the user keeps them:
//! line 1 is a bare header (`{"id", "timestamp", "instructions", "git"…}`), then
//! `{"record_type": "state"}` markers and response items at the top level
//! (`{"type": "message", "role": "user", …}`), with no timestamp of their own and no events.
//! They are read as the envelope's lines would be: the header as `session_meta` (its `cwd`,
//! `cli_version` and `model` when it has them; the project, when the header has no `cwd`, from
//! the `<cwd>` of the environment block Codex sends first), a line with a `type` and no
//! `payload` as a
//! `response_item`, a `record_type` marker as passed over. With no per-item timestamps, the
//! first message takes the header's (the session's start, the only time such a file records),
//! and the rest have none; with no `token_count` events there is no usage, and an assistant
//! message ends only at the next user message or tool output, so in a file still being written
//! the last one is held back.

use baton_core::usage::{Usage, UsageRecord};
use baton_core::{ContentBlock, MediaSource, Message, Role, Timestamp};
use serde_json::{Map, Value};

use crate::{CompactionEvent, Error, Format, ImportedMessage, ImportedUsage, Transcript, title_of};

mod exec;

/// Line types a rollout has; used by [`sniff`].
const KNOWN_TYPES: [&str; 5] = [
    "session_meta",
    "turn_context",
    "response_item",
    "event_msg",
    "compacted",
];

/// How many leading non-empty lines [`sniff`] looks at.
const SNIFF_LINES: usize = 5;

/// Keys only the bare header of a rollout written before the envelope has, beside its `id` and
/// `timestamp`.
const LEGACY_HEADER_KEYS: [&str; 3] = ["instructions", "originator", "cli_version"];

/// Whether `bytes` look like a Codex rollout: one of the first non-empty lines is a JSON object
/// with a known `type` and an object `payload`, or the file starts as a rollout written before
/// the envelope does (a bare header, then `record_type` markers), or one of those lines is an
/// event of `codex exec --json`.
pub fn sniff(bytes: &[u8]) -> bool {
    let objects: Vec<Map<String, Value>> = bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.trim_ascii().is_empty())
        .take(SNIFF_LINES)
        .filter_map(|l| serde_json::from_slice::<Map<String, Value>>(l).ok())
        .collect();
    let enveloped = objects.iter().any(|obj| {
        obj.get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| KNOWN_TYPES.contains(&t))
            && obj.get("payload").is_some_and(Value::is_object)
    });
    let legacy = objects.first().is_some_and(|first| {
        is_legacy_header(first)
            && (LEGACY_HEADER_KEYS.iter().any(|k| first.contains_key(*k))
                || objects[1..].iter().any(|o| o.contains_key("record_type")))
    });
    let exec = objects.iter().any(exec::is_event);
    enveloped || legacy || exec
}

/// Whether `obj` has the shape of the header line of a rollout written before the envelope: a
/// string `id` and `timestamp`, and none of `type`, `payload`, `role` and `messages` (a message,
/// or a conversation object of a JSONL message file).
fn is_legacy_header(obj: &Map<String, Value>) -> bool {
    obj.get("id").is_some_and(Value::is_string)
        && obj.get("timestamp").is_some_and(Value::is_string)
        && !["type", "payload", "role", "messages"]
            .iter()
            .any(|k| obj.contains_key(*k))
}

/// One line with a JSON object.
struct Line {
    no: usize,
    kind: String,
    timestamp: Option<String>,
    payload: Map<String, Value>,
}

/// Reads one rollout file, or the output of `codex exec --json` (see [`exec`]).
pub fn parse(bytes: &[u8]) -> Result<Vec<Transcript>, Error> {
    if exec::is_exec_json(bytes) {
        return exec::parse(bytes);
    }
    let (lines, truncated) = read_lines(bytes)?;
    let mut b = Builder {
        t: Transcript::new(Format::Codex),
        open_assistant: false,
        model: None,
        user_texts: Vec::new(),
        last_total: None,
        start: None,
    };
    b.t.skipped.non_message_lines = usize::from(truncated);
    for line in &lines {
        let used = match line.kind.as_str() {
            "session_meta" => {
                let p = &line.payload;
                if b.t.source_session_id.is_none() {
                    b.t.source_session_id = str_of(p, "id").map(str::to_owned);
                }
                if b.t.project.is_none() {
                    b.t.project = str_of(p, "cwd").map(str::to_owned);
                }
                if b.t.agent_version.is_none() {
                    b.t.agent_version = str_of(p, "cli_version").map(str::to_owned);
                }
                if let Some(model) = str_of(p, "model") {
                    b.t.saw_model(model);
                    b.model = Some(model.to_owned());
                }
                if b.start.is_none() {
                    b.start.clone_from(&line.timestamp);
                }
                false
            }
            "turn_context" => {
                if let Some(model) = str_of(&line.payload, "model") {
                    b.t.saw_model(model);
                    b.model = Some(model.to_owned());
                }
                if b.t.project.is_none() {
                    b.t.project = str_of(&line.payload, "cwd").map(str::to_owned);
                }
                b.open_assistant = false;
                false
            }
            "compacted" => {
                b.t.compactions.push(CompactionEvent {
                    after_messages: b.t.messages.len(),
                    summary: str_of(&line.payload, "message")
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned),
                    timestamp: line.timestamp.clone(),
                });
                b.open_assistant = false;
                false
            }
            "event_msg" => b.event(line),
            "response_item" => b.item(line)?,
            _ => false,
        };
        if !used {
            b.t.skipped.non_message_lines += 1;
        }
    }
    if b.t.messages.is_empty() {
        return Ok(Vec::new());
    }
    let n = b.t.messages.len();
    b.t.settled = if b.open_assistant { n - 1 } else { n };
    if b.t.project.is_none() {
        // A rollout written before the envelope names its directory only in the environment
        // block Codex sends first.
        b.t.project = b.t.messages.iter().find_map(|m| {
            let text = m.message.plain_text();
            let (_, rest) = text
                .split_once("<environment_context>")?
                .1
                .split_once("<cwd>")?;
            let (cwd, _) = rest.split_once("</cwd>")?;
            Some(cwd.trim().to_owned()).filter(|cwd| !cwd.is_empty())
        });
    }
    b.t.title =
        b.t.messages
            .iter()
            .filter(|m| m.message.role == Role::User)
            .map(|m| m.message.plain_text())
            .filter(|text| !is_wrapper(text))
            .find_map(|text| {
                // Codex Desktop writes mentioned files ahead of the request, under a heading.
                let request = text
                    .split_once("## My request for Codex:")
                    .map_or(text.as_str(), |(_, request)| request);
                title_of(request)
            });
    Ok(vec![b.t])
}

/// User-role text Codex writes that the user did not type: the environment and instruction
/// blocks it sends ahead of the first turn.
fn is_wrapper(text: &str) -> bool {
    let t = text.trim_start();
    t.starts_with('<')
        || t.starts_with("# AGENTS.md")
        || t.starts_with("# Files mentioned") && !t.contains("## My request for Codex:")
}

fn read_lines(bytes: &[u8]) -> Result<(Vec<Line>, bool), Error> {
    let mut out = Vec::new();
    let mut truncated = false;
    for (no, raw_line, unterminated) in super::jsonl_lines(bytes) {
        if raw_line.trim_ascii().is_empty() {
            continue;
        }
        let mut obj = match serde_json::from_slice::<Value>(raw_line) {
            Ok(Value::Object(obj)) => obj,
            Ok(_) => return Err(Error::at(no, "expected a JSON object")),
            Err(_) if unterminated => {
                truncated = true;
                continue;
            }
            Err(e) => return Err(Error::at(no, format!("invalid JSON: {e}"))),
        };
        let timestamp = str_of(&obj, "timestamp").map(str::to_owned);
        let kind = str_of(&obj, "type").map(str::to_owned);
        let (kind, payload) = match (obj.remove("payload"), kind) {
            (Some(Value::Object(p)), kind) => (kind.unwrap_or_default(), p),
            (None | Some(Value::Null), Some(kind)) if KNOWN_TYPES.contains(&kind.as_str()) => {
                (kind, Map::new())
            }
            (Some(Value::Null), _) => (String::new(), Map::new()),
            (Some(_), _) => return Err(Error::at(no, "\"payload\" is not an object")),
            // Written before the envelope: a bare item, a state marker, or the header.
            (None, Some(_)) => ("response_item".to_owned(), obj),
            (None, None) if obj.contains_key("record_type") => (String::new(), Map::new()),
            (None, None) if is_legacy_header(&obj) => ("session_meta".to_owned(), obj),
            (None, None) => (String::new(), Map::new()),
        };
        out.push(Line {
            no,
            kind,
            timestamp,
            payload,
        });
    }
    Ok((out, truncated))
}

struct Builder {
    t: Transcript,
    /// Whether the last message is an assistant message still taking items.
    open_assistant: bool,
    /// The model of the current turn.
    model: Option<String>,
    /// The text of the user message items since the last `user_message` event.
    user_texts: Vec<String>,
    /// The session's cumulative token usage at the last `token_count` event.
    last_total: Option<Value>,
    /// The `session_meta` line's timestamp: the first message's, when its line has none.
    start: Option<String>,
}

impl Builder {
    fn push(&mut self, line: &Line, message: Message) {
        let model = (message.role == Role::Assistant)
            .then(|| self.model.clone())
            .flatten();
        self.open_assistant = message.role == Role::Assistant;
        let timestamp = match &line.timestamp {
            None if self.t.messages.is_empty() => self.start.clone(),
            stamped => stamped.clone(),
        };
        self.t.messages.push(ImportedMessage {
            message,
            timestamp,
            model,
            line: Some(line.no),
        });
    }

    /// Appends blocks to the open assistant message, or starts one.
    fn assistant(&mut self, line: &Line, blocks: Vec<ContentBlock>) {
        if self.open_assistant
            && let Some(last) = self.t.messages.last_mut()
        {
            last.message.content.extend(blocks);
            return;
        }
        self.push(
            line,
            Message {
                role: Role::Assistant,
                content: blocks,
            },
        );
    }

    /// Reads one event: a `user_message` that no user message item before it repeats becomes a
    /// user message; a `token_count` is a response's usage and ends it, as `task_complete` and
    /// `turn_aborted` end the turn. False when the event adds no message.
    fn event(&mut self, line: &Line) -> bool {
        let p = &line.payload;
        match str_of(p, "type") {
            Some("user_message") => {
                let recent = std::mem::take(&mut self.user_texts);
                let text = str_of(p, "message").unwrap_or("").trim();
                if text.is_empty() || recent.iter().any(|t| t.contains(text)) {
                    return false;
                }
                self.push(line, Message::text(Role::User, text));
                true
            }
            Some("token_count") => {
                self.token_count(line);
                false
            }
            Some("task_complete" | "turn_aborted") => {
                self.open_assistant = false;
                false
            }
            _ => false,
        }
    }

    /// A `token_count` event with usage: a record of the response that just ended, unless it
    /// repeats the previous event's totals (Codex writes one again when only rate limits
    /// changed).
    fn token_count(&mut self, line: &Line) {
        let Some(info) = line.payload.get("info").filter(|i| i.is_object()) else {
            return;
        };
        let total = info.get("total_token_usage").filter(|t| t.is_object());
        if total.is_some() && total == self.last_total.as_ref() {
            return;
        }
        let counts = match (
            info.get("last_token_usage").filter(|l| l.is_object()),
            total,
        ) {
            (Some(last), _) => openai_usage(last),
            (None, Some(total)) => {
                let mut usage = openai_usage(total);
                if let Some(previous) = &self.last_total {
                    let before = openai_usage(previous);
                    usage.input = usage.input.saturating_sub(before.input);
                    usage.output = usage.output.saturating_sub(before.output);
                    usage.cache_read = usage.cache_read.saturating_sub(before.cache_read);
                }
                usage
            }
            (None, None) => return,
        };
        self.last_total = total.cloned();
        self.open_assistant = false;
        let session = self.t.source_session_id.clone().unwrap_or_default();
        let at = total
            .and_then(|t| t.get("total_tokens"))
            .and_then(Value::as_u64)
            .map_or_else(|| format!("line{}", line.no), |n| n.to_string());
        let message = self
            .t
            .messages
            .iter()
            .rposition(|m| m.message.role == Role::Assistant);
        self.t.usage.push(ImportedUsage {
            record: UsageRecord {
                id: format!("codex:{session}:{at}"),
                model: self.model.clone(),
                response_id: None,
                request_id: None,
                at: line.timestamp.as_deref().and_then(Timestamp::parse),
                usage: counts,
                estimated: false,
            },
            message,
        });
    }

    /// Reads one response item; false when it is not part of a message.
    fn item(&mut self, line: &Line) -> Result<bool, Error> {
        let p = &line.payload;
        let at = |reason: String| Error::at(line.no, reason);
        match str_of(p, "type").unwrap_or("") {
            "message" => {
                let role = match str_of(p, "role") {
                    Some("user") => Role::User,
                    Some("assistant") => Role::Assistant,
                    Some("developer" | "system") => Role::System,
                    other => return Err(at(format!("message: unknown role {other:?}"))),
                };
                let content = parts(p).map_err(at)?;
                if role == Role::Assistant {
                    self.assistant(line, content);
                    if str_of(p, "phase") == Some("final_answer") {
                        self.open_assistant = false;
                    }
                } else {
                    if role == Role::User {
                        self.user_texts.push(part_texts(p));
                    }
                    self.push(line, Message { role, content });
                }
            }
            "reasoning" => {
                let mut blocks = Vec::new();
                for key in ["summary", "content"] {
                    for part in p.get(key).and_then(Value::as_array).into_iter().flatten() {
                        if let Some(text) = part.get("text").and_then(Value::as_str) {
                            blocks.push(ContentBlock::Thinking {
                                thinking: text.to_owned(),
                                signature: None,
                            });
                        }
                    }
                }
                if let Some(data) = str_of(p, "encrypted_content") {
                    blocks.push(ContentBlock::RedactedThinking {
                        data: data.to_owned(),
                    });
                }
                if blocks.is_empty() {
                    return Ok(false);
                }
                self.assistant(line, blocks);
            }
            kind @ ("function_call" | "custom_tool_call" | "local_shell_call") => {
                let id = call_id(p).ok_or_else(|| at(format!("{kind} without \"call_id\"")))?;
                let (name, input) = match kind {
                    "function_call" => {
                        let args = str_of(p, "arguments").unwrap_or("");
                        let input = if args.trim().is_empty() {
                            Value::Object(Map::new())
                        } else {
                            serde_json::from_str(args)
                                .unwrap_or_else(|_| Value::String(args.to_owned()))
                        };
                        (str_of(p, "name").unwrap_or(""), input)
                    }
                    "custom_tool_call" => (
                        str_of(p, "name").unwrap_or(""),
                        Value::String(str_of(p, "input").unwrap_or("").to_owned()),
                    ),
                    _ => (
                        "local_shell",
                        p.get("action").cloned().unwrap_or(Value::Null),
                    ),
                };
                if name.is_empty() {
                    return Err(at(format!("{kind} without \"name\"")));
                }
                let block = ContentBlock::ToolUse {
                    id: id.to_owned(),
                    name: name.to_owned(),
                    input,
                };
                self.assistant(line, vec![block]);
            }
            kind @ ("function_call_output"
            | "custom_tool_call_output"
            | "local_shell_call_output") => {
                let id = call_id(p).ok_or_else(|| at(format!("{kind} without \"call_id\"")))?;
                let (content, is_error) = output(p.get("output")).map_err(at)?;
                let block = ContentBlock::ToolResult {
                    tool_use_id: id.to_owned(),
                    content,
                    is_error,
                };
                self.push(
                    line,
                    Message {
                        role: Role::Tool,
                        content: vec![block],
                    },
                );
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

fn str_of<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    obj.get(key).and_then(Value::as_str)
}

fn call_id(p: &Map<String, Value>) -> Option<&str> {
    str_of(p, "call_id")
        .or_else(|| str_of(p, "id"))
        .filter(|s| !s.is_empty())
}

/// OpenAI-style counts (`input_tokens` including `cached_input_tokens`, `output_tokens`
/// including reasoning) as baton's [`Usage`].
fn openai_usage(v: &Value) -> Usage {
    let n = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
    let cached = n("cached_input_tokens");
    Usage {
        input: n("input_tokens").saturating_sub(cached),
        output: n("output_tokens"),
        cache_write_5m: 0,
        cache_write_1h: 0,
        cache_read: cached,
    }
}

/// The text of a message item's parts, joined, for matching `user_message` events.
fn part_texts(p: &Map<String, Value>) -> String {
    let mut out = String::new();
    for part in p
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(text) = part.get("text").and_then(Value::as_str) {
            out.push_str(text);
            out.push('\n');
        }
    }
    out
}

/// A message item's content parts as blocks.
fn parts(p: &Map<String, Value>) -> Result<Vec<ContentBlock>, String> {
    match p.get("content") {
        Some(Value::String(s)) => Ok(text_block(s).into_iter().collect()),
        Some(Value::Array(items)) => content_items(items, "content"),
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(_) => Err("message: \"content\" is neither a string nor a list".to_owned()),
    }
}

fn content_items(items: &[Value], at: &str) -> Result<Vec<ContentBlock>, String> {
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "input_text" | "output_text" | "text" | "refusal" => {
                let text = item
                    .get("text")
                    .or_else(|| item.get("refusal"))
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("{at}[{i}]: {kind} part without text"))?;
                out.extend(text_block(text));
            }
            "input_image" => {
                let url = item
                    .get("image_url")
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("{at}[{i}]: input_image without \"image_url\""))?;
                out.push(ContentBlock::Image {
                    source: media_source(url),
                });
            }
            other => return Err(format!("{at}[{i}]: unknown content part type {other:?}")),
        }
    }
    Ok(out)
}

fn text_block(text: &str) -> Option<ContentBlock> {
    (!text.is_empty()).then(|| ContentBlock::Text {
        text: text.to_owned(),
    })
}

/// A `data:<type>;base64,<data>` URL as inline bytes, any other URL as a reference.
fn media_source(url: &str) -> MediaSource {
    if let Some(rest) = url.strip_prefix("data:")
        && let Some((meta, data)) = rest.split_once(',')
        && let Some(media_type) = meta.strip_suffix(";base64")
    {
        return MediaSource::Base64 {
            media_type: media_type.to_owned(),
            data: data.to_owned(),
        };
    }
    MediaSource::Url {
        url: url.to_owned(),
    }
}

/// A tool output: a string, a list of content items, or `{content, success}`.
fn output(value: Option<&Value>) -> Result<(Vec<ContentBlock>, bool), String> {
    match value {
        None | Some(Value::Null) => Ok((Vec::new(), false)),
        Some(Value::String(s)) => Ok((text_block(s).into_iter().collect(), false)),
        Some(Value::Array(items)) => Ok((content_items(items, "output")?, false)),
        Some(Value::Object(obj)) => {
            let failed = obj.get("success").and_then(Value::as_bool) == Some(false);
            let (content, _) = output(obj.get("content").or_else(|| obj.get("output")))?;
            Ok((content, failed))
        }
        Some(other) => Ok((
            vec![ContentBlock::Text {
                text: other.to_string(),
            }],
            false,
        )),
    }
}

#[cfg(test)]
mod tests {
    use baton_core::{ContentBlock, MediaSource, Role};
    use serde_json::{Value, json};

    use super::{parse, sniff};
    use crate::formats::jsonl;
    use crate::{Error, Transcript};

    fn line(kind: &str, payload: Value) -> Value {
        json!({"timestamp": "2025-01-01T00:00:00Z", "type": kind, "payload": payload})
    }

    fn item(payload: Value) -> Value {
        line("response_item", payload)
    }

    fn one(lines: &[Value]) -> Transcript {
        let mut ts = parse(&jsonl(lines)).unwrap();
        assert_eq!(ts.len(), 1);
        ts.remove(0)
    }

    fn say(role: &str, part: &str, text: &str) -> Value {
        item(json!({"type": "message", "role": role, "content": [{"type": part, "text": text}]}))
    }

    #[test]
    fn reads_a_turn_with_reasoning_calls_and_outputs() {
        let t = one(&[
            line(
                "session_meta",
                json!({"id": "sess-1", "cli_version": "0.66.0"}),
            ),
            say("developer", "input_text", "be brief"),
            line("turn_context", json!({"model": "gpt-5", "cwd": "/"})),
            say("user", "input_text", "list files"),
            line(
                "event_msg",
                json!({"type": "user_message", "message": "list files"}),
            ),
            item(
                json!({"type": "reasoning", "summary": [{"type": "summary_text", "text": "**Listing**"}],
                        "content": null, "encrypted_content": "gAAAA=="}),
            ),
            item(
                json!({"type": "function_call", "name": "shell", "arguments": "{\"cmd\":\"ls\"}", "call_id": "c1"}),
            ),
            item(
                json!({"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch", "call_id": "c2"}),
            ),
            item(
                json!({"type": "local_shell_call", "call_id": "c3", "status": "completed",
                        "action": {"type": "exec", "command": ["ls"]}}),
            ),
            item(json!({"type": "function_call_output", "call_id": "c1", "output": "a.txt"})),
            item(json!({"type": "custom_tool_call_output", "call_id": "c2", "output": "Success"})),
            item(
                json!({"type": "local_shell_call_output", "call_id": "c3", "output": {"content": "boom", "success": false}}),
            ),
            item(json!({"type": "ghost_snapshot", "ghost_commit": {}})),
            say("assistant", "output_text", "a.txt"),
            line(
                "event_msg",
                json!({"type": "agent_message", "message": "a.txt"}),
            ),
        ]);
        let roles: Vec<Role> = t.messages.iter().map(|m| m.message.role).collect();
        use Role::*;
        assert_eq!(
            roles,
            [System, User, Assistant, Tool, Tool, Tool, Assistant]
        );
        assert_eq!(t.source_session_id.as_deref(), Some("sess-1"));
        assert_eq!(t.models, ["gpt-5"]);
        assert_eq!(t.messages[2].model.as_deref(), Some("gpt-5"));
        assert_eq!(t.messages[1].model, None);
        assert_eq!(t.tool_calls(), 3);
        // session_meta, turn_context, two events, ghost_snapshot
        assert_eq!(t.skipped.non_message_lines, 5);
        let calls = &t.messages[2].message.content;
        assert_eq!(
            calls[..2],
            [
                ContentBlock::Thinking {
                    thinking: "**Listing**".into(),
                    signature: None
                },
                ContentBlock::RedactedThinking {
                    data: "gAAAA==".into()
                },
            ]
        );
        assert_eq!(
            calls[2],
            ContentBlock::ToolUse {
                id: "c1".into(),
                name: "shell".into(),
                input: json!({"cmd": "ls"})
            }
        );
        assert_eq!(
            calls[3],
            ContentBlock::ToolUse {
                id: "c2".into(),
                name: "apply_patch".into(),
                input: json!("*** Begin Patch")
            }
        );
        assert_eq!(
            calls[4],
            ContentBlock::ToolUse {
                id: "c3".into(),
                name: "local_shell".into(),
                input: json!({"type": "exec", "command": ["ls"]})
            }
        );
        assert_eq!(
            t.messages[5].message.content,
            [ContentBlock::ToolResult {
                tool_use_id: "c3".into(),
                content: vec![ContentBlock::Text {
                    text: "boom".into()
                }],
                is_error: true
            }]
        );
    }

    #[test]
    fn compacted_lines_are_events_and_images_are_kept() {
        let t = one(&[
            say("user", "input_text", "hi"),
            say("assistant", "output_text", "hello"),
            line("compacted", json!({"message": "we said hello"})),
            item(json!({"type": "message", "role": "user", "content": [
                {"type": "input_image", "image_url": "data:image/png;base64,iVBO"},
                {"type": "input_image", "image_url": "https://x/y.png"}]})),
        ]);
        assert_eq!(t.messages.len(), 3);
        assert_eq!(t.compactions.len(), 1);
        assert_eq!(t.compactions[0].after_messages, 2);
        assert_eq!(t.compactions[0].summary.as_deref(), Some("we said hello"));
        assert_eq!(
            t.messages[2].message.content,
            [
                ContentBlock::Image {
                    source: MediaSource::Base64 {
                        media_type: "image/png".into(),
                        data: "iVBO".into()
                    }
                },
                ContentBlock::Image {
                    source: MediaSource::Url {
                        url: "https://x/y.png".into()
                    }
                },
            ]
        );
    }

    #[test]
    fn user_message_events_without_an_item_become_user_messages() {
        let t = one(&[
            line(
                "event_msg",
                json!({"type": "user_message", "message": "\nsummarize this\n"}),
            ),
            say("assistant", "output_text", "done"),
        ]);
        assert_eq!(t.messages.len(), 2);
        assert_eq!(t.messages[0].message.plain_text(), "summarize this");
        assert_eq!(t.skipped.non_message_lines, 0);
    }

    fn token_count(total: u64, last_input: u64, cached: u64, output: u64) -> Value {
        line(
            "event_msg",
            json!({"type": "token_count", "info": {
                "total_token_usage": {"input_tokens": total, "cached_input_tokens": 0,
                                      "output_tokens": 0, "total_tokens": total},
                "last_token_usage": {"input_tokens": last_input, "cached_input_tokens": cached,
                                     "output_tokens": output, "total_tokens": last_input + output}},
                "rate_limits": {}}),
        )
    }

    #[test]
    fn token_counts_are_usage_records_once_each() {
        let t = one(&[
            line(
                "session_meta",
                json!({"id": "s", "cwd": "/work", "cli_version": "0.9"}),
            ),
            line("turn_context", json!({"model": "gpt-5", "cwd": "/work"})),
            say(
                "user",
                "input_text",
                "<environment_context>x</environment_context>",
            ),
            say("user", "input_text", "list the files"),
            line(
                "event_msg",
                json!({"type": "token_count", "info": null, "rate_limits": {}}),
            ),
            item(
                json!({"type": "function_call", "name": "ls", "arguments": "{}", "call_id": "c1"}),
            ),
            token_count(1000, 1000, 800, 20),
            token_count(1000, 1000, 800, 20),
            item(json!({"type": "function_call_output", "call_id": "c1", "output": "a"})),
            say("assistant", "output_text", "a"),
            token_count(2200, 1200, 1000, 5),
        ]);
        let ids: Vec<&str> = t.usage.iter().map(|u| u.record.id.as_str()).collect();
        assert_eq!(ids, ["codex:s:1000", "codex:s:2200"]);
        let first = &t.usage[0];
        assert_eq!(
            (
                first.record.usage.input,
                first.record.usage.cache_read,
                first.record.usage.output
            ),
            (200, 800, 20)
        );
        assert_eq!(first.record.model.as_deref(), Some("gpt-5"));
        assert_eq!(first.message, Some(2));
        assert_eq!(t.usage[1].message, Some(4));
        assert_eq!(t.project.as_deref(), Some("/work"));
        assert_eq!(t.agent_version.as_deref(), Some("0.9"));
        assert_eq!(t.title.as_deref(), Some("list the files"));
    }

    #[test]
    fn an_assistant_message_is_settled_once_its_response_ends() {
        let lines = [
            say("user", "input_text", "go"),
            item(json!({"type": "reasoning", "summary": [{"type": "summary_text", "text": "hm"}]})),
            item(
                json!({"type": "function_call", "name": "ls", "arguments": "{}", "call_id": "c1"}),
            ),
            token_count(10, 10, 0, 1),
            item(
                json!({"type": "reasoning", "summary": [{"type": "summary_text", "text": "again"}]}),
            ),
            item(
                json!({"type": "message", "role": "assistant", "phase": "final_answer",
                        "content": [{"type": "output_text", "text": "done"}]}),
            ),
        ];
        let settled: Vec<(usize, usize)> = (1..=lines.len())
            .map(|n| {
                let t = one(&lines[..n]);
                (t.messages.len(), t.settled)
            })
            .collect();
        // The response's end splits it from the next one, which its final answer closes.
        assert_eq!(settled, [(1, 1), (2, 1), (2, 1), (2, 2), (3, 2), (3, 3)]);
    }

    #[test]
    fn a_user_message_event_repeats_only_an_earlier_item() {
        let t = one(&[
            line(
                "event_msg",
                json!({"type": "user_message", "message": "first"}),
            ),
            say("user", "input_text", "first"),
            say("assistant", "output_text", "ok"),
        ]);
        // The event came before any item saying it: it is the message, and the item too.
        assert_eq!(t.messages.len(), 3);
    }

    #[test]
    fn malformed_lines_are_errors_naming_the_line() {
        let good = jsonl(&[say("user", "input_text", "hi")]);
        let mut bad = good.clone();
        bad.extend_from_slice(b"not json\n");
        assert!(matches!(
            parse(&bad),
            Err(Error::Malformed { line: Some(2), .. })
        ));

        let mut truncated = good.clone();
        truncated.extend_from_slice(b"{\"timestamp\": \"2025");
        assert_eq!(parse(&truncated).unwrap()[0].skipped.non_message_lines, 1);

        let no_id = jsonl(&[item(
            json!({"type": "function_call", "name": "ls", "arguments": "{}"}),
        )]);
        assert_eq!(
            parse(&no_id).unwrap_err(),
            Error::at(1, "function_call without \"call_id\"")
        );
        let bad_role = jsonl(&[say("robot", "input_text", "beep")]);
        assert!(matches!(
            parse(&bad_role),
            Err(Error::Malformed { line: Some(1), .. })
        ));
        let bad_part = jsonl(&[say("user", "input_video", "x")]);
        assert!(matches!(
            parse(&bad_part),
            Err(Error::Malformed { line: Some(1), .. })
        ));
        assert_eq!(parse(b"").unwrap(), Vec::new());
    }

    /// A rollout as Codex CLI wrote it before the envelope (mid 2025): a bare header, state
    /// markers, bare items with no timestamps.
    fn legacy() -> Vec<Value> {
        let say = |role: &str, part: &str, text: &str| {
            json!({"type": "message", "id": null, "role": role,
                   "content": [{"type": part, "text": text}]})
        };
        vec![
            json!({"id": "5f0c2d1e", "timestamp": "2025-07-01T10:00:00.000Z",
                   "instructions": null, "git": {"branch": "main"}}),
            json!({"record_type": "state"}),
            say(
                "user",
                "input_text",
                "<environment_context>\n  <cwd>/home/u/app</cwd>\n</environment_context>",
            ),
            say("user", "input_text", "fix the failing test"),
            json!({"record_type": "state"}),
            json!({"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAAAB",
                   "summary": [{"type": "summary_text", "text": "**Running tests**"}]}),
            json!({"type": "function_call", "id": "fc_1", "name": "shell", "call_id": "call_1",
                   "arguments": "{\"command\":[\"cargo\",\"test\"]}"}),
            json!({"type": "function_call_output", "call_id": "call_1",
                   "output": "{\"output\":\"1 failed\",\"metadata\":{\"exit_code\":101}}"}),
            say("assistant", "output_text", "fixed"),
            say("user", "input_text", "thanks"),
        ]
    }

    #[test]
    fn a_rollout_written_before_the_envelope_reads_like_one_inside_it() {
        let bytes = jsonl(&legacy());
        assert!(sniff(&bytes));
        assert_eq!(crate::detect(&bytes), Some(crate::Format::Codex));
        let t = one(&legacy());
        use Role::*;
        let roles: Vec<Role> = t.messages.iter().map(|m| m.message.role).collect();
        assert_eq!(roles, [User, User, Assistant, Tool, Assistant, User]);
        assert!(matches!(
            &t.messages[2].message.content[..],
            [
                ContentBlock::Thinking { .. },
                ContentBlock::RedactedThinking { .. },
                ContentBlock::ToolUse { id, name, .. },
            ] if id == "call_1" && name == "shell"
        ));
        assert!(matches!(
            &t.messages[3].message.content[..],
            [ContentBlock::ToolResult { tool_use_id, .. }] if tool_use_id == "call_1"
        ));
        assert_eq!(t.source_session_id.as_deref(), Some("5f0c2d1e"));
        assert_eq!(t.project.as_deref(), Some("/home/u/app"));
        assert_eq!(t.title.as_deref(), Some("fix the failing test"));
        // The header's time is the session's start; the items record none of their own.
        let stamps: Vec<Option<&str>> = t.messages.iter().map(|m| m.timestamp.as_deref()).collect();
        assert_eq!(stamps[0], Some("2025-07-01T10:00:00.000Z"));
        assert!(stamps[1..].iter().all(Option::is_none));
        assert_eq!(t.skipped.non_message_lines, 3);
        assert!(t.usage.is_empty());
        assert_eq!(t.settled, t.messages.len());
    }

    #[test]
    fn a_rollout_before_the_envelope_settles_to_a_prefix_at_every_line() {
        let lines = legacy();
        // The header alone is a rollout that holds no message yet.
        assert!(sniff(&jsonl(&lines[..1])));
        assert_eq!(parse(&jsonl(&lines[..1])).unwrap(), Vec::new());
        let settled = crate::formats::settled_at_every_cut(&lines, parse);
        // The assistant's items stay open until the tool output or the next user message.
        assert_eq!(settled[1..], [0, 1, 2, 2, 2, 2, 4, 4, 6]);
    }

    #[test]
    fn sniffs_by_content() {
        assert!(sniff(&jsonl(&[line("session_meta", json!({"id": "x"}))])));
        assert!(!sniff(
            br#"{"type":"user","sessionId":"s","uuid":"u","message":{}}"#
        ));
        assert!(!sniff(br#"{"type":"session_meta"}"#));
        assert!(!sniff(b"[]"));
        // A conversation object of a JSONL message file is no header, whatever keys it has.
        assert!(!sniff(
            br#"{"id":"c1","timestamp":"2025-01-01T00:00:00Z","instructions":"be brief","messages":[]}"#
        ));
        // A bare header needs a key only Codex writes there, or a state marker after it.
        assert!(!sniff(br#"{"id":"x","timestamp":"2025-07-01T10:00:00Z"}"#));
        assert!(sniff(
            b"{\"id\":\"x\",\"timestamp\":\"2025-07-01T10:00:00Z\"}\n{\"record_type\":\"state\"}\n"
        ));
    }
}
