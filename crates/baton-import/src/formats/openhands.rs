//! OpenHands (formerly OpenDevin) event streams.
//!
//! Two containers hold the same events: a JSON array of events (`tests/runtime/trajs/*.json`,
//! the GUI's trajectory download), and `output.jsonl` from evaluation and resolver runs, one run
//! per line with its events under `history` (each line is one [`Transcript`], `index` = line
//! number − 1; a file holding one pretty-printed run object is read as one transcript).
//! Older runs flatten `args` into the event and omit `id` and `source`; the oldest store
//! `history` as `[action, observation]` pairs. All three are read.
//!
//! How events map:
//! - a `message` action from the user, or with no `source` (the resolver's instruction in the
//!   older schema), is a user text message; from the agent, an assistant text message
//!   (`args.content`, else the event's `message`; `args.image_urls` become images);
//! - any other agent action (`run`, `read`, `edit`, `browse`, `finish`, …; also an action with no
//!   `source` in the older schema) is an assistant message holding `args.thought` as text (when
//!   not empty) and a tool use named after the action, with `args` as its input. Its id is
//!   `tool_call_metadata.tool_call_id`, else `oh-<event id>`, else `oh-<position>` (the event's
//!   index in the flattened history) for events without an id; the model is
//!   `tool_call_metadata.model_response.model`;
//! - the observation answering it is a [`Role::Tool`] message with one tool result holding the
//!   observation's `content` (else its `message`), `is_error` for an `error` observation. It is
//!   found by `cause` (the action's event id), else by `tool_call_metadata.tool_call_id`, else,
//!   for events with neither (older schema), by being the event right after the action;
//! - everything else is skipped and counted in [`crate::Skipped::non_message_lines`]: `system`
//!   and `recall` actions, actions by the environment or actions other than `message` by the
//!   user, state-change and `null` observations, observations answering nothing.
//!
//! OpenHands never answers `finish` (nor any action still running when the stream ends), so such
//! a call is left dangling: the reader does not invent results.

use std::collections::{HashMap, HashSet};

use baton_core::{ContentBlock, MediaSource, Message, Role};
use serde_json::{Map, Value};

use crate::{Error, Format, ImportedMessage, Transcript};

/// Fields of an older-schema event that are bookkeeping, not action arguments.
const EVENT_FIELDS: [&str; 10] = [
    "id",
    "timestamp",
    "source",
    "message",
    "action",
    "observation",
    "tool_call_metadata",
    "timeout",
    "cause",
    "llm_metrics",
];

/// Whether `bytes` are an OpenHands event array or run-per-line JSONL.
pub fn sniff(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(bytes);
    let trimmed = text.trim_start();
    if trimmed.starts_with('[') {
        return serde_json::from_str::<Value>(trimmed)
            .is_ok_and(|v| v.as_array().is_some_and(|events| is_event_list(events)));
    }
    if !trimmed.starts_with('{') {
        return false;
    }
    let first_line = trimmed.lines().next().unwrap_or_default();
    let run = serde_json::from_str::<Value>(first_line)
        .or_else(|_| serde_json::from_str::<Value>(trimmed));
    run.is_ok_and(|v| is_run(&v))
}

/// Reads an event array, a run object, or run-per-line JSONL.
pub fn parse(bytes: &[u8]) -> Result<Vec<Transcript>, Error> {
    let text =
        std::str::from_utf8(bytes).map_err(|e| Error::malformed(format!("not UTF-8: {e}")))?;
    if let Ok(whole) = serde_json::from_str::<Value>(text) {
        return match whole {
            Value::Array(events) => {
                let mut t = Transcript::new(Format::OpenHands);
                read_events(&events, &mut t).map_err(Error::malformed)?;
                Ok(vec![t])
            }
            Value::Object(_) if is_run(&whole) => {
                Ok(vec![read_run(&whole, 0).map_err(Error::malformed)?])
            }
            _ => Err(Error::malformed(
                "expected a JSON array of events or an object with a \"history\" array",
            )),
        };
    }
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(line)
            .map_err(|e| Error::at(i + 1, format!("invalid JSON: {e}")))?;
        if !value.is_object() || !value.get("history").is_some_and(Value::is_array) {
            return Err(Error::at(
                i + 1,
                "expected a run object with a \"history\" array",
            ));
        }
        out.push(read_run(&value, i).map_err(|reason| Error::at(i + 1, reason))?);
    }
    if out.is_empty() {
        return Err(Error::malformed("no events"));
    }
    Ok(out)
}

