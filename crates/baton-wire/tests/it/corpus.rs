//! Loading vendor messages from the shared corpus, and the normalizations the round-trip tests
//! compare under.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

/// Where the shared corpus is: `/work/shared/corpus` next to the workspace.
const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/corpus");

/// The corpus folder `sub`, or `None` (after saying so) when the corpus is absent.
pub fn folder(sub: &str) -> Option<PathBuf> {
    let root = Path::new(CORPUS);
    if !root.is_dir() {
        eprintln!("skipping: corpus not found at {}", root.display());
        return None;
    }
    Some(root.join(sub))
}

/// The files in `dir` whose names end with `ext`, sorted.
pub fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.to_string_lossy().ends_with(ext))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no *{ext} files in {}", dir.display());
    files
}

/// One vendor message and where it came from (`file:line` or `file#index`).
pub struct Sample {
    pub at: String,
    pub value: Value,
}

/// The `message` objects of a Claude Code session's user and assistant lines, in file order.
pub fn claude_code_messages(path: &Path) -> Vec<Sample> {
    claude_code_events(path)
        .into_iter()
        .filter_map(|(at, event)| message_of(at, &event))
        .collect()
}

/// A Claude Code session's messages split into threads, each in conversation order.
///
/// File order is not conversation order, in two ways (baton-import must undo both):
///
/// - a file may interleave threads (a subagent's prompt starts a new root, with `parentUuid`
///   null): each line belongs to the thread of the root its `parentUuid` chain leads to;
/// - Claude Code writes one line per block of an assistant response, and runs tools while the
///   response still streams, so a tool result can come before a later block of the same
///   response: assistant lines sharing a `message.id` merge into the first of them.
pub fn claude_code_threads(path: &Path) -> Vec<Vec<Sample>> {
    let events = claude_code_events(path);
    let parent: HashMap<&str, Option<&str>> = events
        .iter()
        .filter_map(|(_, e)| Some((e["uuid"].as_str()?, e["parentUuid"].as_str())))
        .collect();
    let root_of = |event: &Value| -> Option<String> {
        let mut at = event["uuid"].as_str()?;
        while let Some(Some(up)) = parent.get(at) {
            at = up;
        }
        Some(at.to_owned())
    };
    let mut threads: Vec<(Option<String>, Vec<Sample>)> = Vec::new();
    for (at, event) in &events {
        let Some(sample) = message_of(at.clone(), event) else {
            continue;
        };
        let root = root_of(event);
        match threads.iter_mut().find(|(r, _)| *r == root) {
            Some((_, thread)) => thread.push(sample),
            None => threads.push((root, vec![sample])),
        }
    }
    threads
        .into_iter()
        .map(|(_, thread)| merge_responses(thread))
        .collect()
}

/// Merges assistant messages that share an API message `id` into the first of them.
fn merge_responses(thread: Vec<Sample>) -> Vec<Sample> {
    let mut out: Vec<Sample> = Vec::new();
    for sample in thread {
        let id = sample.value["id"]
            .as_str()
            .filter(|_| sample.value["role"] == "assistant");
        let first = id.and_then(|id| out.iter_mut().find(|s| s.value["id"].as_str() == Some(id)));
        match first {
            Some(first) => {
                let blocks = sample.value["content"].as_array().unwrap().clone();
                first.value["content"]
                    .as_array_mut()
                    .unwrap()
                    .extend(blocks);
            }
            None => out.push(sample),
        }
    }
    out
}

fn claude_code_events(path: &Path) -> Vec<(String, Value)> {
    let text = fs::read_to_string(path).unwrap();
    let name = path.file_name().unwrap().to_string_lossy();
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let event: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{name}:{}: {e}", i + 1));
        out.push((format!("{name}:{}", i + 1), event));
    }
    out
}

fn message_of(at: String, event: &Value) -> Option<Sample> {
    if !matches!(event["type"].as_str(), Some("user" | "assistant")) {
        return None;
    }
    let message = event
        .get("message")
        .unwrap_or_else(|| panic!("{at}: no message"));
    Some(Sample {
        at,
        value: message.clone(),
    })
}

/// A SWE-agent trajectory's `history`, both as stored and as SWE-agent sends it to the model.
pub struct SweHistory {
    /// The stored entries, with SWE-agent's own keys (`agent`, `message_type`, `thought`, …).
    pub stored: Vec<Sample>,
    /// The Chat Completions messages SWE-agent builds from them (`_history_to_messages` in
    /// `sweagent/agent/models.py`): `role` and `content`, plus `tool_calls` when present, and for
    /// role `tool` a `tool_call_id` taken from the stored `tool_call_ids[0]`.
    pub sent: Vec<Sample>,
}

