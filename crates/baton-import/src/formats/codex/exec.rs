//! What `codex exec --json` prints (and what people save from CI runs): one event a line,
//! `thread.started` (`thread_id`), `turn.started`, `item.started`/`item.updated`/
//! `item.completed` (an `item` with `id` and `type`), `turn.completed` (`usage`),
//! `turn.failed` and `error`. It names no model, directory or time, and holds no user prompt
//! (that was given on the command line).
//!
//! How it maps, from each `item.completed` (an item only started or updated is still running,
//! and becomes a message once completed):
//! - `agent_message` (`text`) is assistant text, `reasoning` (`text`) a thinking block; items of
//!   the assistant in a row form one assistant message, as in a rollout;
//! - `command_execution` is a call of `shell` with input `{"command"}`, answered at once by a
//!   [`Role::Tool`] message holding `aggregated_output`, an error when its status is `failed` or
//!   `declined` or its exit code is not 0;
//! - `file_change` is a call of `apply_patch` with input `{"changes"}` (paths and kinds),
//!   answered by its status;
//! - `mcp_tool_call` is a call of `mcp__<server>__<tool>` with its `arguments`, answered by the
//!   text of its `result.content` or, failed, its `error.message`;
//! - `web_search`, `todo_list` and `error` items are passed over and counted, as a rollout's
//!   `web_search_call` and plan updates are.
//!
//! A call's id is the item's `id` (`item_3`), unique within one `codex exec`; in a file holding
//! several (outputs appended to one log), the items after the k-th `thread.started` (k ≥ 2)
//! get `<id>.<k>`. `turn.completed` ends the assistant message and is the turn's usage
//! (`input_tokens` counting `cached_input_tokens`, as in a rollout), one record per turn;
//! `turn.failed` ends the message too.
//!
//! **Identity.** The `thread_id` names the thread, not this output: Codex's rollout of the
//! thread holds it as its session id, and `codex exec resume` prints it again for a file that
//! holds only the new turn. So the output has no session id of its own and is keyed by its
//! place, as the formats whose ids are not unique per file are
//! ([`crate::Transcript::source_key`]). A turn's usage record is
//! `codex-exec:<thread id>:<16 hex digits of SHA-256 over the file through the turn's end>`:
//! the same for every cut of the file that holds the turn, another for another output.
//!
//! Lines that are not JSON (what the command wrote to stderr, when it was captured with
//! stdout) are passed over and counted; a line that starts as JSON and is not is an error.
//!
//! **The last complete unit** is a rollout's: every message is settled but an assistant
//! message no turn end or tool output has closed yet.

use baton_core::usage::UsageRecord;
use baton_core::{ContentBlock, Message, Role};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::{openai_usage, str_of};
use crate::{Error, Format, ImportedMessage, ImportedUsage, Transcript};

/// Whether one of the first lines holding a JSON object is an event of `codex exec --json`
/// (what [`super::sniff`] looks at, so the two agree).
pub(super) fn is_exec_json(bytes: &[u8]) -> bool {
    crate::formats::jsonl_lines(bytes)
        .filter_map(|(_, line, _)| serde_json::from_slice::<Map<String, Value>>(line).ok())
        .take(super::SNIFF_LINES)
        .any(|obj| is_event(&obj))
}

/// Whether `obj` is an event of `codex exec --json`: a `thread.`, `turn.` or `item.` type with
/// the field that type carries.
pub(super) fn is_event(obj: &Map<String, Value>) -> bool {
    match str_of(obj, "type") {
        Some("thread.started") => obj.get("thread_id").is_some_and(Value::is_string),
        Some("turn.started") => obj.len() == 1,
        Some("turn.completed") => obj.get("usage").is_some_and(Value::is_object),
        Some("turn.failed") => obj.contains_key("error"),
        Some(t) if t.starts_with("item.") => obj.get("item").is_some_and(Value::is_object),
        _ => false,
    }
}