fn is_event(value: &Value) -> bool {
    match value {
        Value::Object(map) => {
            !map.contains_key("role")
                && (map.get("action").is_some_and(Value::is_string)
                    || map.get("observation").is_some_and(Value::is_string))
        }
        // The oldest schema: `[action, observation]` pairs.
        Value::Array(pair) => !pair.is_empty() && pair.iter().all(|v| v.is_object() && is_event(v)),
        _ => false,
    }
}

fn is_event_list(events: &[Value]) -> bool {
    !events.is_empty() && events.iter().all(is_event)
}

fn is_run(value: &Value) -> bool {
    value
        .get("history")
        .and_then(Value::as_array)
        .is_some_and(|events| is_event_list(events))
}

fn read_run(run: &Value, index: usize) -> Result<Transcript, String> {
    let mut t = Transcript::new(Format::OpenHands);
    t.index = index;
    t.source_session_id = run
        .get("instance_id")
        .and_then(Value::as_str)
        .map(str::to_owned);
    if let Some(model) = run
        .pointer("/metadata/llm_config/model")
        .and_then(Value::as_str)
    {
        t.saw_model(model);
    }
    let events = run
        .get("history")
        .and_then(Value::as_array)
        .ok_or_else(|| "expected a \"history\" array".to_owned())?;
    read_events(events, &mut t)?;
    Ok(t)
}

/// A tool call waiting for its observation.
struct Open {
    tool_use_id: String,
    /// The flattened position of the action, for adjacency matching.
    position: usize,
}

