//! Claude Code's `--output-format stream-json` (what `claude -p` and the Agent SDK print, and
//! what people save from CI runs): the same `user`/`assistant` lines as a session file, but
//! unthreaded. A line carries `session_id` (not `sessionId`), no `parentUuid`, and, for a
//! subagent's lines, `parent_tool_use_id` naming the `Task` call that runs it; the first line is
//! a `system` line of subtype `init` (`cwd`, `claude_code_version`, `model`), the last a
//! `result` line (the run's totals), which closes the last response.
//!
//! [`thread`] rewrites such a file into the session file it stands for, line for line (so line
//! numbers in errors stay the file's own), and the session reader does the rest: each message
//! line's parent is the previous message line of its thread (the main conversation, or the
//! subagent run of one `parent_tool_use_id`), a subagent's lines are sidechain lines (its runs
//! become transcripts of their own, linked to the parent as inline subagents are), and every
//! line gets `sessionId`, a `uuid` (`stream-line-<n>` when the line has none), and the init
//! line's `cwd` and version. A subagent's run is linked to the call its `parent_tool_use_id`
//! names, and its lines close only its own responses, as the main conversation's close only
//! the main conversation's. The prompt given on the command line is not in the output, so a run
//! may start with the assistant and has no title unless the input was streamed too.

use std::collections::HashMap;

use serde_json::{Map, Value};

/// Whether `bytes` are stream-json output rather than a session file: the first line holding a
/// JSON object names its session `session_id`, not `sessionId` (every stream-json line names
/// it; a session file's first line is a message, a `summary` or a snapshot, never that). Only
/// top-level keys count: a tool's input may hold either name.
fn is_stream_json(bytes: &[u8]) -> bool {
    super::super::jsonl_lines(bytes)
        .filter_map(|(_, line, _)| serde_json::from_slice::<Map<String, Value>>(line).ok())
        .next()
        .is_some_and(|first| first.contains_key("session_id") && !first.contains_key("sessionId"))
}

/// The session file that stream-json `bytes` stand for, or `None` when they are a session file
/// already. A line that is not a JSON object is copied as it is, for the session reader to
/// report (or drop, when it is a last line still being written).
pub(super) fn thread(bytes: &[u8]) -> Option<Vec<u8>> {
    if !is_stream_json(bytes) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() + bytes.len() / 8);
    // The last message line of each thread: `None` is the main conversation.
    let mut last: HashMap<Option<String>, String> = HashMap::new();
    let (mut session, mut cwd, mut version) = (None::<String>, None::<Value>, None::<Value>);
    for (no, raw, unterminated) in super::super::jsonl_lines(bytes) {
        let Ok(mut obj) = serde_json::from_slice::<Map<String, Value>>(raw) else {
            out.extend_from_slice(raw);
            if !unterminated {
                out.push(b'\n');
            }
            continue;
        };
        let kind = obj.get("type").and_then(Value::as_str).unwrap_or("");
        if kind == "system" && obj.get("subtype").and_then(Value::as_str) == Some("init") {
            cwd = obj.get("cwd").cloned();
            version = obj.get("claude_code_version").cloned();
        }
        let is_message = matches!(kind, "user" | "assistant");
        if let Some(s) = obj.get("session_id").and_then(Value::as_str) {
            session = Some(s.to_owned());
        }
        let uuid = match obj.get("uuid").and_then(Value::as_str) {
            Some(u) => u.to_owned(),
            None => format!("stream-line-{no}"),
        };
        let thread = obj
            .get("parent_tool_use_id")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if let Some(s) = &session {
            obj.insert("sessionId".into(), Value::String(s.clone()));
        }
        obj.insert("uuid".into(), Value::String(uuid.clone()));
        for (key, value) in [("cwd", &cwd), ("version", &version)] {
            if let Some(value) = value
                && !obj.contains_key(key)
            {
                obj.insert(key.into(), value.clone());
            }
        }
        if is_message {
            let parent = last.insert(thread.clone(), uuid).map(Value::String);
            obj.insert("parentUuid".into(), parent.unwrap_or(Value::Null));
            obj.insert("isSidechain".into(), Value::Bool(thread.is_some()));
        }
        // A map of JSON values always serializes.
        out.extend(serde_json::to_vec(&obj).unwrap_or_default());
        if !unterminated {
            out.push(b'\n');
        }
    }
    Some(out)
}