/// Reads the events; see the module documentation.
pub(super) fn parse(bytes: &[u8]) -> Result<Vec<Transcript>, Error> {
    let mut t = Transcript::new(Format::Codex);
    let mut open = false;
    let (mut thread, mut invocations) = (String::new(), 0);
    let mut digest = Sha256::new();
    for (no, raw, unterminated) in crate::formats::jsonl_lines(bytes) {
        digest.update(raw);
        digest.update(b"\n");
        if raw.trim_ascii().is_empty() {
            continue;
        }
        if raw.trim_ascii_start().first() != Some(&b'{') {
            t.skipped.non_message_lines += 1;
            continue;
        }
        let obj = match serde_json::from_slice::<Value>(raw) {
            Ok(Value::Object(obj)) => obj,
            Ok(_) => return Err(Error::at(no, "expected a JSON object")),
            Err(_) if unterminated => {
                t.skipped.non_message_lines += 1;
                continue;
            }
            Err(e) => return Err(Error::at(no, format!("invalid JSON: {e}"))),
        };
        let used = match str_of(&obj, "type").unwrap_or("") {
            "thread.started" => {
                thread = str_of(&obj, "thread_id").unwrap_or_default().to_owned();
                invocations += 1;
                false
            }
            "turn.completed" => {
                let usage = obj.get("usage").map(openai_usage).unwrap_or_default();
                let through: String = digest
                    .clone()
                    .finalize()
                    .iter()
                    .take(8)
                    .map(|b| format!("{b:02x}"))
                    .collect();
                let message = t
                    .messages
                    .iter()
                    .rposition(|m| m.message.role == Role::Assistant);
                t.usage.push(ImportedUsage {
                    record: UsageRecord {
                        id: format!("codex-exec:{thread}:{through}"),
                        model: None,
                        response_id: None,
                        request_id: None,
                        at: None,
                        usage,
                        estimated: false,
                    },
                    message,
                });
                open = false;
                false
            }
            "turn.failed" => {
                open = false;
                false
            }
            "item.completed" => match obj.get("item").and_then(Value::as_object) {
                Some(item) => completed(&mut t, &mut open, no, item, invocations)?,
                None => return Err(Error::at(no, "item.completed without an \"item\" object")),
            },
            _ => false,
        };
        if !used {
            t.skipped.non_message_lines += 1;
        }
    }
    if t.messages.is_empty() {
        return Ok(Vec::new());
    }
    let n = t.messages.len();
    t.settled = if open { n - 1 } else { n };
    Ok(vec![t])
}

/// Reads one completed item; false when it makes no message.
fn completed(
    t: &mut Transcript,
    open: &mut bool,
    no: usize,
    item: &Map<String, Value>,
    invocation: usize,
) -> Result<bool, Error> {
    let text = |key: &str| str_of(item, key).unwrap_or("").to_owned();
    let status = str_of(item, "status").unwrap_or("completed");
    let id = || match str_of(item, "id").filter(|id| !id.is_empty()) {
        Some(id) if invocation > 1 => Ok(format!("{id}.{invocation}")),
        Some(id) => Ok(id.to_owned()),
        None => Err(Error::at(no, "a completed item without an \"id\"")),
    };
    let (call, result): (ContentBlock, Option<(String, bool)>) = match str_of(item, "type") {
        Some("agent_message") => {
            assistant(t, open, no, ContentBlock::Text { text: text("text") });
            return Ok(true);
        }
        Some("reasoning") => {
            let thinking = text("text");
            if thinking.is_empty() {
                return Ok(false);
            }
            let block = ContentBlock::Thinking {
                thinking,
                signature: None,
            };
            assistant(t, open, no, block);
            return Ok(true);
        }
        Some("command_execution") => {
            let failed = matches!(status, "failed" | "declined")
                || item
                    .get("exit_code")
                    .and_then(Value::as_i64)
                    .is_some_and(|c| c != 0);
            let call = ContentBlock::ToolUse {
                id: id()?,
                name: "shell".to_owned(),
                input: json!({"command": text("command")}),
            };
            (call, Some((text("aggregated_output"), failed)))
        }
        Some("file_change") => {
            let call = ContentBlock::ToolUse {
                id: id()?,
                name: "apply_patch".to_owned(),
                input: json!({"changes": item.get("changes").cloned().unwrap_or(json!([]))}),
            };
            (call, Some((status.to_owned(), status == "failed")))
        }
        Some("mcp_tool_call") => {
            let name = format!("mcp__{}__{}", text("server"), text("tool"));
            let input = item.get("arguments").cloned().unwrap_or(Value::Null);
            let error = item
                .get("error")
                .and_then(|e| e.get("message"))
                .and_then(Value::as_str);
            let output = match error {
                Some(message) => message.to_owned(),
                None => item
                    .get("result")
                    .and_then(|r| r.get("content"))
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n"),
            };
            let failed = error.is_some() || status == "failed";
            let call = ContentBlock::ToolUse {
                id: id()?,
                name,
                input,
            };
            (call, Some((output, failed)))
        }
        _ => return Ok(false),
    };
    let ContentBlock::ToolUse { id, .. } = &call else {
        unreachable!("every arm above that gets here makes a call")
    };
    let id = id.clone();
    assistant(t, open, no, call);
    if let Some((output, is_error)) = result {
        let content = match output.is_empty() {
            true => Vec::new(),
            false => vec![ContentBlock::Text { text: output }],
        };
        push(
            t,
            open,
            no,
            Message {
                role: Role::Tool,
                content: vec![ContentBlock::ToolResult {
                    tool_use_id: id,
                    content,
                    is_error,
                }],
            },
        );
    }
    Ok(true)
}