fn read_events(events: &[Value], t: &mut Transcript) -> Result<(), String> {
    // Flatten `[action, observation]` pairs, remembering where each event was.
    let mut flat: Vec<(String, &Value)> = Vec::new();
    for (i, event) in events.iter().enumerate() {
        match event {
            Value::Array(pair) => {
                for (j, e) in pair.iter().enumerate() {
                    flat.push((format!("history[{i}][{j}]"), e));
                }
            }
            e => flat.push((format!("history[{i}]"), e)),
        }
    }

    let mut by_event_id: HashMap<i64, String> = HashMap::new();
    let mut open: Vec<Open> = Vec::new();
    let mut used_ids: HashSet<String> = HashSet::new();
    let mut saw_event = false;
    for (position, (at, event)) in flat.iter().enumerate() {
        let Some(obj) = event.as_object() else {
            return Err(format!("{at}: expected an event object"));
        };
        let timestamp = obj
            .get("timestamp")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let source = match obj.get("source") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.as_str()),
            Some(_) => return Err(format!("{at}: \"source\" is not a string")),
        };
        saw_event |= obj.contains_key("action") || obj.contains_key("observation");
        if let Some(action) = obj.get("action") {
            let Some(action) = action.as_str() else {
                return Err(format!("{at}: \"action\" is not a string"));
            };
            let args = args_of(obj);
            match (action, source) {
                ("message", Some("user") | None) | ("message", Some("agent")) => {
                    let role = if source == Some("agent") {
                        Role::Assistant
                    } else {
                        Role::User
                    };
                    let content = message_content(obj, &args);
                    if content.is_empty() {
                        t.skipped.non_message_lines += 1;
                        continue;
                    }
                    t.messages.push(ImportedMessage {
                        message: Message { role, content },
                        timestamp,
                        model: None,
                        line: None,
                    });
                }
                ("system" | "recall", _) => t.skipped.non_message_lines += 1,
                (_, Some("agent") | None) => {
                    let tcm = obj.get("tool_call_metadata");
                    let event_id = obj.get("id").and_then(Value::as_i64);
                    let mut id = tcm
                        .and_then(|m| m.get("tool_call_id"))
                        .and_then(Value::as_str)
                        .filter(|id| !id.is_empty())
                        .map(str::to_owned)
                        .unwrap_or_else(|| synthetic_id(event_id, position));
                    if used_ids.contains(&id) {
                        id = synthetic_id(event_id, position);
                    }
                    if used_ids.contains(&id) {
                        return Err(format!("{at}: tool call id {id:?} is used twice"));
                    }
                    used_ids.insert(id.clone());
                    let model = tcm
                        .and_then(|m| m.pointer("/model_response/model"))
                        .and_then(Value::as_str)
                        .filter(|m| !m.is_empty())
                        .map(str::to_owned);
                    if let Some(model) = &model {
                        t.saw_model(model);
                    }
                    let mut content = Vec::new();
                    if let Some(thought) = args.get("thought").and_then(Value::as_str)
                        && !thought.trim().is_empty()
                    {
                        content.push(ContentBlock::Text {
                            text: thought.to_owned(),
                        });
                    }
                    content.push(ContentBlock::ToolUse {
                        id: id.clone(),
                        name: action.to_owned(),
                        input: Value::Object(args),
                    });
                    t.messages.push(ImportedMessage {
                        message: Message {
                            role: Role::Assistant,
                            content,
                        },
                        timestamp,
                        model,
                        line: None,
                    });
                    if let Some(event_id) = event_id {
                        by_event_id.insert(event_id, id.clone());
                    }
                    open.push(Open {
                        tool_use_id: id,
                        position,
                    });
                }
                _ => t.skipped.non_message_lines += 1,
            }
        } else if let Some(observation) = obj.get("observation") {
            let Some(observation) = observation.as_str() else {
                return Err(format!("{at}: \"observation\" is not a string"));
            };
            let Some(k) = answered_call(obj, position, &open, &by_event_id) else {
                t.skipped.non_message_lines += 1;
                continue;
            };
            let call = open.remove(k);
            let text = obj
                .get("content")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .or_else(|| obj.get("message").and_then(Value::as_str))
                .unwrap_or_default();
            let content = if text.is_empty() {
                Vec::new()
            } else {
                vec![ContentBlock::Text {
                    text: text.to_owned(),
                }]
            };
            t.messages.push(ImportedMessage {
                message: Message {
                    role: Role::Tool,
                    content: vec![ContentBlock::ToolResult {
                        tool_use_id: call.tool_use_id,
                        content,
                        is_error: observation == "error",
                    }],
                },
                timestamp,
                model: None,
                line: None,
            });
        } else {
            t.skipped.non_message_lines += 1;
        }
    }
    if !flat.is_empty() && !saw_event {
        return Err("no event has an \"action\" or an \"observation\"".to_owned());
    }
    Ok(())
}

fn synthetic_id(event_id: Option<i64>, position: usize) -> String {
    match event_id {
        Some(id) => format!("oh-{id}"),
        None => format!("oh-{position}"),
    }
}

/// The index in `open` of the call an observation answers, if any.
fn answered_call(
    obj: &Map<String, Value>,
    position: usize,
    open: &[Open],
    by_event_id: &HashMap<i64, String>,
) -> Option<usize> {
    let find = |id: &str| open.iter().position(|o| o.tool_use_id == id);
    if let Some(cause) = obj.get("cause").and_then(Value::as_i64) {
        return by_event_id.get(&cause).and_then(|id| find(id));
    }
    if let Some(id) = obj
        .get("tool_call_metadata")
        .and_then(|m| m.get("tool_call_id"))
        .and_then(Value::as_str)
    {
        return find(id);
    }
    if obj.contains_key("id") {
        return None;
    }
    // Older schema: no ids at all; the observation follows its action.
    open.iter().position(|o| o.position + 1 == position)
}