pub fn swe_agent_history(path: &Path) -> SweHistory {
    let name = path.file_name().unwrap().to_string_lossy();
    let traj: Value = serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap();
    let history = traj["history"]
        .as_array()
        .unwrap_or_else(|| panic!("{name}: no history"));
    let mut stored = Vec::new();
    let mut sent = Vec::new();
    for (i, item) in history.iter().enumerate() {
        let at = format!("{name}#history[{i}]");
        let mut message = json!({"role": item["role"], "content": item["content"]});
        if item["role"] == "tool" {
            let ids = item["tool_call_ids"].as_array().unwrap();
            assert_eq!(
                ids.len(),
                1,
                "{at}: SWE-agent sends one tool call per observation"
            );
            message["tool_call_id"] = ids[0].clone();
        } else if !item["tool_calls"].is_null() {
            message["tool_calls"] = item["tool_calls"].clone();
        }
        stored.push(Sample {
            at: at.clone(),
            value: item.clone(),
        });
        sent.push(Sample { at, value: message });
    }
    SweHistory { stored, sent }
}

/// An Anthropic message in a canonical form, so that forms documented as equal compare equal:
/// top-level fields other than `role` and `content` removed; string content (and tool-result
/// content) as a list of one text block, or no blocks for `""`; a missing tool-result `content`
/// as no blocks; `"is_error": false` removed; and the dropped fields removed (`cache_control`
/// everywhere, `citations` on text and document blocks, `caller` on tool_use blocks).
pub fn canonical_anthropic(message: &Value) -> Value {
    json!({"role": message["role"], "content": anthropic_content(&message["content"])})
}

fn anthropic_content(content: &Value) -> Value {
    match content {
        Value::Null => json!([]),
        Value::String(s) => text_list(s),
        Value::Array(blocks) => blocks.iter().map(anthropic_block).collect(),
        other => other.clone(),
    }
}

fn anthropic_block(block: &Value) -> Value {
    let mut map: Map<String, Value> = block.as_object().unwrap().clone();
    map.remove("cache_control");
    match map["type"].as_str() {
        Some("text" | "document") => {
            map.remove("citations");
        }
        Some("tool_use") => {
            map.remove("caller");
        }
        Some("tool_result") => {
            let content = anthropic_content(map.get("content").unwrap_or(&Value::Null));
            map.insert("content".into(), content);
            if map.get("is_error") == Some(&json!(false)) {
                map.remove("is_error");
            }
        }
        _ => {}
    }
    Value::Object(map)
}

/// A Chat Completions message in a canonical form: only `role`, `content`, `tool_calls` and
/// `tool_call_id` kept; `developer` as `system`; string content as a list of one text part (no
/// parts for `""` or `null`); an empty `tool_calls` removed; and `arguments` as the JSON value
/// they hold, when they hold valid non-string JSON (so whitespace and key order do not count).
pub fn canonical_openai(message: &Value) -> Value {
    let mut out = Map::new();
    let role = match message["role"].as_str() {
        Some("developer") => json!("system"),
        _ => message["role"].clone(),
    };
    out.insert("role".into(), role);
    let content = match &message["content"] {
        Value::Null => json!([]),
        Value::String(s) => text_list(s),
        other => other.clone(),
    };
    out.insert("content".into(), content);
    if let Some(id) = message.get("tool_call_id") {
        out.insert("tool_call_id".into(), id.clone());
    }
    if let Some(Value::Array(calls)) = message.get("tool_calls")
        && !calls.is_empty()
    {
        let calls = calls
            .iter()
            .map(|call| {
                let mut call = call.clone();
                let arguments = call["function"]["arguments"].as_str().unwrap().to_owned();
                if let Ok(value) = serde_json::from_str::<Value>(&arguments)
                    && !value.is_string()
                {
                    call["function"]["arguments"] = value;
                }
                call
            })
            .collect();
        out.insert("tool_calls".into(), Value::Array(calls));
    }
    Value::Object(out)
}

fn text_list(s: &str) -> Value {
    match s.is_empty() {
        true => json!([]),
        false => json!([{"type": "text", "text": s}]),
    }
}