/// Appends `block` to the open assistant message, or starts one.
fn assistant(t: &mut Transcript, open: &mut bool, no: usize, block: ContentBlock) {
    if *open && let Some(last) = t.messages.last_mut() {
        last.message.content.push(block);
        return;
    }
    push(
        t,
        open,
        no,
        Message {
            role: Role::Assistant,
            content: vec![block],
        },
    );
}

fn push(t: &mut Transcript, open: &mut bool, no: usize, message: Message) {
    *open = message.role == Role::Assistant;
    t.messages.push(ImportedMessage {
        message,
        timestamp: None,
        model: None,
        line: Some(no),
    });
}

#[cfg(test)]
mod tests {
    use baton_core::{ContentBlock, Role};
    use serde_json::{Value, json};

    use super::super::{parse, sniff};
    use crate::formats::jsonl;

    /// Two turns of `codex exec --json`: a command, an answer; then a failed MCP call, a file
    /// change, a web search and an answer.
    fn events() -> Vec<Value> {
        let done = |item: Value| json!({"type": "item.completed", "item": item});
        vec![
            json!({"type": "thread.started", "thread_id": "0199a213-81c0"}),
            json!({"type": "turn.started"}),
            done(json!({"id": "item_0", "type": "reasoning", "text": "**Listing files**"})),
            json!({"type": "item.started", "item": {"id": "item_1", "type": "command_execution",
                   "command": "bash -lc ls", "aggregated_output": "", "exit_code": null,
                   "status": "in_progress"}}),
            done(
                json!({"id": "item_1", "type": "command_execution", "command": "bash -lc ls",
                        "aggregated_output": "a.txt\n", "exit_code": 0, "status": "completed"}),
            ),
            done(json!({"id": "item_2", "type": "agent_message", "text": "One file: a.txt."})),
            json!({"type": "turn.completed",
                   "usage": {"input_tokens": 1200, "cached_input_tokens": 200, "output_tokens": 45}}),
            json!({"type": "turn.started"}),
            done(
                json!({"id": "item_3", "type": "mcp_tool_call", "server": "docs", "tool": "search",
                        "arguments": {"q": "x"}, "result": null,
                        "error": {"message": "server down"}, "status": "failed"}),
            ),
            done(
                json!({"id": "item_4", "type": "file_change", "status": "completed",
                        "changes": [{"path": "a.txt", "kind": "update"}]}),
            ),
            done(json!({"id": "item_5", "type": "web_search", "query": "rust"})),
            done(json!({"id": "item_6", "type": "agent_message", "text": "Updated a.txt."})),
            json!({"type": "turn.completed",
                   "usage": {"input_tokens": 900, "cached_input_tokens": 800, "output_tokens": 30}}),
        ]
    }