/// The action's arguments: `args`, or (older schema) the event's own non-bookkeeping fields.
fn args_of(obj: &Map<String, Value>) -> Map<String, Value> {
    match obj.get("args") {
        Some(Value::Object(args)) => args.clone(),
        _ => obj
            .iter()
            .filter(|(k, _)| !EVENT_FIELDS.contains(&k.as_str()) && k.as_str() != "args")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    }
}

fn message_content(obj: &Map<String, Value>, args: &Map<String, Value>) -> Vec<ContentBlock> {
    let text = args
        .get("content")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .or_else(|| obj.get("message").and_then(Value::as_str))
        .unwrap_or_default();
    let mut content = Vec::new();
    if !text.is_empty() {
        content.push(ContentBlock::Text {
            text: text.to_owned(),
        });
    }
    let urls = args
        .get("image_urls")
        .or_else(|| args.get("images_urls"))
        .and_then(Value::as_array);
    for url in urls.into_iter().flatten().filter_map(Value::as_str) {
        content.push(ContentBlock::Image {
            source: media_source(url),
        });
    }
    content
}

fn media_source(url: &str) -> MediaSource {
    if let Some(rest) = url.strip_prefix("data:")
        && let Some((media_type, data)) = rest.split_once(";base64,")
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn one(value: Value) -> Transcript {
        let bytes = serde_json::to_vec(&value).unwrap();
        let mut ts = parse(&bytes).unwrap();
        assert_eq!(ts.len(), 1);
        ts.remove(0)
    }

    fn tool_result(m: &ImportedMessage) -> (&str, String, bool) {
        match &m.message.content[..] {
            [
                ContentBlock::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                },
            ] => (
                tool_use_id.as_str(),
                Message {
                    role: Role::Tool,
                    content: content.clone(),
                }
                .plain_text(),
                *is_error,
            ),
            other => panic!("expected one tool result, got {other:?}"),
        }
    }

    #[test]
    fn event_array_maps_messages_actions_and_observations() {
        let t = one(json!([
            {"id": 0, "source": "user", "action": "message", "timestamp": "2025-01-27T23:16:50",
             "message": "fallback", "args": {"content": "rename it", "image_urls": null}},
            {"id": 1, "source": "environment", "observation": "agent_state_changed", "content": ""},
            {"id": 2, "source": "agent", "action": "system", "args": {"content": "you are"}},
            {"id": 3, "source": "agent", "action": "recall", "args": {}},
            {"id": 4, "source": "agent", "action": "run", "message": "Running command: ls",
             "tool_call_metadata": {"tool_call_id": "toolu_1", "function_name": "execute_bash",
                                    "model_response": {"model": "claude-x"}},
             "args": {"command": "ls", "thought": "Let me look."}},
            {"id": 5, "source": "agent", "observation": "run", "cause": 4, "content": "a.py"},
            {"id": 6, "source": "agent", "action": "read", "args": {"path": "/a.py", "thought": ""}},
            {"id": 7, "source": "agent", "observation": "error", "cause": 6, "content": "",
             "message": "no such file"},
            {"id": 8, "source": "agent", "action": "message", "args": {"content": "done"}},
            {"id": 9, "source": "agent", "observation": "null", "cause": 8, "content": ""},
            {"id": 10, "source": "agent", "action": "finish", "args": {"outputs": {}, "thought": ""}},
        ]));
        assert_eq!(t.format, Format::OpenHands);
        assert_eq!(t.skipped.non_message_lines, 4);
        let m = &t.messages;
        assert_eq!(m.len(), 7);
        assert_eq!(m[0].message, Message::text(Role::User, "rename it"));
        assert_eq!(m[0].timestamp.as_deref(), Some("2025-01-27T23:16:50"));
        assert_eq!(m[1].message.role, Role::Assistant);
        assert_eq!(m[1].message.plain_text(), "Let me look.");
        assert_eq!(m[1].message.tool_use_ids().collect::<Vec<_>>(), ["toolu_1"]);
        assert_eq!(m[1].model.as_deref(), Some("claude-x"));
        match &m[1].message.content[1] {
            ContentBlock::ToolUse { name, input, .. } => {
                assert_eq!(name, "run");
                assert_eq!(input["command"], "ls");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(tool_result(&m[2]), ("toolu_1", "a.py".to_owned(), false));
        // No tool_call_metadata: a synthetic id from the event id; no empty thought text.
        assert_eq!(m[3].message.content.len(), 1);
        assert_eq!(m[3].message.tool_use_ids().collect::<Vec<_>>(), ["oh-6"]);
        assert_eq!(
            tool_result(&m[4]),
            ("oh-6", "no such file".to_owned(), true)
        );
        assert_eq!(m[5].message, Message::text(Role::Assistant, "done"));
        assert_eq!(m[6].message.tool_use_ids().collect::<Vec<_>>(), ["oh-10"]);
        assert_eq!(t.tool_calls(), 3);
        assert_eq!(t.models, ["claude-x"]);
    }

    #[test]
    fn matches_by_tool_call_id_when_cause_is_missing() {
        let t = one(json!([
            {"id": 1, "source": "agent", "action": "run", "args": {"command": "a"},
             "tool_call_metadata": {"tool_call_id": "c1"}},
            {"id": 2, "source": "agent", "action": "run", "args": {"command": "b"},
             "tool_call_metadata": {"tool_call_id": "c2"}},
            {"id": 3, "source": "agent", "observation": "run", "content": "B",
             "tool_call_metadata": {"tool_call_id": "c2"}},
            {"id": 4, "source": "agent", "observation": "run", "content": "A",
             "tool_call_metadata": {"tool_call_id": "c1"}},
            // Answers nothing: skipped.
            {"id": 5, "source": "agent", "observation": "run", "cause": 99, "content": "?"},
        ]));
        assert_eq!(tool_result(&t.messages[2]).0, "c2");
        assert_eq!(tool_result(&t.messages[3]).0, "c1");
        assert_eq!(t.messages.len(), 4);
        assert_eq!(t.skipped.non_message_lines, 1);
    }

    #[test]
    fn reused_tool_call_id_falls_back_to_synthetic() {
        let t = one(json!([
            {"id": 1, "source": "agent", "action": "run", "args": {},
             "tool_call_metadata": {"tool_call_id": "c1"}},
            {"id": 2, "source": "agent", "observation": "run", "cause": 1, "content": "x"},
            {"id": 3, "source": "agent", "action": "run", "args": {},
             "tool_call_metadata": {"tool_call_id": "c1"}},
            {"id": 4, "source": "agent", "observation": "run", "cause": 3, "content": "y"},
        ]));
        assert_eq!(
            t.messages[2].message.tool_use_ids().collect::<Vec<_>>(),
            ["oh-3"]
        );
        assert_eq!(tool_result(&t.messages[3]).0, "oh-3");
    }

    #[test]
    fn user_and_environment_actions_are_skipped() {
        let t = one(json!([
            {"id": 1, "source": "environment", "action": "change_agent_state", "args": {}},
            {"id": 2, "source": "user", "action": "run", "args": {"command": "ls"}},
            {"id": 3, "source": "user", "observation": "run", "cause": 2, "content": "x"},
            {"id": 4, "source": "user", "action": "message", "args": {"content": "hi",
             "image_urls": ["data:image/png;base64,AAAA", "https://x/y.png"]}},
        ]));
        assert_eq!(t.skipped.non_message_lines, 3);
        assert_eq!(t.messages.len(), 1);
        assert_eq!(
            t.messages[0].message.content[1..],
            [
                ContentBlock::Image {
                    source: MediaSource::Base64 {
                        media_type: "image/png".into(),
                        data: "AAAA".into()
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
    fn output_jsonl_older_schema_pairs_by_adjacency() {
        let line1 = json!({"instance_id": "repo__1", "history": [
            {"action": "message", "content": "fix it", "wait_for_response": false},
            {"action": "run", "command": "ls", "thought": "look", "action_risk": 0},
            {"observation": "run", "command": "ls", "content": "a b", "exit_code": 0},
            {"action": "finish", "outputs": {}, "thought": ""},
        ]});
        let line2 = json!({"history": [
            [{"action": "run", "command": "pwd", "thought": ""},
             {"observation": "run", "content": "/w"}],
        ]});
        let text = format!("{line1}\n\n{line2}\n");
        let ts = parse(text.as_bytes()).unwrap();
        assert_eq!(ts.len(), 2);
        assert_eq!((ts[0].index, ts[1].index), (0, 2));
        assert_eq!(ts[0].source_session_id.as_deref(), Some("repo__1"));
        assert_eq!(ts[1].source_session_id, None);
        let m = &ts[0].messages;
        assert_eq!(m.len(), 4);
        assert_eq!(m[0].message, Message::text(Role::User, "fix it"));
        assert_eq!(m[1].message.tool_use_ids().collect::<Vec<_>>(), ["oh-1"]);
        match &m[1].message.content[1] {
            ContentBlock::ToolUse { input, .. } => {
                assert_eq!(
                    input,
                    &json!({"command": "ls", "thought": "look", "action_risk": 0})
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(tool_result(&m[2]), ("oh-1", "a b".to_owned(), false));
        assert_eq!(m[3].message.tool_use_ids().collect::<Vec<_>>(), ["oh-3"]);
        assert_eq!(tool_result(&ts[1].messages[1]).0, "oh-0");
    }

    #[test]
    fn sniff_accepts_events_and_rejects_other_shapes() {
        assert!(sniff(
            br#"[{"id":0,"source":"user","action":"message","args":{}}]"#
        ));
        assert!(sniff(br#"{"history":[{"action":"run"}]}"#));
        assert!(sniff(
            b"{\"history\":[{\"observation\":\"run\"}]}\n{\"history\":[]}\n"
        ));
        assert!(!sniff(br#"[{"role":"user","content":"hi"}]"#));
        assert!(!sniff(br#"{"history":[{"role":"system","content":"x"}]}"#));
        assert!(!sniff(
            br#"{"timestamp":"t","type":"session_meta","payload":{}}"#
        ));
        assert!(!sniff(b"[]"));
        assert!(!sniff(b"# aider chat started at 2024-01-01 00:00:00\n"));
    }

    #[test]
    fn malformed_input_names_line_and_event() {
        let err = parse(b"{\"history\":[{\"action\":\"run\"}]}\n{not json\n").unwrap_err();
        assert!(
            matches!(err, Error::Malformed { line: Some(2), .. }),
            "{err}"
        );
        let err = parse(b"{\"history\":[{\"action\":\"run\"}]}\n{\"x\":1}\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 2: expected a run object with a \"history\" array"
        );
        let err = parse(br#"[{"action":"run"}, 7]"#).unwrap_err();
        assert_eq!(err.to_string(), "history[1]: expected an event object");
        let err = parse(br#"[{"action": 3}]"#).unwrap_err();
        assert_eq!(err.to_string(), "history[0]: \"action\" is not a string");
        let err = parse(b"{\"history\":[{\"source\":1,\"action\":\"run\"}]}\n{\"history\":[]}")
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 1: history[0]: \"source\" is not a string"
        );
        assert!(parse(b"").is_err());
        assert!(parse(b"\"str\"").is_err());
    }
}