    #[test]
    fn exec_events_read_as_calls_answered_at_once() {
        let bytes = jsonl(&events());
        assert!(sniff(&bytes));
        assert_eq!(crate::detect(&bytes), Some(crate::Format::Codex));
        let mut ts = parse(&bytes).unwrap();
        let t = ts.remove(0);
        let shape: Vec<String> = t
            .messages
            .iter()
            .map(|m| {
                let blocks: Vec<String> = m
                    .message
                    .content
                    .iter()
                    .map(|b| match b {
                        ContentBlock::Text { text } => text.clone(),
                        ContentBlock::Thinking { .. } => "thinking".into(),
                        ContentBlock::ToolUse { id, name, .. } => format!("{name}({id})"),
                        ContentBlock::ToolResult {
                            tool_use_id,
                            is_error,
                            ..
                        } => format!(
                            "result({tool_use_id}{})",
                            if *is_error { " error" } else { "" }
                        ),
                        other => other.type_name().into(),
                    })
                    .collect();
                format!("{}:{}", m.message.role.as_str(), blocks.join(","))
            })
            .collect();
        assert_eq!(
            shape,
            [
                "assistant:thinking,shell(item_1)",
                "tool:result(item_1)",
                "assistant:One file: a.txt.",
                "assistant:mcp__docs__search(item_3)",
                "tool:result(item_3 error)",
                "assistant:apply_patch(item_4)",
                "tool:result(item_4)",
                "assistant:Updated a.txt.",
            ]
        );
        // The thread id is the rollout's and a resumed output's too: the file is keyed by
        // its place.
        assert_eq!(t.source_session_id, None);
        assert_eq!(t.settled, t.messages.len());
        let usage: Vec<(u64, u64, u64, Option<usize>)> = t
            .usage
            .iter()
            .map(|u| {
                let n = &u.record.usage;
                (n.input, n.cache_read, n.output, u.message)
            })
            .collect();
        assert_eq!(usage, [(1000, 200, 45, Some(2)), (100, 800, 30, Some(7))]);
        let ids: Vec<&str> = t.usage.iter().map(|u| u.record.id.as_str()).collect();
        assert!(
            ids.iter()
                .all(|id| id.starts_with("codex-exec:0199a213-81c0:")),
            "{ids:?}"
        );
        assert_ne!(ids[0], ids[1]);
        assert_eq!(t.messages[1].message.role, Role::Tool);
    }

    /// Two outputs appended to one log, with what the command wrote to stderr among them:
    /// the text lines are passed over, the second output's calls get ids of their own, and
    /// its turns' usage records are not the first's.
    #[test]
    fn outputs_appended_to_one_log_keep_their_calls_apart() {
        let mut lines: Vec<Value> = events();
        lines.extend(events());
        let mut bytes = b"Reading prompt from stdin...\n".to_vec();
        bytes.extend(jsonl(&lines));
        let t = parse(&bytes).unwrap().remove(0);
        assert_eq!(t.skipped.non_message_lines, 1 + 2 * 7);
        let mut calls: Vec<&str> = t
            .messages
            .iter()
            .flat_map(|m| m.message.tool_use_ids())
            .collect();
        assert_eq!(calls.len(), 6);
        calls.sort_unstable();
        calls.dedup();
        assert_eq!(calls.len(), 6, "{calls:?}");
        let mut ids: Vec<&str> = t.usage.iter().map(|u| u.record.id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 4);
    }

    #[test]
    fn exec_events_cut_at_any_line_settle_to_a_prefix_of_the_whole() {
        let lines = events();
        let settled = crate::formats::settled_at_every_cut(&lines, parse);
        // A turn's usage record is the same in every cut that holds the turn's end.
        let whole = parse(&jsonl(&lines)).unwrap().remove(0);
        for n in 1..=lines.len() {
            for t in parse(&jsonl(&lines[..n])).unwrap() {
                for u in &t.usage {
                    assert!(whole.usage.contains(u), "cut at {n}: {:?}", u.record.id);
                }
            }
        }
        // An answer waits for its turn's end; a running command is no message yet.
        assert_eq!(settled, [0, 0, 0, 0, 2, 2, 3, 3, 5, 7, 7, 7, 8]);
    }
}
